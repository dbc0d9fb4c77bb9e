"""The training text: CPython's own pydoc topics, split into paragraphs of word tokens."""

from __future__ import annotations

import re

WORD_PATTERN = r"[A-Za-z]+(?:'[a-z]+)?|[0-9]+|[.,;:!?()]"
_WORDS = re.compile(WORD_PATTERN)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_MIN_PARAGRAPH = 3


def load_paragraphs() -> list[list[str]]:
    """Paragraphs of ``pydoc_data.topics`` (ships with every CPython) as lists of tokens."""
    from pydoc_data.topics import topics  # a 0.5 MB dict: imported when asked, not at import

    text = "\n\n".join(topics[key] for key in sorted(topics))
    paragraphs = (_WORDS.findall(chunk) for chunk in _PARAGRAPH_BREAK.split(text))
    return [words for words in paragraphs if len(words) >= _MIN_PARAGRAPH]
