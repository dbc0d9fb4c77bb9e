"""Report-only rules: a refusal recorded, not enforced, at every level it can be set."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.policy.engine import REPORTED, Policy, apply_policy
from gateway.policy.file import FieldRule, PolicyFile
from gateway.policy.loading import load_policy_file, parse_policy_text
from tests.policy.test_engine import REJECTED
from tests.support.bodies import CHAT, chat
from tests.support.paths import POLICY


@pytest.fixture(scope="module")
def shipped() -> PolicyFile:
    return load_policy_file(POLICY)[0]


@pytest.mark.parametrize(("fields", "param", "code"), REJECTED)
def test_a_report_only_policy_forwards_what_it_would_refuse_with_the_same_400(
    shipped: PolicyFile, fields: dict[str, Any], param: str, code: str
) -> None:
    enforced = apply_policy(Policy(shipped), CHAT, chat(**fields))
    trial = Policy(shipped.model_copy(update={"enforcement": "report"}))
    body = chat(**fields)
    sent = copy.deepcopy(body)
    decision = apply_policy(trial, CHAT, body)
    assert enforced.error is not None and decision.error is None
    assert decision.report is not None
    assert (decision.report.error.param, decision.report.error.code) == (param, code)
    assert decision.report.error.message == enforced.error.message
    # The path of the rule that refused (the error may name a member inside it).
    assert param.startswith(decision.reported[0].field)
    assert decision.reported[0].action == REPORTED
    assert decision.reported[0].detail == code
    # Forwarded as if the refusing rule were absent: the refused value as it came.
    assert body == sent
    assert decision.body == sent


TRIAL = """
version: 1
routes:
  /v1/chat/completions:
    fields:
      model: {action: pass, type: string, required: true}
      messages:
        action: pass
        type: array
        required: true
        select:
          key: role
          rules:
            user: {fields: {content: {action: pass, type: string}}}
            system: {fields: {content: {action: pass, type: string}}, enforcement: report}
      temperature: {action: pass, type: number, maximum: 1, enforcement: report}
      logprobs: {action: reject, type: boolean, neutral: [false]}
      user: {action: strip, enforcement: report}
      max_completion_tokens: {action: rename, to: max_tokens, type: integer,
                              enforcement: report}
      max_tokens: {action: pass, type: integer, minimum: 1}
      top_k: {action: default, value: 40, type: integer, enforcement: report}
      seed: {action: pass, type: integer, enforcement: enforce}
profiles:
  canary:
    routes:
      /v1/chat/completions:
        fields:
          logprobs: {enforcement: report}
          temperature: {enforcement: enforce}
  trial:
    enforcement: report
  strict-trial:
    enforcement: report
    routes:
      /v1/chat/completions:
        enforcement: enforce
"""

USER = {"role": "user", "content": "hi"}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [USER], **fields}


# (fields, profile, the param the client is refused on, the params only reported)
CASES: list[tuple[dict[str, Any], str | None, str | None, list[str]]] = [
    # a report-only rule: forwarded, reported
    ({"temperature": 1.5}, None, None, ["temperature"]),
    ({"temperature": 0.5}, None, None, []),
    # an enforced rule beside it still refuses; the report is kept
    ({"temperature": 1.5, "logprobs": True}, None, "logprobs", ["temperature"]),
    # per profile: canary only reports logprobs and enforces temperature
    ({"logprobs": True}, "canary", None, ["logprobs"]),
    ({"logprobs": True}, None, "logprobs", []),
    ({"logprobs": True}, "other", "logprobs", []),
    ({"temperature": 1.5}, "canary", "temperature", []),
    # a whole profile on trial, except a rule that says enforce
    ({"logprobs": True, "foo": 1}, "trial", None, ["logprobs", "foo"]),
    ({"seed": "x"}, "trial", "seed", []),
    # the overlay's route setting is more specific than the overlay's own
    ({"logprobs": True}, "strict-trial", "logprobs", []),
    # inside messages: a member rule on trial, the unknown role enforced
    ({"messages": [{"role": "system", "content": 5}, USER]}, None, None, ["messages[0].content"]),
    ({"messages": [{"role": "wizard", "content": "x"}]}, None, "messages[0].role", []),
    # a whole profile on trial reaches inside messages, and missing fields
    ({"messages": [{"role": "wizard", "content": "x"}]}, "trial", None, ["messages[0].role"]),
    # a rename conflict of a report-only rename: both forwarded as they came
    ({"max_completion_tokens": 5, "max_tokens": 5}, None, None, ["max_completion_tokens"]),
]


@pytest.fixture(scope="module")
def trial() -> Policy:
    return Policy(parse_policy_text(TRIAL))


@pytest.mark.parametrize(("fields", "profile", "refused", "reported"), CASES)
def test_report_only_at_every_level(
    trial: Policy,
    fields: dict[str, Any],
    profile: str | None,
    refused: str | None,
    reported: list[str],
) -> None:
    sent = body(**fields)
    decision = apply_policy(trial, CHAT, sent, profile=profile)
    assert (decision.error.param if decision.error else None) == refused
    assert [o.field for o in decision.reported] == reported
    if reported:
        assert decision.report is not None and decision.report.error.param == reported[0]
        assert decision.report.error.status == 400
    else:
        assert decision.report is None


def test_a_missing_field_of_a_report_only_route_is_reported() -> None:
    policy = Policy(
        parse_policy_text(
            TRIAL.replace(
                "    fields:\n      model:", "    enforcement: report\n    fields:\n      model:", 1
            )
        )
    )
    decision = apply_policy(policy, CHAT, {"model": "m"})
    assert decision.error is None
    assert [(o.field, o.detail) for o in decision.reported] == [
        ("messages", "missing_required_parameter")
    ]


def test_a_report_only_rule_still_does_what_does_not_refuse(trial: Policy) -> None:
    # strip, rename and default are not refusals: they apply as always.
    decision = apply_policy(trial, CHAT, body(user="u", max_completion_tokens=5))
    assert decision.error is None and decision.reported == ()
    assert decision.body == {"model": "m", "messages": [USER], "max_tokens": 5, "top_k": 40}


def test_a_refused_value_is_forwarded_as_it_came_the_rest_still_rewritten(trial: Policy) -> None:
    decision = apply_policy(trial, CHAT, body(temperature=3, user="u"))
    assert decision.body == {"model": "m", "messages": [USER], "temperature": 3, "top_k": 40}
    assert [o.field for o in decision.reported] == ["temperature"]


def test_reports_are_not_outcomes(trial: Policy) -> None:
    # The outcomes drive the log's and the span's verdict: a report must not make a
    # forwarded request look changed or refused.
    decision = apply_policy(trial, CHAT, body(temperature=1.5, max_tokens=3, top_k=5), trace=True)
    assert all(o.action != REPORTED for o in decision.outcomes)
    assert decision.changed is False


def test_the_walk_writes_nothing_into_the_config_models(shipped: PolicyFile) -> None:
    rules: list[FieldRule] = []

    def collect(rule: FieldRule) -> None:
        rules.append(rule)
        for inner in (rule.fields or {}).values():
            collect(inner)
        if rule.select is not None:
            for inner in (*rule.select.rules.values(), rule.select.unknown):
                collect(inner)

    for route in shipped.routes.values():
        for rule in route.fields.values():
            collect(rule)
    before = [set(r.__dict__) for r in rules]
    policy = Policy(shipped)
    for fields, _, _ in REJECTED:
        apply_policy(policy, CHAT, chat(**fields))
    apply_policy(
        policy, CHAT, chat(messages=[{"role": "user", "content": [{"type": "text", "text": "x"}]}])
    )
    assert [set(r.__dict__) for r in rules] == before
    assert all("object_rules" not in keys for keys in before)
