"""Every relative link of the documentation reaches a file, and every #anchor a heading."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import DOCS, LINKED, PAGES, ROOT, Span, anchors, links

LINKS = [span for page in LINKED for span in links(page)]


def _relative(span: Span) -> bool:
    return "://" not in span.text and not span.text.startswith("mailto:")


def test_the_pages_have_links() -> None:
    assert len([s for s in LINKS if _relative(s)]) > 50


@pytest.mark.parametrize("span", [s for s in LINKS if _relative(s)], ids=lambda s: s.where)
def test_relative_link_resolves(span: Span) -> None:
    path, _, anchor = span.text.partition("#")
    target = (span.page.parent / path).resolve() if path else span.page
    assert target.exists(), f"{span.where}: {span.text}: no such file"
    assert ROOT in target.parents or target == ROOT, f"{span.where}: outside the repository"
    if anchor:
        assert target.suffix == ".md", f"{span.where}: an anchor into a non-Markdown file"
        assert anchor in anchors(target), (
            f"{span.where}: {span.text}: no heading with that anchor in "
            f"{target.relative_to(ROOT)} (it has: {', '.join(sorted(anchors(target)))})"
        )


def test_external_links_are_few_and_https() -> None:
    # The docs are read offline as often as not: what they need is in the repository.
    external = [s for s in LINKS if not _relative(s)]
    assert all(s.text.startswith("https://") for s in external), external


def _linked_from(page: Path) -> set[Path]:
    return {
        (page.parent / s.text.partition("#")[0]).resolve()
        for s in links(page)
        if _relative(s) and s.text.partition("#")[0]
    }


def test_every_docs_page_is_linked_from_the_readme_or_the_index() -> None:
    reachable = _linked_from(ROOT / "README.md") | _linked_from(DOCS / "README.md")
    missing = [p.name for p in DOCS.glob("*.md") if p.resolve() not in reachable]
    assert not missing, f"docs pages linked from neither README.md nor docs/README.md: {missing}"


@pytest.mark.parametrize("page", [p for p in PAGES if p.parent == DOCS], ids=lambda p: p.name)
def test_docs_page_opens_with_what_it_covers_and_links_back(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), f"{page.name}: the first line is the page's title"
    assert lines[1] == "", f"{page.name}: a blank line after the title"
    first = []
    for line in lines[2:]:
        if not line.strip():
            break
        first.append(line)
    paragraph = " ".join(first)
    assert paragraph and not paragraph.startswith(("#", "|", "```", "-", "1.")), (
        f"{page.name}: the title is followed by one paragraph saying what the page covers"
    )
    assert "](../README.md)" in paragraph, f"{page.name}: the first paragraph links to the README"
