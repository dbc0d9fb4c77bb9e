"""A client's ``X-Request-ID`` of any shape passes through the gateway to each real
engine and comes back as it was sent, alone and with ``n`` by fan-out (llama-cpp-python's
server refuses any X-Request-ID that is not a UUID: the gateway sends it one)."""

from __future__ import annotations

import uuid

import openai
import pytest

from tests.realengine.asks import MAX_TOKENS, MESSAGES
from tests.realengine.engines import MODEL_NAME

pytestmark = pytest.mark.realengine

IDS = [
    "my-trace-42",
    "a.b:c_d",
    "x" * 128,
    str(uuid.uuid4()),
    uuid.uuid4().hex,
    str(uuid.uuid4()).upper(),
]


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("request_id", IDS)
def test_a_client_request_id_passes_and_comes_back(
    client: openai.OpenAI, request_id: str, n: int
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME,
        messages=MESSAGES,
        max_tokens=MAX_TOKENS,
        n=n,
        extra_headers={"X-Request-ID": request_id},
    )
    assert raw.headers["x-request-id"] == request_id
    assert len(raw.parse().choices) == n


def test_without_a_request_id_the_gateway_makes_one(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, n=2
    )
    assert uuid.UUID(raw.headers["x-request-id"]).version == 4
    assert len(raw.parse().choices) == 2
