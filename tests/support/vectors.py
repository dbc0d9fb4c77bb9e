"""The embeddings, rerank and tokenize chain: the reference engine (with the no-ops
asked for) behind the gateway, over loopback; and an engine wrapper that counts the
requests reaching it by path."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway.app.factory import create_app
from refengine import create_app as create_engine
from tests.support.gateways import gateway_settings
from tests.support.paths import POLICY
from tests.support.servers import ServerThread

EMBEDDING_MODEL = "ref-embedding-1"
RERANK_MODEL = "ref-reranker-1"


class Counted:
    """An ASGI app that counts the HTTP requests it is given, by path (``seen``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: Counter[str] = Counter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen[scope["path"]] += 1
        await self.app(scope, receive, send)


@contextlib.contextmanager
def engine(*ignore: str) -> Iterator[tuple[str, Counted]]:
    """The reference engine ignoring ``ignore`` on a thread; its URL and its counts."""
    app = Counted(create_engine(ignore=frozenset(ignore)))
    with ServerThread(app) as server:
        yield server.url, app


@contextlib.contextmanager
def gateway(engine_url: str, policy: str | Path = POLICY, **flags: Any) -> Iterator[str]:
    """The gateway with ``policy`` in front of ``engine_url`` on a thread; its URL."""
    overrides = {tuple(k.split("__")): v for k, v in flags.items()}
    app = create_app(gateway_settings(engine_url, policy=policy, overrides=overrides))
    with ServerThread(app) as server:
        yield server.url
