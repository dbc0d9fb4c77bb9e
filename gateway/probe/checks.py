"""Checks of the fields that shape the answer: length limits, stop, n, logprobs,
response_format, streaming, and what the engine does with a field it cannot know.
Each is deterministic: the answer has the asked-for shape, or it does not."""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.probe.client import DONE, Answer
from gateway.probe.context import Probe
from gateway.probe.route import BASE_MAX_TOKENS, completion_tokens
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    REJECTED,
    Verdict,
    compact,
    quote,
)

LIMIT = 4  # max_tokens under test: well under the base request's 16
UNKNOWN_FIELD = "ft_probe_unknown_field"
UNKNOWN = "(unknown field)"
JSON_MAX_TOKENS = 256  # room for a JSON mode answer to close its braces
# OpenAI's JSON mode needs "JSON" in the messages, and without it a model may write
# whitespace until the limit: the probe asks for JSON as clients are told to.
JSON_PROMPT = "Describe Python lists. Answer in JSON: an object with a few short keys."
WHITESPACE_RUN = 32  # trailing whitespace at least this long: unbounded whitespace

_WORD = re.compile(r"[A-Za-z]{3,}")


def _limit_check(probe: Probe, field: str) -> Verdict:
    answer = probe.post(temperature=0, **{field: LIMIT})
    trial, bad = probe.judge(field, answer)
    if bad is not None:
        return bad
    tokens = completion_tokens(answer)
    plain = completion_tokens(probe.baseline.greedy[0])
    if tokens is None:
        return Verdict(field, INCONCLUSIVE, "the answer has no usage.completion_tokens", (trial,))
    also = f" (max_tokens {BASE_MAX_TOKENS} was also sent)" if field != "max_tokens" else ""
    if tokens > LIMIT:
        outcome, summary = IGNORED, f"{field} {LIMIT}: {tokens} completion tokens came back{also}"
    elif plain is not None and plain <= LIMIT:
        outcome = INCONCLUSIVE
        summary = f"{tokens} completion tokens, but the plain answer was only {plain} long"
    else:
        outcome = HONOURED
        summary = f"{field} {LIMIT}: {tokens} completion tokens (the plain request: {plain})"
    return Verdict(field, outcome, summary, (trial,))


def check_max_tokens(probe: Probe) -> Verdict:
    """usage.completion_tokens respects max_tokens."""
    return _limit_check(probe, "max_tokens")


def check_max_completion_tokens(probe: Probe) -> Verdict:
    """usage.completion_tokens respects max_completion_tokens (sent with max_tokens 16)."""
    return _limit_check(probe, "max_completion_tokens")


def stop_word(text: str) -> tuple[str, int] | None:
    """A word of ``text`` to stop at, and where it first occurs: past the first third."""
    candidates = [m.group() for m in _WORD.finditer(text)]
    for word in candidates:
        at = text.find(word)
        if at >= max(1, len(text) // 3):
            return word, at
    for word in candidates:
        at = text.find(word)
        if at > 0:
            return word, at
    return None


def check_stop(probe: Probe) -> Verdict:
    """A word taken from the greedy text ends the text there."""
    greedy = probe.baseline.greedy_text
    if greedy is None:
        return Verdict("stop", INCONCLUSIVE, "needs a repeatable temperature-0 text")
    found = stop_word(greedy)
    if found is None:
        return Verdict("stop", INCONCLUSIVE, f"no word to stop at in {quote(greedy)}")
    word, at = found
    answer = probe.post(temperature=0, stop=[word])
    trial, bad = probe.judge("stop", answer)
    if bad is not None:
        return bad
    text = probe.route.text(answer) or ""
    if word in text or text == greedy:
        outcome, how = IGNORED, f"the text still runs past it: {quote(text)}"
    elif text.rstrip() == greedy[:at].rstrip():
        outcome, how = HONOURED, f"the text ends just before it: {quote(text)}"
    else:
        outcome = INCONCLUSIVE
        how = f"the text {quote(text)} is not the temperature-0 text cut at the word"
    return Verdict("stop", outcome, f"stop {word!r}: {how}", (trial,))


def check_n(probe: Probe) -> Verdict:
    """n=2 gives two choices."""
    answer = probe.post(temperature=1.0, n=2)
    trial, bad = probe.judge("n", answer)
    if bad is not None:
        return bad
    count = len(probe.route.texts(answer))
    if count == 2:
        return Verdict("n", HONOURED, "n 2: two choices came back", (trial,))
    if count == 1:
        return Verdict("n", IGNORED, "n 2: one choice came back", (trial,))
    return Verdict("n", BROKEN, f"n 2: {count} choices came back", (trial,))


def _choice_logprobs(answer: Answer) -> Any:
    body = answer.body if isinstance(answer.body, dict) else {}
    choices = body.get("choices") or [{}]
    first = choices[0] if isinstance(choices[0], dict) else {}
    return first.get("logprobs")


def _is_logprob(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0


def _chat_entries(logprobs: Any) -> list[dict[str, Any]] | None:
    """The ``content`` entries of chat logprobs when well formed, else None."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    for entry in content:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("token"), str)
            and _is_logprob(entry.get("logprob"))
        ):
            return None
    return content


def check_logprobs(probe: Probe) -> Verdict:
    """Log-probabilities come back, well formed (chat: logprobs true; completions: 2)."""
    value: Any = True if probe.route.is_chat else 2
    answer = probe.post(temperature=0, logprobs=value)
    trial, bad = probe.judge("logprobs", answer)
    if bad is not None:
        return bad
    logprobs = _choice_logprobs(answer)
    shown = f"choices[0].logprobs = {compact(logprobs, 80)}"
    if logprobs is None:
        return Verdict("logprobs", IGNORED, f"logprobs {json.dumps(value)}: {shown}", (trial,))
    if probe.route.is_chat:
        well_formed = _chat_entries(logprobs) is not None
    else:
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        well_formed = (
            isinstance(tokens, list)
            and isinstance(values, list)
            and len(tokens) == len(values) > 0
            and all(v is None or _is_logprob(v) for v in values)
            and any(_is_logprob(v) for v in values)
        )
    if not well_formed:
        return Verdict("logprobs", BROKEN, f"malformed: {shown}", (trial,))
    return Verdict("logprobs", HONOURED, f"well formed: {shown}", (trial,))


def _alternatives(entry: dict[str, Any]) -> int:
    top = entry.get("top_logprobs")
    return len(top) if isinstance(top, list) else 0


def check_top_logprobs(probe: Probe) -> Verdict:
    """Each token comes with two alternatives (chat only)."""
    answer = probe.post(temperature=0, logprobs=True, top_logprobs=2)
    trial, bad = probe.judge("top_logprobs", answer)
    if bad is not None:
        return bad
    entries = _chat_entries(_choice_logprobs(answer))
    sizes = sorted({_alternatives(e) for e in entries or ()})
    if entries is None:
        outcome, summary = IGNORED, "logprobs true, top_logprobs 2: no logprobs came back"
    elif sizes == [2]:
        outcome, summary = HONOURED, "top_logprobs 2: two alternatives for every token"
    elif sizes == [0]:
        outcome, summary = IGNORED, "top_logprobs 2: no alternatives for any token"
    else:
        outcome = BROKEN
        summary = f"top_logprobs 2: {'/'.join(map(str, sizes))} alternatives per token"
    return Verdict("top_logprobs", outcome, summary, (trial,))


def check_response_format(probe: Probe) -> Verdict:
    """JSON mode: the text parses as a JSON object (chat only). Asked as OpenAI asks it
    to be used (a message that says JSON, tokens enough to close the braces), so an
    engine that has it gets to show it; an answer that runs to the token limit in
    whitespace is the defect named (the grammar lets whitespace go on unbounded)."""
    answer = probe.post(
        messages=[{"role": "user", "content": JSON_PROMPT}],
        temperature=0,
        max_tokens=JSON_MAX_TOKENS,
        response_format={"type": "json_object"},
    )
    trial, bad = probe.judge("response_format", answer)
    if bad is not None:
        return bad
    text = probe.route.text(answer) or ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    tail = len(text) - len(text.rstrip())
    if isinstance(parsed, dict):
        outcome, how = HONOURED, "the text is a JSON object"
    elif text.strip() and not text.lstrip().startswith("{"):
        outcome, how = IGNORED, f"the text is not JSON: {quote(text)}"
    elif tail >= WHITESPACE_RUN or not text.strip("{ \n\r\t"):
        outcome = BROKEN
        how = (
            f"unbounded whitespace: the answer ends in {tail} whitespace characters "
            f"at the token limit ({completion_tokens(answer)} tokens): {quote(text)}"
        )
    else:
        outcome = INCONCLUSIVE
        how = f"the text does not parse, but may have been cut short: {quote(text)}"
    return Verdict("response_format", outcome, f"json_object: {how}", (trial,))


def _stream_problem(answer: Answer) -> str | None:
    events = answer.events or []
    if answer.malformed:
        return f"lines that are not SSE data events: {quote(answer.malformed[0])}"
    if not events or events[-1] != DONE:
        return "the stream does not end with data: [DONE]"
    return None


def check_stream(probe: Probe) -> Verdict:
    """stream true: a well-formed event stream that ends with [DONE]."""
    answer = probe.stream(temperature=0, stream=True)
    trial, bad = probe.judge("stream", answer)
    if bad is not None:
        return bad
    if answer.events is None:
        return Verdict(
            "stream", IGNORED, f"answered with {answer.content_type or 'no content type'}", (trial,)
        )
    problem = _stream_problem(answer)
    if problem is not None:
        return Verdict("stream", BROKEN, problem, (trial,))
    text = probe.route.stream_text(answer)
    same = " (the temperature-0 text)" if text == probe.baseline.greedy_text else ""
    return Verdict(
        "stream",
        HONOURED,
        f"{len(answer.events)} events ending with [DONE], text {quote(text, 40)}{same}",
        (trial,),
    )


def check_stream_options(probe: Probe) -> Verdict:
    """stream_options.include_usage: a chunk carries the usage."""
    answer = probe.stream(temperature=0, stream=True, stream_options={"include_usage": True})
    trial, bad = probe.judge("stream_options", answer)
    if bad is not None:
        return bad
    if answer.events is None:
        return Verdict("stream_options", INCONCLUSIVE, "no event stream came back", (trial,))
    problem = _stream_problem(answer)
    if problem is not None:
        return Verdict("stream_options", BROKEN, problem, (trial,))
    usage = [
        e["usage"]
        for e in answer.events
        if isinstance(e, dict)
        and isinstance(e.get("usage"), dict)
        and isinstance(e["usage"].get("completion_tokens"), int)
    ]
    if usage:
        return Verdict(
            "stream_options",
            HONOURED,
            f"include_usage: a usage chunk came back: {compact(usage[-1], 80)}",
            (trial,),
        )
    return Verdict("stream_options", IGNORED, "include_usage: no chunk carries usage", (trial,))


def check_unknown(probe: Probe) -> Verdict:
    """A field no engine knows: refused (like OpenAI) or silently accepted."""
    answer = probe.post(temperature=0, **{UNKNOWN_FIELD: "probe"})
    trial, bad = probe.judge(UNKNOWN, answer)
    if bad is not None:
        if bad.outcome == REJECTED:
            return Verdict(UNKNOWN, REJECTED, f"{UNKNOWN_FIELD}: {bad.summary}", (trial,))
        return bad
    return Verdict(UNKNOWN, IGNORED, f"{UNKNOWN_FIELD}: accepted with HTTP 200", (trial,))


MODEL = "model"
UNSERVED_MODEL = "ft-gateway-probe-no-such-model"


def check_model(probe: Probe) -> Verdict:
    """``model`` itself: does the engine refuse a name it does not serve (honoured: the
    name means something to it), or answer anyway (ignored: whatever a client names, this
    model answers; only the gateway's table of deployments keeps names apart)?"""
    answer = probe.post(temperature=0, model=UNSERVED_MODEL)
    trial, bad = probe.judge(MODEL, answer)
    if bad is not None:
        if bad.outcome == REJECTED:
            return Verdict(MODEL, HONOURED, f"{UNSERVED_MODEL}: {bad.summary}", (trial,))
        return bad
    return Verdict(
        MODEL, IGNORED, f"{UNSERVED_MODEL}: answered with HTTP 200 by the served model", (trial,)
    )
