"""Reading a callgrind dump: each function's own instructions (exclusive cost), by the
object it lives in (the interpreter, an extension module, libc), so that
``python -m bench.instructions --profile`` can say where a request's instructions go.

The format (valgrind's docs, "Callgrind Format Specification"): ``ob=``/``fl=``/``fn=``
lines set the current object, file and function (``(id) name`` the first time, ``(id)``
after: objects, files and functions each have their own ids, shared with ``cob=``,
``cfi=``/``cfl=`` and ``cfn=``); a line of numbers is a position and its costs; the
one after a ``calls=`` line is the inclusive cost of that call, which belongs to the
callee, so it is not the caller's own.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_TOTAL = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)
_NAMESPACE = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl"}
_NAMESPACE |= {"cfl": "fl", "fn": "fn", "cfn": "fn"}
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")

# Objects by what they are, for the table: a pattern of the object's path, and a name.
LIBRARIES = (
    (re.compile(r"libpython"), "the interpreter (libpython)"),
    (re.compile(r"/orjson/"), "orjson"),
    (re.compile(r"/uvloop/"), "uvloop (libuv)"),
    (re.compile(r"/httptools/"), "httptools (llhttp)"),
    (re.compile(r"/pydantic_core/"), "pydantic-core"),
    (re.compile(r"/libc\.so|/libc-"), "libc (malloc, memcpy, syscalls' wrappers)"),
    (re.compile(r"/ld-linux"), "the dynamic linker"),
    (re.compile(r"/libm\.so"), "libm"),
    (re.compile(r"lib-dynload/"), "the standard library's C modules"),
)


def own_costs(lines: Iterable[str]) -> collections.Counter[tuple[str, str]]:
    """Each (object, function)'s own instructions in one dump."""
    names: dict[str, dict[str, str]] = {"ob": {}, "fl": {}, "fn": {}}
    current = {"ob": "?", "fn": "?"}
    costs: collections.Counter[tuple[str, str]] = collections.Counter()
    callee_cost = False
    for line in lines:
        if not line or line[0] == "#":
            continue
        first = line[0]
        if first.isdigit() or first in "+-*":
            if callee_cost:
                callee_cost = False
                continue
            parts = line.split()
            if len(parts) > 1:
                costs[(current["ob"], current["fn"])] += int(parts[1])
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "calls":
            callee_cost = True
            continue
        namespace = _NAMESPACE.get(key)
        if namespace is None:
            continue
        found = _NAMED.match(value)
        if found is not None:
            ident, name = found.groups()
            if name is not None:
                names[namespace][ident] = name
            value = names[namespace].get(ident, value)
        if key in ("ob", "fn"):
            current[key] = value
    return costs


def read_costs(path: Path) -> collections.Counter[tuple[str, str]]:
    """``own_costs`` of the dump at ``path``."""
    with path.open(errors="replace") as lines:
        return own_costs(lines)


def library(obj: str) -> str:
    """What an object is, by its path (an extension module: its file's name)."""
    for pattern, name in LIBRARIES:
        if pattern.search(obj):
            return name
    return Path(obj).name or obj


def by_library(costs: Mapping[tuple[str, str], float]) -> dict[str, float]:
    """The instructions of each library (``library``) in ``costs``, most first."""
    out: dict[str, float] = collections.defaultdict(float)
    for (obj, _), cost in costs.items():
        out[library(obj)] += cost
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def dump_total(path: Path) -> int:
    """The total instructions of the dump at ``path`` (its ``summary:`` line)."""
    found = _TOTAL.search(path.read_text(errors="replace"))
    if found is None:
        raise SystemExit(f"no total in {path}")
    return int(found.group(1))


@dataclass(frozen=True)
class Measured:
    """Instructions per request, and each (object, function)'s own per request when a
    profile was asked for."""

    per_request: int
    costs: dict[tuple[str, str], float] | None = None

    @classmethod
    def of(cls, dump: Path, number: int, *, profile: bool) -> Measured:
        """The figures of ``number`` requests' dump."""
        if not profile:
            return cls(dump_total(dump) // number)
        costs = read_costs(dump)
        return cls(sum(costs.values()) // number, {k: v / number for k, v in costs.items()})
