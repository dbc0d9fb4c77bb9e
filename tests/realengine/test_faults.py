"""A real engine killed mid-stream, and restarted: each runs on an engine of the test's own
(the session's stays up), behind the gateway with the policy the probe wrote for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.realengine.asks import LONG, MAX_TOKENS, MESSAGES
from tests.realengine.engines import MODEL_NAME, Running, running
from tests.realengine.probing import Probed, serve_gateway
from tests.support.sdk import sync_sdk

pytestmark = pytest.mark.realengine


@pytest.fixture
def own(served: Running, out_dir: Path) -> Iterator[Running]:
    """Another instance of the session's engine, for this test to kill."""
    with running(served.engine, out_dir) as engine:
        yield engine


@pytest.fixture
def own_client(own: Running, probed: Probed) -> Iterator[openai.OpenAI]:
    with serve_gateway(own.url, probed.policy) as gateway, sync_sdk(gateway.url) as client:
        yield client


def answered(client: openai.OpenAI) -> bool:
    answer = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS
    )
    return bool(answer.choices[0].message.content)


def test_engine_killed_mid_stream_ends_the_stream_with_an_error_event(
    own: Running, own_client: openai.OpenAI
) -> None:
    stream = own_client.chat.completions.create(
        model=MODEL_NAME, messages=LONG, max_tokens=400, stream=True
    )
    chunks = iter(stream)
    first = next(chunks)
    assert first.choices  # the engine is generating
    own.kill()
    with pytest.raises(openai.APIError) as raised:
        for _ in chunks:
            pass
    assert raised.value.code == "upstream_protocol_error"


def test_engine_restarted_is_served_again(own: Running, own_client: openai.OpenAI) -> None:
    assert answered(own_client)
    own.kill()
    with pytest.raises(openai.InternalServerError) as raised:
        answered(own_client)
    assert raised.value.status_code == 502
    assert raised.value.code in ("upstream_unreachable", "upstream_protocol_error")
    own.start()  # the same port
    assert answered(own_client)
