"""YAML files that remember where each key came from.

Config and policy errors must name the file, the key path and the line, and a
duplicated key must be an error rather than a silent "last one wins".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

Location = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a file, printed as ``file:line: key.path: message``."""

    file: str
    line: int
    path: Location
    message: str

    def __str__(self) -> str:
        where = format_location(self.path) or "(top level)"
        return f"{self.file}:{self.line}: {where}: {self.message}"


class SourceError(Exception):
    """A file could not be loaded; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def format_location(path: Location) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


@dataclass
class YamlDocument:
    """Parsed YAML data plus the line of every key and item (1-based)."""

    file: str
    data: Any
    lines: dict[Location, int] = field(default_factory=dict)

    def line_of(self, path: Sequence[str | int]) -> int:
        """The line of ``path``, or of its nearest ancestor that has one."""
        loc = tuple(path)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), 1)

    def problem(self, path: Sequence[str | int], message: str) -> Problem:
        return Problem(self.file, self.line_of(path), tuple(path), message)


def _walk(
    node: yaml.Node,
    path: Location,
    doc: YamlDocument,
    problems: list[Problem],
) -> None:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        kept: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(
                    Problem(
                        doc.file,
                        line,
                        (*path, key),
                        f"duplicate key (first defined on line {seen[key]})",
                    )
                )
                continue
            kept.append((key_node, value_node))
            seen[key] = line
            doc.lines[(*path, key)] = line
            _walk(value_node, (*path, key), doc, problems)
        # The first definition wins, so the data agrees with the recorded lines.
        node.value = kept
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), doc, problems)


# libyaml's parser (PyYAML's C extension, in its wheels) where PyYAML has it: the same
# nodes with the same lines and columns, in a sixth of the pure-Python parser's time
# (33 ms against 194 for the shipped 43 KB policy: each start, reload and check). Where
# the two read a text differently (a differential run over random YAML-like texts), the
# text holds a tab (PyYAML refuses one between tokens, libyaml takes it), a tag or a
# byte-order mark past the start (different values): such a text goes to PyYAML's
# parser, as every text did before. What is left: libyaml takes a few texts PyYAML
# refuses, a comment with no space before it (``key: |#``, ``{a-#: b}``).
_FAST_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_READ_APART = re.compile("[\t!\ufeff]")


def _parse(
    text: str, file: str, loader_type: type[yaml.SafeLoader]
) -> tuple[YamlDocument, list[Problem]]:
    loader = loader_type(text)
    try:
        node = loader.get_single_node()
        doc = YamlDocument(file=file, data=None)
        found: list[Problem] = []
        if node is not None:
            _walk(node, (), doc, found)
            doc.data = loader.construct_document(node)
        return doc, found
    finally:
        loader.dispose()


def _raise(file: str, exc: yaml.YAMLError) -> NoReturn:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise SourceError([Problem(file, line, (), f"invalid YAML: {exc.problem}")]) from exc
    raise SourceError([Problem(file, 1, (), f"invalid YAML: {exc}")]) from exc


def parse_yaml(text: str, *, file: str, problems: list[Problem] | None = None) -> YamlDocument:
    """Parse ``text``; raise SourceError for YAML syntax errors and duplicate keys.

    With a ``problems`` list, duplicate keys are appended to it instead and the
    document (first definition of each key) is returned, so that a checker can
    report them together with everything else wrong in the file.
    """
    fast = _FAST_LOADER is not yaml.SafeLoader and not _READ_APART.search(
        text, 1 if text.startswith("\ufeff") else 0
    )
    try:
        doc, found = _parse(text, file, _FAST_LOADER if fast else yaml.SafeLoader)
    except yaml.YAMLError as exc:
        if not fast:
            _raise(file, exc)
        # Read again by PyYAML's own parser, which says what is wrong as it always has
        # (libyaml's wording differs; the line is the same), and decides: a text only
        # one of the two reads is read as before. A text with an error is parsed twice.
        try:
            doc, found = _parse(text, file, yaml.SafeLoader)
        except yaml.YAMLError as again:
            _raise(file, again)
    if found:
        if problems is None:
            raise SourceError(found)
        problems.extend(found)
    return doc


def read_source(path: str | Path) -> bytes:
    """The bytes of a config or policy file; a missing file is a SourceError."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SourceError([Problem(str(path), 1, (), f"cannot read file: {exc.strerror}")]) from exc


def decode_source(data: bytes, *, file: str) -> str:
    """``data`` as UTF-8 text; SourceError if it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError([Problem(file, 1, (), f"not UTF-8 text: {exc.reason}")]) from exc


def load_yaml(path: str | Path, *, problems: list[Problem] | None = None) -> YamlDocument:
    """Read and parse a YAML file; a missing file is a SourceError too."""
    name = str(path)
    return parse_yaml(decode_source(read_source(path), file=name), file=name, problems=problems)
