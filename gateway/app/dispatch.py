"""The app's front door: the proxy routes go straight to their endpoints.

Starlette's stack (error middleware, exception middleware, router, route
matching, request/response wrappers) costs tens of microseconds per request,
about as much as the whole rest of the proxy. The proxy endpoints are raw ASGI
and answer every error themselves, so for an exact path and method match they
need none of it; everything else (health, unknown paths, wrong methods, the
lifespan) goes through Starlette as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.applications import Starlette

from gateway._types import Endpoint, Receive, Scope, Send


class DispatchingApp(Starlette):
    """Starlette with a dictionary look-up in front for ``(method, path)`` → endpoint."""

    def __init__(self, *, direct: Mapping[tuple[str, str], Endpoint], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.direct = dict(direct)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            endpoint = self.direct.get((scope["method"], scope["path"]))
            if endpoint is not None:
                scope["app"] = self
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
