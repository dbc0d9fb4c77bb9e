"""Chat and completions through the gateway, with the policy the probe wrote for each real
engine, called with the ``openai`` SDK: answers whole and streamed, the SDK's errors for
what the policy rejects, ``n`` (by fan-out where the engine ignores it) and ``seed``
replays where the engine honours it."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.realengine.asks import CHAT, COMPLETIONS, MAX_TOKENS, MESSAGES, PROMPT, SAMPLES
from tests.realengine.engines import MODEL_NAME
from tests.realengine.probing import Probed

pytestmark = pytest.mark.realengine


def test_chat_whole(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS
    )
    (choice,) = answer.choices
    assert choice.message.role == "assistant" and choice.message.content is not None
    assert choice.finish_reason in ("stop", "length")
    assert answer.usage is not None and 0 < answer.usage.completion_tokens <= MAX_TOKENS


def test_chat_streamed(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, stream=True
    )
    chunks = list(stream)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    # Usage unasked: the gateway asks the engine for it to meter, and hides it.
    assert all(c.usage is None for c in chunks)


def test_chat_streamed_with_usage_as_the_policy_says(client: openai.OpenAI, probed: Probed) -> None:
    def ask() -> list[ChatCompletionChunk]:
        stream = client.chat.completions.create(
            model=MODEL_NAME,
            messages=MESSAGES,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        return list(stream)

    if probed.action(CHAT, "stream_options") == "reject":
        with pytest.raises(openai.BadRequestError) as raised:
            ask()
        assert raised.value.param == "stream_options"
        return
    usage = [c.usage for c in ask() if c.usage is not None]
    assert len(usage) == 1 and 0 < usage[0].completion_tokens <= MAX_TOKENS


def test_completions_whole(client: openai.OpenAI) -> None:
    answer = client.completions.create(model=MODEL_NAME, prompt=PROMPT, max_tokens=MAX_TOKENS)
    (choice,) = answer.choices
    assert choice.finish_reason in ("stop", "length")
    assert answer.usage is not None and 0 < answer.usage.completion_tokens <= MAX_TOKENS


def test_completions_streamed(client: openai.OpenAI) -> None:
    stream = client.completions.create(
        model=MODEL_NAME, prompt=PROMPT, max_tokens=MAX_TOKENS, stream=True
    )
    ends = [c.choices[0].finish_reason for c in stream if c.choices]
    assert ends[-1] in ("stop", "length")


def rejected(probed: Probed, route: str) -> list[str]:
    return [f for f in SAMPLES[route] if probed.action(route, f) == "reject"]


@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_what_the_policy_rejects_is_the_sdks_bad_request_naming_the_field(
    client: openai.OpenAI, probed: Probed, route: str
) -> None:
    fields = rejected(probed, route)
    # A real engine honours some fields and not others: a policy rejecting none of the
    # probed fields would mean the probe measured nothing.
    assert fields, f"the policy written for {probed.engine} rejects none of {list(SAMPLES[route])}"
    for field in fields:
        extra: dict[str, Any] = {field: SAMPLES[route][field]}
        if field == "top_logprobs":
            extra["logprobs"] = True
        with pytest.raises(openai.BadRequestError) as raised:
            if route == CHAT:
                client.chat.completions.create(
                    model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, extra_body=extra
                )
            else:
                client.completions.create(
                    model=MODEL_NAME, prompt=PROMPT, max_tokens=MAX_TOKENS, extra_body=extra
                )
        error = raised.value
        # top_logprobs is sent with logprobs on, which the policy may reject first.
        named = {field, "logprobs"} if field == "top_logprobs" else {field}
        assert error.status_code == 400
        assert error.code in ("unsupported_parameter", "unsupported_value"), error.body
        assert error.param in named, error.body


def test_an_unknown_field_as_the_policy_says(client: openai.OpenAI, probed: Probed) -> None:
    extra = {"ft_gateway_unknown_field": 1}
    if probed.rules.get("unknown_fields") == "reject":
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(
                model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, extra_body=extra
            )
        assert raised.value.code == "unknown_parameter"
        assert raised.value.param == "ft_gateway_unknown_field"
    else:
        answer = client.chat.completions.create(
            model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, extra_body=extra
        )
        assert answer.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("stream", [False, True])
def test_n_two_gives_two_choices(client: openai.OpenAI, probed: Probed, stream: bool) -> None:
    assert probed.action(CHAT, "n") in ("pass", "fanout")
    if stream:
        chunks = list(
            client.chat.completions.create(
                model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, n=2, stream=True
            )
        )
        # Each choice ends (the sampled text may be empty: the model may stop at once).
        ends = {c.index: c.finish_reason for k in chunks for c in k.choices if c.finish_reason}
        assert ends.keys() == {0, 1}
    else:
        answer = client.chat.completions.create(
            model=MODEL_NAME, messages=MESSAGES, max_tokens=MAX_TOKENS, n=2
        )
        assert [c.index for c in answer.choices] == [0, 1]
        assert all(c.finish_reason in ("stop", "length") for c in answer.choices)


@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_seed_replays(client: openai.OpenAI, probed: Probed, route: str) -> None:
    """Where the engine honours ``seed``, the same seed at temperature 1 gives the same
    text again (also for n: 2, whose n requests get seeds derived from it); where the
    policy rejects it, the SDK's 400 names it."""

    def ask(seed: int, n: int = 1) -> list[str]:
        if route == CHAT:
            chat = client.chat.completions.create(
                model=MODEL_NAME,
                messages=MESSAGES,
                max_tokens=MAX_TOKENS,
                temperature=1.0,
                seed=seed,
                n=n,
            )
            return [c.message.content or "" for c in chat.choices]
        completion = client.completions.create(
            model=MODEL_NAME, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=1.0, seed=seed, n=n
        )
        return [c.text for c in completion.choices]

    if probed.action(route, "seed") == "reject":
        with pytest.raises(openai.BadRequestError) as raised:
            ask(1234)
        assert raised.value.param == "seed"
        return
    assert probed.action(route, "seed") == "pass"
    assert ask(1234) == ask(1234)
    twice = ask(98765, n=2)
    assert ask(98765, n=2) == twice and len(twice) == 2
