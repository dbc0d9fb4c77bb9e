"""The policy file a probe writes: honoured fields pass with their type and range
checks; fields the engine ignores, refuses or fails on are rejected (neutral values
excepted); each rule carries a comment with the verdict, its evidence and the date."""

from __future__ import annotations

import json
import math
import re
import textwrap
from decimal import Decimal
from typing import Any

from gateway.probe.checks import UNKNOWN
from gateway.probe.fields import PROBED, UNPROBED, Rule
from gateway.probe.runner import ProbeResult, RouteResult
from gateway.probe.verdict import (
    BROKEN,
    HONOURED,
    IGNORED,
    INCONCLUSIVE,
    REJECTED,
    Verdict,
    shown_confidence,
)

_BARE = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*\Z")  # \Z: "$" also matches before a final newline
# Words YAML 1.1 reads as booleans or null when unquoted.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_KEY_ORDER = ("action", "to", "type", "required")
_WIDTH = 96


def flow(value: Any) -> str:
    """``value`` as one line of YAML flow style that reads back as the same JSON value."""
    if isinstance(value, dict):
        return "{" + ", ".join(_entry(k, v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, float):
        # YAML 1.1 reads "1e-05" as a string: write floats without an exponent.
        if not math.isfinite(value):
            raise ValueError(f"not a JSON number: {value}")
        text = repr(value)
        if "e" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    if isinstance(value, str):
        return _key(value)
    return json.dumps(value, ensure_ascii=False)


def _entry(key: str, value: Any) -> str:
    text = _key(key)
    # YAML allows an implicit key of at most 1024 characters; past that the
    # explicit "? " form reads back the same.
    if len(text) > 1000:
        return f"? {text} : {flow(value)}"
    return f"{text}: {flow(value)}"


def _key(text: str) -> str:
    """A string as a YAML scalar: bare when YAML reads it back as the same string."""
    if _BARE.match(text) and text.lower() not in _RESERVED:
        return text
    return _quoted(text)


def _quoted(text: str) -> str:
    """A YAML double-quoted string with everything but printable ASCII escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _rule_lines(name: str, rule: Rule, indent: str) -> list[str]:
    """One line in flow style, or a block mapping when that line would be too long."""
    rule = _ordered(rule)
    line = f"{indent}{_key(name)}: {flow(rule)}"
    if len(line) <= _WIDTH + 4:
        return [line]
    return [f"{indent}{_key(name)}:"] + [f"{indent}  {_key(k)}: {flow(v)}" for k, v in rule.items()]


def _ordered(rule: Rule) -> Rule:
    first = {k: rule[k] for k in _KEY_ORDER if k in rule}
    return first | {k: v for k, v in rule.items() if k not in first}


def probed_rule(route: RouteResult, name: str, verdict: Verdict) -> Rule:
    """The rule the verdict on field ``name`` calls for."""
    spec = dict(PROBED[route.route][name])
    neutral = spec.pop("neutral", [])
    if verdict.outcome == HONOURED:
        return {"action": "pass", **spec}
    if name == "max_completion_tokens":
        max_tokens = route.verdict("max_tokens")
        if max_tokens is not None and max_tokens.outcome == HONOURED:
            # LangChain's ChatOpenAI sends max_completion_tokens in place of max_tokens:
            # renamed, the limit is kept; ignored, the answer runs to the engine's limit.
            return {"action": "rename", "to": "max_tokens", **spec}
    rule: Rule = {"action": "reject", **spec}
    if neutral:
        rule["neutral"] = neutral
    if verdict.outcome in (REJECTED, BROKEN):
        # The engine cannot take the field at all: do not forward even a neutral value.
        rule["drop_neutral"] = True
    rule["reason"] = {
        IGNORED: "This engine accepts it but ignores it.",
        REJECTED: "This engine does not support it.",
        BROKEN: "This engine fails on it.",
        INCONCLUSIVE: "It has not been verified on this engine.",
    }[verdict.outcome]
    return rule


def verdict_line(verdict: Verdict) -> str:
    """``honoured (confidence 0.98): summary``."""
    sure = (
        f" (confidence {shown_confidence(verdict.confidence)})"
        if verdict.confidence is not None
        else ""
    )
    return f"{verdict.outcome}{sure}: {verdict.summary}"


def _comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(
        text, width=_WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}#   "
    )


def render_policy(result: ProbeResult, *, schema: str | None = None) -> str:
    """The policy YAML for ``result``; ``ft-gateway check`` accepts it. ``schema``: the
    path of gateway/policy.schema.json relative to the file, for editors."""
    day = result.probed_on.isoformat()
    lines = [f"# yaml-language-server: $schema={schema}", "#"] if schema else []
    lines += [
        f"# Field policy written by `ft-gateway probe` on {day} from {result.requests} requests",
        f"# to {result.upstream} (model {result.model}).",
        "# Each probed field's rule says what the probe measured and how. Honoured fields",
        "# pass with the spec's type and range checks; fields the engine ignores, refuses or",
        "# fails on are rejected, their neutral values excepted. Re-probe after every engine",
        "# upgrade and review the diff; check an edit with: ft-gateway check FILE",
    ]
    if result.extra:
        lines += _comment(f"Every probe request also carried {flow(result.extra)}.", "")
    for route in result.routes:
        if route.error is not None:
            lines += _comment(
                f"{route.route} is not in this policy, so the gateway checks none of its "
                f"requests: {route.error}",
                "",
            )
    lines += [
        "version: 1",
        f"description: {_quoted(f'probed from {result.model} at {result.upstream} on {day}')}",
        "",
    ]
    lines += _unknown_comment(result, day)
    lines += ["unknown_fields: reject", "", "routes:"]
    for route in result.routes:
        if route.error is None:
            lines += _route_lines(route, result, day)
    return "\n".join(lines) + "\n"


def _unknown_comment(result: ProbeResult, day: str) -> list[str]:
    found = [(r.route, r.verdict(UNKNOWN)) for r in result.routes]
    parts = [f"{route}: {verdict_line(v)}" for route, v in found if v is not None]
    text = (
        "A field no route names gets OpenAI's 400 unknown_parameter. "
        f"An unknown field, probed {day}: " + "; ".join(parts)
    )
    return _comment(text, "")


def _route_lines(route: RouteResult, result: ProbeResult, day: str) -> list[str]:
    indent = "      "
    lines = [f"  {route.route}:", "    fields:"]
    named: set[str] = set()
    for comment, rules in UNPROBED[route.route]:
        lines += _comment(comment, indent)
        for name, rule in rules.items():
            lines += _rule_lines(name, rule, indent)
            named.add(name)
        lines.append("")
    extra = [k for k in result.extra if k not in named and k not in PROBED[route.route]]
    if extra:
        lines += _comment("Sent with every probe request (--extra): passed as they come.", indent)
        lines += [f"{indent}{_key(k)}: {{action: pass}}" for k in extra]
        lines.append("")
    for verdict in route.verdicts:
        if verdict.field not in PROBED[route.route]:
            continue
        rule = probed_rule(route, verdict.field, verdict)
        note = f"{verdict.field}: {verdict_line(verdict)} (probed {day})"
        if verdict.outcome == INCONCLUSIVE:
            note = "REVIEW BY HAND. " + note
        if rule["action"] == "rename":
            note += "; renamed to max_tokens, which the engine honours"
        lines += _comment(note, indent)
        lines += _rule_lines(verdict.field, rule, indent)
    lines.append("")
    return lines
