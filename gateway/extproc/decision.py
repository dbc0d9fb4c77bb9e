"""What the processor answers for one request, pure of gRPC: admitted or refused on its
headers, then forwarded (as it came, or rewritten) or refused on its body.

Each step is the one ``serve`` takes, through the same pure seams: the API keys
(access/keys.py), the route rows (routes.py) and the shapes a route refuses
(jsonbody/shapes.py), the body's JSON (jsonbody/parse.py), the keys' models
(fleet/access.py) and the fleet table (deployments.py, through fleet.py), the policy
(policy/engine.py) and its errors (errors.py). What the proxy does that a processor
cannot do exactly is refused by name (``unsupported``): ``n`` served by fan-out (one
request to Envoy cannot become several to the engine), the Responses API and
Anthropic's Messages API in translate mode (a translation of the answer, and the
store) and the Batch API (files kept, each line policed by ``serve``'s runner).
Anthropic's Message Batches API is the 404 ``serve`` gives. The Messages API in
native mode is policed as any route, its refusals in Anthropic's shape (messages.py).
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from gateway.app.reloadable import Reloadable
from gateway.batches.paths import BATCHES, FILES
from gateway.errors import BodyTooLarge, GatewayError, InvalidRequest, ModelNotFound
from gateway.extproc.fleet import Fleet, fleet_key
from gateway.extproc.request import Request
from gateway.jsonbody.parse import parse_request
from gateway.jsonbody.shapes import body_problem
from gateway.messages.errors import MESSAGE_BATCHES, unserved
from gateway.policy.engine import apply_policy
from gateway.routes import MESSAGES, RESPONSES
from gateway.state import GatewayState

# The code of every refusal of what only ``serve`` does.
UNSUPPORTED = "unsupported_in_extproc"
# The Batch API: serve keeps the files and runs each line through the policy itself;
# through Envoy an upload would reach the engine unpoliced (or be a 404 there).
BATCH_API = (FILES, BATCHES)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class Forward(NamedTuple):
    """A request Envoy sends on: its new body (None: the client's own bytes), the
    headers set on it (the served model, the deployment, the trace context) and those
    removed (the routing headers the processor did not set: a client's own would
    choose Envoy's route)."""

    body: bytes | None
    headers: list[tuple[str, bytes]]
    removed: tuple[str, ...] = ()


def unsupported(message: str, *, param: str | None = None) -> InvalidRequest:
    """The 400 of a request that needs what ``ft-gateway serve`` does and a processor
    cannot (docs/envoy.md, "What is refused by name")."""
    return InvalidRequest(message, param=param, code=UNSUPPORTED)


class Decider:
    """Decides the requests of one processor: the gateway's live state (policy, keys,
    tracer, observers: swapped by the reloader) and the fleet's table."""

    def __init__(self, state: GatewayState, fleet: Fleet) -> None:
        self.state = state
        self.fleet = fleet
        settings = state.settings
        # Restart-only settings, read once.
        self.max_body_bytes = settings.limits.max_body_bytes
        self.translated = settings.upstream.responses == "translate"
        # One mode for the gateway, as serve mounts it (app/mount.py).
        self.messages_translated = settings.upstream.messages == "translate"
        extproc = settings.extproc
        self.profile_header = (
            extproc.profile_header.encode() if extproc.profile_header is not None else None
        )
        self.model_header = extproc.model_header
        self.deployment_header = extproc.deployment_header
        # What Envoy may route by: never left as a client sent it.
        self.routing_headers = (extproc.model_header, extproc.deployment_header)

    def refleet(self, new: Reloadable) -> bool:
        """Swap in the fleet of a reload if it differs (the reloader's hook); True if so."""
        if fleet_key(new.settings, new.policies) == self.fleet.key:
            return False
        self.fleet = Fleet(new.settings, new.policies)
        return True

    def admit(self, request: Request) -> None:
        """Check what the headers alone decide (the key, a route only serve has, the
        declared length); raise the client's error."""
        record = request.record
        path = record.path
        if self.translated and _under(path, RESPONSES):
            raise unsupported(
                "The Responses API is translated onto chat completions and its responses "
                "are stored by ft-gateway serve; an Envoy external processor sees no "
                "answer to translate or store. Send it through ft-gateway serve, or set "
                "upstream.responses: native for an engine with its own /v1/responses."
            )
        if _under(path, MESSAGE_BATCHES):
            raise unserved(record.method, path)  # as serve answers it: Anthropic's 404
        if self.messages_translated and _under(path, MESSAGES):
            raise unsupported(
                "Anthropic's Messages API is translated onto chat completions by "
                "ft-gateway serve (the request, and the answer event by event); an Envoy "
                "external processor sees no answer to translate. Send it through "
                "ft-gateway serve, or set upstream.messages: native for an engine with "
                "its own /v1/messages."
            )
        if any(_under(path, api) for api in BATCH_API):
            raise unsupported(
                "The Batch API (/v1/files, /v1/batches) is served by ft-gateway serve, which "
                "keeps the files and sends each line through the policy; an Envoy external "
                "processor sees one request at a time. Send it through ft-gateway serve."
            )
        if request.route is None:
            return
        state = self.state
        if state.authenticate is not None:
            record.client, request.profile = state.authenticate(request.headers)
        if self.profile_header is not None:
            profile = request.header(self.profile_header)
            request.profile = profile.decode("latin-1") if profile else None
        length = request.header(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise BodyTooLarge(
                f"Request body is larger than this gateway's limit of {self.max_body_bytes} bytes."
            )

    def decide(self, request: Request, raw: bytes) -> Forward:
        """The request as the engine gets it, or the client's error raised."""
        route = request.route or ""
        record = request.record
        if len(raw) > self.max_body_bytes:
            raise BodyTooLarge(
                f"Request body is larger than this gateway's limit of {self.max_body_bytes} bytes."
            )
        body = parse_request(raw, request.headers, request.named)
        state = self.state
        if state.capture is not None:
            state.capture.record(route, request.profile, body, len(raw))
        tracer = state.tracer
        if tracer is not None:
            tracer.request(record, body)
        model = body.get("model")
        record.model = model if isinstance(model, str) else None
        gate = state.models
        if gate is not None and isinstance(model, str):
            if not gate.may_use(record.client, request.profile, model):
                raise ModelNotFound(model)
        policy = state.policy  # read once: a reload finishes no request under two
        served = record.model
        aliased = False
        fleet = self.fleet
        headers: list[tuple[str, bytes]] = []
        if fleet.rows:
            row, policy = fleet.place(model)
            served = record.served = row.served
            record.deployment = row.deployment.name
            headers.append((self.deployment_header, row.deployment.name.encode()))
            if row.alias:
                body = {**body, "model": row.served}
                aliased = True
        error = body_problem(route, state.policy, body, "POST", route)
        if error is not None:
            raise error
        decision = apply_policy(policy, route, body, profile=request.profile)
        record.outcomes = decision.outcomes
        record.report = decision.report
        if decision.error is not None:
            raise decision.error
        if decision.fanout > 1:
            raise unsupported(
                f"'n': {decision.fanout} is served by fan-out (the engine asked "
                f"{decision.fanout} times, the answers merged), which ft-gateway serve does "
                "and an Envoy external processor cannot: ask for one choice, or send the "
                "request through ft-gateway serve.",
                param="n",
            )
        record.stream = decision.body.get("stream") is True
        if served is not None:
            headers.append((self.model_header, served.encode()))
        if tracer is not None:
            headers.extend((n.decode(), v) for n, v in tracer.upstream_headers(record, []))
        changed = decision.changed or aliased
        set_names = {name for name, _ in headers}
        removed = tuple(name for name in self.routing_headers if name not in set_names)
        return Forward(orjson.dumps(decision.body) if changed else None, headers, removed)


def internal_error() -> GatewayError:
    """The 500 of a request the processor failed on (the traceback is logged)."""
    return GatewayError("The gateway failed to process the request.")
