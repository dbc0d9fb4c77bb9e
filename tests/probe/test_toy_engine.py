"""The probe against a toy engine whose every field can be honoured, ignored, refused,
failing or hanging (tests/support/toyengine.py, through httpx.MockTransport)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.policy.values import json_equal
from gateway.probe.checks import UNKNOWN, stop_word
from gateway.probe.client import MAX_TIMEOUTS_IN_A_ROW, EngineClient
from gateway.probe.context import ProbeError
from gateway.probe.fields import PROBED
from gateway.probe.messages import UNKNOWN_ROLE
from gateway.probe.progress import Progress
from gateway.probe.report import render_markdown, render_table
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import ProbeResult, checks_for, planned_requests, probe_engine
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    OUTCOMES,
    REJECTED,
    Verdict,
)
from gateway.probe.writer import render_policy
from gateway.probe.yamltext import Noted, entry_lines, flow
from tests.support.probes import BOTH, DAY, outcomes, run_probe, verdict
from tests.support.toyengine import ToyEngine


def honoured_everywhere(route: str) -> dict[str, str]:
    """The verdicts on an engine that honours everything (the toy's defaults)."""
    expected = {c.field: HONOURED for c in checks_for(route)} | {UNKNOWN: IGNORED}
    if route == CHAT:
        expected[UNKNOWN_ROLE] = REJECTED
    return expected


@pytest.fixture(scope="module")
def honest() -> ProbeResult:
    """A probe of an engine that honours everything."""
    return run_probe(ToyEngine())


def test_an_engine_that_honours_everything_gets_honoured_everywhere(honest: ProbeResult) -> None:
    for route in BOTH:
        found = outcomes(honest, route)
        assert set(found) == {c.field for c in checks_for(route)}
        assert found.pop(UNKNOWN) == IGNORED
        if route == CHAT:
            # It refuses a role it does not know, as OpenAI does.
            assert found.pop(UNKNOWN_ROLE) == REJECTED
        assert set(found.values()) == {HONOURED}, found
    assert honest.requests <= planned_requests(BOTH)


def test_the_request_budget_is_counted_up_front() -> None:
    # 53 chat requests before the checks inside messages, which add 10; 50 for completions
    # (one each for model itself). The seed check sends 18 of them: 6 alone, 12 in its
    # load's waves. Below the field, on chat: 24 for tool calling, and where JSON mode
    # holds 625 for the keywords (one plain schema first, then 52 cases of 8 and 4).
    assert planned_requests([CHAT]) == 63 + 24 + 625
    assert planned_requests([COMPLETIONS]) == 50
    assert planned_requests(BOTH) == 113 + 24 + 625


def test_statistical_verdicts_carry_a_confidence(honest: ProbeResult) -> None:
    for field in ("temperature", "seed", "top_k", "top_p", "min_p"):
        confidence = verdict(honest, CHAT, field).confidence
        assert confidence is not None and 0.9 <= confidence < 1
    assert verdict(honest, CHAT, "n").confidence is None


def test_every_verdict_carries_its_evidence(honest: ProbeResult) -> None:
    for route in BOTH:
        found = honest.route(route)
        assert found is not None
        for v in found.verdicts:
            assert v.summary
            assert v.trials, v.field
    seed = verdict(honest, CHAT, "seed")
    assert all('"seed": ' in t.sent for t in seed.trials)
    assert all(t.got.startswith("200, 1 choice, text ") for t in seed.trials)


# field ignored -> the verdicts that change (all others stay honoured): most change only
# their own (in test order); those that change more follow.
ALONE = (
    "frequency_penalty",
    "logit_bias",
    "max_completion_tokens",
    "max_tokens",
    "min_p",
    "n",
    "presence_penalty",
    "repetition_penalty",
    "response_format",
    "seed",
    "stop",
    "stream_options",
    "top_k",
    "top_logprobs",
    "top_p",
)
IGNORING = {
    **{field: {field: IGNORED} for field in ALONE},
    "logprobs": {"logprobs": IGNORED, "top_logprobs": IGNORED},
    # The seed check's load streams: answered whole, it cannot be known to overlap.
    "stream": {"stream": IGNORED, "stream_options": INCONCLUSIVE, "seed": INCONCLUSIVE},
    # Without a repeatable temperature 0 the comparisons against it cannot be made.
    "temperature": {
        "temperature": IGNORED,
        **{
            f: INCONCLUSIVE
            for f in (
                "presence_penalty",
                "frequency_penalty",
                "repetition_penalty",
                "logit_bias",
                "stop",
            )
        },
    },
}


@pytest.mark.parametrize("field", sorted(IGNORING))
def test_an_ignored_field_is_found_ignored_and_nothing_else_changes(field: str) -> None:
    routes = [CHAT] if field in ("max_completion_tokens", "top_logprobs") else BOTH
    result = run_probe(ToyEngine(ignore={field}), routes)
    for route in routes:
        expected = honoured_everywhere(route)
        expected |= {f: o for f, o in IGNORING[field].items() if f in expected}
        assert outcomes(result, route) == expected


def test_a_refused_field_is_rejected_with_the_engines_message() -> None:
    result = run_probe(ToyEngine(reject={"n", "logprobs"}), [COMPLETIONS])
    n = verdict(result, COMPLETIONS, "n")
    assert n.outcome == REJECTED
    assert n.summary == "HTTP 400: n is not supported"
    assert verdict(result, COMPLETIONS, "logprobs").outcome == REJECTED
    assert verdict(result, COMPLETIONS, "seed").outcome == HONOURED


def test_an_unknown_field_refused_like_openai_does_is_rejected() -> None:
    result = run_probe(ToyEngine(reject_unknown=True), [CHAT])
    v = verdict(result, CHAT, UNKNOWN)
    assert v.outcome == REJECTED
    assert "Unrecognized request argument supplied: ft_probe_unknown_field" in v.summary


def test_a_failing_field_is_broken() -> None:
    result = run_probe(ToyEngine(fail={"logit_bias"}), [CHAT])
    v = verdict(result, CHAT, "logit_bias")
    assert v.outcome == BROKEN
    assert v.summary.startswith("HTTP 500: Internal Server Error")


def test_a_hanging_field_is_broken_and_probing_goes_on() -> None:
    toy = ToyEngine(hang={"seed", "top_k", "top_p", "min_p", "n"})
    result = run_probe(toy, [CHAT])
    for field in ("seed", "top_k", "top_p", "min_p", "n"):
        v = verdict(result, CHAT, field)
        assert v.outcome == BROKEN
        assert v.summary.startswith("no answer: time-out after 1 s")
    # After three time-outs in a row a plain request showed the engine alive again.
    assert verdict(result, CHAT, "presence_penalty").outcome == HONOURED
    assert verdict(result, CHAT, "stream").outcome == HONOURED


def test_an_engine_that_stops_answering_costs_a_few_time_outs_not_a_hundred() -> None:
    toy = ToyEngine(hang_after=7)  # answers the chat baseline, then nothing
    result = run_probe(toy)
    found = outcomes(result, CHAT)
    assert found["temperature"] == HONOURED
    assert found["seed"] == BROKEN
    assert found["stream"] == INCONCLUSIVE
    assert "not sent: the engine timed out 3 times in a row" in verdict(result, CHAT, "n").summary
    completions = result.route(COMPLETIONS)
    assert completions is not None and "time-out" in str(completions.error)
    # The baseline, three time-outs in a row, one plain request to see whether the
    # engine came back, and the second route's plain request.
    assert len(toy.requests) == 7 + MAX_TIMEOUTS_IN_A_ROW + 2


def test_an_engine_that_answers_no_plain_request_is_a_clear_error() -> None:
    with pytest.raises(ProbeError, match=r"did not answer the plain request.*HTTP 500"):
        run_probe(ToyEngine(fail={"model"}))


def test_a_route_the_engine_lacks_is_reported_and_left_out_of_the_policy() -> None:
    toy = ToyEngine()

    def chat_only(request: httpx.Request) -> httpx.Response:
        if request.url.path == COMPLETIONS:
            return httpx.Response(404, json={"error": {"message": "no such route"}})
        return toy(request)

    with EngineClient("http://toy", transport=httpx.MockTransport(chat_only)) as client:
        result = probe_engine(client, upstream="http://toy", model="toy", routes=BOTH, today=DAY)
    completions = result.route(COMPLETIONS)
    assert completions is not None and "HTTP 404: no such route" in str(completions.error)
    text = render_policy(result)
    policy = parse_policy_text(text)
    assert [str(r) for r in policy.routes] == [CHAT]
    assert "/v1/completions is not in this policy" in text
    assert "Not measured: " in render_markdown(result)


def test_the_request_budget_is_never_exceeded() -> None:
    toy = ToyEngine()
    result = run_probe(toy, BOTH, max_requests=20)
    assert len(toy.requests) == result.requests == 20
    last = outcomes(result, CHAT)
    assert last["stream"] == INCONCLUSIVE
    assert "request budget (20) is spent" in verdict(result, CHAT, "stream").summary


GARBAGE: list[Any] = [
    [],
    "text",
    {"choices": None},
    {"choices": [None, 3]},
    {"choices": [{"message": "x", "logprobs": {"content": 3}}]},
    {"choices": [{"message": {"content": 5}, "text": ["a"]}], "usage": "many"},
    {"choices": [{"message": {"content": "x"}, "text": "x", "logprobs": {"content": [{}]}}]},
    {"choices": [{"message": {"content": "x"}, "text": "x", "logprobs": {"tokens": [1]}}]},
]


@pytest.mark.parametrize("garbage", GARBAGE, ids=[json.dumps(g)[:30] for g in GARBAGE])
def test_answers_of_any_shape_never_crash_the_probe(garbage: Any) -> None:
    result = run_probe(ToyEngine(garbage=garbage))
    for route in BOTH:
        found = outcomes(result, route)
        assert set(found.values()) <= set(OUTCOMES)
        assert found["temperature"] == HONOURED  # the plain requests were answered properly
    parse_policy_text(render_policy(result))
    render_markdown(result)


def test_a_malformed_stream_is_broken() -> None:
    toy = ToyEngine()

    def no_done(request: httpx.Request) -> httpx.Response:
        response = toy(request)
        if response.headers.get("content-type") == "text/event-stream":
            text = response.text.replace("data: [DONE]\n\n", "event: x\nnot sse\n\n")
            return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
        return response

    with EngineClient("http://toy", transport=httpx.MockTransport(no_done)) as client:
        result = probe_engine(client, upstream="http://toy", model="toy", routes=[CHAT])
    stream = verdict(result, CHAT, "stream")
    assert stream.outcome == BROKEN
    assert "not SSE data events" in stream.summary


# -- the written policy ------------------------------------------------------------


def test_the_written_policy_passes_honoured_fields_with_their_checks(honest: ProbeResult) -> None:
    policy = parse_policy_text(render_policy(honest))
    for route in BOTH:
        fields = policy.routes[route].fields
        for name, spec in PROBED[route].items():
            rule = fields[name]
            assert rule.action == "pass", name
            if name == "response_format":
                continue  # its json_schema checked keyword by keyword: test_structured_probe
            expected = {k: v for k, v in spec.items() if k != "neutral"}
            got = rule.model_dump(exclude_unset=True, exclude={"action"})
            assert json.loads(json.dumps(got)) == json.loads(json.dumps(expected)), name


def test_the_written_policy_rejects_ignored_refused_and_broken_fields() -> None:
    toy = ToyEngine(ignore={"logprobs", "max_completion_tokens"}, fail={"logit_bias"})
    result = run_probe(toy, [CHAT])
    text = render_policy(result)
    policy = Policy(parse_policy_text(text))
    body = {"model": "toy", "messages": [{"role": "user", "content": "hi"}]}

    def decide(**fields: Any) -> str | None:
        decision = apply_policy(policy, CHAT, body | fields)
        return decision.error.param if decision.error else None

    assert decide(logprobs=True) == "logprobs"
    assert decide(logit_bias={"5": 10}) == "logit_bias"
    assert decide(ft_probe_unknown_field=1) == "ft_probe_unknown_field"
    neutrals: list[dict[str, Any]] = [
        {"n": 1},
        {"logprobs": False},
        {"logprobs": None},
        {"logit_bias": {}},
    ]
    for neutral in neutrals:
        assert decide(**neutral) is None, neutral
    # The engine fails on logit_bias, so even its neutral value is not forwarded.
    assert "logit_bias" not in apply_policy(policy, CHAT, body | {"logit_bias": {}}).body
    # max_tokens is honoured: max_completion_tokens is renamed onto it.
    renamed = apply_policy(policy, CHAT, body | {"max_completion_tokens": 7})
    assert renamed.error is None and renamed.body["max_tokens"] == 7
    assert decide(seed=5, temperature=0.5, top_k=3, stop="x", stream=False) is None
    assert "# logit_bias: broken: HTTP 500: Internal Server Error" in text


def test_an_inconclusive_field_is_rejected_and_flagged_for_review() -> None:
    result = run_probe(ToyEngine(ignore={"temperature"}), [COMPLETIONS])
    text = render_policy(result)
    rule = parse_policy_text(text).routes[COMPLETIONS].fields["stop"]
    assert rule.action == "reject"
    assert "# REVIEW BY HAND. stop: inconclusive" in text


def test_fields_sent_with_every_request_pass_in_the_written_policy() -> None:
    extra = {"chat_template_kwargs": {"enable_thinking": False}, "priority": 1}
    toy = ToyEngine()
    result = run_probe(toy, [CHAT], extra=extra)
    assert all(r["priority"] == 1 for r in toy.requests)
    policy = parse_policy_text(render_policy(result))
    assert policy.routes[CHAT].fields["priority"].action == "pass"


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON)
@example({"\u0301" * 300: None})  # escaped, a key past YAML's 1024-character implicit-key limit
def test_flow_style_reads_back_as_the_same_json_value(value: Any) -> None:
    back = yaml.safe_load(f"key: {flow(value)}")["key"]
    if isinstance(value, float) and math.isfinite(value):
        assert isinstance(back, float) and back == value
    else:
        assert json_equal(back, value)


def _without_notes(value: Any) -> Any:
    if isinstance(value, Noted):
        return _without_notes(value.value)
    if isinstance(value, dict):
        return {k: _without_notes(v) for k, v in value.items()}
    return value


# Nested mappings whose entries may carry a comment of any text, as the messages rule
# does: an engine's message with a line break YAML knows (U+2028, U+0085) among them.
NOTED = st.recursive(
    JSON,
    lambda inner: st.dictionaries(
        st.text(), inner | st.builds(Noted, inner, st.text()), min_size=1, max_size=4
    ),
    max_leaves=16,
)


@given(NOTED)
@example({"a": Noted({"b": 1}, "x\u2028unknown_fields: pass\x85c: 2\nd: 3")})
@example({"k" * 1200: {"b": Noted(1, "long key")}})
def test_block_style_with_comments_reads_back_as_the_same_json_value(value: Any) -> None:
    text = "\n".join(entry_lines("key", value, "")) + "\n"
    back = yaml.safe_load(text)
    assert json_equal(back, {"key": _without_notes(value)})


def test_an_engines_message_cannot_write_policy_through_a_comment() -> None:
    toy = ToyEngine()

    def sly(request: httpx.Request) -> httpx.Response:
        if b'"seed"' in request.content:
            message = "no\u2028unknown_fields: pass\u2029routes: {}\x85version: 2"
            return httpx.Response(400, json={"error": {"message": message}})
        return toy(request)

    with EngineClient("http://toy", transport=httpx.MockTransport(sly)) as client:
        result = probe_engine(client, upstream="http://toy", model="toy", routes=[CHAT])
    assert verdict(result, CHAT, "seed").outcome == REJECTED
    policy = parse_policy_text(render_policy(result))
    assert policy.unknown_fields == "reject" and list(policy.routes) == [CHAT]


# -- report, table, progress -------------------------------------------------------------


def test_the_markdown_report_has_a_table_per_route_and_the_evidence(
    honest: ProbeResult,
) -> None:
    report = render_markdown(honest)
    assert "| field | verdict | confidence | evidence |" in report
    assert "## /v1/chat/completions" in report and "## /v1/completions" in report
    assert "| seed | **honoured** | 0.98" in report
    assert '- sent `{"temperature": 1.0, "seed": 1234}` → 200, 1 choice' in report
    table = render_table(honest)
    assert "seed" in table and f"{honest.requests} requests to http://toy" in table


def test_report_cells_cannot_break_the_table() -> None:
    result = run_probe(ToyEngine(reject={"n"}), [CHAT])
    found = result.route(CHAT)
    assert found is not None
    found.verdicts.append(Verdict("x", IGNORED, "a | b <think>\nc"))
    assert "| x | **ignored** | — | a \\| b &lt;think&gt; c |" in render_markdown(result)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only() -> None:
    terminal = _Terminal()
    bar = Progress(10, stream=terminal, width=10)
    bar.update(done=3, label="seed")
    assert terminal.getvalue() == "\r[###.......] 3/10 seed"
    bar.close()
    assert terminal.getvalue().endswith("\r")
    pipe = io.StringIO()
    quiet = Progress(10, stream=pipe)
    quiet.update(done=3, label="seed")
    quiet.close()
    assert pipe.getvalue() == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the quick brown fox jumps over", ("brown", 10)),
        ("ab cd xyz", ("xyz", 6)),
        ("xyz", None),
        ("12 34 !!", None),
    ],
)
def test_stop_word_is_taken_past_the_first_third(
    text: str, expected: tuple[str, int] | None
) -> None:
    assert stop_word(text) == expected


def test_json_mode_that_writes_whitespace_to_the_limit_is_named_broken() -> None:
    """Asked for JSON with room to close its braces, an answer of whitespace to the token
    limit is the defect (unbounded whitespace), not an inconclusive cut."""
    toy = ToyEngine(json_whitespace=True)
    found = verdict(run_probe(toy, [CHAT]), CHAT, "response_format")
    assert found.outcome == BROKEN
    assert "unbounded whitespace" in found.summary
    sent = next(b for b in toy.requests if b.get("response_format") == {"type": "json_object"})
    assert "JSON" in sent["messages"][0]["content"] and sent["max_tokens"] == 256
