"""``POST /v1/responses`` through the gateway in front of each real engine: translated to
chat completions (``upstream.responses: translate``, what the probe writes for an engine
without the route), and native against llama.cpp's own ``/v1/responses``."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types.responses import Response, ResponseTextDeltaEvent

from tests.realengine.engines import LLAMA_SERVER, MODEL_NAME, Running
from tests.realengine.probing import Probed, serve_gateway
from tests.support.sdk import sync_sdk

pytestmark = pytest.mark.realengine
RESPONSES = "/v1/responses"
INPUT = "Name three colours of the rainbow."


def limit(probed: Probed) -> int | openai.Omit:
    """max_output_tokens where the policy passes it; else none (the engine's own limit)."""
    return 16 if probed.action(RESPONSES, "max_output_tokens") == "pass" else openai.omit


def ask(client: openai.OpenAI, probed: Probed) -> Response:
    return client.responses.create(model=MODEL_NAME, input=INPUT, max_output_tokens=limit(probed))


def check_answers(client: openai.OpenAI, probed: Probed) -> None:
    response = ask(client, probed)
    assert response.object == "response" and response.status in ("completed", "incomplete")
    assert [item.type for item in response.output][-1:] == ["message"]
    events = list(
        client.responses.create(
            model=MODEL_NAME, input=INPUT, max_output_tokens=limit(probed), stream=True
        )
    )
    assert events[0].type == "response.created"
    assert events[-1].type in ("response.completed", "response.incomplete")
    # The text may be empty (the model may stop at once): its deltas add up to it.
    text = "".join(e.delta for e in events if isinstance(e, ResponseTextDeltaEvent))
    completed = events[-1].response if hasattr(events[-1], "response") else None
    assert completed is not None and completed.output_text == text


def test_translated(client: openai.OpenAI, probed: Probed) -> None:
    check_answers(client, probed)


@pytest.fixture
def native_client(served: Running, probed: Probed) -> Iterator[openai.OpenAI]:
    with (
        serve_gateway(served.url, probed.policy, upstream__responses="native") as gateway,
        sync_sdk(gateway.url, timeout=300) as client,
    ):
        yield client


def test_native_where_the_probe_found_the_route(
    served: Running, probed: Probed, native_client: openai.OpenAI
) -> None:
    """llama.cpp's server has /v1/responses, llama-cpp-python's has not: the probe says so,
    and where it is served the gateway forwards to it with the policy's verdicts."""
    assert probed.responses_native == (served.engine.name == LLAMA_SERVER), probed.output
    if probed.responses_native:
        check_answers(native_client, probed)
    else:
        with pytest.raises(openai.NotFoundError):
            ask(native_client, probed)
