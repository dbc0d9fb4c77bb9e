"""The route of each path, from the routes' table (gateway/routes.py).

As uvicorn picks its protocol implementations, a row names its route class as a
``"module:Class"`` string, per mode where it has more than one (the ``upstream``
setting its row's ``mode`` names), and only the chosen module is imported:
nothing imports this back.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from gateway.proxy.route import Route
from gateway.responses.store import ResponseStore
from gateway.routes import ROUTES
from gateway.state import GatewayState


def make_route(state: GatewayState, path: str, *, store: ResponseStore | None) -> Route:
    """The route serving ``path`` in this deployment's mode."""
    row = ROUTES[path]
    classes = row.classes
    spec = classes.get("") or classes[getattr(state.settings.upstream, row.mode)]
    module, _, name = spec.partition(":")
    route_class = cast(Callable[..., Route], getattr(importlib.import_module(module), name))
    return route_class(state, store=store)
