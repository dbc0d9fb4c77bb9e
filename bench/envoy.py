"""Envoy as a bench contender: plain (a reverse proxy of deploy/envoy/envoy.yaml without
its ext_proc filter) or with ``ft-gateway extproc`` as its processor, run as one
process tree so the harness measures both programs together (and each apart, by name).

``python -m bench.envoy --upstream URL --host H --port P --workdir D [--extproc]``
starts them, stays in the foreground and stops both on SIGTERM. The bootstrap's
templating and the binary (scripts/envoy) are shared with tests/extproc/.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from bench.ports import free_port
from bench.tools import installed

ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = ROOT / "deploy" / "envoy" / "envoy.yaml"


def envoy_binary() -> str:
    """The Envoy binary scripts/envoy installs (once per machine); fails loudly if not."""
    return installed("envoy")


def _address(cluster: dict[str, Any]) -> dict[str, Any]:
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    found: dict[str, Any] = endpoint["address"]["socket_address"]
    return found


def bootstrap(
    *,
    engine_port: int,
    extproc_port: int | None,
    port: int = 0,
    host: str = "127.0.0.1",
    engine_host: str = "127.0.0.1",
) -> dict[str, Any]:
    """deploy/envoy/envoy.yaml listening on ``host:port`` (0: any free port) with its
    admin on any free port, the engine at ``engine_host:engine_port`` and the processor
    at ``extproc_port`` (None: no ext_proc filter, plain Envoy)."""
    config: dict[str, Any] = yaml.safe_load(BOOTSTRAP.read_text())
    config["admin"]["address"]["socket_address"]["port_value"] = 0
    resources = config["static_resources"]
    listener = resources["listeners"][0]["address"]["socket_address"]
    listener.update(address=host, port_value=port)
    clusters = {c["name"]: c for c in resources["clusters"]}
    _address(clusters["engine"]).update(address=engine_host, port_value=engine_port)
    manager = resources["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    if extproc_port is None:
        manager["http_filters"] = [
            f for f in manager["http_filters"] if f["name"] != "envoy.filters.http.ext_proc"
        ]
        resources["clusters"] = [c for c in resources["clusters"] if c["name"] == "engine"]
    else:
        _address(clusters["ft-gateway-extproc"])["port_value"] = extproc_port
    return config


def envoy_command(config: Path, admin_address: Path) -> list[str]:
    """The Envoy command line for ``config``: one worker thread, no hot restart (several
    Envoys share a machine), its admin address written to ``admin_address``."""
    return [
        envoy_binary(),
        "-c",
        str(config),
        "--concurrency",
        "1",
        "--disable-hot-restart",
        "--log-level",
        "warning",
        "--admin-address-path",
        str(admin_address),
    ]


def _start_extproc(workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """ft-gateway extproc with the repository's config; its gRPC port once it listens."""
    config = ROOT / "config.yaml"
    command = [str(Path(sys.executable).parent / "ft-gateway"), "extproc", "--config", str(config)]
    # As the gateway contender runs serve: the repository's config (access log on).
    command += ["--port", "0", "--metrics-port", str(free_port())]
    log = workdir / "extproc.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"extproc exited:\n{log.read_text()}")
        for line in log.read_text().splitlines():
            if '"extproc_listening"' in line:
                return process, int(json.loads(line)["grpc_port"])
        time.sleep(0.05)
    raise RuntimeError("extproc did not listen within 60 s")


def main(argv: list[str] | None = None) -> int:
    """Run Envoy (and its processor) until SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m bench.envoy")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--extproc", action="store_true")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    engine_host, _, engine_port = args.upstream.removeprefix("http://").rpartition(":")
    children: list[subprocess.Popen[bytes]] = []
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    try:
        extproc_port = None
        if args.extproc:
            processor, extproc_port = _start_extproc(args.workdir)
            children.append(processor)
        config = bootstrap(
            engine_port=int(engine_port),
            extproc_port=extproc_port,
            port=args.port,
            host=args.host,
            engine_host=engine_host,
        )
        path = args.workdir / "envoy.yaml"
        path.write_text(yaml.safe_dump(config))
        children.append(subprocess.Popen(envoy_command(path, args.workdir / "admin-address")))
        while not stop[0] and all(c.poll() is None for c in children):
            time.sleep(0.2)
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
    return 0


if __name__ == "__main__":  # pragma: no cover - python -m bench.envoy
    sys.exit(main())
