"""The real-engine suite's set-up: each engine started once (``served``, one at a time),
probed once with ``ft-gateway probe`` (``probed``: the report and the policy it wrote),
and the gateway with that policy in front of it (``gateway``); the tests call the
gateway with the ``openai`` SDK (``client``).

Only ``-m realengine`` runs these (scripts/real-engines does, with the engines installed);
the default run leaves them out. The probe's files go to ``FT_REAL_ENGINES_OUT``
(scripts/real-engines writes docs/engines.md from them), else to a temporary folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.realengine.engines import ENGINES, Running, engine, running
from tests.realengine.probing import Probed, probe, serve_gateway
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread


@pytest.fixture(scope="session")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the probe's reports, the written policies and the engines' logs go."""
    given = os.environ.get("FT_REAL_ENGINES_OUT")
    path = Path(given) if given else tmp_path_factory.mktemp("real-engines")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session", params=ENGINES)
def served(request: pytest.FixtureRequest, out_dir: Path) -> Iterator[Running]:
    """One real engine, serving the model (one engine at a time: the tests are grouped)."""
    with running(engine(request.param), out_dir) as served:
        yield served


@pytest.fixture(scope="session")
def probed(served: Running, out_dir: Path) -> Probed:
    """``ft-gateway probe`` run against ``served``, once per engine (on the routes
    ``FT_REAL_ENGINES_PROBE_ROUTE`` names, ``all`` by default)."""
    return probe(served, out_dir, os.environ.get("FT_REAL_ENGINES_PROBE_ROUTE", "all"))


@pytest.fixture(scope="session")
def gateway(served: Running, probed: Probed) -> Iterator[ServerThread]:
    """The gateway with the probe's policy in front of ``served`` (Responses: translate)."""
    if probed.returncode != 0:
        pytest.fail(f"the probe of {probed.engine} failed:\n{probed.output}")
    with serve_gateway(served.url, probed.policy) as server:
        yield server


@pytest.fixture
def client(gateway: ServerThread) -> Iterator[openai.OpenAI]:
    with sync_sdk(gateway.url, timeout=300) as sdk:
        yield sdk
