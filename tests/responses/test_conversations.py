"""Conversations that work by default: with config.yaml as shipped (no store setting) the
gateway keeps responses in SQLite under its state directory, so openai-python's
``responses.create`` twice with ``previous_response_id`` continues a conversation, the
workers of one ``serve --workers 2`` continue each other's, and ``item_reference`` items
resolve to the stored items (the same API key's only). Over real sockets, with the
raw-socket fake engine recording what it receives."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest

from gateway.settings import load_settings
from tests.support.bodies import MODEL
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE
from tests.support.gateways import serve_gateway
from tests.support.paths import ROOT
from tests.support.processes import gateway_process, pin
from tests.support.responses import RESPONSES
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio


def messages(engine: FakeEngine) -> list[dict[str, Any]]:
    """The messages of the engine's last request."""
    sent: list[dict[str, Any]] = engine.requests[-1].json()["messages"]
    return sent


async def test_two_turns_with_the_shipped_config_need_no_store_setting(
    fake_engine: FakeEngine, state_home: str
) -> None:
    settings = load_settings(
        ROOT / "config.yaml",
        overrides={("upstream", "url"): fake_engine.url, ("listen", "port"): 0},
        environ={},
    )
    assert settings.store.backend == "sqlite" and settings.store.path is None
    async with serve_gateway(settings) as served, sdk(served.url, api_key="sk-alice") as client:
        one = await client.responses.create(model=MODEL, input="Name a cat.")
        assert one.model_dump()["store"] is True
        two = await client.responses.create(
            model=MODEL, input="Why that name?", previous_response_id=one.id
        )
        assert two.previous_response_id == one.id
        assert messages(fake_engine) == [
            {"role": "user", "content": "Name a cat."},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "Why that name?"},
        ]
        assert (await client.responses.retrieve(two.id)).output_text == "ok"
    state = Path(state_home) / "ft-gateway"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert (state / "responses.sqlite3").is_file()


async def test_two_workers_continue_each_others_conversations(
    fake_engine: FakeEngine, tmp_path: Path, state_home: str
) -> None:
    config = {"upstream": {"url": fake_engine.url}}  # no store setting
    with anyio.fail_after(DEADLINE * 3):
        async with gateway_process("--workers", "2", config=config, tmp=tmp_path) as process:
            url, pids = await process.serving()
            pinned = await pin(url, pids)
            first, second = (pinned[pid] for pid in pids)
            try:
                body = {"model": MODEL, "input": "Name a cat."}
                one = (await first.post(RESPONSES, json=body)).json()
                body = {"model": MODEL, "input": "And a dog?", "previous_response_id": one["id"]}
                answer = await second.post(RESPONSES, json=body)
                assert answer.status_code == 200, answer.text
                two = answer.json()
                assert messages(fake_engine)[:2] == [
                    {"role": "user", "content": "Name a cat."},
                    {"role": "assistant", "content": "ok"},
                ]
                body = {"model": MODEL, "input": "Which?", "previous_response_id": two["id"]}
                assert (await first.post(RESPONSES, json=body)).status_code == 200
                assert len(messages(fake_engine)) == 5
            finally:
                for client in pinned.values():
                    await client.aclose()
    assert (Path(state_home) / "ft-gateway" / "responses.sqlite3").is_file()


async def test_the_store_path_flag_moves_the_file(
    fake_engine: FakeEngine, tmp_path: Path, state_home: str
) -> None:
    config = {"upstream": {"url": fake_engine.url}}
    with anyio.fail_after(DEADLINE * 2):
        async with gateway_process(
            "--store-path", str(tmp_path / "kept.db"), config=config, tmp=tmp_path
        ) as process:
            url, _ = await process.serving()
            async with sdk(url) as client:
                one = await client.responses.create(model=MODEL, input="Name a cat.")
                assert (await client.responses.retrieve(one.id)).id == one.id
    assert (tmp_path / "kept.db").is_file()
    assert not (Path(state_home) / "ft-gateway").exists()


async def test_item_reference_resolves_to_the_stored_item(fake_engine: FakeEngine) -> None:
    settings = load_settings(
        None, overrides={("upstream", "url"): fake_engine.url, ("listen", "port"): 0}, environ={}
    )
    async with (
        serve_gateway(settings) as served,
        sdk(served.url, api_key="sk-alice") as alice,
        sdk(served.url, api_key="sk-bob") as bob,
    ):
        one = await alice.responses.create(model=MODEL, input="Name a cat.")
        said = one.output[0].id
        # The Vercel AI SDK's second turn with store on: the answer by reference.
        turn: Any = [
            {"role": "user", "content": [{"type": "input_text", "text": "Name a cat."}]},
            {"type": "item_reference", "id": said},
            {"role": "user", "content": [{"type": "input_text", "text": "Why?"}]},
        ]
        two = await alice.responses.create(model=MODEL, input=turn)
        assert messages(fake_engine) == [
            {"role": "user", "content": "Name a cat."},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "Why?"},
        ]
        # The stored conversation holds the item itself, and its input items are named too.
        items = await alice.responses.input_items.list(two.id, order="asc")
        assert [item.type for item in items.data] == ["message", "message", "message"]
        first_input = (await alice.responses.input_items.list(one.id)).data[0].id
        three = await alice.responses.create(
            model=MODEL, input=[{"type": "item_reference", "id": first_input}]
        )
        assert three.status == "completed"
        assert messages(fake_engine) == [{"role": "user", "content": "Name a cat."}]
        count = len(fake_engine.requests)
        with pytest.raises(openai.BadRequestError) as other_key:
            await bob.responses.create(model=MODEL, input=turn)
        assert other_key.value.param == "input[1].id"
        assert f"'{said}'" in other_key.value.message
        unknown = "msg_" + "0" * 52
        with pytest.raises(openai.BadRequestError) as not_found:
            await alice.responses.create(
                model=MODEL, input=[turn[0], {"type": "item_reference", "id": unknown}]
            )
        assert not_found.value.param == "input[1].id"
        assert f"'{unknown}' not found" in not_found.value.message
        unstored = await alice.responses.create(model=MODEL, input="Name a dog.", store=False)
        assert unstored.model_dump()["store"] is False
        reference: Any = [{"type": "item_reference", "id": unstored.output[0].id}]
        with pytest.raises(openai.BadRequestError) as not_kept:
            await alice.responses.create(model=MODEL, input=reference)
        assert not_kept.value.param == "input[0].id"
        assert "store: false" in not_kept.value.message
        # The store: false turn reached the engine; none of the refused ones did.
        assert len(fake_engine.requests) == count + 1


async def test_item_reference_without_a_store_says_so(fake_engine: FakeEngine) -> None:
    settings = load_settings(
        None,
        overrides={
            ("upstream", "url"): fake_engine.url,
            ("listen", "port"): 0,
            ("store", "backend"): "none",
        },
        environ={},
    )
    async with serve_gateway(settings) as served, sdk(served.url) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.responses.create(
                model=MODEL, input=[{"type": "item_reference", "id": "msg_1"}]
            )
        assert refused.value.param == "input[0].id"
        assert "store.backend is 'none'" in refused.value.message
        assert fake_engine.requests == []
