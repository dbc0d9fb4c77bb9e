"""YAML files that remember where each key came from.

Config and policy errors must name the file, the key path and the line, and a
duplicated key must be an error rather than a silent "last one wins".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def parse_yaml(text: str, *, file: str, problems: list[Problem] | None = None) -> YamlDocument:
    """Parse ``text``; raise SourceError for YAML syntax errors and duplicate keys.

    With a ``problems`` list, duplicate keys are appended to it instead and the
    document (first definition of each key) is returned, so that a checker can
    report them together with everything else wrong in the file.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        doc = YamlDocument(file=file, data=None)
        found: list[Problem] = []
        if node is not None:
            _walk(node, (), doc, found)
            doc.data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise SourceError([Problem(file, line, (), f"invalid YAML: {exc.problem}")]) from exc
    except yaml.YAMLError as exc:
        raise SourceError([Problem(file, 1, (), f"invalid YAML: {exc}")]) from exc
    finally:
        loader.dispose()
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
