"""The probe below the field on one engine: its tool calling (tools.py) and each
JSON-Schema keyword (keywords.py), on chat and on the engine's own /v1/responses where
it serves one.

The keywords are measured whatever chat's one ``json_object`` request found: that
verdict varies from run to run on a small model (a JSON object cut by max_tokens is
inconclusive), and the keyword cases have a gate of their own (a plain schema first),
so an engine that refuses or ignores json_schema is told by its own answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.probe import keywords, tools
from gateway.probe.client import Answer, BudgetSpent, EngineClient
from gateway.probe.context import Probe
from gateway.probe.verdict import HONOURED, INCONCLUSIVE, Verdict

RESPONSES = "/v1/responses"


@dataclass
class StructuredProbe:
    """What the probe found below the field: ``keywords`` (chat's json_schema),
    ``tools`` (chat's tool calling), ``native_keywords`` (the engine's own
    /v1/responses text.format, when it serves it and its JSON mode held); ``notes`` say
    why a part was not measured."""

    keywords: list[Verdict] = field(default_factory=list)
    tools: list[Verdict] = field(default_factory=list)
    native_keywords: list[Verdict] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    def keyword(self, name: str, *, native: bool = False) -> Verdict | None:
        """The verdict on keyword case ``name`` (keywords.KeywordCase.name)."""
        found = self.native_keywords if native else self.keywords
        return next((v for v in found if v.field == name), None)

    def schema_honoured(self) -> bool:
        """Whether chat's json_schema holds for some keyword: the written policy then
        passes a schema keyword by keyword (none honoured: json_schema is refused)."""
        return any(v.outcome == HONOURED for v in self.keywords)

    def tool(self, name: str) -> Verdict | None:
        """The verdict of tool check ``name`` (tools.FIELDS)."""
        return next((v for v in self.tools if v.field == name), None)


def _finish(answer: Answer) -> str | None:
    body = answer.body if isinstance(answer.body, dict) else {}
    choices = body.get("choices") or [{}]
    first = choices[0] if isinstance(choices[0], dict) else {}
    reason = first.get("finish_reason")
    return reason if isinstance(reason, str) else None


def _measured(run: Callable[[], list[Verdict]], names: list[str]) -> list[Verdict]:
    try:
        return run()
    except BudgetSpent as exc:
        return [Verdict(n, INCONCLUSIVE, f"not measured: {exc}") for n in names]


def probe_structured(probe: Probe, *, samples: int = keywords.SAMPLES) -> StructuredProbe:
    """Tool calling, then every keyword case (behind their own gate)."""
    found = StructuredProbe()

    def send_tools(fields: dict[str, Any], seed: int) -> Answer:
        return probe.post(**fields, seed=seed)

    found.tools = _measured(lambda: tools.measure_all(send_tools), list(tools.FIELDS))

    def send(schema: dict[str, Any], seed: int) -> Answer:
        return probe.post(
            messages=[{"role": "user", "content": keywords.PROMPT}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "probe", "schema": schema, "strict": True},
            },
            temperature=1.0,
            seed=seed,
            max_tokens=keywords.MAX_TOKENS,
        )

    def read(answer: Answer) -> tuple[str | None, str | None]:
        return probe.route.text(answer), _finish(answer)

    found.keywords = _measured(
        lambda: keywords.measure_all(send, read, samples=samples), [c.name for c in keywords.CASES]
    )
    return found


def _output_text(answer: Answer) -> tuple[str | None, str | None]:
    body = answer.body if isinstance(answer.body, dict) else {}
    parts = [
        part["text"]
        for item in body.get("output") or ()
        if isinstance(item, dict)
        for part in item.get("content") or ()
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]
    incomplete = body.get("status") == "incomplete"
    return ("".join(parts) if parts else None), ("length" if incomplete else "stop")


def probe_native_keywords(
    client: EngineClient,
    found: StructuredProbe,
    *,
    model: str,
    extra: dict[str, Any],
    samples: int = keywords.SAMPLES,
) -> None:
    """Every keyword case on the engine's own /v1/responses, as ``text.format``."""

    def send(schema: dict[str, Any], seed: int) -> Answer:
        body = {
            "model": model,
            "input": keywords.PROMPT,
            "max_output_tokens": keywords.MAX_TOKENS,
            "temperature": 1.0,
            "seed": seed,
            **extra,
            "text": {
                "format": {"type": "json_schema", "name": "probe", "schema": schema, "strict": True}
            },
        }
        return client.post(RESPONSES, body)

    found.native_keywords = _measured(
        lambda: keywords.measure_all(send, _output_text, samples=samples),
        [c.name for c in keywords.CASES],
    )


def planned(*, keywords_too: bool, native: bool, samples: int = keywords.SAMPLES) -> int:
    """The most requests this probe sends."""
    return (
        tools.planned()
        + keywords.planned(keywords_too, samples=samples)
        + keywords.planned(native, samples=samples)
    )
