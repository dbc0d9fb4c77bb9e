"""Which error shape a client reads, by route or by path.

A route's row names the ErrorShape its clients read (``"module:NAME"``, imported
when first asked, as the factory picks a route's class), so the parts that answer
outside the proxy (``explain``, the app's 404s, the Envoy processor) write an error
as the route would. A path under a route's own (``/v1/messages/batches``) is called
by the same clients, and gets the same shape.
"""

from __future__ import annotations

import importlib
from typing import cast

from gateway.errors import OPENAI_ERRORS, ErrorShape
from gateway.routes import ROUTES


def error_shape(route: str) -> ErrorShape:
    """The error shape of ``route``'s clients (its row names it; OpenAI's by default)."""
    spec = ROUTES[route].errors if route in ROUTES else ""
    if not spec:
        return OPENAI_ERRORS
    module, _, name = spec.partition(":")
    return cast(ErrorShape, getattr(importlib.import_module(module), name))


def path_error_shape(path: str) -> ErrorShape:
    """The error shape of the clients of ``path``: its route's, or that of the route it
    lies under (Anthropic's for ``/v1/messages/batches``), else OpenAI's."""
    for row in ROUTES.values():
        if row.errors and (path == row.path or path.startswith(row.path + "/")):
            return error_shape(row.path)
    return OPENAI_ERRORS
