"""The checks inside messages, and n, against the toy engine: every verdict each can
give (the toy renders, drops, refuses or fails on a role, a part or a tool call as
told), and the rule the written policy has for it, shown by the decisions it makes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.probe.client import EngineClient
from gateway.probe.load import LOAD_MAX_TOKENS
from gateway.probe.messages import (
    AUDIO_PART,
    CHECKED,
    DEVELOPER_ROLE,
    FILE_PART,
    IMAGE_PART,
    PART_TYPES,
    SYSTEM_ROLE,
    TEXT_PART,
    TOOL_MESSAGE,
    UNKNOWN_ROLE,
    WIZARD,
    tool_exchange,
)
from gateway.probe.parts import part
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import ProbeResult, probe_engine
from gateway.probe.verdict import BROKEN, HONOURED, IGNORED, INCONCLUSIVE, REJECTED
from gateway.probe.writer import render_policy
from tests.support.probes import BOTH, comments, outcomes, run_probe, verdict
from tests.support.toyengine import DROP, FAIL, REJECT, RENDER, ToyEngine

USER = {"role": "user", "content": "hi"}
TEXT = {"type": "text", "text": "hi"}
# A request for each verdict inside messages, and where the policy refuses it.
REQUESTS: dict[str, tuple[list[dict[str, Any]], str]] = {
    SYSTEM_ROLE: ([{"role": "system", "content": "Be brief."}, USER], "messages[0].role"),
    DEVELOPER_ROLE: ([{"role": "developer", "content": "Be brief."}, USER], "messages[0].role"),
    UNKNOWN_ROLE: ([{"role": WIZARD, "content": "Be brief."}, USER], "messages[0].role"),
    TEXT_PART: ([{"role": "user", "content": [TEXT]}], "messages[0].content[0].type"),
    IMAGE_PART: (
        [{"role": "user", "content": [TEXT, part("image_url")]}],
        "messages[0].content[1].type",
    ),
    AUDIO_PART: (
        [{"role": "user", "content": [TEXT, part("input_audio")]}],
        "messages[0].content[1].type",
    ),
    FILE_PART: ([{"role": "user", "content": [TEXT, part("file")]}], "messages[0].content[1].type"),
    TOOL_MESSAGE: (tool_exchange(), "messages[1].tool_calls"),
}


def decide(result: ProbeResult, messages: list[dict[str, Any]], **fields: Any) -> Any:
    """The written policy's decision on a chat request with ``messages``."""
    policy = Policy(parse_policy_text(render_policy(result)))
    return apply_policy(policy, CHAT, {"model": "toy", "messages": messages, **fields})


def refused_at(result: ProbeResult, name: str) -> str | None:
    """Where the written policy refuses the request for verdict ``name``, or None."""
    decision = decide(result, REQUESTS[name][0])
    return decision.error.param if decision.error else None


@pytest.fixture(scope="module")
def honest() -> ProbeResult:
    return run_probe(ToyEngine(), [CHAT])


def test_an_engine_that_renders_everything_passes_every_role_and_part(
    honest: ProbeResult,
) -> None:
    for name in CHECKED:
        expected = REJECTED if name == UNKNOWN_ROLE else HONOURED
        assert verdict(honest, CHAT, name).outcome == expected, name
        # An unknown role is refused by the policy too, whatever the engine does.
        refused = refused_at(honest, name)
        assert refused == (REQUESTS[name][1] if name == UNKNOWN_ROLE else None), name
    # developer is renamed to system, which the engine renders.
    decision = decide(honest, REQUESTS[DEVELOPER_ROLE][0])
    assert decision.body["messages"][0]["role"] == "system"
    # The tool message's result and call both counted.
    tool = verdict(honest, CHAT, TOOL_MESSAGE)
    assert tool.summary.startswith("both rendered: a tool result 9 words longer: +9 prompt")
    assert len(tool.trials) == 3 and all("prompt tokens" in t.got for t in tool.trials)


# (the toy's behaviour inside messages, the verdict changed, its outcome, a piece of
# its summary); every other verdict stays as on the honest engine.
CASES: list[tuple[dict[str, str], str, str, str]] = [
    ({"system": DROP}, SYSTEM_ROLE, IGNORED, "is dropped: 11 prompt tokens, as many as"),
    ({"system": REJECT}, SYSTEM_ROLE, REJECTED, "HTTP 400: Invalid value: role 'system'"),
    ({"system": FAIL}, SYSTEM_ROLE, BROKEN, "HTTP 500"),
    ({"developer": DROP}, DEVELOPER_ROLE, IGNORED, "(a system message with the same text: 22)"),
    ({"developer": REJECT}, DEVELOPER_ROLE, REJECTED, "HTTP 400"),
    ({"developer": FAIL}, DEVELOPER_ROLE, BROKEN, "HTTP 500"),
    ({WIZARD: RENDER}, UNKNOWN_ROLE, IGNORED, "accepted with HTTP 200 and rendered as it is"),
    ({WIZARD: DROP}, UNKNOWN_ROLE, IGNORED, "accepted with HTTP 200 and the message dropped"),
    ({WIZARD: FAIL}, UNKNOWN_ROLE, BROKEN, "a client's mistake answered as a server failure"),
    ({"text": DROP}, TEXT_PART, IGNORED, "the prompt as a text part is dropped"),
    ({"image_url": DROP}, IMAGE_PART, IGNORED, "dropped without a word: 11 prompt tokens"),
    ({"image_url": REJECT}, IMAGE_PART, REJECTED, "content part 'image_url' is not supported"),
    ({"image_url": FAIL}, IMAGE_PART, BROKEN, "HTTP 500"),
    ({"input_audio": DROP}, AUDIO_PART, IGNORED, "an input_audio part beside a text part is"),
    ({"input_audio": REJECT}, AUDIO_PART, REJECTED, "HTTP 400"),
    ({"input_audio": FAIL}, AUDIO_PART, BROKEN, "HTTP 500"),
    ({"file": DROP}, FILE_PART, IGNORED, "a file part beside a text part is dropped"),
    ({"file": REJECT}, FILE_PART, REJECTED, "HTTP 400"),
    ({"file": FAIL}, FILE_PART, BROKEN, "HTTP 500"),
    ({"tool_calls": DROP}, TOOL_MESSAGE, IGNORED, "a result of a call it never made"),
    ({"tool": DROP}, TOOL_MESSAGE, IGNORED, "would never see what the tool answered"),
    ({"tool": DROP, "tool_calls": DROP}, TOOL_MESSAGE, IGNORED, "both are dropped"),
    ({"tool": REJECT}, TOOL_MESSAGE, REJECTED, "HTTP 400: Invalid value: role 'tool'"),
    ({"tool_calls": FAIL}, TOOL_MESSAGE, BROKEN, "HTTP 500"),
]
# Verdicts that change with another: a text part is in every part check's request.
ALSO = {
    ("text", REJECT): {IMAGE_PART: REJECTED, AUDIO_PART: REJECTED, FILE_PART: REJECTED},
    ("text", FAIL): {IMAGE_PART: BROKEN, AUDIO_PART: BROKEN, FILE_PART: BROKEN},
}
CASES += [
    ({"text": REJECT}, TEXT_PART, REJECTED, "content part 'text' is not supported"),
    ({"text": FAIL}, TEXT_PART, BROKEN, "HTTP 500"),
]


@pytest.mark.parametrize(
    ("inside", "name", "outcome", "summary"),
    CASES,
    ids=[f"{n}-{'+'.join(f'{k}:{v}' for k, v in i.items())}" for i, n, _, _ in CASES],
)
def test_each_check_inside_messages_gives_each_verdict_and_the_rule_for_it(
    inside: dict[str, str], name: str, outcome: str, summary: str
) -> None:
    result = run_probe(ToyEngine(inside=inside), [CHAT])
    found = verdict(result, CHAT, name)
    assert found.outcome == outcome
    assert summary in found.summary
    assert found.trials
    expected = {n: REJECTED if n == UNKNOWN_ROLE else HONOURED for n in CHECKED}
    expected[name] = outcome
    for (key, how), changed in ALSO.items():
        if inside.get(key) == how:
            expected |= changed
    assert {n: o for n, o in outcomes(result, CHAT).items() if n in CHECKED} == expected
    # The written policy refuses what the engine does not honour, where OpenAI would
    # name it; developer is the exception: renamed to system, which the engine renders.
    refused = refused_at(result, name)
    if name == DEVELOPER_ROLE:
        decision = decide(result, REQUESTS[name][0])
        assert decision.error is None
        assert decision.body["messages"][0]["role"] == "system"
    else:
        assert refused == REQUESTS[name][1]
    assert f"# {name}: {outcome}: {found.summary} (probed 2026-11-29)" in comments(
        render_policy(result)
    )


def test_an_unknown_role_is_refused_as_openai_does_it() -> None:
    result = run_probe(ToyEngine(inside={WIZARD: RENDER}), [CHAT])
    error = decide(result, REQUESTS[UNKNOWN_ROLE][0]).error
    assert error is not None and error.code == "invalid_value"
    assert error.message.startswith(f"Invalid value: '{WIZARD}'. Supported values are: ")


def test_a_rejected_part_says_why_in_the_clients_error() -> None:
    result = run_probe(ToyEngine(inside={"image_url": DROP}), [CHAT])
    error = decide(result, REQUESTS[IMAGE_PART][0]).error
    assert error is not None and error.code == "unsupported_value"
    assert "This engine drops image parts without a word" in error.message
    # The other parts, honoured, pass; so does the text part alone.
    for name in (AUDIO_PART, FILE_PART, TEXT_PART):
        assert refused_at(result, name) is None, name


def test_a_tool_exchange_rejected_refuses_a_tool_message_alone_too() -> None:
    result = run_probe(ToyEngine(inside={"tool_calls": DROP}), [CHAT])
    alone = [USER, {"role": "tool", "tool_call_id": "x", "content": "sunny"}]
    error = decide(result, alone).error
    assert error is not None and error.param == "messages[1].role"
    # An assistant message without tool calls still passes.
    assert decide(result, [USER, {"role": "assistant", "content": "Hi."}, USER]).error is None


def test_developer_is_renamed_only_onto_a_system_role_that_passes() -> None:
    # system refused: developer, rendered, passes as it is.
    result = run_probe(ToyEngine(inside={"system": REJECT}), [CHAT])
    decision = decide(result, REQUESTS[DEVELOPER_ROLE][0])
    assert decision.error is None and decision.body["messages"][0]["role"] == "developer"
    text = comments(render_policy(result))
    assert "passed: the engine renders it, and system does not pass" in text
    # Both refused: both rejected.
    result = run_probe(ToyEngine(inside={"system": REJECT, "developer": REJECT}), [CHAT])
    assert refused_at(result, DEVELOPER_ROLE) == "messages[0].role"
    assert refused_at(result, SYSTEM_ROLE) == "messages[0].role"


def test_without_prompt_tokens_the_checks_inside_messages_are_inconclusive() -> None:
    result = run_probe(ToyEngine(prompt_tokens=False), [CHAT])
    for name in CHECKED:
        found = verdict(result, CHAT, name)
        if name == UNKNOWN_ROLE:
            assert found.outcome == REJECTED  # an answer's status needs no counting
            continue
        assert found.outcome == INCONCLUSIVE, name
        assert "no usage.prompt_tokens" in found.summary
    # Every rule is rejected and marked for review, and the policy still checks
    # (developer is not renamed onto a system role that is rejected).
    text = render_policy(result)
    assert f"# REVIEW BY HAND. {SYSTEM_ROLE}: inconclusive" in text
    assert f"# REVIEW BY HAND. {IMAGE_PART}: inconclusive" in text
    for name in CHECKED:
        # A part's request is refused at its text part, itself not verified.
        where = "messages[0].content[0].type" if name in PART_TYPES else REQUESTS[name][1]
        assert refused_at(result, name) == where, name


def test_an_unknown_role_answered_without_a_text_is_broken_but_not_a_server_failure() -> None:
    toy = ToyEngine(inside={WIZARD: RENDER})

    def empty_for_wizard(request: httpx.Request) -> httpx.Response:
        if WIZARD.encode() in request.content:
            return httpx.Response(200, json={"choices": [{"message": {"content": None}}]})
        return toy(request)

    with EngineClient("http://toy", transport=httpx.MockTransport(empty_for_wizard)) as client:
        result = probe_engine(client, upstream="http://toy", model="toy", routes=[CHAT])
    found = verdict(result, CHAT, UNKNOWN_ROLE)
    assert found.outcome == BROKEN
    assert "HTTP 200 without a text" in found.summary and "server failure" not in found.summary
    assert refused_at(result, UNKNOWN_ROLE) == "messages[0].role"


def test_the_checks_inside_messages_stay_within_their_requests() -> None:
    toy = ToyEngine()
    run_probe(toy, [CHAT])
    # The seed check's load requests have prompts of their own: left out.
    probe = [r for r in toy.requests if r.get("max_tokens") != LOAD_MAX_TOKENS]
    # The checks below the field (JSON mode, tools, schemas) have prompts of their own too.
    below = ("response_format", "tools")
    inside = [
        r
        for r in probe
        if r["messages"] != toy.requests[0]["messages"] and not any(k in r for k in below)
    ]
    # system, developer, wizard, the text part, three parts, three tool exchanges.
    assert len(inside) == 10
    assert {m["role"] for r in inside for m in r["messages"]} == {
        "system",
        "developer",
        WIZARD,
        "user",
        "assistant",
        "tool",
    }


# -- n: honoured passes, any other verdict is served by fan-out --------------------------


@pytest.mark.parametrize(
    ("toy", "outcome"),
    [
        (ToyEngine(), HONOURED),
        (ToyEngine(ignore={"n"}), IGNORED),
        (ToyEngine(reject={"n"}), REJECTED),
        (ToyEngine(fail={"n"}), BROKEN),
    ],
    ids=["honoured", "ignored", "rejected", "broken"],
)
def test_n_passes_where_the_engine_honours_it_and_is_fanned_out_elsewhere(
    toy: ToyEngine, outcome: str
) -> None:
    result = run_probe(toy, BOTH)
    text = render_policy(result)
    policy = Policy(parse_policy_text(text))
    text = comments(text)
    for route in BOTH:
        assert verdict(result, route, "n").outcome == outcome
        rule = policy.source.routes[route].fields["n"]
        body: dict[str, Any] = {"model": "toy", "n": 3}
        body |= {"messages": [USER]} if route == CHAT else {"prompt": "hi"}
        decision = apply_policy(policy, route, body)
        assert decision.error is None
        if outcome == HONOURED:
            assert (rule.action, rule.maximum) == ("pass", 128)
            assert decision.fanout == 1 and decision.body["n"] == 3
        else:
            assert (rule.action, rule.maximum) == ("fanout", 8)
            assert decision.fanout == 3 and "n" not in decision.body
            # Past the fan-out's maximum: a 400, not 9 engine requests.
            too_many = apply_policy(policy, route, body | {"n": 9})
            assert too_many.error is not None and too_many.error.param == "n"
    if outcome != HONOURED:
        assert "served by fan-out: the gateway asks the engine n times (up to 8)" in text


def test_the_completions_route_has_no_checks_inside_messages(honest: ProbeResult) -> None:
    result = run_probe(ToyEngine(), [COMPLETIONS])
    assert not set(outcomes(result, COMPLETIONS)) & set(CHECKED)
    assert "messages" not in parse_policy_text(render_policy(result)).routes[COMPLETIONS].fields
