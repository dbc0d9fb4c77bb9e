"""Upstream clients by name: ``upstream.client`` in the config picks one.

As uvicorn does for its protocol implementations, the table holds
``"module:Class"`` strings and only the chosen module is imported, so a
deployment never loads a client library it does not use and no
implementation imports this module back.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

import httpx

from gateway.settings import Settings
from gateway.upstream.balancer import Balancer
from gateway.upstream.base import UpstreamClient

CLIENTS = {
    "httpx": "gateway.upstream.httpx_impl:HttpxUpstream",
    "aiohttp": "gateway.upstream.aiohttp_impl:AiohttpUpstream",
    "httptools": "gateway.upstream.httptools_impl:HttptoolsUpstream",
}


def client_class(name: str) -> Callable[..., UpstreamClient]:
    """The class registered as ``name`` in CLIENTS, its module imported now."""
    module, _, attribute = CLIENTS[name].partition(":")
    return cast(Callable[..., UpstreamClient], getattr(importlib.import_module(module), attribute))


def make_upstream(
    settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
) -> UpstreamClient:
    """The UpstreamClient that ``settings.upstream.client`` names (an injected
    ``transport`` always means the httpx client: tests mock through it); with
    several replicas, replicas from DNS or a per-replica limit, a Balancer over one
    such client per replica."""
    upstream = settings.upstream
    if len(upstream.replicas) > 1 or upstream.dns is not None or upstream.max_in_flight:
        return Balancer.from_settings(settings, lambda one: make_upstream(one, transport=transport))
    if transport is not None:
        return client_class("httpx")(settings, transport=transport)
    return client_class(settings.upstream.client)(settings)
