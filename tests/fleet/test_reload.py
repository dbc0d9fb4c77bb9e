"""A reload of the fleet's table (SIGHUP) on a real server, under load: a deployment
added, the old ones kept with their pools, not one request failed; a table that fails
``check`` refused whole."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
import yaml

from gateway.app.reload import Reloader
from gateway.settings import load_settings
from tests.support.bodies import NO_THINKING
from tests.support.fleet import SeenEngine, deployment, running_engines
from tests.support.gateways import serve_gateway
from tests.support.paths import POLICY
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio


def write_config(path: Path, deployments: list[dict[str, Any]]) -> None:
    text = yaml.safe_dump({"policy": str(POLICY), "deployments": deployments})
    new = path.with_suffix(".new")
    new.write_text(text)
    new.replace(path)  # whole, as an editor or a ConfigMap swaps it


def send_sighup() -> None:
    # Without the gateway's handler SIGHUP would end the test run: make sure first.
    if signal.getsignal(signal.SIGHUP) in (signal.SIG_DFL, signal.SIG_IGN, None):
        raise RuntimeError("no SIGHUP handler: the gateway did not install its own")
    os.kill(os.getpid(), signal.SIGHUP)


async def attempts(reloader: Reloader, count: int) -> None:
    with anyio.fail_after(60):
        await reloader.wait_for_attempts(count)


async def ask(client: openai.AsyncOpenAI, model: str) -> str:
    answer = await client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=3,
        extra_body=NO_THINKING,
    )
    return answer.model


async def test_sighup_adds_a_deployment_under_load_with_no_failed_request(
    tmp_path: Path,
) -> None:
    alpha, beta, gamma = SeenEngine("alpha"), SeenEngine("beta"), SeenEngine("gamma")
    config = tmp_path / "config.yaml"
    async with running_engines([alpha, beta, gamma]):
        two = [deployment("chat", [alpha]), deployment("code", [beta])]
        write_config(config, two)
        settings = load_settings(config, environ={})
        async with serve_gateway(settings) as gateway, sdk(gateway.url) as client:
            reloader: Reloader = gateway.app.state.reloader
            engines = gateway.app.state.gateway.engines
            pool = engines.targets["alpha"].engine.upstream
            with pytest.raises(openai.NotFoundError):
                await ask(client, "gamma")

            done = asyncio.Event()
            answered: list[str] = []

            async def load(model: str) -> None:
                while not done.is_set():
                    answered.append(await ask(client, model))

            workers = [asyncio.create_task(load(m)) for m in ("alpha", "beta") * 3]
            # Refused whole: "gamma" may not also serve "alpha" (and nothing changes).
            write_config(config, [*two, deployment("third", [gamma], models=["gamma", "alpha"])])
            send_sighup()
            await attempts(reloader, 1)
            assert reloader.last is not None and reloader.last.result == "failed"
            assert "'alpha' is already served by 'chat'" in (reloader.last.error or "")
            with pytest.raises(openai.NotFoundError):
                await ask(client, "gamma")

            write_config(config, [*two, deployment("third", [gamma])])
            send_sighup()
            await attempts(reloader, 2)
            assert reloader.last is not None and reloader.last.result == "loaded"
            assert "deployments" in reloader.last.changed
            assert await ask(client, "gamma") == "gamma"
            done.set()
            await asyncio.gather(*workers)  # any failed request raises here

            live = gateway.app.state.gateway.engines
            assert live is not engines
            assert live.targets["alpha"].engine.upstream is pool  # kept: its connections
            assert set(answered) == {"alpha", "beta"}
            assert gamma.models == ["gamma"]
            assert set(alpha.models) == {"alpha"} and set(beta.models) == {"beta"}
