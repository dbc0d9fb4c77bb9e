"""Scenarios of the policy's work alone, without HTTP.

- ``policy``: ``apply_policy`` on chat bodies of 2, 10 and 50 messages, the policy file
  as it is and with every rule inside a value (``select``, ``fields``) taken out: what
  the nested checks cost, growing with the messages;
- ``report``: Python calls (a count: the same under any load) and time per
  ``apply_policy`` for typical bodies under the shipped policy, under a profile whose
  ``logprobs`` only reports, and with the whole policy report-only: what report-only
  rules cost a request they do not touch (``--baseline DIR`` counts an older tree too);
- ``validators``: the JSON-Schema validators on PyPI on a typical schema (pydantic's
  for a small model), building, checking a valid and an invalid answer, the
  metaschema; then the gateway's own steps with the library it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema
import jsonschema_rs
import orjson
import yaml

from bench.cost.scenario import Case, Context, Scenario, cases
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.file import FieldRule, PolicyFile
from gateway.policy.loading import load_policy_file, parse_policy_text
from gateway.schemas.answers import check_chat
from gateway.schemas.check import SchemaCheck
from gateway.schemas.expect import Answers, Expectation
from gateway.schemas.rules import JsonSchemaRules

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "policies" / "ft-serve.yaml"
CHAT, COMPLETIONS, RESPONSES = "/v1/chat/completions", "/v1/completions", "/v1/responses"
MODEL = "Qwen3.8-Flash-Next"
SIZES = (2, 10, 50)


def chat_body(messages: int) -> dict[str, Any]:
    """A chat request as clients send it: a system prompt, then turns of a conversation."""
    turns: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(messages - 1):
        role = "user" if i % 2 == 0 else "assistant"
        turns.append({"role": role, "content": f"Turn {i}: tell me more about cats."})
    return {
        "model": MODEL,
        "messages": turns,
        "temperature": 0.7,
        "max_tokens": 256,
        "stream": True,
    }


def _flat(rule: FieldRule) -> FieldRule:
    return rule.model_copy(update={"select": None, "fields": None})


def without_nested(source: PolicyFile) -> PolicyFile:
    """``source`` with no rule inside any value (top-level rules as they are)."""
    routes = {
        name: route.model_copy(update={"fields": {n: _flat(r) for n, r in route.fields.items()}})
        for name, route in source.routes.items()
    }
    return source.model_copy(update={"routes": routes})


def _applying(policy: Policy, route: str, body: dict[str, Any], profile: str | None = None) -> Any:
    decision = apply_policy(policy, route, body, profile=profile)
    if decision.error is not None:
        raise SystemExit(f"the bench body is rejected: {decision.error.message}")
    return lambda: apply_policy(policy, route, body, profile=profile)


def _policy(ctx: Context) -> list[Case]:
    source, _ = load_policy_file(ctx.option("policy"))
    nested, flat = Policy(source), Policy(without_nested(source))
    found = []
    for size in SIZES:
        body = chat_body(size)
        top = Case(f"{size} messages, top level only", _applying(flat, CHAT, body))
        inside = _applying(nested, CHAT, body)
        found += [top, Case(f"{size} messages, with nested rules", inside, base=top.name)]
    return found


POLICY = Scenario(
    "policy",
    f"apply_policy on {CHAT}, the policy file with its nested rules and with top-level rules only",
    cases(_policy),
    figures=("wall_us",),
    compare=("wall_us",),
    added=("wall_us",),
    number=5000,
    warmup=100,
    options={"policy": SHIPPED},
    labels={"case": "messages", "wall_us": "us", "wall_us ratio": "ratio", "+wall_us": "added us"},
)

TRIAL = {"routes": {CHAT: {"fields": {"logprobs": {"enforcement": "report"}}}}}


def bodies() -> dict[str, tuple[str, dict[str, Any]]]:
    """Request bodies as clients send them, by name: (route, body)."""
    system = {"role": "system", "content": "You are a helpful assistant."}
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: tell me more."}
        for i in range(9)
    ]
    return {
        "chat, 2 messages": (
            CHAT,
            {"model": MODEL, "messages": [system, turns[0]], "temperature": 0.7, "stream": True},
        ),
        "chat, 10 messages": (CHAT, {"model": MODEL, "messages": [system, *turns]}),
        "completions": (COMPLETIONS, {"model": MODEL, "prompt": "Once upon", "max_tokens": 16}),
        "responses": (RESPONSES, {"model": MODEL, "input": "Hi.", "max_output_tokens": 16}),
    }


def variants(policy_text: str) -> dict[str, tuple[str, str | None]]:
    """The policy as shipped; with a profile whose logprobs only reports (the request
    sent under it); all reporting: name -> (policy text, profile)."""
    data = yaml.safe_load(policy_text)
    with_profile = {**data, "profiles": {**data.get("profiles", {}), "trial": TRIAL}}
    return {
        "shipped": (policy_text, None),
        "report-only profile": (yaml.safe_dump(with_profile), "trial"),
        "whole policy report-only": (yaml.safe_dump({**data, "enforcement": "report"}), None),
    }


def _report(ctx: Context) -> list[Case]:
    policies = {
        name: (Policy(parse_policy_text(text)), profile)
        for name, (text, profile) in variants(SHIPPED.read_text()).items()
    }
    found = []
    for body_name, (route, body) in bodies().items():
        for name, (policy, profile) in policies.items():
            base = None if name == "shipped" else f"{body_name}: shipped"
            call = _applying(policy, route, body, profile)
            found.append(Case(f"{body_name}: {name}", call, base=base))
    return found


REPORT = Scenario(
    "report",
    "apply_policy under the shipped policy and with report-only rules the bodies do not "
    "touch: Python calls per call (deterministic), then time (an idle machine's only)",
    cases(_report),
    figures=("calls", "opcodes", "wall_us"),
    compare=("wall_us",),
    added=("calls",),
    number=3000,
    warmup=100,
    labels={"case": "body: policy", "wall_us": "us", "+calls": "added calls"},
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"type": "string", "enum": ["admin", "editor", "viewer"]},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "postcode": {"type": "string", "pattern": "^[0-9]{5}$"},
        "addresses": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"},
                    "country": {"type": "string", "enum": ["DE", "FR", "US"]},
                },
                "required": ["street", "city", "country"],
                "additionalProperties": False,
            },
        },
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["name", "email", "age", "role", "nickname", "postcode", "addresses", "score"],
    "additionalProperties": False,
}
VALID: dict[str, Any] = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "age": 36,
    "role": "editor",
    "nickname": None,
    "postcode": "10115",
    "addresses": [
        {"street": "Unter den Linden 1", "city": "Berlin", "country": "DE"},
        {"street": "1 Rue de Rivoli", "city": "Paris", "country": "FR"},
    ],
    "score": 0.82,
}
INVALID: dict[str, Any] = {**VALID, "addresses": [{**VALID["addresses"][0], "country": "XX"}]}


def _jsonschema() -> Callable[[Any], Any]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return lambda value: next(validator.iter_errors(value), None)


def _fastjsonschema() -> Callable[[Any], Any]:
    check = fastjsonschema.compile(SCHEMA)

    def first(value: Any) -> Any:
        try:
            check(value)
        except fastjsonschema.JsonSchemaValueException as exc:
            return exc
        return None

    return first


def _rs() -> Callable[[Any], Any]:
    validator = jsonschema_rs.validator_for(SCHEMA)
    return lambda value: next(iter(validator.iter_errors(value)), None)


def _rs_valid_first() -> Callable[[Any], Any]:
    # What the gateway does: is_valid first (no error objects made), errors only then.
    validator = jsonschema_rs.validator_for(SCHEMA)
    return lambda value: (
        None if validator.is_valid(value) else next(iter(validator.iter_errors(value)))
    )


LIBRARIES: dict[str, Callable[[], Callable[[Any], Any]]] = {
    f"jsonschema {version('jsonschema')}": _jsonschema,
    f"fastjsonschema {version('fastjsonschema')}": _fastjsonschema,
    f"jsonschema-rs {version('jsonschema-rs')} (iter_errors)": _rs,
    f"jsonschema-rs {version('jsonschema-rs')} (is_valid, then errors)": _rs_valid_first,
}
METASCHEMA: dict[str, Callable[[], Any]] = {
    "jsonschema": lambda: jsonschema.Draft202012Validator.check_schema(SCHEMA),
    "jsonschema-rs": lambda: jsonschema_rs.meta.validate(SCHEMA),
}


def _validators(ctx: Context) -> list[Case]:
    found = []
    for name, make in LIBRARIES.items():
        check = make()
        if check(VALID) is not None or check(INVALID) is None:
            raise SystemExit(f"{name} decides the sample answers wrongly")
        found.append(Case(f"{name}: compile", make, share=20))
        found.append(Case(f"{name}: valid", partial(check, VALID)))
        found.append(Case(f"{name}: invalid", partial(check, INVALID)))
    for name, check_schema in METASCHEMA.items():
        found.append(Case(f"{name}: metaschema", check_schema, share=10))
    where = "response_format.json_schema.schema"
    expect = Expectation(Answers(schema="enforce"), SCHEMA, where, {}, None, False, False)
    message = {"role": "assistant", "content": orjson.dumps(VALID).decode()}
    answer = {"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    rules = JsonSchemaRules(unknown_keywords="pass")
    kept = SchemaCheck(rules)
    gateway = "gateway (jsonschema-rs)"
    found += [
        Case(f"{gateway}: answer check", lambda: check_chat(expect, answer)),
        Case(f"{gateway}: request check", lambda: kept.refusals(SCHEMA, where, {"name": "person"})),
        Case(
            f"{gateway}: request check, first time",
            lambda: SchemaCheck(rules).refusals(SCHEMA, where, {"name": "person"}),
            share=20,
        ),
    ]
    return found


VALIDATORS = Scenario(
    "validators",
    "JSON-Schema validators on a typical schema (an answer of about 300 bytes): building "
    "(once per distinct schema), a valid and an invalid answer, the 2020-12 metaschema; "
    "the gateway's answer check and request check (first and cached)",
    cases(_validators),
    figures=("wall_us",),
    compare=(),
    rounds=5,
    number=2000,
    labels={"case": "library: step", "wall_us": "us"},
)
