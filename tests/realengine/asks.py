"""What the real-engine tests send: short prompts, few tokens (about 40 a second on two
cores), and a non-neutral value for each field the probe judges."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from tests.realengine.engines import MODEL_NAME

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
MAX_TOKENS = 12
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Name three colours of the rainbow."}
]
PROMPT = "The three primary colours are"
# A request that runs long (for a stream to be cut while it runs).
LONG: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Count from 1 to 300, one number per line."}
]

# Fields the probe judges, each with a value the written policy would not let through as
# neutral: sent where the policy rejects the field, to see the SDK's error.
_SAMPLING: dict[str, Any] = {
    "temperature": 0.5,
    "seed": 7,
    "top_k": 5,
    "top_p": 0.9,
    "min_p": 0.1,
    "presence_penalty": 0.5,
    "frequency_penalty": 0.5,
    "repetition_penalty": 1.1,
    "logit_bias": {"100": 1},
    "stop": ["zebra"],
}
SAMPLES: dict[str, dict[str, Any]] = {
    CHAT: {
        **_SAMPLING,
        "max_completion_tokens": 8,
        "logprobs": True,
        "top_logprobs": 2,
        "response_format": {"type": "json_object"},
    },
    COMPLETIONS: {**_SAMPLING, "logprobs": 2},
}


def base(route: str) -> dict[str, Any]:
    """The plain request on ``route``."""
    if route == CHAT:
        return {"model": MODEL_NAME, "messages": MESSAGES, "max_tokens": MAX_TOKENS}
    return {"model": MODEL_NAME, "prompt": PROMPT, "max_tokens": MAX_TOKENS}


def with_field(route: str, field: str) -> dict[str, Any]:
    """The plain request plus ``field``'s sample (top_logprobs needs logprobs on)."""
    body = {**base(route), field: SAMPLES[route][field]}
    if field == "top_logprobs":
        body["logprobs"] = True
    return body
