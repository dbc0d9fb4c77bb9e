"""Several worker processes on one port: ``ft-gateway serve --workers N``.

The parent process serves nothing itself. It starts N workers (the ``spawn``
method: each a fresh interpreter that builds its own app, upstream client and
policy), forwards SIGHUP to every worker so each reloads its policy, restarts a
worker that dies, and stops them all on SIGINT/SIGTERM (a second one kills).

The parent binds the port once, without SO_REUSEPORT, and every worker
accepts on that one socket (and likewise on the metrics port). SO_REUSEPORT
would spread connections more evenly, but it lets any other process of the
same user bind the same port and take a share of the connections: a second
gateway started by mistake, without API keys, would then answer half the
clients. A port in use is an error (exit 3, as uvicorn's own). Metrics stay
whole: the workers meet in a directory the parent creates (and removes at
exit), and ``/metrics`` on any worker adds up all of them (workermetrics.py).
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

from gateway.app.factory import create_app
from gateway.observe.logs import setup_logging
from gateway.observe.workermetrics import mark_worker_dead
from gateway.serving.server import run_server
from gateway.settings import Settings

logger = logging.getLogger("gateway.workers")
_BACKLOG = 2048
# uvicorn's exit status when it cannot listen (uvicorn.server.STARTUP_FAILURE).
STARTUP_FAILURE = 3


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota
    (a container limited to 2 CPUs on a 64-core host gets 2, not 64)."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        count = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def _cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    try:
        max_, period = (root / "cpu.max").read_text().split()[:2]  # cgroup v2
        return None if max_ == "max" else int(max_) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())  # cgroup v1
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def shared_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) and listening, for every worker to accept on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _stop_with_parent() -> None:
    """Drain and stop (SIGTERM to ourselves) if the parent dies without stopping us
    (SIGKILL, a crash): an orphan would keep serving with nobody to stop it."""
    parent = multiprocessing.parent_process()
    if parent is None:  # pragma: no cover - only called in a worker
        return

    def watch() -> None:
        wait([parent.sentinel])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _name_process(name: str) -> None:
    """Show the worker as ``name`` in ps/top/pgrep (its command line is Python's spawn
    one). Linux only; 15 bytes at most."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(name[:15])


def _run_worker(
    settings: Settings,
    log_level: str,
    ready: Connection,
    shared: socket.socket,
    metrics_socket: socket.socket | None,
    worker_dir: Path,
    index: int = 0,
) -> None:
    """A worker's main function (in a fresh interpreter); ``index``: its number,
    which a worker started in its place gets too (rate-limit counts per worker)."""
    # Until the app's lifespan takes SIGHUP over for reloads, one must not kill us.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # Before anything can fail: multiprocessing would print a traceback to stderr.
    setup_logging(settings.log.format, log_level)
    _name_process(f"ft-gateway-w{index}")
    _stop_with_parent()

    def started() -> None:
        ready.send(os.getpid())
        ready.close()

    try:
        app = create_app(
            settings, worker_dir=worker_dir, worker_index=index, metrics_socket=metrics_socket
        )
        run_server(app, settings, log_level=log_level, sockets=[shared], on_started=started)
    except Exception:
        logger.exception("worker %d failed", os.getpid())
        sys.exit(1)


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    ready_pipe: Connection
    index: int = 0
    ready: bool = False
    hup_pending: bool = False
    exited: bool = False


@dataclass
class _Supervisor:
    settings: Settings
    log_level: str
    count: int
    shared: socket.socket
    metrics_socket: socket.socket | None
    worker_dir: Path
    context: Any = field(default_factory=lambda: multiprocessing.get_context("spawn"))
    workers: list[_Worker] = field(default_factory=list)
    signals: list[int] = field(default_factory=list)
    stopping: bool = False
    killed: bool = False
    announced: bool = False
    exit_code: int = 0

    def start_worker(self, index: int) -> _Worker:
        reader, writer = self.context.Pipe(duplex=False)
        process = self.context.Process(
            target=_run_worker,
            args=(
                self.settings,
                self.log_level,
                writer,
                self.shared,
                self.metrics_socket,
                self.worker_dir,
                index,
            ),
            name="ft-gateway-worker",
        )
        process.start()
        writer.close()
        worker = _Worker(process, reader, index)
        self.workers.append(worker)
        return worker

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def handle_signals(self) -> None:
        while self.signals:
            signum = self.signals.pop(0)
            if signum == signal.SIGHUP:
                logger.info("SIGHUP: every worker reloads its policy")
                for worker in self.live():
                    if worker.ready:
                        self.kill(worker, signal.SIGHUP)
                    else:
                        worker.hup_pending = True
            elif not self.stopping:
                logger.info("stopping %d workers", len(self.live()))
                self.stop()
            elif not self.killed:
                logger.warning("second stop signal: killing the workers")
                self.killed = True
                for worker in self.live():
                    self.kill(worker, signal.SIGKILL)

    def stop(self) -> None:
        self.stopping = True
        for worker in self.live():
            self.kill(worker, signal.SIGTERM)

    def kill(self, worker: _Worker, signum: int) -> None:
        pid = worker.process.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def live(self) -> list[_Worker]:
        return [w for w in self.workers if not w.exited]

    def on_ready(self, worker: _Worker) -> None:
        try:
            worker.ready_pipe.recv()
        except (EOFError, OSError):
            pass  # it died before it was ready: its sentinel says so
        else:
            worker.ready = True
            if self.announced:
                logger.info("worker %s started", worker.process.pid)
            if worker.hup_pending:
                worker.hup_pending = False
                self.kill(worker, signal.SIGHUP)
        worker.ready_pipe.close()
        if not self.announced and sum(w.ready for w in self.live()) == self.count:
            self.announced = True
            pids = ", ".join(str(w.process.pid) for w in self.live())
            listen = self.settings.listen
            logger.info(
                "ft-gateway serving on http://%s:%d with %d workers (pids %s)",
                listen.host,
                listen.port,
                self.count,
                pids,
            )

    def on_exit(self, worker: _Worker) -> None:
        worker.exited = True
        worker.process.join()
        self.workers.remove(worker)
        if worker.process.pid is not None:
            mark_worker_dead(self.worker_dir, worker.process.pid)
        if self.stopping:
            return
        if not worker.ready:
            logger.error(
                "a worker failed to start (exit code %s); stopping", worker.process.exitcode
            )
            self.exit_code = 1
            self.stop()
            return
        logger.warning(
            "worker %s exited with code %s; starting another",
            worker.process.pid,
            worker.process.exitcode,
        )
        self.start_worker(worker.index)

    def run(self, wakeup: int) -> int:
        for index in range(self.count):
            self.start_worker(index)
        while self.workers:
            self.handle_signals()
            waiting: dict[Any, tuple[str, _Worker]] = {}
            for worker in self.workers:
                waiting[worker.process.sentinel] = ("exit", worker)
                if not worker.ready and not worker.ready_pipe.closed:
                    waiting[worker.ready_pipe] = ("ready", worker)
            for item in wait([*waiting, wakeup]):
                if item == wakeup:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wakeup, 512)
                    continue
                kind, worker = waiting[item]
                if kind == "ready" and not worker.ready_pipe.closed:
                    self.on_ready(worker)
                elif kind == "exit" and not worker.exited:
                    if not worker.ready and not worker.ready_pipe.closed:
                        self.on_ready(worker)
                    self.on_exit(worker)
        return self.exit_code


@contextlib.contextmanager
def _signals(supervisor: _Supervisor) -> Iterator[int]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, supervisor.on_signal) for s in handled}
    old_wakeup = signal.set_wakeup_fd(write_fd)
    try:
        yield read_fd
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.close(read_fd)
        os.close(write_fd)


def serve_workers(
    settings: Settings,
    *,
    workers: int,
    log_level: str = "info",
) -> int:
    """Run ``workers`` worker processes until SIGINT/SIGTERM; the exit code."""
    setup_logging(settings.log.format, log_level)
    listen = settings.listen
    with contextlib.ExitStack() as stack:
        try:
            shared = stack.enter_context(shared_socket(listen.host, listen.port))
            port = shared.getsockname()[1]
            metrics_port = listen.metrics_port
            metrics_socket = None
            if metrics_port is not None:
                metrics_socket = stack.enter_context(shared_socket(listen.host, metrics_port))
                metrics_port = metrics_socket.getsockname()[1]
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            logger.error("cannot listen on %s: %s", listen.host, reason)
            return STARTUP_FAILURE
        listen = listen.model_copy(update={"port": port, "metrics_port": metrics_port})
        settings = settings.model_copy(update={"listen": listen})
        worker_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ftgw-")))
        supervisor = _Supervisor(settings, log_level, workers, shared, metrics_socket, worker_dir)
        with _signals(supervisor) as wakeup:
            return supervisor.run(wakeup)
    return 1  # pragma: no cover - the with block always returns
