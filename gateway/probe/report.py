"""The probe's findings as a Markdown report (``--report``) and as a terminal table."""

from __future__ import annotations

import json

from gateway.probe.anthropic import table_line as messages_line
from gateway.probe.responses import table_line
from gateway.probe.route import BASE_MAX_TOKENS, CHAT_PROMPT, COMPLETION_PROMPT
from gateway.probe.runner import ProbeResult
from gateway.probe.verdict import OUTCOMES, Verdict, shown_confidence, trim


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: no HTML tags, no column breaks, one line."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\n", " ")
    )


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`"


def _confidence(verdict: Verdict) -> str:
    return shown_confidence(verdict.confidence) if verdict.confidence is not None else "—"


def render_markdown(result: ProbeResult) -> str:
    """The report: a table per route, then each verdict's requests and answers."""
    counts = {o: 0 for o in OUTCOMES}
    for route in result.routes:
        for verdict in route.verdicts:
            counts[verdict.outcome] += 1
    tally = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    base_chat = {
        "messages": [{"role": "user", "content": CHAT_PROMPT}],
        "max_tokens": BASE_MAX_TOKENS,
    }
    base_completion = {"prompt": COMPLETION_PROMPT, "max_tokens": BASE_MAX_TOKENS}
    lines = [
        f"# Probe of {_cell(result.model)} at {_cell(result.upstream)}",
        "",
        f"Probed on {result.probed_on.isoformat()} by `ft-gateway probe`: "
        f"{result.requests} requests; {tally}.",
        "",
        "Every request is a base request plus the fields shown: chat "
        f"{_code(json.dumps(base_chat))}, completions {_code(json.dumps(base_completion))}"
        + (f", and on both {_code(json.dumps(result.extra))}" if result.extra else "")
        + ". Confidence is given for statistical tests: one minus the estimated chance that "
        "an engine ignoring the field would have answered the same way.",
        "",
    ]
    for route in result.routes:
        if route.error is not None:
            lines += [f"## {route.route}", "", f"Not measured: {_cell(route.error)}", ""]
            continue
        lines += [
            f"## {route.route}",
            "",
            "| field | verdict | confidence | evidence |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(v.field)} | **{v.outcome}** | {_confidence(v)} | {_cell(v.summary)} |"
            for v in route.verdicts
        ]
        lines += ["", "<details><summary>Requests and answers</summary>", ""]
        for verdict in route.verdicts:
            lines.append(f"- **{_cell(verdict.field)}**")
            if not verdict.trials:
                lines.append("  - no request of its own (see the summary)")
            for trial in verdict.trials:
                lines.append(f"  - sent {_code(trial.sent)} → {_cell(trial.got)}")
        lines += ["", "</details>", ""]
    lines += _below_lines(result)
    if result.responses is not None:
        lines += ["## /v1/responses", "", table_line(result.responses), ""]
        lines += [
            f"- **{v.field}**: {v.outcome}: {_cell(v.summary)}" for v in result.responses.verdicts
        ]
        lines.append("")
    if result.messages is not None:
        lines += ["## /v1/messages", "", messages_line(result.messages), ""]
        lines += [
            f"- **{v.field}**: {v.outcome}: {_cell(v.summary)}" for v in result.messages.verdicts
        ]
        lines.append("")
    return "\n".join(lines)


# The sections below the field, by the title the report gives each.
KEYWORDS = "json_schema keywords"
TOOLS = "tool calling"
NATIVE_KEYWORDS = "json_schema keywords (/v1/responses, native)"


def _below_lines(result: ProbeResult) -> list[str]:
    """The report's sections below the field: each tool check and keyword case."""
    found = result.structured
    if found is None:
        return []
    lines: list[str] = []
    sections = ((TOOLS, found.tools), (KEYWORDS, found.keywords))
    for title, verdicts in (*sections, (NATIVE_KEYWORDS, found.native_keywords)):
        if not verdicts:
            if title == KEYWORDS and "keywords" in found.notes:
                lines += [f"## {title}", "", f"Not measured: {_cell(found.notes['keywords'])}", ""]
            continue
        lines += [
            f"## {title}",
            "",
            "| field | verdict | confidence | evidence |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(v.field)} | **{v.outcome}** | {_confidence(v)} | {_cell(v.summary)} |"
            for v in verdicts
        ]
        lines.append("")
    return lines


def render_table(result: ProbeResult, *, width: int = 100) -> str:
    """A plain-text table for the terminal."""
    lines: list[str] = []
    for route in result.routes:
        if route.error is not None:
            lines += [f"{route.route}: not measured: {route.error}", ""]
            continue
        name_width = max(len(v.field) for v in route.verdicts)
        lines.append(route.route)
        for v in route.verdicts:
            head = f"  {v.field:<{name_width}}  {v.outcome:<12}  {_confidence(v):>5}  "
            lines.append(head + trim(v.summary.replace("\n", " "), max(20, width - len(head))))
        lines.append("")
    if result.structured is not None:
        for title, verdicts in (
            (TOOLS, result.structured.tools),
            (KEYWORDS, result.structured.keywords),
        ):
            tally = ", ".join(
                f"{sum(v.outcome == o for v in verdicts)} {o}"
                for o in dict.fromkeys(v.outcome for v in verdicts)
            )
            lines.append(f"{title}: {tally or 'not measured'}")
            lines += [f"  {v.field}: {v.outcome}" for v in verdicts if v.outcome != "honoured"]
        lines.append("")
    if result.responses is not None:
        lines += [table_line(result.responses), ""]
    if result.messages is not None:
        lines += [messages_line(result.messages), ""]
    lines.append(f"{result.requests} requests to {result.upstream} ({result.model})")
    return "\n".join(lines)
