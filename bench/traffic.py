"""A deterministic mix of request bodies as clients send them, sent to a gateway.

``python -m bench.traffic --gateway URL [--requests 1000] [--seed 7]``

The mix: chat completions (70%: the openai SDK's and LangChain's usual fields,
conversations of 1 to 12 messages, a few unsupported fields: logprobs, tools,
JSON mode, an image part, a tool message), completions (15%) and Responses
(15%). With the gateway's ``capture`` on (sample_ratio 1), the file it writes
is a recorded-bodies file for ``ft-gateway diff --bodies`` with a known shape;
``--out FILE`` writes the bodies themselves instead, without a gateway.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

MODEL = "Qwen3.8-Flash-Next"
CHAT, COMPLETIONS, RESPONSES = "/v1/chat/completions", "/v1/completions", "/v1/responses"
WORDS = "the a list of python values in order can hold any kind and grow or shrink".split()


def _text(r: random.Random, n: int) -> str:
    return " ".join(r.choice(WORDS) for _ in range(n)).capitalize() + "."


def _chat(r: random.Random) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if r.random() < 0.6:
        messages.append({"role": r.choice(["system"] * 4 + ["developer"]), "content": _text(r, 8)})
    for i in range(r.randint(1, 12) | 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": _text(r, r.randint(3, 30))})
    body: dict[str, Any] = {"model": MODEL, "messages": messages}
    odds = r.random
    if odds() < 0.05:
        last = messages[-1]
        last["content"] = [
            {"type": "text", "text": str(last["content"])},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ]
    if odds() < 0.02:
        messages.insert(1, {"role": "tool", "content": "42", "tool_call_id": "call_1"})
    if odds() < 0.7:
        body["temperature"] = round(r.uniform(0, 1.5), 2)
    if odds() < 0.2:
        body["top_p"] = round(r.uniform(0.5, 1), 2)
    if odds() < 0.5:
        key = "max_completion_tokens" if odds() < 0.5 else "max_tokens"
        body[key] = r.randint(1, 16)
    if odds() < 0.4:
        body["stream"] = True
        if odds() < 0.5:
            body["stream_options"] = {"include_usage": True}
    if odds() < 0.1:
        body["n"] = r.randint(1, 3)
    if odds() < 0.1:
        body["seed"] = r.randint(0, 2**31)
    if odds() < 0.1:
        body["stop"] = ["\n\n"]
    if odds() < 0.15:
        body["user"] = f"user-{r.randint(1, 500)}"
    if odds() < 0.05:
        body["metadata"] = {"team": "search"}
    if odds() < 0.05:
        body["logprobs"] = True
        if odds() < 0.5:
            body["top_logprobs"] = 3
    elif odds() < 0.2:
        body["logprobs"] = False
    if odds() < 0.05:
        body["tools"] = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
        body["parallel_tool_calls"] = True
    if odds() < 0.05:
        body["response_format"] = {"type": r.choice(["json_object", "text"])}
    if odds() < 0.05:
        body["presence_penalty"] = round(r.uniform(-1, 1), 2)
    if odds() < 0.05:
        body["frequency_penalty"] = round(r.uniform(-1, 1), 2)
    if odds() < 0.02:
        body["logit_bias"] = {"1234": -100}
    if odds() < 0.02:
        body["reasoning_effort"] = "low"
    if odds() < 0.05:
        body["top_k"] = r.choice([-1, 20, 40])
    if odds() < 0.05:
        body["chat_template_kwargs"] = {"enable_thinking": False}
    return body


def _completion(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "prompt": _text(r, r.randint(3, 20))}
    if r.random() < 0.7:
        body["max_tokens"] = r.randint(1, 16)
    if r.random() < 0.6:
        body["temperature"] = round(r.uniform(0, 1.2), 2)
    if r.random() < 0.05:
        body["logprobs"] = r.choice([None, 0, 2])
    if r.random() < 0.1:
        body["echo"] = False
        body["best_of"] = 1
    if r.random() < 0.02:
        body["suffix"] = " The end."
    if r.random() < 0.05:
        body["n"] = 2
    return body


def _response(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL}
    if r.random() < 0.5:
        body["input"] = _text(r, r.randint(3, 20))
    else:
        body["input"] = [
            {"role": "user", "content": [{"type": "input_text", "text": _text(r, 10)}]}
        ]
    if r.random() < 0.4:
        body["instructions"] = _text(r, 6)
    if r.random() < 0.6:
        body["max_output_tokens"] = r.randint(1, 16)
    if r.random() < 0.5:
        body["temperature"] = round(r.uniform(0, 1.2), 2)
    if r.random() < 0.05:
        body["tools"] = [{"type": "web_search"}]
    if r.random() < 0.05:
        body["text"] = {"format": {"type": "json_object"}}
    if r.random() < 0.1:
        body["store"] = False
    if r.random() < 0.05:
        body["reasoning"] = {"effort": "low"}
    return body


def traffic(count: int, *, seed: int = 7) -> Iterator[tuple[str, dict[str, Any]]]:
    """``count`` (route, body) pairs, the same for the same seed."""
    r = random.Random(seed)
    for _ in range(count):
        pick = r.random()
        if pick < 0.7:
            yield CHAT, _chat(r)
        elif pick < 0.85:
            yield COMPLETIONS, _completion(r)
        else:
            yield RESPONSES, _response(r)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.traffic", description=__doc__)
    parser.add_argument("--gateway", help="the gateway's base URL (capture on)")
    parser.add_argument("--out", type=Path, help="write the bodies here instead (JSON lines)")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--api-key", default="sk-none")
    args = parser.parse_args(argv)
    if args.out is not None:
        with args.out.open("w") as out:
            for route, body in traffic(args.requests, seed=args.seed):
                out.write(json.dumps({"route": route, "profile": None, "body": body}) + "\n")
        return 0
    if args.gateway is None:
        parser.error("--gateway or --out is needed")
    statuses: dict[int, int] = {}
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.gateway, timeout=120, headers=headers) as client:
        for route, body in traffic(args.requests, seed=args.seed):
            status = client.post(route, json=body).status_code
            statuses[status] = statuses.get(status, 0) + 1
    print(json.dumps({"requests": args.requests, "statuses": statuses}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
