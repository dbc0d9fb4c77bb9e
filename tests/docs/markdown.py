"""Just enough Markdown for the documentation tests: fenced blocks, headings,
GitHub's heading anchors, links and inline code, each with its line number."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"

# The pages these tests hold to every rule.
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "CHANGELOG.md",
        *DOCS.glob("*.md"),
    ]
)
# Pages whose links are checked too (they link into the pages above).
LINKED = [
    *PAGES,
    ROOT / "SECURITY.md",
    ROOT / "bench" / "README.md",
    ROOT / "sampler" / "README.md",
]

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<lang>[\w-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language tag, its text (fence indentation removed)."""

    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Span:
    """Text found outside fenced blocks (a link target, an inline code span)."""

    page: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def split(page: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The page's fenced blocks, and its other lines as (line number, text)."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page.relative_to(ROOT)}:{i + 1}: unclosed code fence")
        blocks.append(Block(page, i + 1, m["lang"], "\n".join(body) + "\n"))
        i = j + 1
    return blocks, prose


def blocks(page: Path) -> list[Block]:
    return split(page)[0]


def headings(page: Path) -> list[str]:
    """Heading texts, in order, outside fenced blocks."""
    out = []
    for _, text in split(page)[1]:
        m = _HEADING.match(text)
        if m is not None:
            out.append(m[2])
    return out


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: the rendered text in lower case, without
    punctuation but for '-' and '_', spaces as '-'."""
    text = _CODE_SPAN.sub(lambda m: m[2], heading)
    text = _LINK.sub(lambda m: m["text"], text)
    text = text.replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor of a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in headings(page):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _paragraphs(page: Path) -> list[tuple[int, str]]:
    """Runs of non-blank prose lines, joined: a span broken over lines is whole."""
    out: list[tuple[int, str]] = []
    run: list[str] = []
    start = previous = 0
    for number, text in split(page)[1]:
        if text.strip() and run and number == previous + 1:
            run.append(text)
        else:
            if run:
                out.append((start, "\n".join(run)))
            run = [text] if text.strip() else []
            start = number
        previous = number
    if run:
        out.append((start, "\n".join(run)))
    return out


def _line_of(start: int, text: str, offset: int) -> int:
    return start + text.count("\n", 0, offset)


def code_spans(page: Path) -> list[Span]:
    """Inline code spans outside fenced blocks, line breaks inside them as spaces."""
    out = []
    for start, text in _paragraphs(page):
        for m in _CODE_SPAN.finditer(text):
            out.append(Span(page, _line_of(start, text, m.start()), " ".join(m[2].split())))
    return out


def links(page: Path) -> list[Span]:
    """Link targets outside fenced blocks and inline code."""
    out = []
    for start, text in _paragraphs(page):
        # Blank out code spans (keeping their length) so a link inside one is not a link.
        plain = _CODE_SPAN.sub(lambda m: m[1] + "x" * len(m[2]) + m[1], text)
        for m in _LINK.finditer(plain):
            out.append(Span(page, _line_of(start, text, m.start()), m["target"]))
    return out
