"""The content parts the checks inside messages send beside a text part: small, and
well formed, so that an engine whose model takes such parts reads them and a
refusal is about the part's type, not its bytes."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any


def part(kind: str) -> dict[str, Any]:
    """A content part of type ``kind``: image_url, input_audio or file."""
    if kind == "image_url":
        url = "data:image/png;base64," + _b64(_png(32))
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": {"data": _b64(_wav(0.05)), "format": "wav"}}
    if kind == "file":
        data = "data:application/pdf;base64," + _b64(_pdf())
        return {"type": "file", "file": {"filename": "probe.pdf", "file_data": data}}
    raise ValueError(f"no content part of type {kind!r}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _png(size: int) -> bytes:
    """A grey ``size`` x ``size`` PNG (some vision encoders refuse tiny images)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = b"".join(b"\x00" + b"\x80" * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _wav(seconds: float, rate: int = 16000) -> bytes:
    """``seconds`` of 16-bit mono silence as a WAV file."""
    data = b"\x00\x00" * int(rate * seconds)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


def _pdf() -> bytes:
    """A one-page PDF that says "Python lists", with a correct cross-reference table."""
    stream = b"BT /F1 12 Tf 72 720 Td (Python lists) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out
