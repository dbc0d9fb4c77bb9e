"""Which Python runs the gateway, and whether its build is one of the slow ones.

The same gateway took 16-21% less CPU per request under a PGO+LTO build linked
statically (Debian's ``python3``) than under a CPython built without profile-guided
optimisation whose interpreter loads libpython as a shared library (pyenv's and a
plain ``./configure``'s default): docs/operating.md#the-python-interpreter.
The start-up line names the build; ``ft-gateway serve`` warns of a slow one, and
``scripts/install`` makes a new ``.venv`` with another Python of this machine where
``python3`` is a slow build and that one is not (``python -m
gateway.observe.interpreter``: ``choose``).
"""

from __future__ import annotations

import platform
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from pathlib import Path

OPTIMISED = "--enable-optimizations"
# What scripts/install may make a venv with, in order: python3 (the default), then the
# others a machine may have beside it (Debian's is /usr/bin/python3).
CANDIDATES = (
    "python3",
    "python3.13",
    "python3.12",
    "python3.11",
    "/usr/local/bin/python3",
    "/usr/bin/python3",
)
_ROOT = Path(__file__).resolve().parent.parent.parent
# Run by each candidate: exits 1 unless it is a Python >= 3.11 that can make a venv,
# else prints ``this_interpreter`` as "<slow 0|1> <words>" (no dependency is needed).
_PROBE = (
    "import sys; sys.exit(1) if sys.version_info < (3, 11) else None; "
    "import ensurepip, venv; sys.path.insert(0, sys.argv[1]); "
    "from gateway.observe.interpreter import this_interpreter; "
    "words, slow = this_interpreter(); print(int(slow), words)"
)


def libpython_shared(maps: Path = Path("/proc/self/maps")) -> bool:
    """Whether this process has libpython mapped as a shared library (Linux; False
    where the maps cannot be read)."""
    try:
        text = maps.read_text()
    except OSError:
        return False
    return "/libpython" in text


def describe(
    implementation: str, version: str, config_args: str | None, *, shared: bool
) -> tuple[str, bool]:
    """The build in words, and whether it is a slow one: CPython configured without
    ``--enable-optimizations`` whose libpython is a shared library."""
    if implementation != "CPython":
        return f"{implementation} {version}", False
    optimised = OPTIMISED in (config_args or "")
    slow = shared and not optimised
    parts = [f"CPython {version}", "libpython shared" if shared else "libpython static"]
    if slow:
        parts.append(f"built without {OPTIMISED}")
    return ", ".join(parts), slow


def this_interpreter() -> tuple[str, bool]:
    """``describe`` of the running interpreter."""
    return describe(
        platform.python_implementation(),
        platform.python_version(),
        sysconfig.get_config_var("CONFIG_ARGS"),
        shared=libpython_shared() if sys.platform == "linux" else False,
    )


def slow_build_warning(build: tuple[str, bool]) -> str | None:
    """What ``ft-gateway serve`` logs as it starts under a slow build (None: not slow)."""
    words, slow = build
    if not slow:
        return None
    return (
        f"This Python ({words}) is built without profile-guided optimisation and loads "
        "libpython as a shared library: under an optimised build (Debian's python3) the "
        "gateway took 16-21% less CPU per request (docs/operating.md#the-python-interpreter)."
    )


def probe(executable: str) -> tuple[str, bool] | None:
    """``this_interpreter`` of ``executable``, or None where it is not a Python >= 3.11
    that can make a venv (or is not there)."""
    try:
        done = subprocess.run(
            [executable, "-c", _PROBE, str(_ROOT)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    slow, _, words = done.stdout.strip().partition(" ")
    if done.returncode != 0 or slow not in ("0", "1") or not words:
        return None
    return words, slow == "1"


def choose(
    candidates: Sequence[str], build_of: Callable[[str], tuple[str, bool] | None]
) -> tuple[str, str | None]:
    """The interpreter of a new venv, and what to say of the choice (None: nothing):
    the first candidate unless its build is slow and a later one's is not."""
    first = candidates[0]
    build = build_of(first)
    if build is None or not build[1]:
        return first, None
    for other in candidates[1:]:
        found = build_of(other)
        if found is not None and not found[1]:
            return other, (
                f"{first} is {build[0]}: the gateway takes some 19-27% more CPU per "
                f"request under that build (docs/operating.md#the-python-interpreter); "
                f".venv is made with {other} ({found[0]}). PYTHON={first} scripts/install, "
                "in a checkout without .venv, makes it with the other."
            )
    return first, None


def main() -> None:
    """scripts/install's choice: the interpreter on stdout, what it says on stderr."""
    chosen, said = choose(CANDIDATES, probe)
    if said is not None:
        print(f"scripts/install: {said}", file=sys.stderr)
    print(chosen)


if __name__ == "__main__":
    main()
