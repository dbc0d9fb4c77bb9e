"""A client cannot forge a log line or a field, nor drive the terminal of whoever reads the
log: everything a client chose (the path, the model, field names) is written escaped, in
the text format and in JSON, and so are the gateway's own records that quote a client.
Lines are read back with ``str.splitlines``, which breaks where a log viewer would (CR,
LF, VT, FF, the file and group separators, NEL U+0085, U+2028, U+2029)."""

from __future__ import annotations

import io
import json
import logging
import shlex
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.observe.exchange import Exchange
from gateway.observe.logs import AccessLog, JsonFormatter, TextFormatter
from gateway.policy.engine import Outcome
from gateway.settings import Settings
from tests.support.bodies import CHAT
from tests.support.engine import FakeEngine
from tests.support.faults import fault_settings
from tests.support.gateways import serve_gateway

pytestmark = pytest.mark.anyio
# Every character class that forges a line or a field, or moves a terminal.
HOSTILE = (
    "/v1/x status=200 forged=1"
    "\r\n2026-01-01T00:00:00.000Z POST /v1/chat/completions 200"
    "\x1b]0;owned\x07\x1b[2J\x9b31m"
    "\x0b\x0c\x1c\x1d\x1e\x7f"
    "\u0085next\u2028line\u2029para"
    "\u202eevil\u2066\u200b\ufeff"
)
RAW = ("\r", "\n", "\x1b", "\x9b", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029", "\u202e")


def _exchange() -> Exchange:
    exchange = Exchange("POST", HOSTILE, None, "req-1", model=HOSTILE, status=404)
    exchange.outcomes = [Outcome(HOSTILE, "rejected")]
    return exchange


def _one_clean_line(text: str) -> str:
    assert len(text.splitlines()) == 1, text.splitlines()
    for char in RAW:
        assert char not in text, repr(char)
    return text


@pytest.mark.parametrize("format", ["json", "text"])
def test_a_hostile_path_model_and_field_name_stay_on_one_escaped_line(format: str) -> None:
    stream = io.BytesIO()
    AccessLog(stream, format=format).finished(_exchange())  # type: ignore[arg-type]
    line = _one_clean_line(stream.getvalue().decode().removesuffix("\n"))
    if format == "json":
        record = json.loads(line)
        assert record["path"] == HOSTILE  # escaped, not lost: it reads back whole
        assert record["status"] == 404
    else:
        _, method, path_and_rest = line.split(" ", 2)
        assert method == "POST"
        # The path is one quoted token: nothing it holds reads as a field of the line.
        assert path_and_rest.startswith('"/v1/x status=200 forged=1')
        assert json.loads(path_and_rest[: path_and_rest.index('" 404 ') + 1]) == HOSTILE
        # What follows is key=value pairs, quoted where need be: none of them forged.
        pairs = shlex.split(path_and_rest.split('" 404 ', 1)[1])
        keys = [pair.split("=", 1)[0] for pair in pairs]
        assert keys == ["request_id", "model", "stream", *keys[3:]], keys
        assert "forged" not in keys and "status" not in keys


def _record(message: str) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "gateway", "levelname": "WARNING", "msg": "client sent %s", "args": (message,)}
        | {"value": message}
    )


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()])
def test_records_quoting_a_client_stay_on_one_escaped_line(formatter: logging.Formatter) -> None:
    line = _one_clean_line(formatter.format(_record(HOSTILE)))
    if isinstance(formatter, JsonFormatter):
        data = json.loads(line)
        assert data["message"] == f"client sent {HOSTILE}" and data["value"] == HOSTILE


@pytest.fixture
def settings(fake_engine: FakeEngine) -> Settings:
    return fault_settings(fake_engine.url)


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[tuple[str, list[io.BytesIO]]]:
    async with serve_gateway(settings) as gateway:
        streams = [io.BytesIO(), io.BytesIO()]
        gateway.app.state.gateway.observer = _Both(streams)
        yield gateway.url, streams


class _Both:
    """The access log in both formats."""

    def __init__(self, streams: list[io.BytesIO]) -> None:
        self.logs = [AccessLog(streams[0], format="json"), AccessLog(streams[1], format="text")]

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        for log in self.logs:
            log.finished(exchange)


async def test_a_real_request_with_a_hostile_path_is_one_line_in_both_formats(
    served: tuple[str, list[io.BytesIO]],
) -> None:
    url, streams = served
    # Percent-encoded on the wire; uvicorn hands the gateway the decoded path.
    target = "/v1/%E2%80%A8forged%0D%0Aline%1B%5B2J%C2%85x%20status=200"
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(target, json={"model": "m"})
        await client.post(CHAT, json={"model": "m\u2028forged\x1b[2J", "messages": []})
    assert response.status_code == 404
    for stream in streams:
        lines = stream.getvalue().decode().split("\n")[:-1]
        assert len(lines) == 2
        for line in lines:
            _one_clean_line(line)
