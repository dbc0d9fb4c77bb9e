"""The whole suite's set-up, which imports only the standard library and pytest: the GPU
machine runs tests/sampler/ with this file and has none of the gateway's dependencies.

Fixtures that several folders share are in tests/support/fixtures.py (a plugin, below);
each folder's own are in its conftest.py or its test modules.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest

pytest_plugins = ["tests.support.figures", "tests.support.fixtures"]

# Triton reads TRITON_INTERPRET when it is first imported, and several test
# modules import it: without an NVIDIA device, every one of them must see the
# interpreter.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# In CI (CI=true) hypothesis draws the same examples every run, so a red build
# is reproducible; long random searches are scripts/fuzz's job. Hypothesis is a
# test dependency, absent where only the GPU tests run.
if importlib.util.find_spec("hypothesis") is not None:
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None)
    if os.environ.get("CI"):
        settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    # pyproject.toml sets pytest-timeout's ``timeout``; where that plugin is not
    # installed (the GPU machine may lack it) the key is declared here, unenforced,
    # so that neither filterwarnings = error nor --strict-config fails on it.
    if importlib.util.find_spec("pytest_timeout") is None:
        parser.addini("timeout", "per-test time-out (pytest-timeout is not installed: unused)")


# The loggers a gateway's set-up (observe/logs.py:setup_logging) configures when a test
# runs `serve` in process: put back after each test, so no test's log capture (caplog,
# which listens on the root logger) depends on which tests ran before it.
_LOGGERS = ("", "gateway", "uvicorn", "uvicorn.error", "uvicorn.access", "py.warnings")


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    saved = []
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate, logger.disabled, logger.handlers[:]))
    hooks = sys.excepthook, threading.excepthook, warnings.showwarning
    yield
    for logger, level, propagate, disabled, handlers in saved:
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled
        logger.handlers[:] = handlers
    logging.captureWarnings(False)  # setup_logging's capture, undone before the hooks
    sys.excepthook, threading.excepthook, warnings.showwarning = hooks
