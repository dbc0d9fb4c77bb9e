"""The pidfile against another local user (issue 33, item 5).

It was ``ft-gateway-PORT.pid`` in the shared temporary directory, opened following
links: another user could make ``serve`` overwrite a file of its user's (a link in
its place), keep it from starting, or make ``ft-gateway reload`` signal a pid of
their choosing. Now it is in a directory of the user's own, opened without following
a link, the user's own file, and ``reload`` signals only the process that holds it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import stat
import subprocess
from pathlib import Path

import pytest

from gateway.commands import reload
from gateway.serving import pidfile
from gateway.serving.pidfile import PidfileError, live_pid, serving_pidfile
from tests.support.gateways import gateway_settings

PORT = 18093


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_default_is_a_private_directory_of_the_users_never_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    with serving_pidfile(gateway_settings(overrides={("listen", "port"): PORT})) as held:
        assert held == tmp_path / "state" / "ft-gateway" / f"ft-gateway-{PORT}.pid"
        assert _mode(held.parent) == 0o700 and _mode(held) == 0o600
        assert live_pid(held) == os.getpid()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    with serving_pidfile(gateway_settings(overrides={("listen", "port"): PORT})) as held:
        assert held == tmp_path / "run" / "ft-gateway" / f"ft-gateway-{PORT}.pid"
        assert _mode(held.parent) == 0o700
    assert not (tmp_path / "tmp").exists()


def test_a_link_in_place_of_the_pidfile_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    path = tmp_path / "gw.pid"
    path.symlink_to(victim)
    settings = gateway_settings(overrides={("server", "pidfile"): str(path)})
    with serving_pidfile(settings) as held:
        assert held is None  # the gateway serves; reload cannot find it
    assert victim.read_text() == "precious\n"
    assert "is a symbolic link (not followed)" in capsys.readouterr().err


def test_a_hard_link_in_place_of_the_pidfile_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    path = tmp_path / "gw.pid"
    os.link(victim, path)
    with serving_pidfile(gateway_settings(overrides={("server", "pidfile"): str(path)})):
        pass
    assert victim.read_text() == "precious\n"
    assert "has other hard links" in capsys.readouterr().err


def test_a_link_in_place_of_the_default_directory_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ft-gateway").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    with serving_pidfile(gateway_settings(overrides={("listen", "port"): PORT})) as held:
        assert held is None
    assert list(elsewhere.iterdir()) == []
    assert "is not a directory (a link is not followed)" in capsys.readouterr().err


def test_reload_signals_only_the_process_that_holds_the_pidfile(tmp_path: Path) -> None:
    path = tmp_path / "gw.pid"
    # Another process of the user's (sleep ends on SIGHUP): the pid a forged file names.
    victim = subprocess.Popen(["sleep", "60"])
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held by this process, naming the other
        os.write(fd, f"{victim.pid}\n".encode())
        try:
            args = argparse.Namespace(config=None, port=None, pidfile=str(path), timeout=1.0)
            assert reload.run(args) == 2
            with pytest.raises(PidfileError, match=f"names pid {victim.pid}, which does not"):
                live_pid(path)
            assert pidfile.lock_holders(os.fstat(fd)) == {os.getpid()}
        finally:
            os.close(fd)
        assert victim.poll() is None  # never signalled
    finally:
        victim.kill()
        victim.wait()


def test_another_users_pidfile_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gw.pid"
    path.write_text(f"{os.getpid()}\n")
    # As if it were another user's: this process is not its owner.
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(PidfileError, match="belongs to another user"):
        live_pid(path)
