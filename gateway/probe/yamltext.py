"""YAML text for the policy a probe writes: a value on one line in flow style where it
fits, a block mapping where it does not, comments above entries (``Noted``), and
anchors for a rule written more than once (``Anchor``, ``Alias``). What it writes
reads back as the same JSON value, whatever the keys and strings hold."""

from __future__ import annotations

import json
import math
import re
import textwrap
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

WIDTH = 96
_BARE = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*\Z")  # \Z: "$" also matches before a final newline
# Words YAML 1.1 reads as booleans or null when unquoted.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_ANCHOR = re.compile(r"^[A-Za-z0-9_-]+\Z")
# YAML 1.1 ends a comment at these as at a newline: an engine's message that holds one
# must not turn the rest of its comment line into policy.
_BREAKS = str.maketrans({"\x85": " ", "\u2028": " ", "\u2029": " "})


@dataclass(frozen=True)
class Noted:
    """A mapping entry's value with the comment written above its key."""

    value: Any
    note: str


@dataclass(frozen=True)
class Anchor:
    """A value written once under ``&name``, for ``Alias(name)`` to repeat."""

    name: str
    value: Any

    def __post_init__(self) -> None:
        if not _ANCHOR.match(self.name):
            raise ValueError(f"not an anchor name: {self.name!r}")


@dataclass(frozen=True)
class Alias:
    """``*name``: the value of an earlier ``Anchor(name, ...)``."""

    name: str


def flow(value: Any) -> str:
    """``value`` as one line of YAML flow style that reads back as the same JSON value."""
    if isinstance(value, Anchor):
        return f"&{value.name} {flow(value.value)}"
    if isinstance(value, Alias):
        return f"*{value.name}"
    if isinstance(value, Noted):
        raise TypeError("a comment cannot be written in flow style")
    if isinstance(value, dict):
        return "{" + ", ".join(_flow_entry(k, v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, float):
        # YAML 1.1 reads "1e-05" as a string: write floats without an exponent.
        if not math.isfinite(value):
            raise ValueError(f"not a JSON number: {value}")
        text = repr(value)
        if "e" in text:
            text = format(Decimal(text), "f")
        return text if "." in text else text + ".0"
    if isinstance(value, str):
        return key(value)
    return json.dumps(value, ensure_ascii=False)


def _flow_entry(name: str, value: Any) -> str:
    text = key(name)
    # YAML allows an implicit key of at most 1024 characters; past that the
    # explicit "? " form reads back the same.
    if len(text) > 1000:
        return f"? {text} : {flow(value)}"
    return f"{text}: {flow(value)}"


def key(text: str) -> str:
    """A string as a YAML scalar: bare when YAML reads it back as the same string."""
    if _BARE.match(text) and text.lower() not in _RESERVED:
        return text
    return quoted(text)


def quoted(text: str) -> str:
    """A YAML double-quoted string with everything but printable ASCII escaped."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def comment(text: str, indent: str) -> list[str]:
    """``text`` as comment lines of at most WIDTH characters, continued lines indented."""
    safe = "".join(c if c.isprintable() else " " for c in text.translate(_BREAKS))
    return textwrap.wrap(
        safe, width=WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}#   "
    )


def entry_lines(name: str, value: Any, indent: str) -> list[str]:
    """The mapping entry ``name: value``: on one line when it fits and holds no comment,
    else a block mapping whose entries are written the same way."""
    lines: list[str] = []
    if isinstance(value, Noted):
        lines += comment(value.note, indent)
        value = value.value
    anchor = ""
    if isinstance(value, Anchor):
        anchor, value = f" &{value.name}", value.value
    head = key(name)
    if len(head) > 1000:
        # YAML allows an implicit key of at most 1024 characters; past that, the
        # explicit form: "? key", then the value after ": ".
        lines.append(f"{indent}? {head}")
        head = ""
    if not isinstance(value, dict) or not value or not _has_notes(value):
        line = f"{indent}{head}:{anchor} {flow(value)}"
        if not isinstance(value, dict) or not value or len(line) <= WIDTH + 4:
            return lines + [line]
    lines.append(f"{indent}{head}:{anchor}")
    for inner, item in value.items():
        lines += entry_lines(inner, item, indent + "  ")
    return lines


def _has_notes(value: Any) -> bool:
    if isinstance(value, Noted):
        return True
    if isinstance(value, Anchor):
        return _has_notes(value.value)
    if isinstance(value, dict):
        return any(_has_notes(v) for v in value.values())
    return False
