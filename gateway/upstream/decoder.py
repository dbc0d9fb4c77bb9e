"""Undoing an engine answer's gzip or deflate Content-Encoding, a bounded piece at a time
(the httptools and httpx clients'; aiohttp bounds its own the same way).

A few hundred bytes of gzip can inflate to a gigabyte: one ``decompress`` call without
``max_length`` would build all of it before any limit could look. So each call gives at
most ``PIECE`` bytes and keeps the input it did not get to (``pending``); the reader of a
whole answer refuses it past ``limits.max_response_bytes`` and the relay a stream past
``limits.max_stream_bytes``, each holding at most one piece more than its limit.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from gateway._types import Headers
from gateway.errors import UpstreamProtocolError

PIECE = 256 * 1024  # the most one call inflates (the httptools client's read buffer)
_READABLE = (b"gzip", b"x-gzip", b"deflate")


class Decoder:
    """Undoes a gzip or deflate Content-Encoding (engines rarely send one: the proxy
    asks for identity; decoding it keeps the answer usable, as the other clients do)."""

    def __init__(self, encoding: bytes) -> None:
        # 47: a gzip or zlib header, detected; deflate without one is tried on failure.
        self._raw = encoding == b"deflate"
        self._z = zlib.decompressobj(47)

    @property
    def pending(self) -> bool:
        """Input is held that the last call did not inflate yet (``decode(b"")`` goes on)."""
        return bool(self._z.unconsumed_tail)

    def flush(self) -> bytes:
        """What is left once all the input has been decoded (call when none is pending)."""
        return self._z.flush()

    def decode(self, data: bytes) -> bytes:
        """At most ``PIECE`` bytes of what the pending input and then ``data`` inflate to;
        UpstreamProtocolError if it is not valid gzip or deflate."""
        z = self._z
        if z.unconsumed_tail:
            data = z.unconsumed_tail + data
        try:
            try:
                return z.decompress(data, PIECE)
            except zlib.error:
                if not self._raw:
                    raise
                self._raw = False
                self._z = zlib.decompressobj(-15)
                return self._z.decompress(data, PIECE)
        except zlib.error:
            raise UpstreamProtocolError("The engine's compressed answer is corrupt.") from None

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """What ``data`` inflates to, ``PIECE`` bytes at most at a time (none empty)."""
        piece = self.decode(data)
        while True:
            if piece:
                yield piece
            if not self.pending:
                return
            piece = self.decode(b"")


def decoding(headers: Headers) -> tuple[Headers, Decoder | None]:
    """``headers`` without Content-Encoding, and the Decoder that undoes it (None for
    none or identity); UpstreamProtocolError for an encoding the gateway cannot read."""
    decoder: Decoder | None = None
    kept: Headers = []
    for name, value in headers:
        if name != b"content-encoding":
            kept.append((name, value))
            continue
        encoding = value.strip().lower()
        if encoding in _READABLE:
            decoder = Decoder(encoding)
        elif encoding not in (b"identity", b""):
            raise UpstreamProtocolError(
                "The engine's answer has a Content-Encoding the gateway cannot read."
            )
    return kept, decoder
