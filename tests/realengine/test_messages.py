"""Anthropic's Messages API through the gateway in front of each real engine, with the
``anthropic`` SDK: translated onto chat completions (``upstream.messages: translate``),
and native against llama.cpp's server's own ``/v1/messages`` and ``count_tokens``, whose
measured deviations (a ``chatcmpl-`` id; ``end_turn`` beside the stop sequence that
matched) the gateway mends, and whose ``thinking`` the probe found ignored and the
policy refuses."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest
import yaml
from anthropic.types import TextBlock

from tests.realengine.engines import LLAMA_SERVER, MODEL_NAME, Running
from tests.realengine.probing import Probed, serve_gateway
from tests.support.servers import ServerThread

pytestmark = pytest.mark.realengine
ASK: list[anthropic.types.MessageParam] = [
    {"role": "user", "content": "Name three colours of the rainbow."}
]


def sdk(gateway: ServerThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gateway.url, api_key="sk-test", max_retries=0, timeout=300)


def check_answers(client: anthropic.Anthropic) -> None:
    message = client.messages.create(model=MODEL_NAME, max_tokens=16, messages=ASK)
    assert message.id.startswith("msg_") and message.type == "message"
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens <= 16
    with client.messages.stream(model=MODEL_NAME, max_tokens=16, messages=ASK) as stream:
        names = [event.type for event in stream]
        final = stream.get_final_message()
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert final.id.startswith("msg_") and final.usage.output_tokens <= 16
    counted = client.messages.count_tokens(model=MODEL_NAME, messages=ASK)
    assert counted.input_tokens == message.usage.input_tokens + (
        message.usage.cache_read_input_tokens or 0
    )


@pytest.fixture
def translated(served: Running, probed: Probed) -> Iterator[anthropic.Anthropic]:
    with serve_gateway(served.url, probed.policy) as gateway, sdk(gateway) as client:
        yield client


@pytest.fixture
def native(served: Running, probed: Probed) -> Iterator[anthropic.Anthropic]:
    with (
        serve_gateway(served.url, probed.policy, upstream__messages="native") as gateway,
        sdk(gateway) as client,
    ):
        yield client


def test_translated(translated: anthropic.Anthropic) -> None:
    check_answers(translated)


def test_a_stop_sequence_is_matched_and_named_translated(
    translated: anthropic.Anthropic, probed: Probed
) -> None:
    check_stop_sequence(translated, probed)


def check_stop_sequence(client: anthropic.Anthropic, probed: Probed) -> None:
    """A matched stop sequence is named (``stop_reason: stop_sequence``); where the probe
    could not verify ``stop_sequences`` (the model's answer too short to cut, on a loaded
    machine) and the policy it wrote refuses it, the client is told so, naming it."""
    written = yaml.safe_load(probed.policy.read_text())
    rule = written["routes"]["/v1/messages"]["fields"].get("stop_sequences", {})
    if rule.get("action") == "reject":
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(
                model=MODEL_NAME, max_tokens=24, messages=ASK, stop_sequences=["the"]
            )
        assert refused.value.api_message is not None
        assert refused.value.api_message.startswith("stop_sequences: ")
        return
    free = client.messages.create(
        model=MODEL_NAME, max_tokens=24, messages=ASK, extra_body={"temperature": 0}
    )
    text = "".join(b.text for b in free.content if isinstance(b, TextBlock))
    words = [w for w in text.split() if w.isalpha()]  # no template markers (<|im_end|>)
    if len(words) < 3:
        pytest.skip(f"the model's greedy answer is too short to cut: {text!r}")
    stop = words[len(words) // 2]
    cut = client.messages.create(
        model=MODEL_NAME,
        max_tokens=24,
        messages=ASK,
        stop_sequences=[stop],
        extra_body={"temperature": 0},
    )
    assert (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", stop)
    said = "".join(b.text for b in cut.content if isinstance(b, TextBlock))
    assert said == text[: text.index(stop)]


def test_native_where_the_probe_found_the_route(
    served: Running, probed: Probed, native: anthropic.Anthropic
) -> None:
    """llama.cpp's server has /v1/messages, llama-cpp-python's has not: the probe says so,
    and where it is served the gateway forwards to it, mended, with the policy's verdicts."""
    assert probed.messages_native == (served.engine.name == LLAMA_SERVER), probed.output
    if not probed.messages_native:
        with pytest.raises(anthropic.NotFoundError):
            native.messages.create(model=MODEL_NAME, max_tokens=8, messages=ASK)
        return
    check_answers(native)
    # llama.cpp's server says end_turn beside the stop sequence that matched: mended.
    check_stop_sequence(native, probed)
    # It accepts thinking and ignores it (measured): the probe's policy refuses it.
    with pytest.raises(anthropic.BadRequestError) as refused:
        native.messages.create(
            model=MODEL_NAME,
            max_tokens=2048,
            messages=ASK,
            thinking={"type": "enabled", "budget_tokens": 1024},
        )
    assert refused.value.api_message is not None
    assert refused.value.api_message.startswith("thinking.type: ")
