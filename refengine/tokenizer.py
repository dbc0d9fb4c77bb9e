"""A word-level tokenizer: special tokens, a newline, punctuation and the corpus's words.

Text is split into words, numbers and punctuation; characters outside those are
dropped and words the vocabulary lacks become ``<|unk|>``. Decoding puts a space
between words but none before closing punctuation, after "(" or around newlines,
and leaves special tokens out of the text (except the thinking markers).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from refengine.corpus import WORD_PATTERN

EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
UNK = "<|unk|>"
NEWLINE = "\n"
SPECIALS = (EOS, IM_START, IM_END, THINK_START, THINK_END, UNK)

_NO_SPACE_BEFORE = frozenset(".,;:!?)")
_ROLE_WORDS = ("system", "user", "assistant", "tool")
_SHOWN_SPECIALS = {THINK_START: "<think>\n", THINK_END: "\n</think>\n\n"}


class Tokenizer:
    """Maps text to token ids and back; ids 0..5 are the special tokens, 6 the newline."""

    def __init__(self, words: Iterable[str]) -> None:
        self.tokens: list[str] = [*SPECIALS, NEWLINE, *dict.fromkeys(words)]
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        specials = "|".join(re.escape(s) for s in SPECIALS)
        self._pattern = re.compile(f"{specials}|\n|{WORD_PATTERN}")
        self.eos_id = self.ids[EOS]
        self.unk_id = self.ids[UNK]
        self.think_start_id = self.ids[THINK_START]
        self.think_end_id = self.ids[THINK_END]
        self.special_ids = frozenset(self.ids[s] for s in SPECIALS) | {self.ids[NEWLINE]}

    @classmethod
    def from_corpus(cls, paragraphs: Sequence[Sequence[str]]) -> Tokenizer:
        """A vocabulary of every corpus token, most frequent first."""
        counts = Counter(token for paragraph in paragraphs for token in paragraph)
        words = [token for token, _ in counts.most_common()]
        return cls([*words, *_ROLE_WORDS])

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; unknown words become ``<|unk|>``."""
        unk = self.ids[UNK]
        return [self.ids.get(match, unk) for match in self._pattern.findall(text)]

    def piece(self, previous: int | None, token: int) -> str:
        """The text ``token`` adds after ``previous`` (None at the start of the text)."""
        text = self.tokens[token]
        if token in self.special_ids and text != NEWLINE:
            return _SHOWN_SPECIALS.get(text, "")
        if previous is None or text == NEWLINE or text[0] in _NO_SPACE_BEFORE:
            return text
        before = self.tokens[previous]
        if previous in self.special_ids or before == "(":
            return text
        return " " + text

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``; ``decode(a + b) == decode(a) + pieces of b``."""
        out: list[str] = []
        previous: int | None = None
        for token in ids:
            out.append(self.piece(previous, token))
            previous = token
        return "".join(out)
