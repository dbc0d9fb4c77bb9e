"""Fixtures that tests in several folders share; the root conftest registers this plugin.

It imports none of the gateway, nor any of its dependencies, at import time (only the
standard library, pytest and support modules that import nothing else): scripts/gpu-test
runs the sampler's tests with it loaded on a machine that has only numpy, torch, triton
and pytest (tests/test_gpu_image.py checks it). What needs more is imported inside the
hook or fixture that uses it.
"""

from __future__ import annotations

import typing
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.engine import FakeEngine

if TYPE_CHECKING:
    from gateway.settings import Settings
    from tests.support.gateways import Gateway, MockEngine, Recorder
    from tests.support.redisserver import RedisServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """A state directory of the test's own (``$XDG_STATE_HOME``, no ``$XDG_RUNTIME_DIR``):
    the default response store (SQLite) and pidfile of every gateway the test starts, in
    process or not, are made there, never in the home directory, and no test sees
    another's conversations."""
    home = str(tmp_path_factory.mktemp("state"))
    monkeypatch.setenv("XDG_STATE_HOME", home)
    # The default pidfile's directory too (the runtime one is first): two gateways of two
    # workers serving one port number at different times would share a pidfile there.
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return home


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``upstream_client``: each UpstreamClient implementation by its ``upstream.client``
    name, so that tests which talk to a real loopback engine run over every one."""
    if "upstream_client" in metafunc.fixturenames:
        from gateway.settings import Upstream

        names = typing.get_args(Upstream.model_fields["client"].annotation)
        metafunc.parametrize("upstream_client", names)


@pytest.fixture
async def fake_engine() -> AsyncIterator[FakeEngine]:
    """The raw-socket fake engine (tests/support/engine.py) on a free loopback port."""
    async with FakeEngine() as engine:
        yield engine


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[Gateway]:
    """The gateway with the test's ``settings`` under uvicorn on a loopback port, with
    ``ft-gateway serve``'s server options and a Recorder as its observer."""
    from tests.support.gateways import serve_gateway

    async with serve_gateway(settings) as served:
        yield served


@pytest.fixture
def engine() -> MockEngine:
    """A mocked engine (respx behind httpx.MockTransport) to inject through create_app."""
    from tests.support.gateways import MockEngine

    return MockEngine()


@pytest.fixture
def recorder() -> Recorder:
    """An observer that keeps every finished exchange."""
    from tests.support.gateways import Recorder

    return Recorder()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A real ``redis-server`` of the test's own on a free loopback port (empty at start)."""
    from tests.support.redisserver import RedisServer  # imports uvicorn (via servers)

    with RedisServer() as server:
        yield server
