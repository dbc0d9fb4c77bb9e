"""The header table itself (gateway/proxy/headers.py): a route extends it without
changing the default, Connection-named headers never cross, and docs/headers.md is the
table row for row. (What crosses on a real server: test_headers_each_way.py.)"""

from __future__ import annotations

import re
from pathlib import Path

from gateway.proxy.headers import DEFAULT_HEADERS, DROPPED, RELAYED, HeaderPolicy

DOCS = Path(__file__).resolve().parents[2] / "docs" / "headers.md"
SECRET = b"sk-client-secret-5e6f7a8b9c0d"


def test_a_route_extends_the_table_without_changing_the_default() -> None:
    anthropic = DEFAULT_HEADERS.extend(
        upstream={b"x-api-key": DROPPED, b"anthropic-dangerous-header": DROPPED},
        downstream={b"request-id": RELAYED, b"anthropic-ratelimit-requests-limit": RELAYED},
    )
    sent = [
        (b"x-api-key", SECRET),
        (b"anthropic-version", b"2023-06-01"),
        (b"anthropic-dangerous-header", b"x"),
    ]
    assert anthropic.to_engine(sent) == [(b"anthropic-version", b"2023-06-01")]
    answered = [(b"request-id", b"req_1"), (b"content-type", b"application/json")]
    assert anthropic.to_client(answered) == answered
    assert DEFAULT_HEADERS.to_client(answered) == [(b"content-type", b"application/json")]
    assert isinstance(anthropic, HeaderPolicy) and anthropic is not DEFAULT_HEADERS


def test_connection_named_headers_never_cross_either_way() -> None:
    sent = [(b"connection", b"x-custom-thing"), (b"x-custom-thing", b"hop"), (b"x-other", b"1")]
    assert DEFAULT_HEADERS.to_engine(sent) == [(b"x-other", b"1")]
    answered = [(b"connection", b"retry-after"), (b"retry-after", b"3")]
    assert DEFAULT_HEADERS.to_client(answered) == []


_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| ([a-z ]+) \| ([a-z ]+) \|", re.MULTILINE)


def test_the_docs_table_is_the_code_table() -> None:
    rows = {name: (up.strip(), down.strip()) for name, up, down in _ROW.findall(DOCS.read_text())}
    assert rows == DEFAULT_HEADERS.rows(), "docs/headers.md's table differs from headers.py"
