"""The model names one deployment (the top-level ``upstream``) serves, and the 404 for the
others, as a fleet's table gives it.

Many engines answer any ``model`` with the one they run (llama.cpp, TEI, SGLang in
single-model mode: the probe says which): a client asking for another model would
silently get this one. So a name the deployment does not serve is refused before the
policy, as a fleet refuses it. The names are ``upstream.models`` where it is set;
otherwise the engine's own answer to ``GET /v1/models`` (its ``data[].id``), asked at
the first request and again when a request names a model not in it (at most once
per ``REFRESH`` seconds, so unknown names cost no round trip each). An engine that
lists nothing (no such route, an error, an unreadable answer, no answer in
``ASK_TIMEOUT``) leaves the names unknown: then the engine decides, as before, and the
gateway says so in its log once.

The endpoint tests ``model in names`` itself (a set look-up, no call) and awaits
``admit`` only on a miss. The list is asked of one replica directly, past the
balancer: the gateway's own question is no placement in the routing metrics, and
its failure takes no replica out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from gateway import __version__
from gateway.errors import ModelNotFound
from gateway.state import GatewayState
from gateway.upstream.balancer import Balancer
from gateway.upstream.base import UpstreamClient

logger = logging.getLogger("gateway")
REFRESH = 30.0  # seconds between two readings of the engine's list
ASK_TIMEOUT = 5.0  # seconds the list may take
_MAX_LIST_BYTES = 1 << 20
USER_AGENT = f"ft-gateway/{__version__}".encode()


def listed(answer: Any) -> frozenset[str] | None:
    """The model ids of an OpenAI model list (None: not one)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
        return None
    ids = [m.get("id") for m in answer["data"] if isinstance(m, dict)]
    found = frozenset(i for i in ids if isinstance(i, str))
    return found or None  # an empty list says nothing the engine would answer to


class ServedNames:
    """The names a single deployment serves: configured, or learned from its engine."""

    __slots__ = ("state", "names", "known", "configured", "_asked", "_lock", "_said")

    def __init__(self, state: GatewayState, configured: list[str] | None) -> None:
        self.state = state
        self.configured = configured is not None
        # What passes without a call: the served names, and None (no model named: the
        # engine's own, which it serves).
        self.names: frozenset[str | None] = frozenset((None, *(configured or ())))
        self.known = self.configured  # False: the engine has not said (it decides)
        self._asked = -REFRESH
        self._lock = asyncio.Lock()
        self._said = False

    async def admit(self, model: str | None) -> None:
        """Pass a request for ``model`` that ``names`` lacks, once the engine's list is
        read again (if due); ModelNotFound for a name the deployment does not serve."""
        if model is None or self.configured:
            if model is not None:
                raise ModelNotFound(model)
            return
        if time.monotonic() - self._asked >= REFRESH:
            async with self._lock:
                if time.monotonic() - self._asked >= REFRESH:
                    await self._learn()
        if model in self.names or not self.known:
            return
        raise ModelNotFound(model)

    async def _learn(self) -> None:
        try:
            async with asyncio.timeout(ASK_TIMEOUT):
                found = await self._ask()
        except Exception as exc:  # whatever fails, the names stay as they were
            found, why = None, str(exc) or type(exc).__name__
        else:
            why = "its answer to GET /v1/models is not a model list"
        self._asked = time.monotonic()
        if found is not None:
            self.names, self.known, self._said = frozenset((None, *found)), True, False
            return
        if not self.known and not self._said:
            self._said = True
            logger.warning(
                "the engine did not list its models (%s): requests pass whatever model they "
                "name; set upstream.models to refuse the names it does not serve",
                why,
                extra={"event": "served_models"},
            )

    async def _ask(self) -> frozenset[str] | None:
        engine = self.state.engines.default
        # Its own request, not a client's: an engine's log (and a test's) tells them apart.
        headers = [(b"accept", b"application/json"), (b"user-agent", USER_AGENT)]
        if engine.auth is not None:
            headers.append((b"authorization", engine.auth))
        client = _one_client(engine.upstream)
        if client is None:
            return None
        response = await client.request("GET", "/v1/models", headers=headers, body=b"")
        try:
            if response.status != 200:
                return None
            return listed(orjson.loads(await response.read(_MAX_LIST_BYTES)))
        finally:
            await response.aclose()


def _one_client(pool: UpstreamClient) -> UpstreamClient | None:
    """A replica's own client (the first in service), past the balancer: the gateway's
    own question is no placement to count, and its failure ejects no replica."""
    if not isinstance(pool, Balancer):
        return pool
    for replica in pool.replicas:
        if replica.in_service and not replica.draining:
            return replica.client
    return None
