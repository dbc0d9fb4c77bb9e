"""A fleet as the tests run it: reference engines serving named models, each wrapped so
that a test sees, engine side, which model names reached it; and the settings of a
gateway with their deployments."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.settings import Settings, load_settings
from refengine.server import create_app as create_engine
from tests.support.asgi import read_body
from tests.support.paths import POLICY
from tests.support.servers import running_server


@dataclass
class SeenEngine:
    """A reference engine serving ``model``; ``models`` lists the ``model`` of every
    POST body that reached it, in order."""

    model: str
    models: list[str] = field(default_factory=list)
    url: str = ""
    server: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def stop(self) -> None:
        """Stop serving (the engine is gone: its port refuses connections)."""
        await self.server.aclose()

    def app(self) -> Any:
        engine = create_engine(model_name=self.model, max_batch=8)

        async def seen(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await engine(scope, receive, send)
                return
            body = await read_body(receive)
            self.models.append(json.loads(body).get("model"))
            sent = False

            async def replay() -> Any:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await engine(scope, replay, send)

        return seen


@contextlib.asynccontextmanager
async def running_engines(engines: Sequence[SeenEngine]) -> AsyncIterator[None]:
    """Serve every engine on its own loopback port (``url`` set) while open."""
    async with contextlib.AsyncExitStack() as stack:
        for engine in engines:
            stack.push_async_callback(engine.stop)
            engine.url = await engine.server.enter_async_context(running_server(engine.app()))
        yield


def deployment(
    name: str,
    engines: Sequence[SeenEngine],
    *,
    models: Sequence[str] | None = None,
    policy: str | Path = POLICY,
    **extra: Any,
) -> dict[str, Any]:
    """One deployment's config over ``engines`` (its replicas), serving their model."""
    upstream = {"urls": [e.url for e in engines], **extra.pop("upstream", {})}
    return {
        "name": name,
        "upstream": upstream,
        "policy": str(policy),
        "models": list(models or dict.fromkeys(e.model for e in engines)),
        **extra,
    }


def fleet_settings(
    deployments: Sequence[Mapping[str, Any]],
    *,
    overrides: Mapping[tuple[str, ...], Any] | None = None,
) -> Settings:
    """Settings with ``deployments``, the default policy, no config file, no environment."""
    flags: dict[tuple[str, ...], Any] = {
        ("policy",): str(POLICY),
        ("deployments",): [dict(d) for d in deployments],
        **(overrides or {}),
    }
    return load_settings(None, overrides=flags, environ={})


def policy_rejecting_seed(directory: Path) -> Path:
    """The default policy but for chat's ``seed``, which it rejects, written in ``directory``."""
    text = POLICY.read_text()
    rule = "      seed: {action: pass, type: integer,"
    if rule not in text:
        raise LookupError("the default policy's chat seed rule moved: update this helper")
    line = text[text.index(rule) :].split("\n", 1)[0]
    path = directory / "no-seed.yaml"
    path.write_text(
        text.replace(line, "      seed: {action: reject, reason: This deployment ignores seed.}", 1)
    )
    return path
