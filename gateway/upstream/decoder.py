"""Undoing an engine answer's gzip or deflate Content-Encoding (the httptools client's)."""

from __future__ import annotations

import zlib


class Decoder:
    """Undoes a gzip or deflate Content-Encoding (engines rarely send one: the proxy
    asks for identity; decoding it keeps the answer usable, as the other clients do)."""

    def __init__(self, encoding: bytes) -> None:
        # 47: a gzip or zlib header, detected; deflate without one is tried on failure.
        self._raw = encoding == b"deflate"
        self._z = zlib.decompressobj(47)

    def flush(self) -> bytes:
        return self._z.flush()

    def decode(self, data: bytes) -> bytes:
        try:
            return self._z.decompress(data)
        except zlib.error:
            if not self._raw:
                raise
            self._raw = False
            self._z = zlib.decompressobj(-15)
            return self._z.decompress(data)
