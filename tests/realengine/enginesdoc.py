"""docs/engines.md written from what the real-engine suite measured: for each engine, the
verdicts of ``ft-gateway probe``'s report and what the policy it wrote does with each.

    python -m tests.realengine.enginesdoc OUT_DIR docs/engines.md

OUT_DIR holds, per engine, ``<engine>.json`` (name, version, model, checksum),
``<engine>.report.md`` (the probe's report) and ``<engine>.policy.yaml`` (its policy), as
tests/realengine/probing.py leaves them; and, from the probe of the engine serving
embeddings, ``<engine>.embeddings.report.md`` and ``.policy.yaml``, or where that probe
wrote none, ``<engine>.embeddings.probe.txt`` (what it said). scripts/real-engines runs
this after the suite.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.probe.keywords import case_named
from gateway.probe.report import KEYWORDS, NATIVE_KEYWORDS, TOOLS

ROUTES = ("/v1/chat/completions", "/v1/completions")
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
# Routes the probe reports as a summary line and ``- **field**: verdict`` bullets.
_NATIVE = (RESPONSES, MESSAGES)
EMBEDDINGS = "/v1/embeddings"
UNMEASURED = "not measured"
_ROW = re.compile(
    r"^\| (?P<field>.+?) \| \*\*(?P<verdict>[a-z][a-z ]*)\*\* \| [^|]+ \| (?P<evidence>.*) \|$"
)
_BULLET = re.compile(r"^- \*\*(?P<field>[^*]+)\*\*: (?P<verdict>[a-z]+): (?P<evidence>.*)$")


@dataclass(frozen=True)
class Row:
    field: str
    verdict: str
    evidence: str


@dataclass
class Report:
    """The verdict tables of one probe report, by route."""

    routes: dict[str, list[Row]] = field(default_factory=dict)
    responses_line: str = ""
    messages_line: str = ""

    def verdict(self, route: str, name: str) -> Row | None:
        return next((r for r in self.routes.get(route, []) if r.field == name), None)


def parse_report(text: str) -> Report:
    """The tables of ``ft-gateway probe --report``: each route's ``| field | **verdict** |
    confidence | evidence |`` rows; for /v1/responses its summary line and, where the
    engine serves the route, its ``- **field**: verdict: evidence`` lines."""
    report = Report()
    route: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            route = line[3:].strip()
            report.routes.setdefault(route, [])
            continue
        if route is None:
            continue
        row = _ROW.match(line) if route not in _NATIVE else _BULLET.match(line)
        if row is not None:
            evidence = row["evidence"].replace("\\|", "|")
            report.routes[route].append(Row(row["field"], row["verdict"], evidence))
        elif route == RESPONSES and line.startswith(RESPONSES + ":"):
            report.responses_line = line
        elif route == MESSAGES and line.startswith(MESSAGES + ":"):
            report.messages_line = line
    return report


def _describe(rule: dict[str, Any] | None, unknown: str = "reject") -> str:
    """What a policy rule does, in a few words."""
    if rule is None:
        return f"no rule ({unknown}, as any unnamed field)"
    action = str(rule.get("action", "pass"))
    if action == "rename":
        return f"renamed to `{rule['to']}`"
    if action == "fanout":
        return f"fan-out (n up to {rule.get('maximum', '?')})"
    if action == "reject":
        neutral = rule.get("neutral")
        if not neutral:
            return "400"
        shown = ", ".join(f"`{json.dumps(v)}`" for v in neutral)
        if rule.get("drop_neutral"):
            return f"400; neutral {shown} accepted, not forwarded"
        return f"400; neutral {shown} passes"
    return action


def _embeddings_input(rule: dict[str, Any] | None, name: str) -> str:
    """What the rule on embeddings' ``input`` does with a batch (``input``) or with
    token ids (``token_ids``, a rule inside it)."""
    if rule is None:
        return _describe(None)
    if name == "token_ids":
        return _describe(rule.get("token_ids", {"action": "pass"}))
    kinds = rule.get("type", ["string", "array"])
    if "array" in (kinds if isinstance(kinds, list) else [kinds]):
        if rule.get("items", {}).get("type") == "integer":
            return "one input, text or token ids (a batch: 400)"
        return _describe(rule)
    return "one string only (a batch: 400)"


def _select(rule: dict[str, Any] | None, key: str | None) -> dict[str, Any] | None:
    """The rule a ``select`` gives ``key``: its ``unknown`` rule for one it does not name
    (or for ``key`` None)."""
    if rule is None or "select" not in rule:
        return None
    select = rule["select"]
    found = select.get("rules", {}).get(key) if key is not None else None
    if found is None:
        return {"action": "reject", **select.get("unknown", {})}
    return {"action": "pass", **found}


def _dig(value: Any, *path: str) -> Any:
    for step in path:
        value = value.get(step) if isinstance(value, dict) else None
    return value


_TOOL_FIELDS = {"tool arguments": "tools", "parallel_tool_calls false": "parallel_tool_calls"}


def below_does(policy: dict[str, Any], section: str, name: str) -> str:
    """What the written ``policy`` does with a tool check or a keyword case ``name``."""
    chat = _dig(policy, "routes", "/v1/chat/completions", "fields") or {}
    if section == TOOLS:
        return _describe(chat.get(_TOOL_FIELDS.get(name, "tool_choice")))
    if section == NATIVE_KEYWORDS:
        fmt = _dig(policy, "routes", RESPONSES, "fields", "text", "fields", "format")
        table = _dig(fmt, "select", "rules", "json_schema", "fields", "schema", "json_schema")
    else:
        wrapper = _dig(chat, "response_format", "select", "rules", "json_schema", "fields")
        table = _dig(wrapper, "json_schema", "fields", "schema", "json_schema")
    if not isinstance(table, dict):
        return "json_schema refused"
    case = case_named(name)
    rule = (table.get("keywords") or {}).get(case.keyword)
    if rule is None:
        return "400 (not named)"
    if case.context is not None:
        kind, what = case.context
        rule = (rule.get(kind) or {}).get(what) or rule.get("unknown") or rule
    return "400" if rule.get("action") == "reject" else "pass"


def policy_does(policy: dict[str, Any], route: str, name: str) -> str:
    """What the written ``policy`` does on ``route`` with what the probe called ``name``:
    a top-level field, ``(unknown field)``, a role (``system role``), ``(unknown role)``,
    a user content part (``image_url part``) or ``tool message``."""
    if route in (TOOLS, KEYWORDS, NATIVE_KEYWORDS):
        return below_does(policy, route, name)
    if route not in policy.get("routes", {}):
        return "route not declared (404)"
    on_route = policy["routes"][route]
    fields: dict[str, Any] = on_route.get("fields", {})
    unknown = str(on_route.get("unknown_fields", policy.get("unknown_fields", "reject")))
    if name == "(unknown field)":
        return {"reject": "400 `unknown_parameter`", "pass": "passes"}.get(unknown, unknown)
    if name == "model" and fields.get("model", {}).get("enum"):
        names = ", ".join(f"`{n}`" for n in fields["model"]["enum"])
        return f"only {names} (another: 400)"
    if route == EMBEDDINGS and name in ("input", "token_ids"):
        return _embeddings_input(fields.get("input"), name)
    if route == MESSAGES and name == "count_tokens":
        declared = COUNT_TOKENS in policy.get("routes", {})
        return f"`{COUNT_TOKENS}` " + ("declared" if declared else "left out of the policy")
    if route == MESSAGES and name == "thinking":
        thinking = fields.get("thinking")
        kinds = ["enabled", "adaptive", "disabled"]
        refused = [k for k in kinds if (_select(thinking, k) or {}).get("action") == "reject"]
        return f"400 for `{'`, `'.join(refused)}`" if refused else _describe(thinking)
    messages = fields.get("messages")
    if name == "(unknown role)":
        return _describe(_select(messages, None))
    if name == "tool message":
        return _describe(_select(messages, "tool"))
    if name.endswith(" role"):
        return _describe(_select(messages, name.removesuffix(" role")))
    if name.endswith(" part"):
        user = _select(messages, "user")
        content = (user or {}).get("fields", {}).get("content")
        return _describe(_select(content, name.removesuffix(" part")))
    return _describe(fields.get(name), unknown)


@dataclass(frozen=True)
class Measured:
    """One engine's run: what it is, its report, its policy."""

    engine: str
    version: str
    model: str
    model_sha256: str
    report: Report
    policy: dict[str, Any]
    # Per route the probe measured nothing on, what it said instead.
    unmeasured: dict[str, str] = field(default_factory=dict)

    @property
    def responses_native(self) -> bool:
        return self.report.responses_line.startswith(RESPONSES + ": served natively")

    @property
    def messages_native(self) -> bool:
        return self.report.messages_line.startswith(MESSAGES + ": served natively")


def load(out_dir: Path) -> list[Measured]:
    """Every engine measured in ``out_dir``, by name."""
    found = []
    for about_file in sorted(out_dir.glob("*.json")):
        about = json.loads(about_file.read_text())
        name = about["engine"]
        report = parse_report((out_dir / f"{name}.report.md").read_text())
        policy = yaml.safe_load((out_dir / f"{name}.policy.yaml").read_text())
        unmeasured = _add_embeddings(out_dir, name, report, policy)
        found.append(
            Measured(
                name,
                about["version"],
                about["model"],
                about["model_sha256"],
                report,
                policy,
                unmeasured,
            )
        )
    return found


def _add_embeddings(
    out_dir: Path, name: str, report: Report, policy: dict[str, Any]
) -> dict[str, str]:
    """The embeddings probe's verdicts and rules added to ``report`` and ``policy``; or,
    where it wrote none, what it said (by route)."""
    stem = out_dir / f"{name}.embeddings"
    report_file, policy_file = Path(f"{stem}.report.md"), Path(f"{stem}.policy.yaml")
    if report_file.exists() and policy_file.exists():
        rows = parse_report(report_file.read_text()).routes.get(EMBEDDINGS, [])
        report.routes[EMBEDDINGS] = rows
        written = yaml.safe_load(policy_file.read_text())
        routes = policy.setdefault("routes", {})
        routes[EMBEDDINGS] = written.get("routes", {}).get(EMBEDDINGS, {})
        return {}
    said = Path(f"{stem}.probe.txt")
    if not said.exists():
        return {}
    lines = [line for line in said.read_text().splitlines() if line.startswith("ft-gateway")]
    return {EMBEDDINGS: lines[-1] if lines else "the probe wrote no report"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _fields(runs: list[Measured], route: str) -> list[str]:
    names: list[str] = []
    for run in runs:
        for row in run.report.routes.get(route, []):
            if row.field not in names:
                names.append(row.field)
    return names


def render(runs: list[Measured]) -> str:
    """The page."""
    lines = [
        "# Real engines",
        "",
        "What `scripts/real-engines` measured: the gateway in front of engines nobody here",
        "wrote, each probed with `ft-gateway probe` and then served through the gateway with",
        "the policy the probe wrote for it. For each field, the probe's verdict (honoured,",
        "ignored, rejected, broken, inconclusive: [Probing an engine](probe.md)) and what that",
        "policy does with it. **Generated** by `scripts/real-engines` from the probe reports",
        "of its last run (`tests/realengine/enginesdoc.py`): do not edit by hand; run",
        "`scripts/real-engines` again after changing what the gateway sends to engines, and",
        "commit the page it writes. Back to the [README](../README.md); all pages:",
        "[docs/](README.md).",
        "",
        "`/v1/embeddings` is measured on a second process of each engine serving",
        "embeddings (`ft-gateway probe --route embeddings`), as an embedding deployment is",
        "its own: llama-server with `--embedding --pooling mean -np 2` (Gemma's GGUF names no",
        "pooling), llama-cpp-python's server with `--embedding True`, which has no pooling",
        "setting: with this model it answers a vector per token (a list of lists, not",
        "OpenAI's one vector per input), so the probe writes no rules for it. Rerank is not",
        "measured: no reranker model installs from the package registries. The suite itself",
        "(`tests/realengine/`) also checks answers whole and streamed, `n`, `seed` replays,",
        "client request ids of any shape, an engine killed mid-stream and restarted, the",
        "embeddings SDK calls through the probe's policy (`dimensions`, base64, batches,",
        "token ids) and `/tokenize`, `/detokenize` through the default policy (llama-server",
        "serves llama.cpp's shape, `content`; llama-cpp-python's server has only",
        "`/extras/tokenize`, so the gateway's `/tokenize` answers its 404 as",
        "`upstream_error`; llama-server answers vLLM's shape, `prompt`, with no tokens and",
        "a 200, which the default policy passes: in front of it, refuse `prompt` in an",
        "overlay). The engines run with the flags `tests/realengine/engines.py`",
        "gives them; llama-cpp-python's server needs `--interrupt_requests False` behind the",
        "gateway: by default each new request interrupts the stream in progress, so of `n`",
        "streamed by fan-out all but one end after their first chunk.",
        "",
        "| engine | version | model | model sha256 | `/v1/responses` | `/v1/messages` |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        modes = [
            "native (served by the engine)" if native else "translate (not served)"
            for native in (run.responses_native, run.messages_native)
        ]
        lines.append(
            f"| {run.engine} | {_cell(run.version)} | {_cell(run.model)} "
            f"| `{run.model_sha256}` | {modes[0]} | {modes[1]} |"
        )
    lines.append("")
    differing: list[str] = []
    for route in (*ROUTES, RESPONSES, MESSAGES, EMBEDDINGS, TOOLS, KEYWORDS, NATIVE_KEYWORDS):
        names = _fields(runs, route)
        if not names:
            continue
        lines += [f"## {route}", ""]
        for run in runs:
            if route in run.unmeasured:
                # The probe's message without its program name (a code span that
                # starts with it reads as a command line to the docs' checks).
                said = _cell(run.unmeasured[route].removeprefix("ft-gateway probe: "))
                lines += [f"{run.engine}: {UNMEASURED}, the probe said `{said}`.", ""]
        head = "| field |" + "".join(f" {r.engine} | its policy |" for r in runs)
        lines += [head, "|---|" + "---|---|" * len(runs)]
        for name in names:
            verdicts = [_verdict(run, route, name) for run in runs]
            cells = [
                f" **{verdict}** | {_cell(policy_does(run.policy, route, name))} |"
                for run, verdict in zip(runs, verdicts, strict=True)
            ]
            lines.append(f"| {_cell(name)} |" + "".join(cells))
            if len(set(verdicts)) > 1:
                each = ", ".join(f"{r.engine} {v}" for r, v in zip(runs, verdicts, strict=True))
                differing.append(f"`{route}` {name}: {each}")
        lines.append("")
    lines += ["## Where the engines differ", ""]
    if len(runs) < 2:
        lines.append(f"- one engine measured in this run ({runs[0].engine}): nothing to compare")
    else:
        lines += [f"- {d}" for d in differing] or ["- nowhere: every verdict is the same"]
    lines += [""]
    for run in runs:
        lines += [f"## {run.engine}: the evidence", "", f"{run.report.responses_line}", ""]
        if run.report.messages_line:
            lines += [run.report.messages_line, ""]
        lines += ["<details><summary>Each verdict's evidence</summary>", ""]
        for route, rows in run.report.routes.items():
            for row in rows:
                lines.append(f"- `{route}` **{row.field}**: {row.verdict}: {_cell(row.evidence)}")
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def _verdict(run: Measured, route: str, name: str) -> str:
    row = run.report.verdict(route, name)
    if row is not None:
        return row.verdict
    if route in run.unmeasured:
        return UNMEASURED
    return "not served" if route == RESPONSES else "not probed"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m tests.realengine.enginesdoc OUT_DIR PAGE", file=sys.stderr)
        return 2
    runs = load(Path(args[0]))
    if not runs:
        print(f"no probe reports in {args[0]}", file=sys.stderr)
        return 1
    Path(args[1]).write_text(render(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
