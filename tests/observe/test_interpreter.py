"""The interpreter's build as the start-up line names it, the warning of a slow one, and
the choice of a new venv's interpreter (scripts/install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.observe import interpreter
from gateway.observe.interpreter import (
    choose,
    describe,
    libpython_shared,
    probe,
    slow_build_warning,
    this_interpreter,
)

PYENV = "'--prefix=/root/.pyenv/versions/3.11.7' '--enable-shared' '--libdir=/x/lib'"
OFFICIAL_IMAGE = "'--enable-loadable-sqlite-extensions' '--enable-optimizations' '--with-lto'"
OFFICIAL_IMAGE += " '--enable-shared'"
DEBIAN = "'--enable-shared' '--prefix=/usr' '--with-computed-gotos'"


@pytest.mark.parametrize(
    ("implementation", "config_args", "shared", "words", "slow"),
    [
        # pyenv's default: no PGO, the interpreter calling into libpython.so.
        (
            "CPython",
            PYENV,
            True,
            "CPython 3.11.7, libpython shared, built without --enable-optimizations",
            True,
        ),
        # The official images: PGO and LTO, libpython shared.
        ("CPython", OFFICIAL_IMAGE, True, "CPython 3.11.7, libpython shared", False),
        # Debian's python3: PGO by its own rules (not in CONFIG_ARGS), linked statically.
        ("CPython", DEBIAN, False, "CPython 3.11.7, libpython static", False),
        ("CPython", None, False, "CPython 3.11.7, libpython static", False),
        ("PyPy", None, True, "PyPy 3.11.7", False),
    ],
)
def test_a_build_is_named_and_a_slow_one_found(
    implementation: str, config_args: str | None, shared: bool, words: str, slow: bool
) -> None:
    assert describe(implementation, "3.11.7", config_args, shared=shared) == (words, slow)


def test_libpython_is_found_among_the_mapped_files(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f1c00000000-7f1c00100000 r-xp 00000000 08:01 1 /opt/py/lib/libpython3.11.so.1.0\n"
    )
    assert libpython_shared(maps)
    maps.write_text("55d000000000-55d000100000 r-xp 00000000 08:01 2 /usr/bin/python3.11\n")
    assert not libpython_shared(maps)
    assert not libpython_shared(tmp_path / "absent")


def test_only_a_slow_build_is_warned_of() -> None:
    assert slow_build_warning(("CPython 3.11.2, libpython static", False)) is None
    words = "CPython 3.11.7, libpython shared, built without --enable-optimizations"
    warning = slow_build_warning((words, True))
    assert warning is not None
    assert words in warning and "docs/operating.md#the-python-interpreter" in warning


def test_this_interpreter_is_named() -> None:
    words, slow = this_interpreter()
    assert words.startswith("CPython 3.")
    assert slow == ("without" in words)


SLOW = ("CPython 3.11.7, libpython shared, built without --enable-optimizations", True)
FAST = ("CPython 3.11.2, libpython static", False)


@pytest.mark.parametrize(
    ("builds", "chosen", "said"),
    [
        # python3 is optimised: it is kept, whatever else is there.
        ({"python3": FAST, "/usr/bin/python3": FAST}, "python3", False),
        # python3 is slow, a later candidate is not: that one, and the choice is said.
        ({"python3": SLOW, "python3.12": SLOW, "/usr/bin/python3": FAST}, "/usr/bin/python3", True),
        # the first optimised one wins.
        ({"python3": SLOW, "python3.12": FAST, "/usr/bin/python3": FAST}, "python3.12", True),
        # python3 is slow and nothing else is better (or there): python3, nothing said
        # (serve warns of it).
        ({"python3": SLOW, "python3.12": SLOW}, "python3", False),
        ({"python3": SLOW}, "python3", False),
        # python3 cannot make a venv (too old, not there): python3 all the same, and the
        # install says it needs Python >= 3.11.
        ({"python3": None, "/usr/bin/python3": FAST}, "python3", False),
    ],
)
def test_a_new_venv_is_made_with_an_optimised_python_where_python3_is_slow(
    builds: dict[str, tuple[str, bool] | None], chosen: str, said: bool
) -> None:
    candidates = ("python3", "python3.12", "/usr/bin/python3")
    got, words = choose(candidates, lambda name: builds.get(name))
    assert got == chosen
    assert (words is not None) == said
    if words is not None:
        assert SLOW[0] in words and FAST[0] in words and chosen in words
        assert "docs/operating.md#the-python-interpreter" in words


def test_another_interpreter_is_probed_by_running_it(tmp_path: Path) -> None:
    assert probe(sys.executable) == this_interpreter()
    assert probe(str(tmp_path / "absent")) is None
    old = tmp_path / "python3.9"  # a Python < 3.11 exits 1 at the probe's first line
    old.write_text("#!/bin/sh\nexit 1\n")
    old.chmod(0o755)
    assert probe(str(old)) is None
    talker = tmp_path / "not-python"  # exits 0 but prints something else
    talker.write_text("#!/bin/sh\necho hello\n")
    talker.chmod(0o755)
    assert probe(str(talker)) is None


def test_the_choice_is_printed_and_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    builds = {"python3": SLOW, "/usr/bin/python3": FAST}
    monkeypatch.setattr(interpreter, "CANDIDATES", ("python3", "/usr/bin/python3"))
    monkeypatch.setattr(interpreter, "probe", builds.get)
    interpreter.main()
    out, err = capsys.readouterr()
    assert out == "/usr/bin/python3\n"
    assert err.startswith("scripts/install: python3 is CPython 3.11.7")
    monkeypatch.setattr(interpreter, "probe", {"python3": FAST}.get)
    interpreter.main()
    assert capsys.readouterr() == ("python3\n", "")


def test_scripts_install_asks_the_module_as_a_bare_python_would() -> None:
    # scripts/install runs it before anything is installed: no dependency may be needed
    # (-S: no site-packages).
    root = Path(interpreter.__file__).resolve().parent.parent.parent
    done = subprocess.run(
        [sys.executable, "-S", "-m", "gateway.observe.interpreter"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() in interpreter.CANDIDATES
