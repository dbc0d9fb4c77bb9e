"""/healthz (the process runs) and /readyz (it can serve: not draining, engine answering).

Neither needs a key (probes carry none), so neither shows what only the operator
should know: no file path (the policy's, the keys file's), no reload error's
detail, no store's address. /readyz says a status and a generic reason; the
detail is in the gateway's log and in ``ft-gateway reload``'s output.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.app.reload import Reloader
from gateway.errors import GatewayError
from gateway.state import GatewayState
from gateway.upstream.base import UpstreamClient


class Health:
    """The health endpoints of one app."""

    def __init__(self, state: GatewayState, reloader: Reloader) -> None:
        self.state = state
        self.reloader = reloader

    async def healthz(self, request: Request) -> Response:
        """200 while the process runs."""
        # The pid says which worker process answered (serve --workers N).
        return JSONResponse({"status": "ok", "pid": os.getpid()})

    async def readyz(self, request: Request) -> Response:
        """200 with the live policy while the engine answers; 503 draining or not ready."""
        state = self.state
        reloader = self.reloader
        if state.drain.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        policy = state.policy
        body: dict[str, Any] = {
            "status": "ready",
            "policy": {
                "sha256": policy.digest,
                "loaded_at": policy.loaded_at.isoformat(),
            },
        }
        if reloader.last is not None:
            body["policy"]["last_reload"] = {
                "result": reloader.last.result,
                "trigger": reloader.last.trigger,
                "at": reloader.last.at.isoformat(),
                "error": reloader.last.reason,
            }
        limiter = state.limiter
        if limiter is not None:
            await limiter.probe()
            body["rate_limits"] = limiter.status()
            if limiter.down and not limiter.fail_open:
                body["status"] = "not ready"
                body["reason"] = "rate limits: the store is down and on_failure is fail_closed"
                return JSONResponse(body, status_code=503)
        engines = state.engines
        if not engines.fleet:
            problem = await _engine_problem(engines.default.upstream)
            if problem is not None:
                body["status"] = "not ready"
                body["reason"] = f"upstream: {problem}"
                return JSONResponse(body, status_code=503)
            return JSONResponse(body)
        # A fleet is ready while any deployment can serve: one engine down must not take
        # the gateway out of a Service that the others still serve through.
        problems = await asyncio.gather(*(_engine_problem(e.upstream) for e in engines.engines))
        body["deployments"] = {
            engine.name: {"status": "up"}
            if problem is None
            else {"status": "down", "reason": problem}
            for engine, problem in zip(engines.engines, problems, strict=True)
        }
        if all(problem is not None for problem in problems):
            body["status"] = "not ready"
            body["reason"] = "upstream: no deployment can serve"
            return JSONResponse(body, status_code=503)
        return JSONResponse(body)


async def _engine_problem(upstream: UpstreamClient) -> str | None:
    """Why ``upstream`` cannot serve now, or None when it answers."""
    try:
        response = await upstream.request("GET", "/v1/models", headers=[], body=b"")
        await response.aclose()
        if response.status >= 500:
            return f"engine answered HTTP {response.status}"
    except GatewayError as exc:
        return str(exc)
    return None
