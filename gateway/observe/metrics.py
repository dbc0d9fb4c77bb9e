"""Prometheus metrics: an Observer of every exchange, exposed through a registry of its own.

The hot path only adds to plain numbers in dicts (about a microsecond per
request); the Prometheus families are built when ``/metrics`` is scraped. A
prometheus-client metric object takes a lock per update, which costs several
times more, for nothing: observers and scrapes both run on the event loop.

Each app registers its own collector on its own CollectorRegistry (tests
build many apps; nothing is global). ``Tallies`` holds every number and can
be merged, so several worker processes can add theirs up for one scrape.
The model label is one of the names the config gives (modelnames.py), else
``(other)``: a client cannot choose it. Field names, which the policy's rules
bound but a client's unknown fields do not, are capped: past the cap they are
counted under ``(other)``.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from gateway.errors import UpstreamError
from gateway.limits.limiter import Limiter
from gateway.limits.meter import Usage
from gateway.observe.batchmetrics import BatchTallies, batch_families
from gateway.observe.exchange import Exchange
from gateway.observe.families import MAX_LABEL, Capped, counter, histogram
from gateway.observe.families import OTHER as OTHER
from gateway.observe.histogram import LATENCY_BUCKETS as LATENCY_BUCKETS
from gateway.observe.histogram import Histogram as Histogram
from gateway.observe.routingmetrics import (
    RoutedPool,
    RoutingTallies,
    deployment_routing_families,
    routing_families,
)
from gateway.observe.tallies import RELOAD_RESULTS as RELOAD_RESULTS
from gateway.observe.tallies import Tallies as Tallies
from gateway.policy.engine import Policy

MAX_FIELDS = 256
CONTENT_TYPE = CONTENT_TYPE_LATEST
# The status of a request whose client left before any answer (nginx's 499).
CLIENT_CLOSED = 499
K = TypeVar("K")
_INDEX = re.compile(r"\[\d+\]")


def _upstream_codes() -> frozenset[str]:
    codes: set[str] = set()
    todo: list[type[UpstreamError]] = [UpstreamError]
    while todo:
        cls = todo.pop()
        if cls.default_code is not None:
            codes.add(cls.default_code)
        todo.extend(cls.__subclasses__())
    return frozenset(codes)


UPSTREAM_CODES = _upstream_codes()


class Metrics:
    """Requests, policy decisions, engine timings and failures, policy reloads."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.tallies = Tallies()
        self._fields = Capped(MAX_FIELDS)
        # The config's model names -> their labels (name_models); any other is (other).
        self._model_labels: dict[str | None, str] = {None: ""}
        # Raw (client-given) field names -> capped ones, so each is worked out once.
        self._field_labels: dict[str, str] = {}
        # Requests being handled: the gauges are counted from these when scraped.
        self._live: dict[int, Exchange] = {}
        # Spans the tracer lost so far (when tracing is on): read when scraped.
        self.spans_dropped: Callable[[], int] | None = None
        # Fills the routing gauges when scraped (set by the balancer, if any).
        self.routing_gauges: Callable[[RoutingTallies], None] | None = None
        self.limiter: Limiter | None = None  # read when scraped
        # A fleet's balancers by deployment, read when scraped (set by the app).
        self.deployment_pools: Callable[[], Iterable[tuple[str, RoutedPool]]] | None = None
        self.batch_gauges: Callable[[BatchTallies], None] | None = None  # the batch runner's
        self.registry.register(self)

    # The Observer protocol.

    def started(self, exchange: Exchange) -> None:
        self._live[id(exchange)] = exchange

    def finished(self, exchange: Exchange) -> None:
        self._live.pop(id(exchange), None)
        t = self.tallies
        route = exchange.route or exchange.path
        model = self._model_labels.get(exchange.model, OTHER)
        key = (route, model, exchange.status or CLIENT_CLOSED)
        t.requests[key] = t.requests.get(key, 0) + 1
        if exchange.client is not None:
            ckey = (exchange.client, exchange.status or CLIENT_CLOSED)
            t.clients[ckey] = t.clients.get(ckey, 0) + 1
        for outcome in exchange.outcomes:
            name = self._field_labels.get(outcome.field)
            if name is None:
                name = self._field_label(outcome.field)
            dkey = (route, name, outcome.action)
            t.decisions[dkey] = t.decisions.get(dkey, 0) + 1
        if exchange.report is not None:
            for outcome in exchange.report.fields:
                vkey = (route, self._field_label(outcome.field), outcome.detail)
                t.reported[vkey] = t.reported.get(vkey, 0) + 1
            if exchange.answers:
                self._count_answers(route, exchange, enforced=False)
        if exchange.client_disconnected:
            t.disconnects[route] = t.disconnects.get(route, 0) + 1
        if exchange.rate_limited is not None:
            rkey = (exchange.client or "", exchange.rate_limited)
            t.rate_limited[rkey] = t.rate_limited.get(rkey, 0) + 1
        deployment = exchange.deployment
        if deployment is not None:
            self._count_deployment(exchange, deployment)
        usage = exchange.usage
        if usage is not None:
            self._count_tokens(route, model, exchange.client, usage)
        elif exchange.route is not None and exchange.status == 200:
            t.usage_missing[route] = t.usage_missing.get(route, 0) + 1
        started = exchange.upstream_started
        if started is None:
            return
        latency = t.latency.get(route)
        if latency is None:
            latency = t.latency[route] = Histogram()
        # Histogram.observe written out: two a request.
        value = time.perf_counter() - started
        latency.counts[bisect_left(LATENCY_BUCKETS, value)] += 1
        latency.total += value
        if exchange.first_byte is not None:
            ttfb = t.ttfb.get(route)
            if ttfb is None:
                ttfb = t.ttfb[route] = Histogram()
            value = exchange.first_byte - started
            ttfb.counts[bisect_left(LATENCY_BUCKETS, value)] += 1
            ttfb.total += value
        if exchange.error_code is not None or (exchange.upstream_status or 0) >= 500:
            self._count_upstream_error(exchange)

    def _count_answers(self, route: str, exchange: Exchange, *, enforced: bool) -> None:
        # (reported ones counted where the report is read, the enforced where the error is)
        found = self.tallies.answer_violations
        for violation in exchange.answers:
            if violation.enforced is enforced:
                key = (route, violation.check, violation.code or "", str(enforced).lower())
                found[key] = found.get(key, 0) + 1

    def _count_upstream_error(self, exchange: Exchange) -> None:
        t = self.tallies
        if exchange.answers:
            self._count_answers(exchange.route or exchange.path, exchange, enforced=True)
        kind = None if exchange.engine_error else exchange.error_code
        if kind is None or kind not in UPSTREAM_CODES:
            kind = "engine_5xx" if (exchange.upstream_status or 0) >= 500 else None
        if kind is not None:
            t.upstream_errors[kind] = t.upstream_errors.get(kind, 0) + 1

    def _count_deployment(self, exchange: Exchange, deployment: str) -> None:
        t = self.tallies
        key = (deployment, exchange.served or "", exchange.status or CLIENT_CLOSED)
        t.deployments[key] = t.deployments.get(key, 0) + 1
        started, first = exchange.upstream_started, exchange.first_byte
        if started is not None and first is not None:
            ttfb = t.deployment_ttfb.get(deployment)
            if ttfb is None:
                ttfb = t.deployment_ttfb[deployment] = Histogram()
            ttfb.observe(first - started)

    def _count_tokens(self, route: str, model: str, client: str | None, usage: Usage) -> None:
        # Written out, not looped over the three kinds: this runs on every answer; the
        # usage unpacked (a tuple's named fields are not specialised reads).
        prompt, completion, total = usage
        tokens = self.tallies.tokens
        key = (route, model, "prompt")
        tokens[key] = tokens.get(key, 0) + prompt
        key = (route, model, "completion")
        tokens[key] = tokens.get(key, 0) + completion
        key = (route, model, "total")
        tokens[key] = tokens.get(key, 0) + total
        if client is not None:
            clients = self.tallies.client_tokens
            ckey = (client, "prompt")
            clients[ckey] = clients.get(ckey, 0) + prompt
            ckey = (client, "completion")
            clients[ckey] = clients.get(ckey, 0) + completion
            ckey = (client, "total")
            clients[ckey] = clients.get(ckey, 0) + total

    def name_models(self, names: Iterable[str]) -> None:
        """Label requests for ``names`` (the config's: modelnames.py) by their own name;
        any other model counts as ``(other)``, a request without one as ``""``."""
        labels: dict[str | None, str] = {name: name[:MAX_LABEL] for name in names}
        labels[None] = ""
        self._model_labels = labels

    def _field_label(self, name: str) -> str:
        if "[" in name:
            # A path inside the request: one label per place, whatever the index
            # (messages[].content[].type), and not cached by the raw path.
            return self._fields.label(_INDEX.sub("[]", name))
        label = self._fields.label(name)
        if label != OTHER:
            self._field_labels[name] = label
        return label

    # Policy reloads.

    def policy_live(self, policy: Policy) -> None:
        """Show ``policy`` as the live one."""
        self.tallies.policy = (policy.path, policy.digest, policy.loaded_at.timestamp())

    def policy_reload(self, result: str) -> None:
        """Count one reload attempt (loaded, unchanged or failed)."""
        reloads = self.tallies.reloads
        reloads[result] = reloads.get(result, 0) + 1

    # Exposition.

    def render(self) -> bytes:
        """The Prometheus text exposition of the registry."""
        return generate_latest(self.registry)

    def snapshot(self) -> Tallies:
        """The numbers now, in-flight gauges included."""
        live = list(self._live.values())
        if self.spans_dropped is not None:
            self.tallies.trace_spans_dropped = self.spans_dropped()
        if self.routing_gauges is not None:
            self.routing_gauges(self.tallies.routing)
        if self.limiter is not None:
            self.tallies.limit_store_errors = self.limiter.health.errors
            self.tallies.limit_store_bypassed = self.limiter.health.bypassed
        if self.deployment_pools is not None:
            routing = {}
            for name, pool in self.deployment_pools():
                pool.gauges(pool.tallies)
                routing[name] = pool.tallies
            self.tallies.deployment_routing = routing
        if self.batch_gauges is not None:
            self.batch_gauges(self.tallies.batches)
        self.tallies.in_flight = len(live)
        # A stream is in flight once the policy let it through to the engine.
        self.tallies.streams_in_flight = sum(
            1 for e in live if e.stream and e.upstream_started is not None
        )
        return self.tallies

    def collect(self) -> Iterator[Metric]:
        """The metric families (prometheus-client's Collector interface)."""
        return families(self.snapshot())


def families(t: Tallies) -> Iterator[Metric]:
    """Prometheus metric families for ``t``."""
    yield counter(
        "ft_gateway_requests",
        "Requests answered, by route, model and HTTP status (499: the client left first).",
        ["route", "model", "status"],
        t.requests,
    )
    yield counter(
        "ft_gateway_deployment_requests",
        "A fleet's requests by deployment, the model its engine serves (an alias counts as "
        "the name it stands for) and HTTP status.",
        ["deployment", "model", "status"],
        t.deployments,
    )
    yield histogram(
        "ft_gateway_deployment_ttfb_seconds",
        "A fleet's time to first byte by deployment (as ft_gateway_upstream_ttfb_seconds).",
        ["deployment"],
        t.deployment_ttfb,
    )
    yield counter(
        "ft_gateway_policy_decisions",
        "Fields the policy acted on, by route, field and action "
        "(rejected, neutral, stripped, renamed, defaulted).",
        ["route", "field", "action"],
        t.decisions,
    )
    yield from batch_families(t.batches)
    yield counter(
        "ft_gateway_policy_reported",
        "Refusals that report-only rules would have made (the request was forwarded), by "
        "route, field and verdict: the error code the client would have got with its 400.",
        ["route", "field", "verdict"],
        t.reported,
    )
    yield counter(
        "ft_gateway_answer_violations",
        "Engine answers that broke what their request asked, by route, answer check, error "
        "code and whether it was enforced (a 502 or an error event) or only reported.",
        ["route", "check", "code", "enforced"],
        t.answer_violations,
    )

    for name, doc, hists in (
        (
            "ft_gateway_upstream_latency_seconds",
            "From sending a request to the engine until its answer was fully relayed.",
            t.latency,
        ),
        (
            "ft_gateway_upstream_ttfb_seconds",
            "From sending a request to the engine until its first byte: the first chunk of a "
            "stream, the whole answer otherwise.",
            t.ttfb,
        ),
    ):
        yield histogram(name, doc, ["route"], hists)

    yield GaugeMetricFamily(
        "ft_gateway_requests_in_flight", "Requests being handled.", value=t.in_flight
    )
    yield GaugeMetricFamily(
        "ft_gateway_streams_in_flight",
        "Streaming requests sent to the engine and not finished.",
        value=t.streams_in_flight,
    )
    yield counter(
        "ft_gateway_upstream_errors",
        "Engine failures by kind: the gateway's error code (unreachable, timeout, protocol "
        "error, ...), or engine_5xx for an engine answer with a 5xx status.",
        ["kind"],
        t.upstream_errors,
    )
    yield counter(
        "ft_gateway_client_disconnects",
        "Requests whose client hung up before the answer was complete.",
        ["route"],
        t.disconnects,
    )
    yield counter(
        "ft_gateway_client_requests",
        "Requests by API key name and HTTP status (only when API keys are on).",
        ["client", "status"],
        t.clients,
    )
    yield counter(
        "ft_gateway_tokens",
        "Tokens the engine reported in its usage, by route, model and kind "
        "(prompt, completion, total).",
        ["route", "model", "kind"],
        t.tokens,
    )
    yield counter(
        "ft_gateway_client_tokens",
        "Tokens the engine reported, by API key name and kind (only when API keys are on).",
        ["client", "kind"],
        t.client_tokens,
    )
    yield counter(
        "ft_gateway_usage_missing",
        "Answered requests whose engine reported no usage (their tokens are not counted).",
        ["route"],
        t.usage_missing,
    )
    yield counter(
        "ft_gateway_rate_limited",
        "Requests refused with 429, by API key name and the limit that refused them.",
        ["client", "limit"],
        t.rate_limited,
    )
    yield CounterMetricFamily(
        "ft_gateway_rate_limit_store_errors",
        "Failed or timed-out calls to the rate-limit store (Redis).",
        value=t.limit_store_errors,
    )
    yield CounterMetricFamily(
        "ft_gateway_rate_limit_store_bypassed",
        "Limit decisions taken without the store while it was down (fail_open: let "
        "through, fail_closed: refused with 503).",
        value=t.limit_store_bypassed,
    )
    yield CounterMetricFamily(
        "ft_gateway_trace_spans_dropped",
        "Trace spans lost: the export queue was full or the collector failed (tracing on).",
        value=t.trace_spans_dropped,
    )
    yield counter(
        "ft_gateway_policy_reloads",
        "Policy reloads by result: loaded, unchanged, failed (the old policy stays live).",
        ["result"],
        t.reloads,
    )

    info = GaugeMetricFamily(
        "ft_gateway_policy_info",
        "The live policy: 1 for its file and SHA-256.",
        labels=["path", "sha256"],
    )
    loaded = GaugeMetricFamily(
        "ft_gateway_policy_loaded_timestamp_seconds",
        "When the live policy was loaded (Unix time).",
    )
    if t.policy is not None:
        path, digest, at = t.policy
        info.add_metric([path, digest], 1)
        loaded.add_metric([], at)
    yield info
    yield loaded
    yield from routing_families(t.routing)
    yield from deployment_routing_families(t.deployment_routing)
