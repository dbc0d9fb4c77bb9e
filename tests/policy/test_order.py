"""The order of the policy's steps (docs/policy.md): checks, strip, rename, default.
A default fills only a field still absent after the renames, so it never overrides
a value the client sent under another name. A table over the shipped policy and
every profile or model overlay the docs show, laid over it as serve would."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from gateway.commands.explain import explain_request
from gateway.policy.engine import KEPT, Policy, apply_policy
from gateway.policy.file import FieldRule
from gateway.policy.loading import parse_policy_text
from tests.docs.markdown import PAGES, blocks
from tests.support.bodies import MESSAGES, MODEL
from tests.support.paths import POLICY

BASE_BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": MODEL, "messages": MESSAGES},
    "/v1/completions": {"model": MODEL, "prompt": "Once upon a time"},
    "/v1/responses": {"model": MODEL, "input": "hi"},
}


@functools.cache
def _overlays() -> list[tuple[str, str]]:
    """(where, policy text): the shipped policy, and it with each overlay of the docs."""
    shipped = POLICY.read_text(encoding="utf-8")
    out = [("policies/ft-serve.yaml", shipped)]
    for page in PAGES:
        for block in blocks(page):
            if block.lang not in ("yaml", "yml"):
                continue
            data = yaml.safe_load(block.text)
            if isinstance(data, dict) and data and set(data) <= {"models", "profiles"}:
                merged = yaml.safe_load(shipped)
                merged.update(data)
                out.append((block.where, yaml.safe_dump(merged, sort_keys=False)))
    return out


def _sample(rule: FieldRule) -> Any:
    """A value the rule accepts that is not its default (None: no simple one)."""
    if rule.enum:
        return rule.enum[-1]
    if int in rule.types:
        low = int(rule.minimum) if rule.minimum is not None else 0
        value = low + 2
        return value if rule.maximum is None or value <= rule.maximum else None
    if str in rule.types:
        return "x"
    return None


@dataclass(frozen=True)
class Case:
    where: str
    route: str
    profile: str | None
    model: str
    source: str  # the field the client sends
    target: str  # its name at the engine
    default: Any  # the target's default in this policy (absent: None)
    value: Any


def _cases() -> list[Case]:
    cases = []
    for where, text in _overlays():
        policy = Policy(parse_policy_text(text, file=where))
        for profile in [None, *policy.source.profiles]:
            for model in [MODEL, *policy.source.models]:
                for route in policy.routes:
                    compiled = policy.route(route, model=model, profile=profile)
                    assert compiled is not None
                    for name, rule in compiled.rules.items():
                        if rule.action != "rename" or rule.to is None:
                            continue
                        target = compiled.rules.get(rule.to)
                        value = _sample(rule.source)
                        if value is None:
                            continue
                        default = target.value if target and target.action == "default" else None
                        if default == value:
                            continue
                        cases.append(
                            Case(where, route, profile, model, name, rule.to, default, value)
                        )
    return cases


CASES = _cases()


@functools.cache
def _policy(where: str) -> Policy:
    return Policy(parse_policy_text(dict(_overlays())[where], file=where))


def test_the_table_holds_the_docs_batch_profile() -> None:
    """The case of the issue: docs/limits.md's batch profile defaults max_tokens."""
    batch = [
        c
        for c in CASES
        if c.profile == "batch" and c.source == "max_completion_tokens" and c.default == 1024
    ]
    assert batch, "no case of a rename onto a defaulted field: this table checks nothing"


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c.where}:{c.route}:{c.profile}:{c.model}:{c.source}"
)
def test_a_renamed_value_is_never_overridden_by_a_default(case: Case) -> None:
    policy = _policy(case.where)
    body = {**BASE_BODIES[case.route], "model": case.model, case.source: case.value}
    decision = apply_policy(policy, case.route, body, profile=case.profile)
    assert decision.error is None, decision.error
    assert case.source not in decision.body
    assert decision.body[case.target] == case.value
    # And absent under both names, the default (if any) is what the engine gets.
    bare = {**BASE_BODIES[case.route], "model": case.model}
    forwarded = apply_policy(policy, case.route, bare, profile=case.profile).body
    if case.default is not None:
        assert forwarded[case.target] == case.default
    else:
        assert case.target not in forwarded


def test_explain_lists_the_steps_in_order_and_the_kept_value() -> None:
    where, text = next((w, t) for w, t in _overlays() if w.startswith("docs/limits.md"))
    policy = Policy(parse_policy_text(text, file=where))
    raw = (
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}],'
        b' "max_completion_tokens": 3, "user": "u"}'
    )
    result = explain_request(policy, raw, profile="batch")
    assert result.error is None
    assert result.forwarded is not None and b'"max_tokens":3' in result.forwarded
    actions = [(o.field, o.action) for o in result.outcomes if o.action != "passed"]
    assert actions[-2:] == [("max_completion_tokens", "renamed"), ("max_tokens", KEPT)]
    kept = result.outcomes[-1]
    assert kept.detail == "sent as 'max_completion_tokens'; default 1024 not applied"
