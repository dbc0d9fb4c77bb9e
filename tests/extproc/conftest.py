"""The real parts of the Envoy tests, each started once per module (Envoy starts are
dear on two loaded cores): a fake engine, ``ft-gateway extproc`` with a policy file of
the module's own, Envoy running deploy/envoy/envoy.yaml in front of both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.envoy import bootstrap
from tests.support.engine import FakeEngine
from tests.support.envoy import EngineThread, Envoy, Extproc
from tests.support.paths import POLICY


@pytest.fixture(scope="module")
def engine_thread() -> Iterator[EngineThread]:
    thread = EngineThread()
    with thread:
        yield thread


@pytest.fixture(scope="module")
def engine(engine_thread: EngineThread) -> FakeEngine:
    return engine_thread.engine


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("extproc")
    (directory / "policy.yaml").write_text(POLICY.read_text())
    (directory / "config.yaml").write_text("policy: policy.yaml\nlog: {format: json}\n")
    return directory


@pytest.fixture(scope="module")
def extproc(workdir: Path) -> Iterator[Extproc]:
    processor = Extproc(workdir / "config.yaml")
    processor.start()
    try:
        yield processor
    finally:
        processor.stop()


@pytest.fixture(scope="module")
def envoy(engine: FakeEngine, extproc: Extproc) -> Iterator[Envoy]:
    proxy = Envoy(bootstrap(engine_port=engine.port, extproc_port=extproc.port))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
