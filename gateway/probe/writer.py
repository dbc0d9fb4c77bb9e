"""The policy file a probe writes: honoured fields pass with their type and range
checks; fields the engine ignores, refuses or fails on are rejected (neutral values
excepted); an ``n`` the engine does not honour is served by fan-out; inside messages,
a rule per role and content part (message_rules.py). Each rule carries a comment
with the verdict, its evidence and the date."""

from __future__ import annotations

from gateway.probe.anthropic import route_lines as messages_route_lines
from gateway.probe.checks import MODEL, UNKNOWN
from gateway.probe.fields import PROBED, UNPROBED, Rule
from gateway.probe.message_rules import messages_rule
from gateway.probe.responses import route_lines as responses_route_lines
from gateway.probe.route import CHAT
from gateway.probe.runner import ProbeResult, RouteResult
from gateway.probe.structured_rules import (
    SchemaAnchor,
    answers_rule,
    keyword_table,
    response_format_rule,
    tool_rules,
    tools_honoured,
)
from gateway.probe.vector_rules import route_lines as vector_route_lines
from gateway.probe.vectors import PROBES as VECTOR_ROUTES
from gateway.probe.verdict import (
    ALONE_ONLY,
    BROKEN,
    HONOURED,
    IGNORED,
    REFUSED_BECAUSE,
    REJECTED,
    Verdict,
    probed_note,
    verdict_line,
)
from gateway.probe.yamltext import comment, entry_lines, flow, key, quoted

_KEY_ORDER = ("action", "to", "type", "required")
# n served by the gateway's fan-out: the most engine requests one client request becomes.
FANOUT_MAXIMUM = 8
# What the gateway does with a seed the engine honours alone only (--seed-under-load).
SEED_CHOICES = ("pass", "reject")
# The seed verdict as the route's guarantees.seed (system_fingerprint carries it).
_SEED_GUARANTEE = {HONOURED: "under_load", ALONE_ONLY: "alone_only", IGNORED: "ignored"}


def _rule_lines(name: str, rule: Rule, indent: str) -> list[str]:
    """One line in flow style, or a block mapping when that line would be too long."""
    return entry_lines(name, _ordered(rule), indent)


def _ordered(rule: Rule) -> Rule:
    first = {k: rule[k] for k in _KEY_ORDER if k in rule}
    return first | {k: v for k, v in rule.items() if k not in first}


def probed_rule(
    route: RouteResult, name: str, verdict: Verdict, *, seed_under_load: str = "pass"
) -> Rule:
    """The rule the verdict on field ``name`` calls for; ``seed_under_load``: pass or
    reject a seed the engine reproduces alone only."""
    spec = dict(PROBED[route.route][name])
    neutral = spec.pop("neutral", [])
    if verdict.outcome == HONOURED or (verdict.outcome == ALONE_ONLY and seed_under_load == "pass"):
        return {"action": "pass", **spec}
    if name == "n":
        # Any other verdict: the gateway asks the engine n times and merges the answers,
        # which is right even for an engine that honours n after all.
        return {"action": "fanout", **spec, "maximum": FANOUT_MAXIMUM}
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
    rule["reason"] = (
        "This engine reproduces a seed only for a request that runs alone: "
        f"under load {_percent(verdict.rate)} of seeded replays gave another text."
        if verdict.outcome == ALONE_ONLY
        else REFUSED_BECAUSE[verdict.outcome]
    )
    return rule


def _percent(rate: float | None) -> str:
    return f"{round(100 * (rate or 0.0))}%"


def render_policy(
    result: ProbeResult, *, schema: str | None = None, seed_under_load: str = "pass"
) -> str:
    """The policy YAML for ``result``; ``ft-gateway check`` accepts it. ``schema``: the
    path of gateway/policy.schema.json relative to the file, for editors;
    ``seed_under_load``: what the gateway does with a seed the engine honours alone
    only (pass: best effort, as OpenAI's own seed; reject: a 400 with the reason)."""
    if seed_under_load not in SEED_CHOICES:
        raise ValueError(f"seed_under_load must be one of {', '.join(SEED_CHOICES)}")
    day = result.probed_on.isoformat()
    lines = [f"# yaml-language-server: $schema={schema}", "#"] if schema else []
    lines += comment(
        f"Field policy written by `ft-gateway probe` on {day} from {result.requests} "
        f"requests to {result.upstream} (model {result.model}).",
        "",
    )
    lines += [
        "# Each probed field's rule says what the probe measured and how. Honoured fields",
        "# pass with the spec's type and range checks; fields the engine ignores, refuses or",
        "# fails on are rejected, their neutral values excepted; an n it does not honour is",
        "# served by fan-out. Inside messages, each role and content part probed is passed",
        "# or rejected the same way. Re-probe after every engine upgrade and review the diff;",
        "# check an edit with: ft-gateway check FILE",
    ]
    if result.extra:
        lines += comment(f"Every probe request also carried {flow(result.extra)}.", "")
    for route in result.routes:
        if route.error is not None:
            lines += comment(
                f"{route.route} is not in this policy, so the gateway checks none of its "
                f"requests: {route.error}",
                "",
            )
    lines += [
        "version: 1",
        f"description: {quoted(f'probed from {result.model} at {result.upstream} on {day}')}",
        "",
    ]
    lines += _unknown_comment(result, day)
    lines += _model_comment(result, day)
    lines += ["unknown_fields: reject", "", "routes:"]
    below = result.structured
    anchor = SchemaAnchor(keyword_table(below.keywords, day)) if below and below.keywords else None
    for route in result.routes:
        if route.error is None and route.route in VECTOR_ROUTES:
            lines += vector_route_lines(route.route, route.verdicts, result.model, day)
        elif route.error is None:
            lines += _route_lines(route, result, day, seed_under_load, anchor)
    if result.responses is not None:
        lines += responses_route_lines(
            result.responses, result.route(CHAT), day, structured=below, anchor=anchor
        )
    if result.messages is not None:
        lines += messages_route_lines(
            result.messages, result.route(CHAT), day, structured=below, anchor=anchor
        )
    return "\n".join(lines) + "\n"


def _unknown_comment(result: ProbeResult, day: str) -> list[str]:
    found = [(r.route, r.verdict(UNKNOWN)) for r in result.routes]
    parts = [f"{route}: {verdict_line(v)}" for route, v in found if v is not None]
    text = (
        "A field no route names gets OpenAI's 400 unknown_parameter. "
        f"An unknown field, probed {day}: " + "; ".join(parts)
    )
    return comment(text, "")


def _model_comment(result: ProbeResult, day: str) -> list[str]:
    found = [(r.route, r.verdict(MODEL)) for r in result.routes]
    parts = [f"{route}: {verdict_line(v)}" for route, v in found if v is not None]
    if not parts:
        return []
    ignored = any(v is not None and v.outcome == IGNORED for _, v in found)
    why = (
        "This engine answers a name it does not serve: the gateway refuses the names its "
        "deployment does not serve (a fleet's models, or upstream.models, else the names "
        "the engine lists: docs/fleet.md)."
        if ignored
        else "This engine refuses a name it does not serve."
    )
    return comment(
        f"model, probed {day} with a name it does not serve: " + "; ".join(parts) + ". " + why, ""
    )


def _route_lines(
    route: RouteResult,
    result: ProbeResult,
    day: str,
    seed_under_load: str,
    anchor: SchemaAnchor | None,
) -> list[str]:
    indent = "      "
    lines = [f"  {route.route}:"]
    below = result.structured if route.route == CHAT else None
    calling = tools_honoured(below)
    # json_schema by its keywords' own verdicts, json_object by the field's (the two are
    # told apart: a small model's one json_object answer may be cut short).
    json_ok = below is not None and below.schema_honoured()
    checks = answers_rule(schema=json_ok, tool_calls=calling)
    if checks:
        lines += comment(
            "Answers checked against what the request asked (what the probe's samples did "
            "not catch is still never a 200 with bad data): docs/structured-outputs.md.",
            "    ",
        )
        lines.append(f"    answers: {flow(checks)}")
    seed = route.verdict("seed")
    if seed is not None and seed.outcome in _SEED_GUARANTEE:
        lines += comment(
            f"What the engine guarantees, as measured on {day} (the seed rule's comment has "
            "the evidence); the answers' system_fingerprint carries it.",
            "    ",
        )
        lines.append(f"    guarantees: {{seed: {_SEED_GUARANTEE[seed.outcome]}}}")
    lines.append("    fields:")
    named: set[str] = set()
    for index, (note, rules) in enumerate(UNPROBED[route.route]):
        lines += comment(note, indent)
        for name, rule in rules.items():
            if calling and name in _TOOL_FIELDS:
                continue  # probed: written below with their verdicts
            lines += _rule_lines(name, rule, indent)
            named.add(name)
        if index == 0 and route.route == CHAT:
            # After the request itself (model), the rules inside its messages.
            lines += entry_lines("messages", messages_rule(route.verdict, day), indent)
            named.add("messages")
        lines.append("")
    extra = [k for k in result.extra if k not in named and k not in PROBED[route.route]]
    if extra:
        lines += comment("Sent with every probe request (--extra): passed as they come.", indent)
        lines += [f"{indent}{key(k)}: {{action: pass}}" for k in extra]
        lines.append("")
    for verdict in route.verdicts:
        if verdict.field not in PROBED[route.route]:
            continue
        rule = probed_rule(route, verdict.field, verdict, seed_under_load=seed_under_load)
        note = probed_note(verdict.field, verdict, day)
        if verdict.outcome == ALONE_ONLY:
            note += (
                "; passed as best effort, as OpenAI's own seed is: a replay may differ while "
                "other requests share the batch (--seed-under-load reject writes a 400 instead)"
                if rule["action"] == "pass"
                else "; refused with a 400 (--seed-under-load reject)"
            )
        if rule["action"] == "rename":
            note += "; renamed to max_tokens, which the engine honours"
        if rule["action"] == "fanout":
            note += (
                f"; served by fan-out: the gateway asks the engine n times (up to "
                f"{FANOUT_MAXIMUM}) and merges the answers"
            )
        if verdict.field == "response_format" and json_ok:
            rule = response_format_rule(anchor, json_object=_json_object_rule(rule))
            note += "; json_schema: each keyword as probed below the field (json_schema.keywords)"
        lines += comment(note, indent)
        lines += _rule_lines(verdict.field, rule, indent)
    if below is not None and calling:
        lines.append("")
        lines += comment(f"Tool calling, probed {day}: each choice as measured.", indent)
        for name, value in tool_rules(below, anchor if json_ok else None, day).items():
            lines += entry_lines(name, value, indent)
    lines.append("")
    return lines


_TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls")


def _json_object_rule(rule: Rule) -> Rule | None:
    """json_object's rule inside response_format's: passed where the field's own
    verdict passes it (None), else refused with the field's reason."""
    if rule.get("action") != "reject":
        return None
    return {"action": "reject", "reason": rule.get("reason", "Not honoured by this engine.")}
