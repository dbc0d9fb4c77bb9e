"""A toy engine that honours every field the probe checks, unless told otherwise.

It answers through ``httpx.MockTransport`` (``ToyEngine().transport``): a bigram
model over 256 made-up words, sampled with numpy. Each field can be made ignored
(dropped before generation), rejected (400), failing (500) or hanging (a time-out),
so the tests can show each of the probe's verdicts, including the "honoured"
ones the reference engine never gives for n, logprobs or response_format.

Inside messages it counts prompt tokens as a template would render them: three
per message, one per word of its text, and a part's or a tool call's tokens. Each
role, content part type and ``tool_calls`` can be rendered (the default), dropped
(not counted), rejected (400 naming it, as OpenAI does) or failing (500); a role
it does not know is rejected unless told otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from gateway.probe.checks import UNSERVED_MODEL
from gateway.probe.route import CHAT_PROMPT

_SYLLABLES = ["ba", "ke", "di", "fo", "gu", "la", "me", "ni", "po", "ru", "sa", "te", "vi"]
_SYLLABLES += ["wo", "zu", "ha"]
WORDS = [a + b for a in _SYLLABLES for b in _SYLLABLES]
VOCAB = len(WORDS)
KNOWN = {
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "stop",
    "seed",
    "n",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "response_format",
    "stream",
    "stream_options",
    "chat_template_kwargs",
}
_BASE = {"model", "messages", "prompt", "max_tokens", "temperature"}
_PROMPT = CHAT_PROMPT  # the plain request's message: answered properly even with garbage
ROLES = {"system", "developer", "user", "assistant", "tool"}
# Prompt tokens of a content part beyond its text, as a multimodal model counts them.
PART_TOKENS = {"text": 0, "image_url": 64, "input_audio": 25, "file": 40}
RENDER, DROP, REJECT, FAIL = "render", "drop", "reject", "fail"


def _softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    z = np.exp(x - x.max())
    out: npt.NDArray[np.float64] = z / z.sum()
    return out


class ToyEngine:
    """Call it with an httpx.Request; ``requests`` records every body it got."""

    def __init__(
        self,
        *,
        ignore: Iterable[str] = (),
        reject: Iterable[str] = (),
        fail: Iterable[str] = (),
        hang: Iterable[str] = (),
        reject_unknown: bool = False,
        garbage: Any = None,  # answered to every request beyond the plain one
        hang_after: int | None = None,
        inside: dict[str, str] | None = None,
        prompt_tokens: bool = True,
        json_whitespace: bool = False,
    ) -> None:
        self.ignore = set(ignore)
        self.reject = set(reject)
        self.fail = set(fail)
        self.hang = set(hang)
        self.reject_unknown = reject_unknown
        self.garbage = garbage
        self.hang_after = hang_after  # time out on every request after this many
        # role, part type or "tool_calls" -> RENDER, DROP, REJECT or FAIL
        self.inside = dict(inside or {})
        self.prompt_tokens = prompt_tokens  # reported in usage
        # JSON mode answered "{" and whitespace to the token limit (a grammar that lets it).
        self.json_whitespace = json_whitespace
        self.requests: list[dict[str, Any]] = []
        self._weights = np.random.default_rng(0).normal(0.0, 2.0, size=(VOCAB, VOCAB))

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/completions"):
            # A route it does not serve (/v1/responses): a web framework's 404.
            return httpx.Response(404, json={"detail": "Not Found"})
        body = json.loads(request.content)
        self.requests.append(body)
        present = {k for k, v in body.items() if v is not None}
        stalled = self.hang_after is not None and len(self.requests) > self.hang_after
        if stalled or present & self.hang:
            raise httpx.ReadTimeout("the toy engine hangs", request=request)
        if present & self.fail:
            return httpx.Response(500, text="Internal Server Error")
        for name in sorted(present & self.reject):
            return _error(400, f"{name} is not supported", name)
        if body.get("model") == UNSERVED_MODEL and "model" not in self.ignore:
            # The name means something to it (a probe's unserved name gets vLLM's 404).
            return _error(404, f"The model `{UNSERVED_MODEL}` does not exist.", "model")
        unknown = sorted(present - KNOWN)
        if unknown and self.reject_unknown:
            return _error(400, f"Unrecognized request argument supplied: {unknown[0]}", None)
        plain = body.get("messages") in (None, [{"role": "user", "content": _PROMPT}])
        if self.garbage is not None and (present - _BASE or not plain):
            return httpx.Response(200, json=self.garbage)
        fields = {k: v for k, v in body.items() if v is not None and k not in self.ignore}
        chat = request.url.path.endswith("/chat/completions")
        prompt = self._render(body.get("messages")) if chat else len(str(body["prompt"]).split())
        if isinstance(prompt, httpx.Response):
            return prompt
        choices = [self._choice(fields, chat, index) for index in range(int(fields.get("n", 1)))]
        if fields.get("stream"):
            return self._stream(fields, chat, choices)
        tokens = sum(c.pop("_tokens") for c in choices)
        usage = {"completion_tokens": tokens, "total_tokens": prompt + tokens}
        if self.prompt_tokens:
            usage["prompt_tokens"] = prompt
        return httpx.Response(200, json={"object": "x", "choices": choices, "usage": usage})

    def _render(self, messages: list[dict[str, Any]]) -> int | httpx.Response:
        """The prompt tokens of ``messages``, or the answer refusing or failing on one."""
        tokens = 3  # the assistant's turn that the answer starts
        for index, message in enumerate(messages):
            role = message["role"]
            how = self.inside.get(role, RENDER if role in ROLES else REJECT)
            refused = self._refuse(how, f"role {role!r}", f"messages[{index}].role")
            if refused is not None:
                return refused
            if how == DROP:
                continue
            tokens += 3
            content = message.get("content")
            if isinstance(content, str):
                tokens += len(content.split())
            for at, part in enumerate(content if isinstance(content, list) else []):
                kind = part["type"]
                how = self.inside.get(kind, RENDER if kind in PART_TOKENS else REJECT)
                where = f"messages[{index}].content[{at}].type"
                refused = self._refuse(how, f"content part {kind!r}", where)
                if refused is not None:
                    return refused
                if how == RENDER:
                    tokens += PART_TOKENS[kind] + len(str(part.get("text", "")).split())
            for call in message.get("tool_calls") or []:
                how = self.inside.get("tool_calls", RENDER)
                refused = self._refuse(how, "tool_calls", f"messages[{index}].tool_calls")
                if refused is not None:
                    return refused
                if how == RENDER:
                    function = call["function"]
                    tokens += len(f"{function['name']} {function['arguments']}".split())
        return tokens

    @staticmethod
    def _refuse(how: str, what: str, param: str) -> httpx.Response | None:
        if how == REJECT:
            return _error(400, f"Invalid value: {what} is not supported", param)
        if how == FAIL:
            return httpx.Response(500, text="Internal Server Error")
        return None

    def _choice(self, fields: dict[str, Any], chat: bool, index: int) -> dict[str, Any]:
        words, logprobs = self._generate(fields)
        text = " ".join(words)
        stops = fields.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            if stop in text:
                text = text[: text.index(stop)]
        if (fields.get("response_format") or {}).get("type") == "json_object":
            text = (
                "{" + "\n" * len(words) * 4
                if self.json_whitespace
                else json.dumps({"answer": text})
            )
        choice: dict[str, Any] = {"index": index, "finish_reason": "length", "_tokens": len(words)}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
            if fields.get("logprobs"):
                top = int(fields.get("top_logprobs", 0))
                content = [
                    {
                        "token": w,
                        "logprob": lp,
                        "top_logprobs": [{"token": w, "logprob": lp}] * top,
                    }
                    for w, lp in zip(words, logprobs, strict=True)
                ]
                choice["logprobs"] = {"content": content}
            else:
                choice["logprobs"] = None
        else:
            choice["text"] = text
            choice["logprobs"] = (
                {"tokens": words, "token_logprobs": logprobs}
                if fields.get("logprobs") is not None
                else None
            )
        return choice

    def _generate(self, fields: dict[str, Any]) -> tuple[list[str], list[float]]:
        seed = fields.get("seed")
        rng = np.random.default_rng(seed if seed is not None else None)
        limit = int(fields.get("max_completion_tokens", fields.get("max_tokens", 16)))
        temperature = float(fields.get("temperature", 1.0))
        bias = np.zeros(VOCAB)
        for key, value in (fields.get("logit_bias") or {}).items():
            bias[int(key) % VOCAB] += value
        counts = np.zeros(VOCAB)
        previous = 0
        words: list[str] = []
        logprobs: list[float] = []
        for _ in range(limit):
            logits = self._weights[previous] + bias
            seen = counts > 0
            penalty = float(fields.get("repetition_penalty", 1.0))
            logits = np.where(
                seen, np.where(logits > 0, logits / penalty, logits * penalty), logits
            )
            logits = logits - fields.get("frequency_penalty", 0.0) * counts
            logits = logits - fields.get("presence_penalty", 0.0) * seen
            probs = _softmax(logits)
            if temperature == 0:
                token = int(np.argmax(logits))
            else:
                token = self._sample(_softmax(logits / temperature), fields, rng)
            words.append(WORDS[token])
            logprobs.append(float(np.log(probs[token])))
            counts[token] += 1
            previous = token
        return words, logprobs

    @staticmethod
    def _sample(
        probs: npt.NDArray[np.float64], fields: dict[str, Any], rng: np.random.Generator
    ) -> int:
        order = np.argsort(-probs, kind="stable")
        keep = np.ones(VOCAB, dtype=bool)
        top_k = int(fields.get("top_k", 0))
        if top_k > 0:
            keep[order[top_k:]] = False
        top_p = float(fields.get("top_p", 1.0))
        cut = int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1
        keep[order[cut:]] = False
        keep &= probs >= float(fields.get("min_p", 0.0)) * probs.max()
        kept = np.where(keep, probs, 0.0)
        return int(rng.choice(VOCAB, p=kept / kept.sum()))

    def _stream(
        self, fields: dict[str, Any], chat: bool, choices: list[dict[str, Any]]
    ) -> httpx.Response:
        choice = choices[0]
        text = choice["message"]["content"] if chat else choice["text"]
        events: list[dict[str, Any]] = []
        for i, word in enumerate(text.split(" ")):
            piece = word if i == 0 else " " + word
            delta = {"delta": {"content": piece}} if chat else {"text": piece}
            events.append({"choices": [{"index": 0, **delta, "finish_reason": None}]})
        if (fields.get("stream_options") or {}).get("include_usage"):
            tokens = choice["_tokens"]
            events.append({"choices": [], "usage": {"completion_tokens": tokens}})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=data, headers={"content-type": "text/event-stream"})


def _error(status: int, message: str, param: str | None) -> httpx.Response:
    error = {"message": message, "type": "BadRequestError", "param": param, "code": status}
    return httpx.Response(status, json={"error": error})
