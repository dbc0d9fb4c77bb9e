"""The probe's requests, straight to the engine: bounded in number, time and size.

Nothing an engine does makes these calls raise: a time-out, a refused
connection, a 5xx, a body that is not JSON or a stream that never ends all come
back as an ``Answer`` that says what happened, for a check to judge.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

DONE = "[DONE]"
# Consecutive time-outs after which the engine is taken to have stopped answering:
# requests are not sent until a forced one (the runner's plain request) is answered,
# so a dead engine costs a few time-outs, not a hundred.
MAX_TIMEOUTS_IN_A_ROW = 3
MAX_STREAM_EVENTS = 1024
MAX_BODY_BYTES = 4 * 1024 * 1024


@dataclass
class Answer:
    """What came back for one request, or why nothing did (``status`` None)."""

    sent: dict[str, Any]
    status: int | None = None
    body: Any = None  # the parsed JSON body (non-streaming), or None
    raw: str = ""  # the body as text, trimmed; for evidence when it is not JSON
    content_type: str = ""
    events: list[Any] | None = None  # SSE data payloads in order; "[DONE]" as the string
    malformed: list[str] = field(default_factory=list)  # SSE lines that did not parse
    error: str | None = None  # time-out, connection error, budget spent
    started: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def timed_out(self) -> bool:
        return self.error is not None and "time-out" in self.error

    def engine_message(self) -> str:
        """The engine's error message (OpenAI, vLLM or SGLang shape), else the raw body."""
        body = self.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            if isinstance(inner, dict) and isinstance(inner.get("message"), str):
                return str(inner["message"])
            if isinstance(inner, str):
                return inner
        return self.raw[:300] if self.raw else (self.error or "")


class BudgetSpent(Exception):
    """The probe would exceed its request budget."""


class EngineClient:
    """Sends the probe's requests; ``sent`` counts those that reached the wire. Safe to
    share between threads (the seed check's load sends several at once)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_requests: int = 120,
        transport: httpx.BaseTransport | None = None,
        on_request: Callable[[], None] | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            transport=transport,
        )
        self.timeout = timeout
        self.max_requests = max_requests
        self.sent = 0
        # Every (path, body) that reached the wire: the written case file's requests.
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self._timeouts_in_a_row = 0
        self._on_request = on_request
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stalled(self) -> bool:
        """The last requests all timed out: new ones are not sent unless forced."""
        return self._timeouts_in_a_row >= MAX_TIMEOUTS_IN_A_ROW

    def post(self, path: str, body: dict[str, Any], *, force: bool = False) -> Answer:
        """POST a JSON body and read the whole answer."""
        return self._send(path, body, streaming=False, force=force)

    def stream(self, path: str, body: dict[str, Any], *, answer: Answer | None = None) -> Answer:
        """POST a JSON body and read the SSE stream it starts (bounded). ``answer.started``
        is set at the first event, or when the request ends without one."""
        return self._send(path, body, streaming=True, answer=answer)

    def _send(
        self,
        path: str,
        body: dict[str, Any],
        *,
        streaming: bool,
        force: bool = False,
        answer: Answer | None = None,
    ) -> Answer:
        answer = answer if answer is not None else Answer(sent=body)
        try:
            self._count(path, body, answer, force=force)
            if answer.error is None:
                self._exchange(path, body, answer, streaming=streaming)
        finally:
            answer.started.set()
        return answer

    def _count(self, path: str, body: dict[str, Any], answer: Answer, *, force: bool) -> None:
        with self._lock:
            if self.stalled and not force:
                answer.error = (
                    f"not sent: the engine timed out {MAX_TIMEOUTS_IN_A_ROW} times in a row"
                )
                return
            if self.sent >= self.max_requests:
                raise BudgetSpent(f"the request budget ({self.max_requests}) is spent")
            self.sent += 1
            self.bodies.append((path, body))

    def _exchange(
        self, path: str, body: dict[str, Any], answer: Answer, *, streaming: bool
    ) -> None:
        try:
            with self._http.stream("POST", path, json=body) as response:
                answer.status = response.status_code
                answer.content_type = response.headers.get("content-type", "")
                if streaming and answer.content_type.startswith("text/event-stream"):
                    _read_events(response, answer)
                else:
                    _read_body(response, answer)
            self._timeouts_in_a_row = 0
        except httpx.TimeoutException as exc:
            self._timeouts_in_a_row += 1
            answer.error = f"time-out after {self.timeout:g} s ({type(exc).__name__})"
        except httpx.HTTPError as exc:
            self._timeouts_in_a_row = 0
            answer.error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            if self._on_request is not None:
                self._on_request()


def _read_body(response: httpx.Response, answer: Answer) -> None:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            answer.error = f"body longer than {MAX_BODY_BYTES} bytes; stopped reading"
            break
    text = data.decode("utf-8", errors="replace")
    answer.raw = text[:2000]
    try:
        answer.body = json.loads(text)
    except ValueError:
        answer.body = None


def _read_events(response: httpx.Response, answer: Answer) -> None:
    events: list[Any] = []
    answer.events = events
    size = 0
    for line in response.iter_lines():
        size += len(line)
        if not line or line.startswith(":"):
            continue
        if not line.startswith("data:"):
            if not line.startswith(("event:", "id:", "retry:")):
                answer.malformed.append(line[:200])
            continue
        data = line[5:].strip()
        if data == DONE:
            events.append(DONE)
            break
        try:
            events.append(json.loads(data))
        except ValueError:
            answer.malformed.append(line[:200])
        answer.started.set()
        if len(events) >= MAX_STREAM_EVENTS or size > MAX_BODY_BYTES:
            answer.error = f"stream longer than {len(events)} events; stopped reading"
            break
