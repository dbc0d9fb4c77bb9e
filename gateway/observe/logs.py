"""What the gateway writes to stdout: one line per request, and its own events.

``AccessLog`` is an Observer that writes one line per finished request, JSON
(one object per line, for log collectors) or text (for humans). It never
writes a request body, a header or a key: only the request's id, route, model,
the names of the fields the policy acted on, statuses, timings and sizes.
Names that come from the client are cut short and, in text, quoted when they
hold spaces, quotes or characters that are not printable; in both formats every
character that is not printable (controls, terminal escapes, NEL, the Unicode
line and paragraph separators, bidirectional overrides) is written as a JSON
``\\uXXXX`` escape, so a request can neither forge a line or a field nor drive
the terminal of whoever reads the log.

``setup_logging`` makes everything else the process writes one stream too:
the gateway's and uvicorn's records, every other library's (the OpenTelemetry
SDK's exporter retries and failures), Python warnings and uncaught exceptions,
each one line on stdout in the same format. Each worker process calls it too.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import re
import sys
import threading
import time
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, BinaryIO, Literal

import orjson

from gateway.observe.exchange import Exchange

LogFormat = Literal["json", "text"]
_LINE = orjson.OPT_APPEND_NEWLINE
MAX_NAME = 100
MAX_FIELDS = 32
# LogRecord attributes that are not "extra" data.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}


_second: list[Any] = [None, ""]  # the last whole second formatted, and its text
# Each millisecond's ending, made once: an index and a join per line, not a formatting
# (a third of a line's cost). 1000: what a fraction a hair below 1 might round up to.
_MILLIS = (*(f".{ms:03d}Z" for ms in range(1000)), ".999Z")


def _timestamp(epoch: float) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. 2026-05-04T10:12:01.532Z."""
    second = int(epoch)
    if _second[0] != second:
        _second[:] = [second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")]
    text: str = _second[1]
    return text + _MILLIS[int((epoch - second) * 1000)]


# orjson escapes the C0 controls itself, but writes DEL, C1 and U+2028 as they are:
# a line that is ASCII without DEL (two scans in C, no pattern) has none of them.
_NOT_ASCII = re.compile("[\x7f-\U0010ffff]")
_NOT_PRINTABLE_ASCII = re.compile("[^\x20-\x7e]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # (a JSON escape of a character past the BMP is a surrogate pair)
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def printable(text: str) -> str:
    """``text`` with each character that is not printable as a JSON ``\\uXXXX`` escape."""
    if text.isprintable():
        return text
    return _NOT_PRINTABLE_ASCII.sub(_escape, text)


def json_line(line: bytes) -> bytes:
    """orjson's output with the characters it leaves raw that are not printable (DEL,
    C1 controls, U+2028, ...) escaped; the same bytes when there are none (an ASCII
    line: the usual one, one scan in C)."""
    if line.isascii() and b"\x7f" not in line:
        return line
    return _NOT_ASCII.sub(_escape, line.decode()).encode()


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return printable(orjson.dumps(value, default=str).decode())
    text = str(value)
    if text and text.isprintable() and " " not in text and '"' not in text:
        return text
    return printable(orjson.dumps(text).decode())


def format_text(ts: str, head: str, data: dict[str, Any]) -> str:
    """One text line: timestamp, a head, then ``key=value`` pairs (absent values left out)."""
    pairs = " ".join(f"{k}={_text_value(v)}" for k, v in data.items() if v is not None)
    return f"{ts} {head} {pairs}".rstrip()


def request_record(exchange: Exchange, now: float, ts: str | None = None) -> dict[str, Any]:
    """The access-log line of a finished exchange (no body, no header, no key): its
    timestamp ``ts``, level and event first, then the request's fields (one dict made
    per request, which is the JSON line's object as it is)."""
    touched: dict[str, str] = {}
    policy = exchange.verdict
    if policy is not None:
        for outcome in exchange.outcomes:
            if len(touched) >= MAX_FIELDS:
                break
            touched[outcome.field[:MAX_NAME]] = outcome.action
    started = exchange.upstream_started
    first = exchange.first_byte
    usage = exchange.usage
    # Unpacked, not read by name: a tuple's named fields are not specialised reads.
    prompt, completion, total = (None, None, None) if usage is None else usage
    line = {
        "ts": ts,
        "level": "info",
        "event": "request",
        "request_id": exchange.request_id,
        "method": exchange.method,
        "path": exchange.path,
        "model": exchange.model[:MAX_NAME] if exchange.model is not None else None,
        "client": exchange.client,
        "status": exchange.status or None,
        "stream": exchange.stream,
        "policy": policy,
        "fields": touched,
        "error": exchange.error_code,
        "upstream_status": exchange.upstream_status,
        # Milliseconds, rounded to the microsecond: a float rounded to an integer of
        # microseconds, then divided (round(x, 3) is twice as dear: it rounds in decimal).
        "latency_ms": round((now - exchange.started) * 1e6) / 1000,
        "upstream_ms": round((now - started) * 1e6) / 1000 if started is not None else None,
        "ttfb_ms": (
            round((first - started) * 1e6) / 1000
            if started is not None and first is not None
            else None
        ),
        "bytes_out": exchange.bytes_out,
        "client_disconnected": exchange.client_disconnected,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
        "rate_limited": exchange.rate_limited,
        "reported": _reported(exchange) if exchange.report is not None else None,
    }
    if exchange.deployment is not None:  # a fleet's: a name from the config
        line["deployment"] = exchange.deployment
    if exchange.answers:  # what the answer checks found (never the answer's text)
        line["answer"] = _answer(exchange)
    return line


def _answer(exchange: Exchange) -> dict[str, Any]:
    """The answer checks' finding: the enforced violation (the client's error) or else
    the first reported one, and how many more there were."""
    found = exchange.answers
    first = next((v for v in found if v.enforced), found[0])
    return {
        "check": first.check,
        "code": first.code,
        "param": (first.param or "")[:MAX_NAME],
        "keyword": first.keyword,
        "enforced": first.enforced,
        "others": len(found) - 1,
    }


def _reported(exchange: Exchange) -> dict[str, Any] | None:
    """What report-only rules would have refused: the 400 the client would have got
    (status, code, param; not the message, which may quote the client's value) and
    each field with its error code."""
    report = exchange.report
    if report is None:
        return None
    error = report.error
    return {
        "status": error.status,
        "code": error.code,
        "param": error.param[:MAX_NAME] if error.param is not None else None,
        "fields": {o.field[:MAX_NAME]: o.detail for o in report.fields[:MAX_FIELDS]},
    }


class AccessLog:
    """Writes one line per finished request to ``stream`` (stdout by default)."""

    def __init__(self, stream: BinaryIO | None = None, *, format: LogFormat = "json") -> None:
        self.stream = stream if stream is not None else sys.stdout.buffer
        self.json = format == "json"
        self._flush_pending = False

    ignores_start = True  # (Observers does not call ``started``: a line is written at the end)

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        # perf_counter for durations (monotonic), time.time for the timestamp.
        now = time.perf_counter()
        ts = _timestamp(time.time())
        if self.json:
            line = orjson.dumps(request_record(exchange, now, ts), option=_LINE)
            if not line.isascii() or b"\x7f" in line:  # (json_line's test, without its call)
                line = json_line(line)
        else:
            record = request_record(exchange, now)
            del record["ts"], record["level"], record["event"]
            method, path = _text_value(record.pop("method")), _text_value(record.pop("path"))
            head = f"{method} {path} {record.pop('status') or '-'}"
            if not record["fields"]:
                del record["fields"]
            else:
                record["fields"] = ",".join(f"{k}:{v}" for k, v in record["fields"].items())
            line = (format_text(ts, head, record) + "\n").encode()
        self.stream.write(line)
        self._flush_soon()

    def _flush_soon(self) -> None:
        # One flush (a write system call) per turn of the event loop, not per
        # line: under load many requests end in one turn. A line still leaves
        # within microseconds of its request's end.
        if self._flush_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.stream.flush()
            return
        self._flush_pending = True
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        self.stream.flush()


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object; ``extra={...}`` keys become fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update(_extra(record))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json_line(orjson.dumps(data, default=str)).decode()


class TextFormatter(logging.Formatter):
    """A log record as ``ts LEVEL message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        head = f"{record.levelname} {printable(record.getMessage())}"
        line = format_text(_timestamp(record.created), head, _extra(record))
        if record.exc_info:
            # A traceback's own lines stay lines; what they quote is escaped.
            trace = self.formatException(record.exc_info).split("\n")
            line += "\n" + "\n".join(map(printable, trace))
        return line


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k[0] != "_"}


def logging_config(format: LogFormat, level: str = "info") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for every logger of the process, to stdout:
    the gateway's and uvicorn's at ``level``; other libraries' (the root logger) at
    warning and above, or debug and above when ``level`` is debug."""
    formatter = JsonFormatter if format == "json" else TextFormatter
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "gateway",
        "stream": "ext://sys.stdout",
    }
    logger = {"handlers": ["stdout"], "level": level.upper(), "propagate": False}
    others = level.upper() if level in ("debug", "warning", "error") else "WARNING"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"gateway": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {"stdout": handler},
        "root": {"handlers": ["stdout"], "level": others},
        "loggers": {
            "gateway": logger,
            "uvicorn": logger,
            "uvicorn.error": {"level": level.upper()},
        },
    }


def setup_logging(format: LogFormat, level: str = "info") -> None:
    """Send everything this process writes to stdout in ``format``: log records (see
    ``logging_config``), Python warnings, and exceptions no code caught."""
    logging.config.dictConfig(logging_config(format, level))
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_thread_exception


_crash = logging.getLogger("gateway.crash")


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    _crash.critical("uncaught exception", exc_info=(kind, exc, tb))


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "?"
    _crash.error(
        "uncaught exception in thread %s",
        name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
