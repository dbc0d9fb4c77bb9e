"""Rate limits by model over a fleet: a per-key token limit on one model holds across two
``ft-gateway serve`` processes sharing one real Redis, and leaves the key's other model
and the model's other keys alone."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.limits import key_of, write_keys
from tests.support.meteredengine import MeteredEngine
from tests.support.processes import gateway_process
from tests.support.redisserver import RedisServer
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio

# A prompt of 40 words: the engine reports 41 prompt tokens and 1 completion token; the
# gateway reserves about 70 (its body's bytes / 4, plus max_tokens). Within 100 tokens a
# day one request fits, and a second does not after the first is charged 42.
PROMPT = " ".join(["word"] * 40)
DAILY = 100


@contextlib.asynccontextmanager
async def serving(tmp: Path, config: dict[str, Any]) -> AsyncIterator[str]:
    tmp.mkdir(exist_ok=True)
    async with gateway_process(config=config, tmp=tmp) as gateway:
        url, _ = await gateway.serving()
        yield url


async def ask(client: openai.AsyncOpenAI, model: str) -> str:
    answer = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=1
    )
    return answer.model


async def test_a_per_key_model_token_limit_holds_across_two_gateways_on_one_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    alpha, beta = MeteredEngine(), MeteredEngine()
    keys = write_keys(tmp_path, {"alice": None, "bob": None})
    async with running_server(alpha) as alpha_url, running_server(beta) as beta_url:
        config = {
            "auth": {"keys_file": str(keys)},
            "deployments": [
                {"name": "chat", "upstream": {"url": alpha_url}, "models": ["alpha"]},
                {"name": "code", "upstream": {"url": beta_url}, "models": ["beta"]},
            ],
            "rate_limits": {
                "store": "redis",
                "redis": {"url": redis_server.url, "timeout": 1.0, "on_failure": "fail_closed"},
                "models": {"alpha": {"per_key": {"tokens_per_day": DAILY}}},
            },
        }
        async with (
            serving(tmp_path / "a", config) as first,
            serving(tmp_path / "b", config) as second,
            sdk(first, api_key=key_of("alice")) as alice_first,
            sdk(second, api_key=key_of("alice")) as alice_second,
            sdk(second, api_key=key_of("bob")) as bob,
        ):
            assert await ask(alice_first, "alpha") is not None
            with pytest.raises(openai.RateLimitError) as caught:
                await ask(alice_second, "alpha")  # the other process: one budget in Redis
            error = caught.value
            assert error.code == "rate_limit_exceeded"
            assert "for key 'alice' on model 'alpha' on tokens per day" in error.message
            assert int(error.response.headers["retry-after"]) >= 1
            await ask(alice_second, "beta")  # her other model: no such limit
            await ask(bob, "alpha")  # the model's other key: his own counters
    assert [b["model"] for b in alpha.bodies] == ["alpha", "alpha"]
    assert [b["model"] for b in beta.bodies] == ["beta"]
