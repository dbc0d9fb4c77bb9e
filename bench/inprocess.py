"""The gateway in this process, as an ASGI app called with hand-written ``receive``/``send``
(no client HTTP stack to measure), in front of the fast fake engine
(bench/fake_engine.py) in its own process over loopback: latency and CPU time are the
gateway's own, its upstream client's included.

Shared by the guards (bench/callcount.py, bench/instructions.py) and the cost runner
(bench/cost/gateway.py). It imports no part of the gateway, so that bench/callcount.py
can use it with another checkout's ``gateway`` first on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Coroutine, Iterator, MutableMapping
from typing import Any, TypeVar

CHAT = "/v1/chat/completions"

# The fake engine in its own process, on a free port that it prints once it listens.
_ENGINE = """
import asyncio
from bench.fake_engine import start_engine

async def serve():
    server = await start_engine("127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

try:
    import uvloop
except ImportError:
    asyncio.run(serve())
else:
    uvloop.run(serve())
"""

T = TypeVar("T")


@contextlib.contextmanager
def fake_engine() -> Iterator[str]:
    """bench/fake_engine.py in its own process (so its CPU time is not counted here);
    yields its URL once it listens."""
    with subprocess.Popen([sys.executable, "-c", _ENGINE], stdout=subprocess.PIPE) as process:
        try:
            assert process.stdout is not None
            port = process.stdout.readline().strip()
            if not port:
                raise SystemExit("the fake engine did not start")
            yield f"http://127.0.0.1:{int(port)}"
        finally:
            process.terminate()


class Call:
    """One client request as the ASGI server would hand it to the app."""

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]], path: str = CHAT) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"gateway"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        self._body = body
        self._sent_body = False
        self._done = asyncio.Event()
        self.status = 0
        self.size = 0

    async def receive(self) -> dict[str, Any]:
        """The body at once, then a disconnect once the answer is complete."""
        if not self._sent_body:
            self._sent_body = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self._done.wait()  # the client stays until the answer is complete
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        """Keep the status and count the body's bytes."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.size += len(message.get("body", b""))
            if not message.get("more_body", False):
                self._done.set()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``main`` on uvloop, as ``ft-gateway serve`` runs (asyncio's loop where it is absent)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency off Windows
        return asyncio.run(main)
    return uvloop.run(main)
