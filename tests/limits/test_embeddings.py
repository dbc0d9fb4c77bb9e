"""An embeddings request is metered and limited by its input tokens alone: the limiter
reserves the input's estimate (no completion: there is none) and settles on the
engine's ``usage.prompt_tokens``. Through a real gateway in front of the reference engine."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest

from gateway.limits.limiter import BYTES_PER_TOKEN, reservation
from refengine import create_app as create_engine
from tests.support.gateways import serve_gateway
from tests.support.limits import auth, limited_settings
from tests.support.servers import running_server
from tests.support.vectors import EMBEDDING_MODEL

pytestmark = pytest.mark.anyio

INPUT = ["the old town in the rain and the cold wind from the sea"] * 16
BUDGET = 3000  # a day's: nothing comes back during the test


def test_a_route_with_no_limit_fields_reserves_its_input_alone() -> None:
    body = {"model": EMBEDDING_MODEL, "input": INPUT}
    reserved = reservation(body, body_bytes=800, default_max_tokens=4096, n=1, fields=())
    assert reserved == math.ceil(800 / BYTES_PER_TOKEN)


async def test_a_token_budget_admits_as_many_calls_as_the_inputs_use(tmp_path: Path) -> None:
    body = {"model": EMBEDDING_MODEL, "input": INPUT, "encoding_format": "float"}
    async with running_server(create_engine()) as engine_url:
        settings = limited_settings(engine_url, tmp_path, {"default": {"tokens_per_day": BUDGET}})
        async with (
            serve_gateway(settings) as gw,
            httpx.AsyncClient(base_url=gw.url, timeout=30) as client,
        ):
            used: list[int] = []
            while True:
                answer = await client.post("/v1/embeddings", json=body, headers=auth("alice"))
                if answer.status_code != 200:
                    break
                used.append(answer.json()["usage"]["prompt_tokens"])
            assert answer.status_code == 429
            assert answer.json()["error"]["type"] == "tokens"
    per_call = used[0]
    assert set(used) == {per_call}
    estimate = math.ceil(len(httpx.Request("POST", "/", json=body).content) / BYTES_PER_TOKEN)
    # Every call charged its input tokens only: the calls admitted are those whose
    # input fits, the next one's estimate being what the last refusal could not hold.
    assert len(used) * per_call <= BUDGET
    assert len(used) * per_call + estimate > BUDGET
    assert len(used) >= (BUDGET - estimate) // per_call
    # What max_tokens (default_max_tokens, 4,096) would have reserved admits none.
    assert len(used) >= 10
