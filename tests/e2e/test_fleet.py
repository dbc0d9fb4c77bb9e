"""A fleet behind one gateway, over real sockets with the openai SDK: two reference-engine
deployments serving different model names (one with two replicas and affinity), an alias
and a hidden alias; each request reaches only its deployment, by the name it serves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.support.bodies import NO_THINKING
from tests.support.fleet import (
    SeenEngine,
    deployment,
    fleet_settings,
    policy_rejecting_seed,
    running_engines,
)
from tests.support.gateways import Gateway, serve_gateway
from tests.support.limits import key_of, write_keys
from tests.support.metrics import Scrape
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio

HI: Any = [{"role": "user", "content": "Say hello."}]


@dataclass
class Fleet:
    gateway: Gateway
    client: openai.AsyncOpenAI
    alpha: list[SeenEngine]  # two replicas of "alpha", with affinity
    beta: SeenEngine  # one replica of "beta", whose policy rejects seed

    def seen(self) -> dict[str, list[str]]:
        alpha = [m for e in self.alpha for m in e.models]
        return {"alpha": alpha, "beta": self.beta.models}


@asynccontextmanager
async def fleet(
    tmp_path: Path, overrides: dict[tuple[str, ...], Any] | None = None, api_key: str = "sk-test"
) -> AsyncIterator[Fleet]:
    alpha = [SeenEngine("alpha"), SeenEngine("alpha")]
    beta = SeenEngine("beta")
    async with running_engines([*alpha, beta]):
        settings = fleet_settings(
            overrides=overrides,
            deployments=[
                deployment(
                    "chat",
                    alpha,
                    upstream={"routing": "affinity"},
                    aliases={
                        "gpt-4o-mini": "alpha",
                        "alpha-legacy": {"to": "alpha", "hidden": True},
                    },
                ),
                deployment("code", [beta], policy=policy_rejecting_seed(tmp_path)),
            ],
        )
        async with serve_gateway(settings) as gateway, sdk(gateway.url, api_key=api_key) as client:
            yield Fleet(gateway, client, alpha, beta)


async def chat(client: openai.AsyncOpenAI, model: str, **fields: Any) -> Any:
    return await client.chat.completions.create(
        model=model, messages=HI, max_tokens=4, extra_body=NO_THINKING, **fields
    )


async def test_the_model_list_is_the_served_names_and_the_visible_alias(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        listed = [m.id async for m in f.client.models.list()]
        assert sorted(listed) == ["alpha", "beta", "gpt-4o-mini"]
        card = await f.client.models.retrieve("alpha-legacy")  # unlisted, not refused
        assert (card.id, card.object) == ("alpha-legacy", "model")
        with pytest.raises(openai.NotFoundError) as caught:
            await f.client.models.retrieve("gpt-5")
        assert caught.value.code == "model_not_found"
        assert f.seen() == {"alpha": [], "beta": []}  # answered by the gateway alone


async def test_each_request_reaches_only_its_deployment_by_its_served_name(
    tmp_path: Path,
) -> None:
    async with fleet(tmp_path) as f:
        assert (await chat(f.client, "alpha")).model == "alpha"
        assert f.seen() == {"alpha": ["alpha"], "beta": []}
        assert (await chat(f.client, "beta")).model == "beta"
        assert f.seen() == {"alpha": ["alpha"], "beta": ["beta"]}
        # The alias reaches the engine as the served name; the answer says what served it.
        assert (await chat(f.client, "gpt-4o-mini")).model == "alpha"
        assert (await chat(f.client, "alpha-legacy")).model == "alpha"
        assert f.seen() == {"alpha": ["alpha"] * 3, "beta": ["beta"]}
        # Affinity: the same conversation stays on one of the two replicas.
        assert sorted(len(e.models) for e in f.alpha) == [0, 3]


async def test_every_route_goes_through_the_model_lookup(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        completion = await f.client.completions.create(model="beta", prompt="Hi", max_tokens=3)
        assert completion.model == "beta"
        response = await f.client.responses.create(
            model="gpt-4o-mini", input="Say hello.", max_output_tokens=4
        )
        assert response.model == "alpha"
        fanned = await chat(f.client, "gpt-4o-mini", n=2)
        assert len(fanned.choices) == 2
        assert f.seen() == {"alpha": ["alpha"] * 3, "beta": ["beta"]}


async def test_an_unknown_model_is_model_not_found_and_reaches_no_engine(
    tmp_path: Path,
) -> None:
    async with fleet(tmp_path) as f:
        for stream in (False, True):
            with pytest.raises(openai.NotFoundError) as caught:
                await f.client.chat.completions.create(model="gpt-4o", messages=HI, stream=stream)
            error = caught.value
            assert (error.code, error.param) == ("model_not_found", "model")
            assert error.body == {
                "message": "The model `gpt-4o` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        with pytest.raises(openai.NotFoundError):
            await f.client.responses.create(model="gpt-4o", input="Hi")
        async with httpx.AsyncClient(base_url=f.gateway.url) as raw:
            missing = await raw.post("/v1/chat/completions", json={"messages": HI})
            wrong = await raw.post("/v1/chat/completions", json={"model": 7, "messages": HI})
        assert missing.status_code == wrong.status_code == 400
        assert missing.json()["error"]["param"] == wrong.json()["error"]["param"] == "model"
        assert f.seen() == {"alpha": [], "beta": []}
        unserved = f.gateway.recorder.finished_exchanges
        assert [e.status for e in unserved[-2:]] == [400, 400]


async def test_each_deployment_has_its_own_policy(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        assert (await chat(f.client, "alpha", seed=7)).model == "alpha"
        with pytest.raises(openai.BadRequestError) as caught:
            await chat(f.client, "beta", seed=7)
        assert caught.value.param == "seed"
        assert f.seen() == {"alpha": ["alpha"], "beta": []}
        records = f.gateway.recorder.finished_exchanges
        assert [r.deployment for r in records] == ["chat", "code"]


async def test_a_key_limited_to_some_models_gets_the_404_for_the_others(tmp_path: Path) -> None:
    keys = write_keys(tmp_path, {"alice": None, "bob": None})
    limits = {
        ("auth", "keys_file"): str(keys),
        ("model_access",): {"keys": {"alice": ["alpha", "gpt-4o-mini"]}},
    }
    async with fleet(tmp_path, limits, api_key=key_of("alice")) as f:
        assert sorted([m.id async for m in f.client.models.list()]) == ["alpha", "gpt-4o-mini"]
        assert (await chat(f.client, "gpt-4o-mini")).model == "alpha"
        with pytest.raises(openai.NotFoundError) as caught:
            await chat(f.client, "beta")
        assert (caught.value.code, caught.value.param) == ("model_not_found", "model")
        with pytest.raises(openai.NotFoundError):
            await f.client.models.retrieve("beta")
        async with sdk(f.gateway.url, api_key=key_of("bob")) as bob:
            assert (await chat(bob, "beta")).model == "beta"
            listed = sorted([m.id async for m in bob.models.list()])
        assert listed == ["alpha", "beta", "gpt-4o-mini"]
        assert f.seen() == {"alpha": ["alpha"], "beta": ["beta"]}


async def test_one_deployment_down_leaves_the_other_serving_and_the_gateway_ready(
    tmp_path: Path,
) -> None:
    async with fleet(tmp_path) as f, httpx.AsyncClient(base_url=f.gateway.url) as raw:
        m = Scrape((await raw.get("/metrics")).text)
        assert m("ft_gateway_deployment_replicas", deployment="chat", state="in_service") == 2
        await f.beta.stop()
        assert (await chat(f.client, "alpha")).model == "alpha"
        with pytest.raises(openai.APIStatusError) as caught:
            await chat(f.client, "beta")
        assert caught.value.status_code == 502  # its engine is gone; no other model answers
        ready = await raw.get("/readyz")
        assert ready.status_code == 200
        deployments = ready.json()["deployments"]
        assert deployments["chat"] == {"status": "up"}
        assert deployments["code"]["status"] == "down"
        assert sorted([m.id async for m in f.client.models.list()]) == [
            "alpha",
            "beta",
            "gpt-4o-mini",
        ]
        for engine in f.alpha:
            await engine.stop()
        assert (await raw.get("/readyz")).status_code == 503


async def test_failover_serves_the_same_model_with_no_failed_request(tmp_path: Path) -> None:
    primary, standby = [SeenEngine("alpha"), SeenEngine("alpha")], SeenEngine("alpha")
    async with running_engines([*primary, standby]):
        settings = fleet_settings(
            [
                deployment("chat", primary, failover="chat-standby"),
                deployment("chat-standby", [standby]),
            ]
        )
        async with serve_gateway(settings) as gateway, sdk(gateway.url) as client:
            assert (await chat(client, "alpha")).model == "alpha"
            for engine in primary:
                await engine.stop()
            answers = await asyncio.gather(*(chat(client, "alpha") for _ in range(6)))
            assert [a.model for a in answers] == ["alpha"] * 6
            assert standby.models == ["alpha"] * 6
            served = [r.deployment for r in gateway.recorder.finished_exchanges]
            assert served == ["chat"] + ["chat-standby"] * 6


async def test_each_deployment_answers_its_own_system_fingerprint(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        alpha, by_alias = await chat(f.client, "alpha"), await chat(f.client, "gpt-4o-mini")
        beta = await chat(f.client, "beta")
        assert alpha.system_fingerprint is not None
        assert by_alias.system_fingerprint == alpha.system_fingerprint  # one deployment
        assert beta.system_fingerprint is not None
        assert beta.system_fingerprint != alpha.system_fingerprint
        stream = await f.client.chat.completions.create(
            model="beta", messages=HI, max_tokens=4, extra_body=NO_THINKING, stream=True
        )
        prints = {chunk.system_fingerprint async for chunk in stream}
        assert prints == {beta.system_fingerprint}
