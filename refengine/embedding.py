"""A deterministic, cheap embedding model and the reranker built on it.

Each input (its token ids) becomes the hashed features of its token unigrams and
bigrams, the text's edges marked, each feature spread over a few weighted, signed
coordinates of a fixed width (a sparse random projection, keyed by blake2b so it
is the same in every process), then L2-normalised. ``dimensions`` is honoured
Matryoshka-style: the vector truncated to its first ``dimensions`` coordinates and
normalised again. base64 is what OpenAI sends: the little-endian float32 bytes,
base64-encoded. The reranker scores a document by the cosine of its vector and
the query's.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Sequence
from functools import lru_cache

WIDTH = 1536  # text-embedding-3-small's: what clients size their indexes by
# Each feature lands once within each of these leading spans, so the leading
# coordinates carry every feature, as a Matryoshka model's do: a short prefix is
# still the text's vector, not zeros.
_SPANS = (16, 128, 512, WIDTH)
_SPREAD = len(_SPANS)
_EDGE = -1  # the id that marks the text's start and end in a bigram


@lru_cache(maxsize=65536)
def _coordinates(feature: tuple[int, int]) -> tuple[tuple[int, float], ...]:
    digest = hashlib.blake2b(struct.pack("<qq", *feature), digest_size=4 * _SPREAD).digest()
    words = struct.unpack(f"<{_SPREAD}I", digest)
    return tuple(
        (w % span, (1.0 + (w >> 20 & 0xFF) / 256) * (1.0 if w & 0x80000000 else -1.0))
        for w, span in zip(words, _SPANS, strict=True)
    )


def embed(ids: Sequence[int]) -> list[float]:
    """The unit vector of a text's token ids (WIDTH wide)."""
    vector = [0.0] * WIDTH
    previous = _EDGE
    for token in [*ids, _EDGE]:
        for feature in ((token, token), (previous, token)):
            for index, sign in _coordinates(feature):
                vector[index] += sign
        previous = token
    return normalised(vector)


def normalised(vector: list[float]) -> list[float]:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def truncated(vector: list[float], dimensions: int) -> list[float]:
    """The first ``dimensions`` coordinates, normalised again (Matryoshka)."""
    return normalised(vector[:dimensions])


def to_base64(vector: Sequence[float]) -> str:
    """OpenAI's base64 encoding: little-endian float32."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def from_base64(text: str) -> list[float]:
    """The floats of ``to_base64``'s text."""
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two unit vectors."""
    return sum(x * y for x, y in zip(a, b, strict=True))
