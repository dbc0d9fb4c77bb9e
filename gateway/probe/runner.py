"""Runs the checks of each route against one engine and collects the verdicts."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from gateway.probe import anthropic, checks, messages, sampling, seed, structured, vectors
from gateway.probe.anthropic import MessagesProbe, probe_messages
from gateway.probe.client import BudgetSpent, EngineClient
from gateway.probe.context import (
    FREE_SAMPLES,
    GREEDY_SAMPLES,
    Baseline,
    BeforeWave,
    Probe,
    ProbeError,
)
from gateway.probe.keywords import SAMPLES as KEYWORD_SAMPLES
from gateway.probe.native import NativeProbe
from gateway.probe.progress import Progress
from gateway.probe.responses import REQUESTS, RESPONSES, ResponsesProbe, probe_responses
from gateway.probe.route import CHAT, ProbeRoute
from gateway.probe.structured import StructuredProbe, probe_native_keywords, probe_structured
from gateway.probe.verdict import HONOURED, INCONCLUSIVE, Verdict
from gateway.routes import MESSAGES


@dataclass(frozen=True)
class Check:
    """One field's check: at most ``requests`` requests."""

    field: str
    run: Callable[[Probe], Verdict]
    requests: int
    chat_only: bool = False


CHECKS: tuple[Check, ...] = (
    Check("temperature", sampling.check_temperature, 0),
    Check("seed", seed.check_seed, seed.REQUESTS),
    *(
        Check(name, functools.partial(sampling.check_filter, field=name), 3)
        for name in sampling.FILTERS
    ),
    *(
        Check(name, functools.partial(sampling.check_penalty, field=name), 2)
        for name in sampling.PENALTIES
    ),
    Check("logit_bias", sampling.check_logit_bias, len(sampling.BIAS_TOKEN_IDS)),
    Check("max_tokens", checks.check_max_tokens, 1),
    Check("max_completion_tokens", checks.check_max_completion_tokens, 1, chat_only=True),
    Check("stop", checks.check_stop, 1),
    Check("n", checks.check_n, 1),
    Check("logprobs", checks.check_logprobs, 1),
    Check("top_logprobs", checks.check_top_logprobs, 1, chat_only=True),
    Check("response_format", checks.check_response_format, 1, chat_only=True),
    Check("stream", checks.check_stream, 1),
    Check("stream_options", checks.check_stream_options, 1),
    Check(checks.UNKNOWN, checks.check_unknown, 1),
    Check(checks.MODEL, checks.check_model, 1),
    # Inside messages (chat): the system check's answer is the developer check's
    # comparison, the text part's the other parts'; each is sent once.
    Check(messages.SYSTEM_ROLE, messages.check_system, 1, chat_only=True),
    Check(messages.DEVELOPER_ROLE, messages.check_developer, 1, chat_only=True),
    Check(messages.UNKNOWN_ROLE, messages.check_unknown_role, 1, chat_only=True),
    Check(messages.TEXT_PART, messages.check_text_part, 1, chat_only=True),
    *(
        Check(name, functools.partial(messages.check_part, name=name), 1, chat_only=True)
        for name in messages.PART_TYPES
    ),
    Check(messages.TOOL_MESSAGE, messages.check_tool_message, 3, chat_only=True),
)


# The routes an engine may serve itself, each probed on its own route: the result's
# class, its prober, and the ProbeResult field it goes in.
NATIVE_PROBES: dict[str, tuple[type[NativeProbe], Callable[..., NativeProbe], str]] = {
    RESPONSES: (ResponsesProbe, probe_responses, "responses"),
    MESSAGES: (MessagesProbe, probe_messages, "messages"),
}


def checks_for(route: str) -> list[Check]:
    """The checks that apply to ``route``."""
    return [c for c in CHECKS if route == CHAT or not c.chat_only]


def planned_requests(routes: Sequence[str], *, keyword_samples: int = KEYWORD_SAMPLES) -> int:
    """The most requests a probe of ``routes`` sends."""
    baseline = GREEDY_SAMPLES + FREE_SAMPLES
    chat_like = [r for r in routes if r not in (RESPONSES, MESSAGES) and r not in vectors.REQUESTS]
    native = REQUESTS if RESPONSES in routes else 0
    native += anthropic.REQUESTS if MESSAGES in routes else 0
    native += sum(vectors.REQUESTS.get(r, 0) for r in routes)
    below = (
        structured.planned(keywords_too=True, native=RESPONSES in routes, samples=keyword_samples)
        if CHAT in routes
        else 0
    )
    return (
        native + below + sum(baseline + sum(c.requests for c in checks_for(r)) for r in chat_like)
    )


@dataclass
class RouteResult:
    """The verdicts of one route, in check order."""

    route: str
    verdicts: list[Verdict]
    baseline: Baseline
    error: str | None = None  # why the route could not be measured (no verdicts then)

    def verdict(self, name: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.field == name), None)


@dataclass
class ProbeResult:
    """Everything one probe run found."""

    upstream: str
    model: str
    probed_on: date
    extra: dict[str, Any]
    routes: list[RouteResult] = field(default_factory=list)
    requests: int = 0
    responses: ResponsesProbe | None = None  # when /v1/responses was probed
    messages: MessagesProbe | None = None  # when /v1/messages was probed
    structured: StructuredProbe | None = None  # below the field, when chat was probed

    def route(self, path: str) -> RouteResult | None:
        return next((r for r in self.routes if r.route == path), None)


def probe_engine(
    client: EngineClient,
    *,
    upstream: str,
    model: str,
    routes: Sequence[str],
    extra: dict[str, Any] | None = None,
    progress: Progress | None = None,
    today: date | None = None,
    before_wave: BeforeWave | None = None,
    keyword_samples: int = KEYWORD_SAMPLES,
) -> ProbeResult:
    """Probe each route; ProbeError when the engine answers no route's plain request.
    ``keyword_samples``: answers per JSON-Schema keyword case (keywords.py).

    A route whose plain request fails is kept with its ``error`` and no verdicts.
    ``before_wave``: see load.py (tests hold the reference engine's steps with it).
    """
    result = ProbeResult(upstream, model, today or date.today(), dict(extra or {}))

    def show(label: str) -> None:
        if progress is not None:
            progress.update(done=client.sent, label=label)

    gave_up = False
    for path in routes:
        if path in NATIVE_PROBES:
            kind, prober, slot = NATIVE_PROBES[path]
            show(f"{path} native")
            try:
                native = prober(client, model=model, extra=result.extra)
            except BudgetSpent as exc:
                native = kind(False, f"not measured: {exc}")
            setattr(result, slot, native)
            text = native.verdict("text") if path == RESPONSES else None
            if result.structured is not None and text is not None and text.outcome == HONOURED:
                # Below the field on the engine's own Responses route, where it holds text.
                show(f"{path} native keywords")
                probe_native_keywords(
                    client,
                    result.structured,
                    model=model,
                    extra=result.extra,
                    samples=keyword_samples,
                )
            continue
        if path in vectors.PROBES:
            show(path)
            try:
                found, error = vectors.PROBES[path](client, model=model)
            except BudgetSpent as exc:
                found, error = [], f"not measured: {exc}"
            result.routes.append(RouteResult(path, found, Baseline([], []), error=error))
            continue
        probe = Probe(client, ProbeRoute(path, model, result.extra), before_wave=before_wave)
        show(f"{path} baseline")
        try:
            probe.measure_baseline()
        except (ProbeError, BudgetSpent) as exc:
            result.routes.append(RouteResult(path, [], probe.baseline, error=str(exc)))
            continue
        verdicts = []
        for check in checks_for(path):
            show(f"{path} {check.field}")
            if client.stalled and check.requests and not gave_up:
                gave_up = not _revive(probe)
            verdicts.append(_run(check, probe))
        result.routes.append(RouteResult(path, verdicts, probe.baseline))
        if path == CHAT:
            show(f"{path} tools and schema keywords")
            result.structured = probe_structured(probe, samples=keyword_samples)
    show("done")
    result.requests = client.sent
    if result.routes and all(r.error is not None for r in result.routes):
        raise ProbeError("; ".join(str(r.error) for r in result.routes))
    return result


def _run(check: Check, probe: Probe) -> Verdict:
    try:
        return check.run(probe)
    except BudgetSpent as exc:
        return Verdict(check.field, INCONCLUSIVE, f"not measured: {exc}")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # An engine answer of a shape no check expected: say so, keep probing.
        return Verdict(check.field, INCONCLUSIVE, f"unreadable answer: {type(exc).__name__}: {exc}")


def _revive(probe: Probe) -> bool:
    try:
        return probe.revive()
    except BudgetSpent:
        return False
