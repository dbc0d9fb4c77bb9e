"""Opt-in capture of request bodies, for ``ft-gateway diff --bodies``.

A sample of the bodies clients send (``capture.sample_ratio``), each under
``capture.max_bytes``, is appended to a JSON-lines file as
``{"ts", "route", "profile", "model", "body"}``, before the policy sees it (so
refused requests are kept too). Headers are never read, so no API key is ever
written. In the body, redaction is an allow-list (``redact_text``, on by
default): a string is written in clear only where ``CLEAR`` lists its place (the
model, roles, part and item types, tool names, the enumerated settings, the
``type`` of a JSON Schema's nodes: what the policy decides by), every other
string, in a field known today or one an API adds tomorrow, as as many ``x``
(lengths still meet the policy's length checks). Numbers, booleans and field
names are kept. A string that looks like a secret, or sits under a key named
like one, becomes ``"[redacted]"`` whatever ``redact_text`` says. Off by
default: docs/policy.md#recorded-bodies says what the file still holds.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from pathlib import Path
from typing import Any

import orjson

from gateway.settings import Capture

logger = logging.getLogger("gateway.capture")
SECRET = "[redacted]"
# Where a string may be written in clear: key paths, "[]" for an array's members.
CLEAR = (
    "model",
    "messages[].role",
    "messages[].content[].type",
    "messages[].content[].image_url.detail",
    "messages[].tool_calls[].type",
    "messages[].tool_calls[].function.name",
    "input[].role",
    "input[].type",
    "input[].status",
    "input[].content[].type",
    "input[].content[].detail",
    "tools[].type",
    "tools[].name",
    "tools[].function.name",
    "functions[].name",
    "tool_choice",
    "tool_choice.type",
    "tool_choice.name",
    "tool_choice.function.name",
    "function_call",
    "function_call.name",
    "response_format.type",
    "text.format.type",
    "text.verbosity",
    "verbosity",
    "reasoning_effort",
    "reasoning.effort",
    "reasoning.summary",
    "service_tier",
    "truncation",
    "encoding_format",
    "include[]",
    "modalities[]",
)
# JSON Schemas in a request: the ``type`` (and ``format``) of each node is kept.
SCHEMAS = (
    "tools[].parameters",
    "tools[].function.parameters",
    "functions[].parameters",
    "response_format.json_schema.schema",
    "text.format.schema",
)
_SCHEMA_CLEAR = frozenset({"type", "format"})
_LEAF = ""


class _Schema:
    """The trie's node for anything inside a JSON Schema."""


_IN_SCHEMA = _Schema()
_Node = dict[str, Any] | _Schema | None


def _trie() -> dict[str, Any]:
    root: dict[str, Any] = {}
    for paths, end in ((CLEAR, True), (SCHEMAS, _IN_SCHEMA)):
        for path in paths:
            node = root
            for step in path.replace("[]", ".[]").split("."):
                node = node.setdefault(step, {})
            node[_LEAF] = end
    return root


_CLEAR_TRIE = _trie()
_SECRET_KEY = re.compile(r"(?i)(api[_-]?key|secret|token|passw|authori[sz]ation|credential)")
_SECRET_VALUE = re.compile(
    r"(?i)(\bsk-[a-z0-9_-]{12,}|\bbearer\s+\S{8,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
# A long unbroken run of letters and digits of mixed classes: a token of some kind.
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")


def _looks_secret(text: str) -> bool:
    if _SECRET_VALUE.search(text):
        return True
    for run in _TOKEN.findall(text):
        if any(c.isdigit() for c in run) and any(c.isalpha() for c in run):
            return True
    return False


def _child(node: _Node, step: str) -> _Node:
    if isinstance(node, _Schema) or node is None:
        return node
    child = node.get(step)
    if isinstance(child, dict) and isinstance(child.get(_LEAF), _Schema):
        return _IN_SCHEMA
    return child


def _clear(node: _Node, key: str | None) -> bool:
    if isinstance(node, _Schema):
        return key in _SCHEMA_CLEAR
    return node is not None and node.get(_LEAF) is True


def _redact(value: Any, text: bool, node: _Node, key: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _redact(v, text, _child(node, k), k) for k, v in value.items()}
    if isinstance(value, list):
        members = _child(node, "[]")
        return [_redact(v, text, members, key) for v in value]
    if isinstance(value, str):
        if key is not None and _SECRET_KEY.search(key):
            return SECRET
        if text and not _clear(node, key):
            return "x" * len(value)
        if _looks_secret(value):
            return SECRET
    return value


def redact(value: Any, *, text: bool) -> Any:
    """``value`` (a request body) with secrets and, with ``text``, every string not in
    ``CLEAR`` replaced; a copy."""
    return _redact(value, text, _CLEAR_TRIE, None)


class BodyCapture:
    """Writes a sample of request bodies, redacted, to one file (appended, mode 0600)."""

    def __init__(self, config: Capture, *, chance: Any = random.random) -> None:
        self.path = Path(config.path)
        self.ratio = config.sample_ratio
        self.max_bytes = config.max_bytes
        self.text = config.redact_text
        self.chance = chance
        self.written = 0
        self.failed = False

    def record(self, route: str, profile: str | None, body: dict[str, Any], size: int) -> None:
        """Maybe write ``body`` (``size``: its bytes as received); never raises."""
        if size > self.max_bytes or self.chance() >= self.ratio:
            return
        model = body.get("model")
        line = orjson.dumps(
            {
                "ts": round(time.time(), 3),
                "route": route,
                "profile": profile,
                "model": model if isinstance(model, str) else None,
                "body": redact(body, text=self.text),
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
        try:
            # One write of one whole line to a file opened for appending: workers
            # sharing the file do not interleave their lines.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            if not self.failed:
                logger.warning("cannot write captured bodies to %s: %s", self.path, exc.strerror)
            self.failed = True
            return
        self.written += 1
