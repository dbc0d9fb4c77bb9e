"""What the raw ASGI engines of the tests share: reading a request's whole body."""

from __future__ import annotations

from typing import Any


async def read_body(receive: Any) -> bytes:
    """The request body, all its ``http.request`` messages joined."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
