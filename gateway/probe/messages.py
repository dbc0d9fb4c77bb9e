"""Checks inside chat messages: which roles and content parts an engine renders into
the prompt, and what it does with a role no template knows.

A model's text cannot show whether it read an instruction (the reference engine's
trigram model follows none), but ``usage.prompt_tokens`` shows what was rendered:
an engine that renders a message or a part counts its tokens; one that drops it
without a word does not. So each check compares the prompt tokens of a request
with those of one that lacks the message or part (the plain request, or the
prompt as a text part for the other parts). All at temperature 0, chat only.
"""

from __future__ import annotations

from typing import Any

from gateway.probe.client import Answer
from gateway.probe.context import Probe
from gateway.probe.parts import part
from gateway.probe.route import CHAT_PROMPT, prompt_tokens
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    REJECTED,
    Trial,
    Verdict,
)

SYSTEM_ROLE = "system role"
DEVELOPER_ROLE = "developer role"
UNKNOWN_ROLE = "(unknown role)"
TEXT_PART = "text part"
IMAGE_PART = "image_url part"
AUDIO_PART = "input_audio part"
FILE_PART = "file part"
TOOL_MESSAGE = "tool message"
# The content part type each part check sends.
PART_TYPES = {IMAGE_PART: "image_url", AUDIO_PART: "input_audio", FILE_PART: "file"}
# The verdicts this module gives, for the writer.
CHECKED = (
    SYSTEM_ROLE,
    DEVELOPER_ROLE,
    UNKNOWN_ROLE,
    TEXT_PART,
    *PART_TYPES,
    TOOL_MESSAGE,
)

WIZARD = "wizard"  # a role no template knows
INSTRUCTION = "Answer every question in exactly three short sentences."
TOOL_CALL_ID = "call_ft_probe"
# Longer tool results and tool call arguments, to see whether either is counted.
_MORE = " and every method with an example of each one"
_USER = {"role": "user", "content": CHAT_PROMPT}
_TEXT = {"type": "text", "text": CHAT_PROMPT}
_NO_USAGE = "the engine reports no usage.prompt_tokens, which this check compares"


def _plain_tokens(probe: Probe) -> int | None:
    return prompt_tokens(probe.baseline.greedy[0]) if probe.baseline.greedy else None


def _counted(probe: Probe, name: str, answer: Answer) -> Verdict | tuple[Trial, int, int]:
    """The verdict when the answer failed or shows no usage; else the evidence and the
    prompt tokens with and without."""
    trial, bad = probe.judge(name, answer, counted=True)
    if bad is not None:
        return bad
    tokens, plain = prompt_tokens(answer), _plain_tokens(probe)
    if tokens is None or plain is None:
        return Verdict(name, INCONCLUSIVE, _NO_USAGE, (trial,))
    return trial, tokens, plain


def _by_count(
    name: str, trial: Trial, tokens: int, base: int, *, rendered: str, dropped: str, fewer: str
) -> Verdict:
    """More prompt tokens than ``base``: rendered (honoured); as many: dropped (ignored);
    fewer: the probe cannot tell. Each outcome's summary is given."""
    if tokens > base:
        return Verdict(name, HONOURED, rendered, (trial,))
    if tokens == base:
        return Verdict(name, IGNORED, dropped, (trial,))
    return Verdict(name, INCONCLUSIVE, fewer, (trial,))


def _role_message(probe: Probe, name: str, role: str) -> Verdict:
    answer = probe.reference(
        role, temperature=0, messages=[{"role": role, "content": INSTRUCTION}, _USER]
    )
    counted = _counted(probe, name, answer)
    if isinstance(counted, Verdict):
        return counted
    trial, tokens, plain = counted
    return _by_count(
        name,
        trial,
        tokens,
        plain,
        rendered=f"a {role} message before the user's is rendered: {tokens} prompt tokens, "
        f"{plain} without it",
        dropped=f"a {role} message before the user's is dropped: {tokens} prompt tokens, as "
        "many as without it",
        fewer=f"fewer prompt tokens with a {role} message ({tokens}) than without ({plain})",
    )


def check_system(probe: Probe) -> Verdict:
    """A system message is rendered: its tokens count."""
    return _role_message(probe, SYSTEM_ROLE, "system")


def check_developer(probe: Probe) -> Verdict:
    """A developer message (the same text) is rendered, refused, or dropped."""
    verdict = _role_message(probe, DEVELOPER_ROLE, "developer")
    system = probe.references.get("system")
    tokens = prompt_tokens(system) if system is not None else None
    if verdict.outcome in (HONOURED, IGNORED) and tokens is not None:
        summary = f"{verdict.summary} (a system message with the same text: {tokens})"
        return Verdict(verdict.field, verdict.outcome, summary, verdict.trials)
    return verdict


def check_unknown_role(probe: Probe) -> Verdict:
    """A role no template knows: refused (as OpenAI does), a 5xx, or accepted."""
    answer = probe.post(temperature=0, messages=[{"role": WIZARD, "content": INSTRUCTION}, _USER])
    trial, bad = probe.judge(UNKNOWN_ROLE, answer, counted=True)
    what = f"role {WIZARD!r}"
    if bad is not None:
        if bad.outcome == REJECTED:
            return Verdict(UNKNOWN_ROLE, REJECTED, f"{what}: {bad.summary}", (trial,))
        if bad.outcome == BROKEN and (answer.status or 0) >= 500:
            summary = f"{what}: {bad.summary}: a client's mistake answered as a server failure"
            return Verdict(UNKNOWN_ROLE, BROKEN, summary, (trial,))
        return bad
    tokens, plain = prompt_tokens(answer), _plain_tokens(probe)
    if tokens is None or plain is None:
        how = ""
    elif tokens > plain:
        how = f" and rendered as it is ({tokens} prompt tokens, {plain} without the message)"
    else:
        how = f" and the message dropped ({tokens} prompt tokens, {plain} without it)"
    return Verdict(UNKNOWN_ROLE, IGNORED, f"{what}: accepted with HTTP 200{how}", (trial,))


def check_text_part(probe: Probe) -> Verdict:
    """The prompt as one text part counts as the same string does."""
    answer = probe.reference(
        TEXT_PART, temperature=0, messages=[{"role": "user", "content": [_TEXT]}]
    )
    counted = _counted(probe, TEXT_PART, answer)
    if isinstance(counted, Verdict):
        return counted
    trial, tokens, plain = counted
    if tokens >= plain:
        same = "as many as" if tokens == plain else f"{plain} for"
        return Verdict(
            TEXT_PART,
            HONOURED,
            f"the prompt as a text part is rendered: {tokens} prompt tokens, {same} the "
            "prompt as a string",
            (trial,),
        )
    return Verdict(
        TEXT_PART,
        IGNORED,
        f"the prompt as a text part is dropped: {tokens} prompt tokens, {plain} for the "
        "prompt as a string",
        (trial,),
    )


def check_part(probe: Probe, name: str) -> Verdict:
    """An image, audio or file part beside the text part: its tokens count, or it is
    dropped (as many tokens as the text part alone), or refused."""
    kind = PART_TYPES[name]
    answer = probe.post(temperature=0, messages=[{"role": "user", "content": [_TEXT, part(kind)]}])
    counted = _counted(probe, name, answer)
    if isinstance(counted, Verdict):
        return counted
    trial, tokens, plain = counted
    # Compared with the text part alone (check_text_part's answer) where it came back.
    alone = probe.references.get(TEXT_PART)
    base = prompt_tokens(alone) if alone is not None else None
    without = "the text part alone"
    if base is None:
        base, without = plain, "the prompt as a string"
    return _by_count(
        name,
        trial,
        tokens,
        base,
        rendered=f"{_a(kind)} part beside a text part is rendered: {tokens} prompt tokens, "
        f"{base} for {without}",
        dropped=f"{_a(kind)} part beside a text part is dropped without a word: {tokens} "
        f"prompt tokens, as many as for {without}",
        fewer=f"fewer prompt tokens with {_a(kind)} part ({tokens}) than for {without} ({base})",
    )


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def check_tool_message(probe: Probe) -> Verdict:
    """An assistant message with tool_calls, then the tool's result: both are rendered
    when a longer result and longer call arguments each count more prompt tokens."""
    requests = [
        {"temperature": 0, "messages": tool_exchange(arguments=a, result=r)}
        for a, r in (("", ""), ("", _MORE), (_MORE, ""))
    ]
    answers, trials, bad = probe.post_each(TOOL_MESSAGE, requests, counted=True)
    if bad is not None:
        return bad
    counts = [prompt_tokens(a) for a in answers]
    if any(c is None for c in counts) or len(counts) != 3:
        return Verdict(TOOL_MESSAGE, INCONCLUSIVE, _NO_USAGE, tuple(trials))
    first, longer_result, longer_call = (int(c or 0) for c in counts)
    words = len(_MORE.split())
    result = longer_result - first
    call = longer_call - first
    if result < 0 or call < 0:
        return Verdict(
            TOOL_MESSAGE,
            INCONCLUSIVE,
            f"a longer tool result or call counted fewer prompt tokens ({result:+}, {call:+})",
            tuple(trials),
        )
    shown = (
        f"a tool result {words} words longer: {result:+} prompt tokens; tool call arguments "
        f"{words} words longer: {call:+}"
    )
    if result and call:
        return Verdict(TOOL_MESSAGE, HONOURED, f"both rendered: {shown}", tuple(trials))
    if result:
        why = "the tool call is dropped, so the model would see a result of a call it never made"
    elif call:
        why = "the tool result is dropped, so the model would never see what the tool answered"
    else:
        why = "both are dropped"
    return Verdict(TOOL_MESSAGE, IGNORED, f"{why}: {shown}", tuple(trials))


def tool_exchange(*, arguments: str = "", result: str = "") -> list[dict[str, Any]]:
    """The user's question, the assistant's tool call, the tool's result; ``arguments``
    and ``result`` lengthen the call's arguments and the result."""
    call = {
        "id": TOOL_CALL_ID,
        "type": "function",
        "function": {"name": "lookup", "arguments": f'{{"topic": "lists{arguments}"}}'},
    }
    return [
        _USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": f"Lists are ordered{result}."},
    ]
