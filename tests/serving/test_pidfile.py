"""The pidfile: held with a lock while serving, so a live gateway is told from a file
left behind; one that cannot be written does not stop the gateway."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.serving.pidfile import (
    PidfileBusy,
    PidfileError,
    holding_pidfile,
    live_pid,
    serving_pidfile,
)
from tests.support.gateways import gateway_settings


def test_held_while_serving_then_removed(tmp_path: Path) -> None:
    path = tmp_path / "gw.pid"
    with holding_pidfile(path):
        assert live_pid(path) == os.getpid()
        assert (tmp_path / "gw.pid.d").is_dir()
        with pytest.raises(PidfileBusy, match=f"another gateway \\(pid {os.getpid()}\\)"):
            with holding_pidfile(path):
                pass
        assert path.exists()  # the refused second one removed nothing
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PidfileError, match="does not exist"):
        live_pid(path)
    path.write_text(f"{os.getpid()}\n")  # left by a gateway that was killed
    with pytest.raises(PidfileError, match="was left by one that has stopped"):
        live_pid(path)


def test_an_unwritable_pidfile_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing" / "gw.pid"
    settings = gateway_settings(overrides={("server", "pidfile"): str(path)})
    with serving_pidfile(settings) as held:
        assert held is None
    err = capsys.readouterr().err
    assert f"warning: cannot write the pidfile {path}: No such file or directory" in err
    assert "'ft-gateway reload' cannot find this gateway" in err


def test_the_default_is_per_port_and_none_for_port_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with serving_pidfile(gateway_settings(overrides={("listen", "port"): 18091})) as held:
        assert held == tmp_path / "ft-gateway" / "ft-gateway-18091.pid"
        assert live_pid(held) == os.getpid()
    with serving_pidfile(gateway_settings(overrides={("listen", "port"): 0})) as held:
        assert held is None
