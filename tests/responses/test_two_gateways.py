"""The done-when test of the shared store: two ``python -m gateway serve`` processes with one
real Redis as their response store; a conversation started on one continues on the other."""

from __future__ import annotations

from pathlib import Path

import anyio
import openai
import pytest

from tests.support.bodies import MODEL
from tests.support.engine import FakeEngine
from tests.support.faults import DEADLINE
from tests.support.processes import gateway_process
from tests.support.redisserver import RedisServer
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio


async def test_previous_response_id_across_two_gateway_processes(
    fake_engine: FakeEngine, redis_server: RedisServer, tmp_path: Path
) -> None:
    config = {
        "upstream": {"url": fake_engine.url},
        "store": {"backend": "redis", "url": redis_server.url},
    }
    with anyio.fail_after(DEADLINE * 3):
        async with (
            gateway_process(config=config, tmp=tmp_path) as first_process,
            gateway_process(config=config, tmp=tmp_path) as second_process,
        ):
            (first_url, _), (second_url, _) = (
                await first_process.serving(),
                await second_process.serving(),
            )
            async with (
                sdk(first_url, api_key="sk-alice") as first,
                sdk(second_url, api_key="sk-alice") as second,
                sdk(second_url, api_key="sk-bob") as stranger,
            ):
                one = await first.responses.create(model=MODEL, input="Name a cat.")
                assert one.output_text == "ok"
                two = await second.responses.create(
                    model=MODEL, input="Why that name?", previous_response_id=one.id
                )
                assert two.previous_response_id == one.id
                sent = fake_engine.requests[-1].json()["messages"]
                assert sent == [
                    {"role": "user", "content": "Name a cat."},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "Why that name?"},
                ]
                assert (await first.responses.retrieve(two.id)).id == two.id
                with pytest.raises(openai.NotFoundError):
                    await stranger.responses.retrieve(two.id)
