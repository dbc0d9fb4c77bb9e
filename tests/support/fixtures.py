"""Fixtures that tests in several folders share; the root conftest registers this plugin.

It imports none of the gateway at import time: scripts/gpu-test runs the sampler's tests
with it loaded on a machine that has only numpy, torch, triton and pytest. What needs the
gateway is imported inside the hook or fixture that uses it.
"""

from __future__ import annotations

import typing

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``upstream_client``: each UpstreamClient implementation by its ``upstream.client``
    name, so that tests which talk to a real loopback engine run over every one."""
    if "upstream_client" in metafunc.fixturenames:
        from gateway.settings import Upstream

        names = typing.get_args(Upstream.model_fields["client"].annotation)
        metafunc.parametrize("upstream_client", names)
