"""An interpolated word trigram model in numpy: the reference engine's "LLM".

P(t | a, b) = w3 P3(t | a, b) + w2 P2(t | b) + w1 P1(t) + wc cache(t), where the
terms whose context never occurs in the corpus drop out and the rest are
renormalised, and ``cache`` is uniform over the words of the row's prompt (so a
prompt steers the text a little). A row's logits depend on that row's tokens only.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from refengine.corpus import load_paragraphs
from refengine.tokenizer import Tokenizer

_W3, _W2, _W1, _WC = 0.55, 0.3, 0.1, 0.05


@dataclass(frozen=True)
class _Table:
    """Sparse counts ``count(context, token)``, rows sorted by context key."""

    keys: npt.NDArray[np.int64]  # unique context keys, ascending
    starts: npt.NDArray[np.int64]  # rows of context keys[i]: starts[i]:starts[i + 1]
    tokens: npt.NDArray[np.int64]
    probs: npt.NDArray[np.float64]  # count / total count of the context

    @classmethod
    def build(
        cls, contexts: npt.NDArray[np.int64], tokens: npt.NDArray[np.int64], vocab: int
    ) -> _Table:
        pairs, counts = np.unique(contexts * vocab + tokens, return_counts=True)
        ctx = pairs // vocab
        keys, starts = np.unique(ctx, return_index=True)
        totals = np.add.reduceat(counts, starts)
        probs = counts / np.repeat(totals, np.diff(np.append(starts, counts.size)))
        return cls(keys, np.append(starts, counts.size), pairs % vocab, probs)

    def row(self, key: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        i = int(np.searchsorted(self.keys, key))
        if i == self.keys.size or self.keys[i] != key:
            return None
        lo, hi = self.starts[i], self.starts[i + 1]
        return self.tokens[lo:hi], self.probs[lo:hi]


class TrigramModel:
    """Next-token logits for a batch of rows, each from its own context."""

    def __init__(self, tokenizer: Tokenizer, paragraphs: Sequence[Sequence[str]]) -> None:
        self.tokenizer = tokenizer
        vocab = tokenizer.vocab_size
        eos = tokenizer.eos_id
        # Every paragraph is "EOS EOS words... EOS": the model learns to start and to stop.
        stream: list[int] = []
        for paragraph in paragraphs:
            stream += [eos, eos, *(tokenizer.ids[w] for w in paragraph)]
        stream.append(eos)
        ids = np.array(stream, dtype=np.int64)
        a, b, c = ids[:-2], ids[1:-1], ids[2:]
        # Drop the "EOS EOS" pair that only glues paragraphs together.
        keep = ~((b == eos) & (c == eos))
        self._tri = _Table.build(a[keep] * vocab + b[keep], c[keep], vocab)
        self._bi = _Table.build(b[keep], c[keep], vocab)
        unigram = np.bincount(c[keep], minlength=vocab).astype(np.float64)
        self._unigram = unigram / unigram.sum()
        self._word_ids = np.array(
            [i for i in range(vocab) if i not in tokenizer.special_ids and unigram[i] > 0]
        )
        self._vocab = vocab

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def prompt_cache(self, prompt: Sequence[int]) -> npt.NDArray[np.int64]:
        """The word ids of a prompt that the cache term favours (computed once per row)."""
        return np.intersect1d(np.asarray(prompt, dtype=np.int64), self._word_ids)

    def logits(
        self, contexts: Sequence[Sequence[int]], caches: Sequence[npt.NDArray[np.int64]]
    ) -> npt.NDArray[np.float32]:
        """float32 [B, V]: row i from the last two tokens of contexts[i] and its cache."""
        out = np.empty((len(contexts), self._vocab), dtype=np.float32)
        for i, (context, cache) in enumerate(zip(contexts, caches, strict=True)):
            out[i] = self._row_logits(context, cache)
        return out

    def _row_logits(
        self, context: Sequence[int], cache: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        eos = self.tokenizer.eos_id
        specials = self.tokenizer.special_ids
        # Newlines and markup (template, thinking markers) read as a paragraph boundary.
        a, b = ([eos, eos] + [eos if t in specials else t for t in context[-2:]])[-2:]
        mix = _W1 * self._unigram
        weight = _W1
        for table, key, w in ((self._tri, a * self._vocab + b, _W3), (self._bi, b, _W2)):
            found = table.row(key)
            if found is not None:
                mix[found[0]] += w * found[1]
                weight += w
        if cache.size:
            mix[cache] += _WC / cache.size
            weight += _WC
        with np.errstate(divide="ignore"):
            logits: npt.NDArray[np.float64] = np.log(mix / weight)
        return logits


@functools.cache
def default_model() -> TrigramModel:
    """The model over the pydoc corpus, built on first use (about 0.1 s) and shared."""
    paragraphs = load_paragraphs()
    return TrigramModel(Tokenizer.from_corpus(paragraphs), paragraphs)
