"""Reading a request's headers by name (Call.named) gives what a scan of the list gives:
the same body limits, media type checks and request id, whether or not a name repeats."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import GatewayError
from gateway.jsonbody.parse import parse_request
from gateway.proxy.headers import request_ids
from gateway.proxy.request import read_body

pytestmark = pytest.mark.anyio

Headers = list[tuple[bytes, bytes]]

CASES: list[Headers] = [
    [(b"content-type", b"application/json"), (b"content-length", b"2")],
    [(b"content-type", b"application/json; charset=utf-8"), (b"content-length", b"2")],
    [(b"content-type", b"text/plain"), (b"content-length", b"2")],
    [(b"content-type", b"application/vnd.api+json")],
    [(b"content-length", b"99999999")],
    [(b"content-length", b"two")],
    [(b"content-length", b" 2 ")],
    [(b"transfer-encoding", b"chunked")],
    [(b"transfer-encoding", b"chunked"), (b"content-length", b"2")],
    [(b"x-request-id", b"trace-42")],
    [(b"x-request-id", b"not sane!")],
    # A repeated name: Call.named is None, and the list is scanned.
    [(b"x-request-id", b"not sane!"), (b"x-request-id", b"trace-43")],
    [(b"content-type", b"application/json"), (b"content-type", b"text/plain")],
]


def _named(headers: Headers) -> dict[bytes, bytes] | None:
    named = dict(headers)
    return named if len(named) == len(headers) else None


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"{}", "more_body": False}


async def _outcome_of_read(headers: Headers, named: dict[bytes, bytes] | None) -> object:
    try:
        return await read_body(_receive, headers, 1000, named)
    except GatewayError as exc:
        return (exc.status, exc.code)


def _outcome_of_parse(headers: Headers, named: dict[bytes, bytes] | None) -> object:
    try:
        return parse_request(b"{}", headers, named)
    except GatewayError as exc:
        return (exc.status, exc.code)


@pytest.mark.parametrize("headers", CASES)
async def test_by_name_as_by_scan(headers: Headers) -> None:
    named = _named(headers)
    assert await _outcome_of_read(headers, named) == await _outcome_of_read(headers, None)
    assert _outcome_of_parse(headers, named) == _outcome_of_parse(headers, None)
    by_name, by_scan = request_ids(headers, named), request_ids(headers)
    if by_scan[2] is None:  # the client's own id: the same from both
        assert by_name == by_scan
    else:  # a new id each time: both new
        assert by_name[2] is not None


def test_a_repeated_name_is_scanned_in_order() -> None:
    headers = [(b"x-request-id", b"not sane!"), (b"x-request-id", b"trace-43")]
    assert _named(headers) is None
    assert request_ids(headers, None)[0] == b"trace-43"
