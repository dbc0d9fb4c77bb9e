"""The real engines the ``realengine`` tests run, as processes of their own on loopback.

scripts/real-engines installs them and says where in environment variables:
``FT_REAL_ENGINES_MODEL`` (the GGUF file), ``FT_REAL_ENGINES_LLAMA_SERVER`` (llama.cpp's
``llama-server``), ``FT_REAL_ENGINES_LLAMA_CPP_PYTHON`` (the Python of the venv that has
``llama-cpp-python[server]``), with each one's version in ``..._VERSION``. The tests
start and stop the engines themselves: a test kills one mid-stream, another restarts one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.servers import free_port

MODEL_NAME = "gemma-3-270m"
START_TIMEOUT = 180.0  # seconds: loading the model on a loaded 2-core machine
LLAMA_SERVER = "llama-server"
LLAMA_CPP_PYTHON = "llama-cpp-python"
# FT_REAL_ENGINES (scripts/real-engines passes it on) names the engines to run, else both.
ENGINES = tuple(
    name
    for name in (LLAMA_SERVER, LLAMA_CPP_PYTHON)
    if name in os.environ.get("FT_REAL_ENGINES", f"{LLAMA_SERVER},{LLAMA_CPP_PYTHON}").split(",")
)
# The line each engine prints once it serves, the model loaded.
# What each says once it serves: llama-server build 11434 logs "llama_server: listening on
# http://..." (older builds "server is listening on"); uvicorn its own line.
READY = {LLAMA_SERVER: b"listening on http", LLAMA_CPP_PYTHON: b"Uvicorn running on"}


def environ(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the real-engine suite with scripts/real-engines")
    return value


@dataclass(frozen=True)
class Engine:
    """How to start one engine (``argv`` for a port) and what it is."""

    name: str
    version: str
    executable: str
    model: Path

    def argv(self, port: int, *, embedding: bool = False) -> list[str]:
        """The command serving on ``port``: chat, or with ``embedding`` /v1/embeddings (an
        embedding deployment of its own, as operators run one)."""
        if self.name == LLAMA_SERVER and embedding:
            # Gemma's GGUF names no pooling: mean over the tokens gives one vector a text.
            return [
                self.executable,
                *("-m", str(self.model), "--alias", MODEL_NAME, "--embedding"),
                *("--pooling", "mean", "--host", "127.0.0.1", "--port", str(port)),
                *("-c", "2048", "-np", "2", "-t", "2"),
            ]
        if self.name == LLAMA_SERVER:
            # One slot per request of a fan-out (n up to 4 in the tests), 1024 tokens each.
            return [
                self.executable,
                *("-m", str(self.model), "--alias", MODEL_NAME),
                *("--host", "127.0.0.1", "--port", str(port)),
                *("-c", "4096", "-np", "4", "-t", "2"),
            ]
        return [
            self.executable,
            *("-m", "llama_cpp.server", "--model", str(self.model)),
            *("--model_alias", MODEL_NAME, "--chat_format", "gemma"),
            # Its server has no pooling setting: with this model it answers a vector a token.
            *(("--embedding", "True") if embedding else ()),
            *("--n_ctx", "2048", "--n_threads", "2"),
            # By default a new request interrupts the stream in progress: of a fan-out's
            # n streams, all but the last end after their first chunk, with no
            # finish_reason. Operators fanning out to it need this off too.
            *("--interrupt_requests", "False"),
            *("--host", "127.0.0.1", "--port", str(port)),
        ]


def engine(name: str) -> Engine:
    """Engine ``name`` as scripts/real-engines installed it."""
    model = Path(environ("FT_REAL_ENGINES_MODEL"))
    key = "FT_REAL_ENGINES_" + name.upper().replace("-", "_")
    return Engine(name, environ(key + "_VERSION"), environ(key), model)


class Running:
    """An engine process serving on ``url``; ``kill`` and ``start`` it again on that port."""

    def __init__(self, engine: Engine, log_dir: Path, *, embedding: bool = False) -> None:
        self.engine = engine
        self.embedding = embedding
        # llama.cpp's server (cpp-httplib) binds with SO_REUSEPORT, not SO_REUSEADDR: a
        # held port would refuse it.
        self.port = free_port(hold=False)
        self.url = f"http://127.0.0.1:{self.port}"
        kind = "-embedding" if embedding else ""
        self.log = log_dir / f"{engine.name}{kind}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._copier: threading.Thread | None = None

    def start(self) -> None:
        """Start the engine; returns once it says it serves (the model is loaded then)."""
        self.process = subprocess.Popen(
            self.engine.argv(self.port, embedding=self.embedding),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        ready = threading.Event()
        self._copier = threading.Thread(target=self._copy_log, args=(self.process, ready))
        self._copier.start()
        if not ready.wait(START_TIMEOUT) or self.process.poll() is not None:
            self.kill()
            raise RuntimeError(f"{self.engine.name} did not start: see {self.log}")
        with httpx.Client(timeout=30) as client:
            client.get(f"{self.url}/v1/models").raise_for_status()

    def _copy_log(self, process: subprocess.Popen[bytes], ready: threading.Event) -> None:
        """The engine's output into its log file, setting ``ready`` at the line that says
        it serves, or when the output ends (it exited: start() sees that)."""
        pattern = READY[self.engine.name]
        assert process.stdout is not None
        with process.stdout, self.log.open("ab") as log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if pattern in line:
                    ready.set()
        ready.set()

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would; returns once it is gone."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if self._copier is not None:
            self._copier.join()  # the output ended with the process: its pipe is closed


@contextlib.contextmanager
def running(engine: Engine, log_dir: Path, *, embedding: bool = False) -> Iterator[Running]:
    """``engine`` started on a free loopback port (serving embeddings with ``embedding``),
    killed on the way out."""
    served = Running(engine, log_dir, embedding=embedding)
    try:
        served.start()
        yield served
    finally:
        served.kill()
