"""The routes served only where the policy declares them are named once for the
processor (jsonbody/shapes.py) and once as the proxy's classes: the two agree."""

from __future__ import annotations

import importlib

from gateway.jsonbody.shapes import DECLARED_ONLY
from gateway.proxy.vectors import PolicedRoute
from gateway.routes import ROUTES


def test_the_declared_only_routes_are_the_policed_route_classes() -> None:
    policed = set()
    for path, row in ROUTES.items():
        for target in row.classes.values():
            module, _, name = target.partition(":")
            if issubclass(getattr(importlib.import_module(module), name), PolicedRoute):
                policed.add(path)
    assert policed == DECLARED_ONLY
