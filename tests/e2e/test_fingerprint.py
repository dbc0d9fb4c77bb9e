"""system_fingerprint through the whole chain (openai SDK -> gateway -> reference engine,
which sends none): on every answer kind, the same across requests, and another when the
engine's identity or the policy changes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.app.factory import create_app
from refengine.server import create_app as create_engine
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_settings
from tests.support.paths import POLICY
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio
CAT: Any = [{"role": "user", "content": "Invent a name for a cat."}]


@asynccontextmanager
async def engine() -> AsyncIterator[str]:
    async with running_server(create_engine()) as url:
        yield url


@asynccontextmanager
async def gateway(
    engine_url: str, *, identity: str | None = None, policy: Path = POLICY
) -> AsyncIterator[openai.AsyncOpenAI]:
    flags: dict[tuple[str, ...], Any] = {}
    if identity is not None:
        flags[("upstream", "identity")] = identity
    settings = gateway_settings(engine_url, policy=policy, overrides=flags)
    async with running_server(create_app(settings)) as url, sdk(url) as client:
        yield client


async def every_kind(client: openai.AsyncOpenAI) -> dict[str, set[str | None]]:
    """The fingerprints of each answer kind (a set: a stream's chunks must agree)."""
    found: dict[str, set[str | None]] = {}
    chat = await client.chat.completions.create(
        model=MODEL, messages=CAT, max_tokens=8, seed=7, extra_body=NO_THINKING
    )
    found["chat"] = {chat.system_fingerprint}
    stream = await client.chat.completions.create(
        model=MODEL, messages=CAT, max_tokens=8, stream=True,
        stream_options={"include_usage": True}, extra_body=NO_THINKING,
    )  # fmt: skip
    found["chat stream"] = {chunk.system_fingerprint async for chunk in stream}
    completion = await client.completions.create(model=MODEL, prompt="A list is", max_tokens=8)
    found["completion"] = {completion.system_fingerprint}
    pieces = await client.completions.create(
        model=MODEL, prompt="A list is", max_tokens=8, stream=True
    )
    found["completion stream"] = {chunk.system_fingerprint async for chunk in pieces}
    response = await client.responses.create(
        model=MODEL, input="A cat's name?", max_output_tokens=16, extra_body=NO_THINKING
    )
    found["response"] = {getattr(response, "system_fingerprint", None)}
    events = await client.responses.create(
        model=MODEL, input="A cat's name?", max_output_tokens=16, stream=True,
        extra_body=NO_THINKING,
    )  # fmt: skip
    found["response stream"] = {
        getattr(event.response, "system_fingerprint", None)
        async for event in events
        if event.type in ("response.created", "response.in_progress", "response.completed")
    }
    return found


async def test_every_answer_kind_carries_one_fingerprint_per_route() -> None:
    async with engine() as url, gateway(url) as client:
        first = await every_kind(client)
        again = await every_kind(client)
    assert first == again  # stable across requests
    for kind, prints in first.items():
        assert len(prints) == 1, kind  # every chunk of a stream, the same one
        (value,) = prints
        assert value is not None and value.startswith("fp_"), kind
    # Chat and completions share the policy, engine and seed guarantee (under_load):
    assert first["chat"] == first["chat stream"] == first["completion"]
    assert first["response"] == first["response stream"]


async def test_it_changes_with_the_engine_identity_and_the_policy(tmp_path: Path) -> None:
    measured_alone = tmp_path / "alone.yaml"
    text = POLICY.read_text()
    measured_alone.write_text(
        text.replace("guarantees: {seed: under_load}", "guarantees: {seed: alone_only}")
    )
    async with engine() as url:
        prints = []
        for options in ({}, {"identity": "ft-serve 0bca88f"}, {"policy": measured_alone}):
            async with gateway(url, **options) as client:
                chat = await client.chat.completions.create(
                    model=MODEL, messages=CAT, max_tokens=4, extra_body=NO_THINKING
                )
                prints.append(chat.system_fingerprint)
    assert len(set(prints)) == 3
