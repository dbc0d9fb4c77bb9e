"""The interpreter's build as the start-up line names it, and the warning of a slow one."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.observe.interpreter import (
    describe,
    libpython_shared,
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
