"""Shared fixtures. Area-specific fixtures live in the test module that needs them."""

from __future__ import annotations

import typing

import pytest

from gateway.settings import Upstream

pytest_plugins = ["tests.figures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=typing.get_args(Upstream.model_fields["client"].annotation))
def upstream_client(request: pytest.FixtureRequest) -> str:
    """Each UpstreamClient implementation by its ``upstream.client`` name: tests that
    talk to a real loopback engine run over both."""
    name: str = request.param
    return name
