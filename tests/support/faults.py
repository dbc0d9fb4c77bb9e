"""Ways for things to fail, for the fault tests: a gateway's settings with small time-outs
and limits, so that every failure shows within seconds; engine URLs that refuse
connections or never accept them. (The engine that misbehaves is tests/support/engine.py.)"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from gateway.access.keys import hash_key
from gateway.settings import Settings
from tests.support.gateways import gateway_settings
from tests.support.servers import free_port

TIMEOUTS = {"connect": 1.0, "response": 1.5, "stream_idle": 0.5}
# Every failure must be answered within the time-outs; this is only how long a
# test waits before it calls the gateway stuck.
DEADLINE = sum(TIMEOUTS.values()) + 10
# Long engine time-outs, for tests where only the client's leaving (or a drain) may
# end a request.
HELD = {"FT_GATEWAY_TIMEOUTS__RESPONSE": "60", "FT_GATEWAY_TIMEOUTS__STREAM_IDLE": "60"}


def fault_settings(upstream: str, *, client: str = "httpx", **env: str) -> Settings:
    """The default policy in front of ``upstream`` over upstream client ``client``, with
    the small time-outs and limits above; ``env`` as more FT_GATEWAY_* variables."""
    environ = {
        "FT_GATEWAY_UPSTREAM__CLIENT": client,
        "FT_GATEWAY_LIMITS__MAX_RESPONSE_BYTES": str(256 * 1024),
        "FT_GATEWAY_LIMITS__MAX_STREAM_BYTES": str(1024 * 1024),
        "FT_GATEWAY_SERVER__HEADER_TIMEOUT": "1",
        "FT_GATEWAY_SERVER__BODY_TIMEOUT": "1",
        **{f"FT_GATEWAY_TIMEOUTS__{k.upper()}": str(v) for k, v in TIMEOUTS.items()},
        **env,
    }
    return gateway_settings(upstream, environ=environ)


def keyed_fault_settings(
    upstream: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    engine_key: str,
    client_key: str,
    **env: str,
) -> Settings:
    """``fault_settings`` with the engine's key ``engine_key`` and one client key,
    ``client_key`` (named alice), both from environment variables; ``env`` as more."""
    monkeypatch.setenv("FAULTS_ENGINE_KEY", engine_key)
    monkeypatch.setenv("FAULTS_CLIENT_KEYS", f"alice:{hash_key(client_key)}")
    return fault_settings(
        upstream,
        FT_GATEWAY_UPSTREAM__API_KEY_ENV="FAULTS_ENGINE_KEY",
        FT_GATEWAY_AUTH__KEYS_ENV="FAULTS_CLIENT_KEYS",
        **env,
    )


def refused_url() -> str:
    """A loopback URL nothing listens on (connects are refused at once)."""
    return f"http://127.0.0.1:{free_port()}"


@contextlib.contextmanager
def unanswered_url() -> Iterator[str]:
    """A loopback URL whose listener never accepts and whose accept queue is full, so a
    new connect gets no SYN-ACK and hangs until the client's connect time-out."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
