"""Which Python runs the gateway, and whether its build is one of the slow ones.

The same gateway took 16-21% less CPU per request under a PGO+LTO build linked
statically (Debian's ``python3``) than under a CPython built without profile-guided
optimisation whose interpreter loads libpython as a shared library (pyenv's and a
plain ``./configure``'s default): docs/operating.md#the-python-interpreter.
The start-up line names the build; ``ft-gateway serve`` warns of a slow one.
"""

from __future__ import annotations

import platform
import sys
import sysconfig
from pathlib import Path

OPTIMISED = "--enable-optimizations"


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
