"""Which config keys a reload may change: ``policy``, ``auth`` and ``rate_limits`` but
for its store; every other key takes a restart, whatever serve filled in since."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.app.reloadable import restart_only_changes
from tests.support.gateways import gateway_settings


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({("policy",): "other.yaml"}, []),
        ({("auth", "keys_file"): "keys.yaml"}, []),
        ({("rate_limits", "keys"): {"erin": {"requests_per_minute": 1}}}, []),
        ({("rate_limits", "default_max_tokens"): 10}, []),
        ({("rate_limits", "store"): "redis"}, [("rate_limits", "store")]),
        ({("rate_limits", "redis", "timeout"): 1}, [("rate_limits", "redis", "timeout")]),
        ({("listen", "port"): 9000}, [("listen", "port")]),
        ({("upstream", "url"): "http://127.0.0.1:9"}, [("upstream", "url")]),
        ({("server", "pidfile"): "/run/gw.pid"}, [("server", "pidfile")]),
        (
            {("watch_policy",): True, ("log", "format"): "text"},
            [("log", "format"), ("watch_policy",)],
        ),
    ],
)
def test_restart_only_changes(flags: dict[tuple[str, ...], Any], expected: list[Any]) -> None:
    live = gateway_settings()
    assert restart_only_changes(live, gateway_settings(overrides=flags)) == expected


def test_what_serve_fills_in_is_not_a_change() -> None:
    live = gateway_settings(overrides={("listen", "port"): 0})
    # serve --workers N: port 0 became a real port; serve chose the pidfile.
    live = live.model_copy(update={"listen": live.listen.model_copy(update={"port": 41234})})
    live.server.pidfile = Path("/run/ft-gateway/gw.pid")
    assert restart_only_changes(live, gateway_settings(overrides={("listen", "port"): 0})) == []
