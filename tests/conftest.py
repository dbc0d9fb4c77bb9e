"""Shared fixtures. Area-specific fixtures live in the test module that needs them."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.figures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
