"""Draws in order from one row's Philox stream: the choices a grammar makes, seeded.

A constrained answer (JSON from a schema, a tool call) is a sequence of choices
(which branch, how many items, which character) rather than one token per step. They
come from the same generator as the tokens, on a stream of their own: draw k of a row
is the word of token id ``k % BLOCK`` at step ``k // BLOCK`` on stream
``STRUCTURED_STREAM`` (counter word 3, which the contract keeps for other uses), keyed
by the row's seed. The same seed gives the same choices, whatever else runs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from sampler.stream import batch_bits

__all__ = ["BLOCK", "STRUCTURED_STREAM", "Draws"]

STRUCTURED_STREAM = 1
BLOCK = 256
_WORD = 32


class Draws:
    """A row's structured draws, in order: uniform words, integers below n, chances."""

    def __init__(self, seed: int, *, stream: int = STRUCTURED_STREAM) -> None:
        self.seed = seed
        self.stream = stream
        self.count = 0  # draws taken so far
        self._block = -1
        self._words: npt.NDArray[np.uint32] = np.empty(0, dtype=np.uint32)

    def word(self) -> int:
        """The next uint32 word of the stream."""
        block, at = divmod(self.count, BLOCK)
        if block != self._block:
            self._words = batch_bits([self.seed], [block], BLOCK, stream=self.stream)[0]
            self._block = block
        self.count += 1
        return int(self._words[at])

    def below(self, n: int) -> int:
        """An integer in [0, n), n >= 1: (words * n) >> bits, over as many words as n needs."""
        if n < 1:
            raise ValueError("n must be >= 1")
        words = max(1, -(-n.bit_length() // _WORD))
        value = 0
        for _ in range(words):
            value = (value << _WORD) | self.word()
        return (value * n) >> (_WORD * words)

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        if high < low:
            raise ValueError("high must be >= low")
        return low + self.below(high - low + 1)

    def uniform(self) -> float:
        """A float in (0, 1), as the sampler makes its uniforms: (x + 0.5) * 2**-32."""
        return (self.word() + 0.5) * 2.0**-32

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return self.uniform() < p

    def pick(self, count: int) -> int:
        """An index in [0, count): ``below`` by another name, for choices among options."""
        return self.below(count)
