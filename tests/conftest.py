"""Shared fixtures. Area-specific fixtures live in the test module that needs them."""

from __future__ import annotations

import os
import typing

import pytest
from hypothesis import settings

from gateway.settings import Upstream

pytest_plugins = ["tests.support.figures"]

# In CI (CI=true) hypothesis draws the same examples every run, so a red build
# is reproducible; long random searches are scripts/fuzz's job.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Triton reads TRITON_INTERPRET when it is first imported, and several test
# modules import it: without an NVIDIA device, every one of them must see the
# interpreter. (scripts/gpu-test runs with --noconftest on the GPU machine.)
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=typing.get_args(Upstream.model_fields["client"].annotation))
def upstream_client(request: pytest.FixtureRequest) -> str:
    """Each UpstreamClient implementation by its ``upstream.client`` name: tests that
    talk to a real loopback engine run over both."""
    name: str = request.param
    return name
