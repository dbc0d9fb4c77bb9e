"""A short soak (the full one is ``scripts/soak``): concurrent streams through a real
``ft-gateway serve`` process, then no failures, no leaked descriptors or engine
connections, RSS steady."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.soak import soak

pytestmark = pytest.mark.anyio


async def test_short_soak_fails_nothing_and_leaks_nothing(
    figure: Callable[[str, str], None],
) -> None:
    result = await soak(concurrency=50, duration=3, warmup=1)
    figure("short soak", "\n" + result.report())
    assert result.load.failures == 0, result.load.reasons
    assert result.load.requests > 0
    assert result.after.fds <= result.baseline.fds
    assert result.after.upstream_connections <= result.baseline.upstream_connections
    # Loose in CI (3 s of load is short for RSS to settle); scripts/soak holds it to 10%.
    assert abs(result.rss_change) <= 0.25


async def test_short_soak_with_limits_in_redis_leaks_no_redis_connection(
    figure: Callable[[str, str], None],
) -> None:
    result = await soak(concurrency=50, duration=3, warmup=1, redis_limits=True)
    figure("short soak, limits in Redis", "\n" + result.report())
    assert result.load.failures == 0, result.load.reasons
    assert result.after.within(result.baseline)
    assert result.baseline.redis_connections == 1  # one pipelined connection per process
    assert result.limiter == "store errors 0, requests refused 0"
