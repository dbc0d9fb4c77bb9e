"""``system_fingerprint``: what served an answer, for engines that send none.

OpenAI's ``system_fingerprint`` changes when the backend configuration that serves
the request changes, so a client keeping (seed, fingerprint) pairs can tell when a
replay may give another text. The engines behind the gateway send none (or null), so
the gateway answers one made of what serves the request: the deployment (when the
gateway serves several; None until then), the engine's identity (``upstream.identity``,
else its URL), the policy (its file's SHA-256) and the route's measured seed guarantee
(``guarantees.seed``, written by ``ft-gateway probe``). It is computed once per policy
load. When the engine sends its own, the client gets the engine's.

The answers are stamped as bytes, without parsing them: a whole answer or each event
of a stream gets the member inserted after its opening brace, or its ``null`` replaced;
an engine's own value is left alone. A stream costs one substring scan per relayed
chunk, and one ``bytes.replace`` when its events lack the member.
"""

from __future__ import annotations

import hashlib
import re

from gateway.policy.engine import Policy

_KEY = b'"system_fingerprint"'
_NULL = re.compile(rb'"system_fingerprint"\s*:\s*null')
_OBJECT_START = re.compile(rb"^\s*\{(?=\s*\")")
_EVENT_START = b"data: {"
_PLAIN_START = b'data: {"'
_ERROR_EVENT = b'data: {"error"'
_DONE = b"data: [DONE]"
_EVENT = re.compile(rb"(?m)^data: ?\{(?=\s*\")(?!\s*\"error\")")
UNMEASURED = "unmeasured"


def fingerprint(
    *, engine: str, policy_digest: str, seed: str | None, deployment: str | None = None
) -> str:
    """``fp_`` and ten hex digits (OpenAI's form) over what serves the request."""
    parts = (deployment or "", engine, policy_digest, seed or UNMEASURED)
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=5).hexdigest()
    return f"fp_{digest}"


class Fingerprints:
    """The fingerprint of each route under the current policy, computed once per policy
    load. ``deployment``: the name of the deployment the gateway serves, when it serves
    several (fleets); None until then."""

    def __init__(self, *, engine: str, deployment: str | None = None) -> None:
        self.engine = engine
        self.deployment = deployment
        self._policy: Policy | None = None
        self._routes: dict[str, bytes] = {}

    def of(self, policy: Policy, route: str) -> bytes:
        """The fingerprint for ``route`` under ``policy`` (bytes, ready to insert)."""
        if policy is not self._policy:
            self._routes = {
                str(name): fingerprint(
                    engine=self.engine,
                    policy_digest=policy.digest,
                    seed=rules.guarantees.seed,
                    deployment=self.deployment,
                ).encode()
                for name, rules in policy.source.routes.items()
            }
            self._policy = policy
        found = self._routes.get(route)
        if found is None:
            found = fingerprint(
                engine=self.engine,
                policy_digest=policy.digest,
                seed=None,
                deployment=self.deployment,
            ).encode()
        return found


def _member(value: bytes) -> bytes:
    return b'"system_fingerprint":"' + value + b'",'


def stamp_answer(data: bytes, value: bytes) -> bytes:
    """A whole JSON answer with ``system_fingerprint`` set, unless the engine set it."""
    if _KEY in data:
        return _NULL.sub(b'"system_fingerprint":"' + value + b'"', data, count=1)
    return _OBJECT_START.sub(lambda m: m.group(0) + _member(value), data, count=1)


def stamp_events(events: bytes, value: bytes) -> bytes:
    """Whole SSE events (``data: {...}`` chunks) with ``system_fingerprint`` in each
    chunk that lacks it; error events and ``[DONE]`` are left as they are."""
    if _KEY in events:
        return _stamp_each(events, value)
    plain = events.count(_PLAIN_START)
    if _ERROR_EVENT in events or plain != events.count(b"data:") - events.count(_DONE):
        return _EVENT.sub(lambda m: m.group(0) + _member(value), events)
    # The common case, as engines write events: one C-level replace, no parse.
    return events.replace(_PLAIN_START, _EVENT_START + _member(value) + b'"')


def _stamp_each(events: bytes, value: bytes) -> bytes:
    """Events of which some carry the key (the engine's own value, or null)."""
    out = []
    for event in events.split(b"\n\n"):
        if _KEY in event:
            out.append(_NULL.sub(b'"system_fingerprint":"' + value + b'"', event, count=1))
        else:
            out.append(_EVENT.sub(lambda m: m.group(0) + _member(value), event))
    return b"\n\n".join(out)
