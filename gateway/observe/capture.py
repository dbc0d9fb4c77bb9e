"""Opt-in capture of request bodies, for ``ft-gateway diff --bodies``.

A sample of the bodies clients send (``capture.sample_ratio``), each under
``capture.max_bytes``, is appended to a JSON-lines file as
``{"ts", "route", "profile", "model", "body"}``, before the policy sees it (so
refused requests are kept too). Headers are never read, so no API key is ever
written; in the body, message text is replaced by as many ``x``
(``redact_text``, on by default: lengths still meet the policy's length
checks) and any string that looks like a secret, or sits under a key named like
one, becomes ``"[redacted]"`` whatever ``redact_text`` says. Off by default:
docs/policy.md#recorded-bodies says what the file still holds.
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
# Keys whose string values are what a person wrote or a model produced.
TEXT_KEYS = frozenset(
    {
        "content",
        "text",
        "prompt",
        "input",
        "instructions",
        "refusal",
        "arguments",
        "output",
        "description",
        "suffix",
    }
)
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


def redact(value: Any, *, text: bool, key: str | None = None) -> Any:
    """``value`` with secrets (and, with ``text``, message text) replaced; a copy."""
    if isinstance(value, dict):
        return {k: redact(v, text=text, key=k) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, text=text, key=key) for v in value]
    if isinstance(value, str):
        if key is not None and _SECRET_KEY.search(key):
            return SECRET
        if text and key in TEXT_KEYS:
            return "x" * len(value)
        if _looks_secret(value):
            return SECRET
    return value


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
