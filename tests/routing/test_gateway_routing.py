"""Routing through the real gateway on loopback: a conversation stays on one replica
while its load is within the bound and moves when it is not; a burst above the
per-replica limit queues, then sheds with 503 at the time-out; a queued request whose
client leaves is dropped from the queue at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.access.keys import hash_key
from gateway.app.factory import create_app
from gateway.routing.affinity import affinity_key
from gateway.routing.config import Affinity
from gateway.upstream.balancer import Balancer
from tests.support.bodies import CHAT, MODEL
from tests.support.gateways import gateway_settings
from tests.support.heldengine import HeldEngine, arrivals
from tests.support.paths import BATCH_PROFILE, policy_with
from tests.support.polling import until
from tests.support.sdk import sdk
from tests.support.servers import running_server

SYSTEM = {"role": "system", "content": "You answer in one line."}


def turn(conversation: str, turns: int, **extra: Any) -> dict[str, Any]:
    """The body of turn ``turns`` of a conversation (its history grows each turn)."""
    messages: list[dict[str, str]] = [SYSTEM]
    for i in range(turns):
        if i:
            messages.append({"role": "assistant", "content": f"answer {i}"})
        messages.append({"role": "user", "content": f"{conversation} question {i}"})
    return {"model": MODEL, "messages": messages, **extra}


@contextlib.asynccontextmanager
async def fleet(count: int, **env: str) -> AsyncIterator[tuple[str, Balancer, list[HeldEngine]]]:
    """``count`` held engines (holding nothing until told) behind the gateway."""
    changed = asyncio.Condition()
    engines = [HeldEngine(changed) for _ in range(count)]
    for engine in engines:
        engine.hold = False
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(running_server(e.app)) for e in engines]
        app = create_app(gateway_settings(",".join(urls), environ=env))
        url = await stack.enter_async_context(running_server(app))
        balancer = app.state.gateway.engines.upstream_for(None)
        assert isinstance(balancer, Balancer)
        try:
            yield url, balancer, engines
        finally:
            for engine in engines:
                engine.let_go()


@contextlib.asynccontextmanager
async def one_slot() -> AsyncIterator[tuple[str, Balancer, HeldEngine]]:
    """One engine, holding what it gets, behind a gateway that lets one request in flight."""
    async with fleet(1, FT_GATEWAY_UPSTREAM__MAX_IN_FLIGHT="1") as (url, balancer, engines):
        (engine,) = engines
        engine.hold = True
        yield url, balancer, engine


def where(engines: list[HeldEngine], conversation: str) -> list[int]:
    """Which engine got each request of ``conversation``, in order of arrival there."""
    return [
        i
        for i, engine in enumerate(engines)
        for body in engine.bodies
        if conversation in body["messages"][1]["content"]
    ]


def seen(engine: HeldEngine, balancer: Balancer, count: int) -> Callable[[], bool]:
    """Whether ``count`` requests have reached the engine or the queue."""
    return lambda: engine.arrived + len(balancer.queue) == count


AFFINITY = {"FT_GATEWAY_UPSTREAM__ROUTING": "affinity"}
# The ring places replicas by their URLs, whose ports change every run: with 12
# conversations on 3 replicas, all on one home is a 1 in 177,147 chance (with 6 it
# was 1 in 243, and a run failed so).
CONVERSATIONS = [f"conversation {i:02d}" for i in range(12)]


@pytest.mark.anyio
async def test_a_conversations_turns_land_on_one_replica() -> None:
    async with fleet(3, **AFFINITY) as (url, balancer, engines):
        async with httpx.AsyncClient(base_url=url) as client:
            for conversation in CONVERSATIONS:
                for n in range(1, 6):
                    response = await client.post(CHAT, json=turn(conversation, n))
                    assert response.status_code == 200
        homes = []
        for conversation in CONVERSATIONS:
            landed = where(engines, conversation)
            assert len(landed) == 5 and len(set(landed)) == 1, (conversation, landed)
            homes.append(landed[0])
        assert len(set(homes)) > 1  # different conversations, different homes
        assert balancer.tallies.placements == {("content", "home"): 5 * len(CONVERSATIONS)}


@pytest.mark.anyio
async def test_prompt_cache_key_routes_then_the_policy_strips_it() -> None:
    async with fleet(3, **AFFINITY) as (url, balancer, engines):
        async with httpx.AsyncClient(base_url=url) as client:
            for n in range(4):
                body = turn(f"user-{n}", 1, prompt_cache_key="shared-prefix-7")
                assert (await client.post(CHAT, json=body)).status_code == 200
        got = [i for i, e in enumerate(engines) for _ in e.bodies]
        assert len(set(got)) == 1  # four different conversations, one key: one replica
        assert all("prompt_cache_key" not in b for e in engines for b in e.bodies)
        assert balancer.tallies.placements == {("prompt_cache_key", "home"): 4}


@pytest.mark.anyio
async def test_a_conversation_over_the_load_bound_moves_to_the_next_replica() -> None:
    async with fleet(3, **AFFINITY) as (url, balancer, engines):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            first = await client.post(CHAT, json=turn("hot", 1))
            (home,) = where(engines, "hot")
            for engine in engines:
                engine.hold = True
            # Held: home has 1 in flight of 1 in all, the bound is ceil(1.25 * 2 / 3) = 1,
            # so the same conversation's next request goes to the next replica on the ring.
            held = asyncio.create_task(client.post(CHAT, json=turn("hot", 2)))
            await arrivals(engines, 2)
            spilled = asyncio.create_task(client.post(CHAT, json=turn("hot", 3)))
            await arrivals(engines, 3)
            landed = where(engines, "hot")
            assert landed.count(home) == 2 and len(set(landed)) == 2
            (moved,) = set(landed) - {home}
            found = affinity_key(turn("hot", 1), [], client=None, config=Affinity())
            assert found is not None
            ring = [r.url for r in balancer._ring.walk(found[1])]
            # Not just any replica: the next one clockwise on the ring.
            assert ring[:2] == [balancer.replicas[home].url, balancer.replicas[moved].url]
            for engine in engines:
                engine.hold = False
                engine.release()
            assert (await held).status_code == (await spilled).status_code == 200
            # Back within the bound: home again.
            assert (await client.post(CHAT, json=turn("hot", 4))).status_code == 200
        assert where(engines, "hot").count(home) == 3
        assert first.status_code == 200
        assert balancer.tallies.placements[("content", "spilled")] == 1
        assert balancer.tallies.placements[("content", "home")] == 3


LIMITED = {
    "FT_GATEWAY_UPSTREAM__MAX_IN_FLIGHT": "1",
    "FT_GATEWAY_UPSTREAM__QUEUE__TIMEOUT": "0.5",
}


@pytest.mark.anyio
async def test_a_burst_above_the_limit_queues_then_sheds_503_at_the_timeout() -> None:
    async with fleet(2, **LIMITED) as (url, balancer, engines):
        for engine in engines:
            engine.hold = True
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            burst = [
                asyncio.create_task(client.post(CHAT, json=turn(f"c{i}", 1))) for i in range(5)
            ]
            await arrivals(engines, 2)  # one per replica: the limit
            # The other three queue and each is shed at its time-out (on a loaded machine
            # they may reach the gateway more than the time-out apart: never all queued
            # at once).
            await until(lambda: balancer.tallies.shed.get("timeout") == 3, "three shed")
            await until(lambda: len(balancer.queue) == 0, "the queue to time out")
            assert [engine.arrived for engine in engines] == [1, 1]  # nothing past the limit
            for engine in engines:
                engine.release()
            results = await asyncio.gather(*burst)
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200, 200, 503, 503, 503]
        for response in results:
            if response.status_code == 503:
                assert response.headers["retry-after"] == "1"
                error = response.json()["error"]
                assert set(error) == {"message", "type", "param", "code"}
                assert error["code"] == "engine_overloaded"
                assert error["type"] == "server_error"
        assert balancer.tallies.shed == {"timeout": 3}
        assert sum(balancer.tallies.waits["timeout"].counts) == 3


@pytest.mark.anyio
async def test_a_freed_slot_goes_to_the_queue_in_order() -> None:
    async with one_slot() as (url, balancer, engine):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            tasks = []
            for i in range(3):
                tasks.append(asyncio.create_task(client.post(CHAT, json=turn(f"q{i}", 1))))
                await until(seen(engine, balancer, i + 1), "the request to queue")
            for expected in (1, 2, 3):
                await arrivals([engine], expected)
                assert balancer.replicas[0].in_flight == 1
                engine.release()
            results = await asyncio.gather(*tasks)
        assert [r.status_code for r in results] == [200, 200, 200]
        assert [b["messages"][1]["content"][:2] for b in engine.bodies] == ["q0", "q1", "q2"]
        assert sum(balancer.tallies.waits["admitted"].counts) == 2


@pytest.mark.anyio
async def test_a_queued_request_whose_client_leaves_is_dropped_at_once() -> None:
    async with one_slot() as (url, balancer, engine):
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            held = asyncio.create_task(client.post(CHAT, json=turn("first", 1)))
            await arrivals([engine], 1)
            # A second client, on its own connection, queues and then hangs up.
            async with httpx.AsyncClient(base_url=url, timeout=60) as leaver:
                leaving = asyncio.create_task(leaver.post(CHAT, json=turn("leaver", 1)))
                await until(lambda: len(balancer.queue) == 1, "the second request to queue")
                leaving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await leaving
            # Gone from the queue while the engine still holds the first request.
            await until(lambda: len(balancer.queue) == 0, "the queue to drop it")
            assert engine.arrived == 1
            assert sum(balancer.tallies.waits["left"].counts) == 1
            engine.release()
            assert (await held).status_code == 200
            engine.hold = False
            assert (await client.post(CHAT, json=turn("third", 1))).status_code == 200
        assert where([engine], "leaver") == []
        assert balancer.replicas[0].in_flight == 0


@pytest.mark.anyio
async def test_interactive_keys_leave_the_queue_before_batch_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = policy_with(tmp_path, BATCH_PROFILE)
    monkeypatch.setenv(
        "ROUTING_TEST_KEYS", f"alice:{hash_key('sk-alice')},nightly:{hash_key('sk-night')}:batch"
    )
    changed = asyncio.Condition()
    engine = HeldEngine(changed)
    async with running_server(engine.app) as engine_url:
        settings = gateway_settings(
            engine_url,
            policy=policy,
            environ={
                "FT_GATEWAY_AUTH__KEYS_ENV": "ROUTING_TEST_KEYS",
                "FT_GATEWAY_UPSTREAM__MAX_IN_FLIGHT": "1",
            },
        )
        app = create_app(settings)
        async with running_server(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as c:
            balancer = app.state.gateway.engines.upstream_for(None)
            assert isinstance(balancer, Balancer)

            def send(key: str, name: str) -> asyncio.Task[httpx.Response]:
                headers = {"authorization": f"Bearer {key}"}
                return asyncio.create_task(c.post(CHAT, json=turn(name, 1), headers=headers))

            first = send("sk-alice", "first")
            await arrivals([engine], 1)
            batch = send("sk-night", "batch")  # waits first...
            await until(lambda: len(balancer.queue) == 1, "the batch request to queue")
            interactive = send("sk-alice", "interactive")  # ...but this one goes first
            await until(lambda: len(balancer.queue) == 2, "the interactive one to queue")
            assert balancer.queue.depth() == {"interactive": 1, "batch": 1}
            engine.hold = False
            engine.release()
            results = await asyncio.gather(first, batch, interactive)
        assert [r.status_code for r in results] == [200, 200, 200]
        order = [b["messages"][1]["content"].split()[0] for b in engine.bodies]
        assert order == ["first", "interactive", "batch"]


@pytest.mark.anyio
async def test_the_openai_sdks_prompt_cache_key_and_session_header_pick_the_replica() -> None:
    async with fleet(3, **AFFINITY) as (url, balancer, engines), sdk(url) as client:
        for n in range(3):
            await client.chat.completions.create(
                model=MODEL,
                messages=turn(f"sdk-{n}", 1)["messages"],
                prompt_cache_key="team-prompt",
            )
        for n in range(3):
            await client.chat.completions.create(
                model=MODEL,
                messages=turn(f"session-{n}", 1)["messages"],
                extra_headers={"X-Session-ID": "session-42"},
            )
        by_key = {i for i, e in enumerate(engines) for b in e.bodies if "sdk-" in str(b)}
        by_session = {i for i, e in enumerate(engines) for b in e.bodies if "session-" in str(b)}
        assert len(by_key) == 1 and len(by_session) == 1
        assert balancer.tallies.placements == {
            ("prompt_cache_key", "home"): 3,
            ("header", "home"): 3,
        }


@pytest.mark.anyio
async def test_a_responses_conversation_chained_by_previous_response_id_stays_on_one_replica() -> (
    None
):
    # Each turn sends only its new input; the content key comes from the conversation
    # the engine reads (the stored history first), so every turn has the first's key.
    env = {**AFFINITY, "FT_GATEWAY_STORE__BACKEND": "memory"}
    async with fleet(3, **env) as (url, balancer, engines):
        async with httpx.AsyncClient(base_url=url) as client:
            for conversation in ("alpha", "beta", "gamma", "delta"):
                previous = None
                for n in range(4):
                    body: dict[str, Any] = {
                        "model": MODEL,
                        "instructions": "You answer in one line.",
                        "input": f"{conversation} question {n}",
                    }
                    if previous is not None:
                        body["previous_response_id"] = previous
                    response = await client.post("/v1/responses", json=body)
                    assert response.status_code == 200, response.text
                    previous = response.json()["id"]
        for conversation in ("alpha", "beta", "gamma", "delta"):
            landed = where(engines, conversation)
            assert len(landed) == 4 and len(set(landed)) == 1, (conversation, landed)
        assert balancer.tallies.placements == {("content", "home"): 16}
