"""``ft-gateway serve`` of a checkout under callgrind: its machine instructions per
request with the HTTP server's protocol and ASGI layer included (what the in-process
loop of bench/instructions.py leaves out), for ``python -m bench.instructions --served``.

The server runs as shipped (one worker, the checkout's ``config.yaml``, its access log
to a file) with callgrind's instrumentation off until it has answered a warm-up;
``callgrind_control`` then turns it on, ``--number`` requests go one after another over
one keep-alive connection (a raw socket and httptools' parser: the client costs the
server nothing), and a dump is taken: the instructions of those requests alone, and of
whatever else the server did meanwhile (a timer, a flush), as a real server would.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httptools
import orjson

from bench.callcounter import KINDS, Kind
from bench.callgrind import Measured
from bench.contenders import wait_ready
from bench.ports import HOST, free_port

# The checkout's own gateway first on sys.path, as the gateway-baseline contender runs it.
_PROGRAM = "import sys; sys.path.insert(0, sys.argv.pop(1)); from gateway.cli import main; "
_PROGRAM += "sys.exit(main(sys.argv[1:]))"


class _Answer:
    """httptools' callbacks: the answer is complete."""

    def __init__(self) -> None:
        self.complete = False

    def on_message_complete(self) -> None:
        self.complete = True


def _request(kind: Kind) -> bytes:
    body = orjson.dumps(kind.body)
    head = [f"POST {kind.path} HTTP/1.1", "host: gateway", "content-type: application/json"]
    head += [f"{n.decode()}: {v.decode()}" for n, v in kind.headers]
    head.append(f"content-length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def send(port: int, kind: Kind, number: int) -> int:
    """``number`` requests of ``kind`` over one connection; the last answer's status."""
    request, status = _request(kind), 0
    with socket.create_connection((HOST, port)) as sock:
        for _ in range(number):
            answer = _Answer()
            parser = httptools.HttpResponseParser(answer)
            sock.sendall(request)
            while not answer.complete:
                data = sock.recv(1 << 16)
                if not data:
                    raise SystemExit("the gateway closed the connection")
                parser.feed_data(data)
            status = parser.get_status_code()
            if status not in (200, 404):
                raise SystemExit(f"the gateway answered {status} to {kind.name}")
    return status


def _control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], capture_output=True, check=True, timeout=120)


def measure_served(
    tree: Path, kind_name: str, number: int, url: str, *, profile: bool = False
) -> Measured | None:
    """Instructions per request of ``kind_name`` through ``ft-gateway serve`` of the
    checkout at ``tree``, and with ``profile`` each function's (None: it has no such
    route)."""
    kind = next(k for k in KINDS if k.name == kind_name)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = free_port(hold=True)
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        argv += [f"--callgrind-out-file={work}/callgrind.out.%p", sys.executable, "-c"]
        argv += [_PROGRAM, str(tree), "serve", "--config", str(tree / "config.yaml")]
        argv += ["--upstream", url, "--host", HOST, "--port", str(port), "--workers", "1"]
        argv += ["--store-path", str(work / "responses.sqlite3")]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FT_GATEWAY_")}
        env["PYTHONHASHSEED"] = "0"
        with (work / "server.log").open("wb") as log:
            server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_ready(f"http://{HOST}:{port}", process=server, timeout=300)
            if send(port, kind, 50) == 404:
                return None
            _control("-i", "on", str(server.pid))
            send(port, kind, number)
            _control("-d", str(server.pid))
            _control("-i", "off", str(server.pid))
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        dump = work / f"callgrind.out.{server.pid}.1"
        if not dump.exists():
            raise SystemExit(f"callgrind wrote no dump for {tree} ({kind_name})")
        return Measured.of(dump, number, profile=profile)
