"""What one API is to the proxy: the Route protocol, and the defaults a route starts from.

The endpoint (endpoint.py) does what every route shares: read the body, watch
for the client leaving and the drain, admit by the limiter, send to the engine
the request's model names (the upstream seam), relay, record. A Route says the
rest, for one API: its path and the engine's, how a request is prepared (the
policy, a translation), how its usage is read, how a whole answer is shaped,
and, through the StreamShaper it makes per request, how engine chunks become
client bytes and how a failure is framed once the answer has started (before
it starts a failure is a status, rendered by the responder for every route).
Chat and completions (openai.py), and the Responses API translated or native
(responses/), are such classes; fan-out (fanout.py) composes with any of them.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import orjson

from gateway._types import Headers
from gateway.errors import GatewayError
from gateway.limits.meter import Usage, usage_of
from gateway.policy.engine import Decision, Policy, apply_policy
from gateway.proxy.call import Call
from gateway.proxy.headers import DEFAULT_HEADERS, HeaderPolicy
from gateway.proxy.shaper import StreamShaper
from gateway.routes import RouteRow
from gateway.state import GatewayState


class Prepared(NamedTuple):
    """A request ready for the engine: its bodies, and what the rate limiter reserves by
    (a tuple: one per request, built at a third of a dataclass's cost)."""

    bodies: list[bytes]
    admitted: dict[str, Any]  # the body as the engine gets it (max_tokens, n)
    size: int  # its size in bytes (the prompt's estimate)
    fanout: int = 1
    fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens")  # the limiter's


class Route:
    """One API, as the proxy serves it; subclasses override what differs."""

    row: ClassVar[RouteRow | None] = None  # None: a pass-through (GET /v1/models)
    upstream_path: ClassVar[str | None] = None  # the engine's path (None: the client's)
    # The request's own object: a subclass where the clients speak another API (its
    # error shape, its headers on every answer).
    call_type: ClassVar[type[Call]] = Call
    # The client's query string goes to the engine (not where the engine's route is
    # another API's: a translation's).
    forward_query: ClassVar[bool] = True
    # Which headers cross each way; a route whose API has headers of its own extends it
    # (DEFAULT_HEADERS.extend(...)), docs/headers.md says how.
    headers: ClassVar[HeaderPolicy] = DEFAULT_HEADERS

    def __init__(self, state: GatewayState, *, store: object = None) -> None:
        self.state = state  # (``store``: the response store, for a route that keeps answers)
        row = self.row
        # The route's name in the policy, the metrics and the logs.
        self.name: str | None = row.path if row is not None else None
        # The fields the limiter reserves a completion by, in this route's requests.
        self.max_tokens: tuple[str, ...] = row.max_tokens if row is not None else ()
        # The field affinity's content key reads.
        self.content = row.content if row is not None else ""
        # Whether ``answer`` shapes a whole answer (else the engine's is sent as it is,
        # without a call per request to say so).
        self.shapes = type(self).answer is not Route.answer

    def policy(self, call: Call) -> Policy:
        """The policy of the call's deployment (the gateway's live one, read once)."""
        return self.state.policy if call.policy is None else call.policy

    def decide(self, call: Call, body: dict[str, Any]) -> Decision:
        """The policy's verdict on ``body`` (raised if it refuses), recorded on the call."""
        decision = apply_policy(
            call.policy or self.state.policy, self.name or "", body, profile=call.profile
        )
        record = call.record
        record.outcomes = decision.outcomes
        record.report = decision.report
        if decision.error is not None:
            raise decision.error
        record.stream = decision.body.get("stream") is True
        return decision

    def refusal(
        self, body: dict[str, Any], *, policy: Policy, profile: str | None
    ) -> GatewayError | None:
        """The error this route answers ``body`` with before any engine sees it (the
        policy's, and the route's own checks), or None: what a batch's validation asks of
        each line, with no request (gateway/batches/validate.py)."""
        return apply_policy(policy, self.name or "", body, profile=profile).error

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        """The request as the engine gets it (the policy's body, or a translation)."""
        decision = self.decide(call, body)
        sent = raw if not decision.changed else orjson.dumps(decision.body)
        return Prepared(
            bodies=[sent], admitted=decision.body, size=len(raw), fields=self.max_tokens
        )

    def usage(self, answer: dict[str, Any]) -> Usage | None:
        """The usage of a whole answer (parsed)."""
        return usage_of(answer.get("usage"))

    async def answer(
        self, call: Call, answer: Any, data: bytes, headers: Headers
    ) -> tuple[Headers, bytes] | None:
        """A whole 2xx answer (``answer`` parsed from ``data``; ``headers``: the engine's,
        those the client may get) as the client gets it: None to send the engine's own
        bytes and headers unchanged. The one place a whole answer is shaped."""
        return None

    def stream_headers(self, headers: Headers) -> Headers:
        """The headers of a stream's answer, from the engine's (those it may get)."""
        headers.append((b"cache-control", b"no-cache"))
        headers.append((b"x-accel-buffering", b"no"))
        return headers

    def shaper(self, call: Call) -> StreamShaper:
        """The stream shaper of one call."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")
