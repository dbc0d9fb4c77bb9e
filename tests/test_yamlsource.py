"""gateway/yamlsource.py: libyaml's parser where it reads a text as PyYAML's does, and
PyYAML's own reading (its values, its errors) everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway import yamlsource
from gateway.yamlsource import SourceError, YamlDocument, parse_yaml

ROOT = Path(__file__).resolve().parent.parent


def _as_pyyaml_reads(text: str, monkeypatch: pytest.MonkeyPatch) -> YamlDocument | str:
    """What parse_yaml gave before libyaml: the document, or the error's text."""
    with monkeypatch.context() as patch:
        patch.setattr(yamlsource, "_FAST_LOADER", yaml.SafeLoader)
        try:
            return parse_yaml(text, file="f.yaml")
        except SourceError as exc:
            return str(exc)


def _reads(text: str) -> YamlDocument | str:
    try:
        return parse_yaml(text, file="f.yaml")
    except SourceError as exc:
        return str(exc)


def test_libyaml_is_the_parser_here() -> None:
    # PyYAML's wheels carry libyaml: without it every file is read by the slow parser.
    assert yamlsource._FAST_LOADER.__name__ == "CSafeLoader"


@pytest.mark.parametrize(
    "path", ["policies/ft-serve.yaml", "config.yaml", "deploy/helm/ft-gateway/values.yaml"]
)
def test_a_shipped_file_reads_the_same_with_the_same_lines(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / path).read_text()
    assert _reads(text) == _as_pyyaml_reads(text, monkeypatch)


@pytest.mark.parametrize(
    "text",
    [
        # What the two parsers read differently: PyYAML refuses a tab between tokens
        # (libyaml takes it), and reads a bare tag and a byte-order mark past the start
        # as other values. Each is PyYAML's reading still.
        "a:\tb\n",
        "a: [b,\tc]\n",
        "! :\n",
        "a: !\n",
        "\ufeff\ufeff",
        "a: b\n\ufeff\n",
        "\ufeffa: b\n",
        # Errors: PyYAML's wording and line, not libyaml's.
        "listen: [\n",
        "a: {b: 1: 2}\n",
        "a: b: c\n",
        "a:\n  - b\n c: d\n",
        "a: *nope\n",
        # A directive libyaml refuses and PyYAML reads.
        "%YAML 1.3\n---\na: b\n",
        # Duplicate keys, found in the nodes either parser gives.
        "a: 1\nb: 2\na: 3\n",
        "",
    ],
)
def test_a_text_reads_as_pyyaml_reads_it(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _reads(text) == _as_pyyaml_reads(text, monkeypatch)


def test_an_error_names_the_line_in_pyyamls_words() -> None:
    with pytest.raises(SourceError) as raised:
        parse_yaml("a: 1\nb: {c: 1: 2}\n", file="p.yaml")
    assert (
        str(raised.value) == "p.yaml:2: (top level): invalid YAML: expected ',' or '}', but got ':'"
    )


def test_keys_keep_their_lines_and_the_first_definition_wins() -> None:
    problems: list[yamlsource.Problem] = []
    doc = parse_yaml("a:\n  b: 1\n  b: 2\nc: [x, y]\n", file="p.yaml", problems=problems)
    assert doc.data == {"a": {"b": 1}, "c": ["x", "y"]}
    assert doc.lines[("a", "b")] == 2 and doc.lines[("c", 1)] == 4
    assert [str(p) for p in problems] == ["p.yaml:3: a.b: duplicate key (first defined on line 2)"]
