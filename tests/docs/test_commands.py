"""Every ``ft-gateway`` command the documentation shows names a real subcommand and
only flags that subcommand accepts, checked with the real argparse parser; the
examples whose output is shown, and whose files exist, print exactly that."""

from __future__ import annotations

import argparse
import io
import os
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn
from unittest import mock

import pytest

from gateway import cli
from tests.docs.markdown import PAGES, ROOT, Block, blocks, code_spans

SHELL = ("sh", "shell", "bash", "console")
# Shell operators end a command: what follows is not its arguments.
_OPERATORS = set("();<>|&")
# Inline code that starts like a command but is not one.
NOT_COMMANDS = {
    "ft-gateway serving on http://HOST:PORT with N workers (pids ...)": "serve's log line",
}


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
    raise _Built(self)


def real_parser() -> argparse.ArgumentParser:
    """The parser ``ft-gateway`` builds, taken at the moment it would parse: no command runs."""
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _stop):
        try:
            cli.main([])
        except _Built as built:
            return built.parser
    raise AssertionError("gateway.cli.main returned without parsing its arguments")


PARSER = real_parser()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("ft-gateway has no subcommands")


SUBCOMMANDS = subcommands(PARSER)
TOP_FLAGS = {s for action in PARSER._actions for s in action.option_strings}


@dataclass(frozen=True)
class Invocation:
    """``ft-gateway ARGS`` as a page shows it."""

    where: str
    args: list[str]
    synopsis: bool  # a usage line ([optional] parts, placeholders, ...): flag names only

    def __str__(self) -> str:
        return f"{self.where}: ft-gateway {' '.join(self.args)}"


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def invocations(command: str, *, where: str, names_only: bool = False) -> Iterator[Invocation]:
    """The ft-gateway (or ``python -m gateway``) invocations in one shell command."""
    synopsis = names_only or "[" in command or "..." in command
    if synopsis:
        command = command.replace("|", " ")  # alternatives in a usage line, not pipes
    if "ft-gateway" not in command and "-m gateway" not in command:
        return
    try:
        tokens = _tokens(command)
    except ValueError as exc:
        pytest.fail(f"{where}: cannot read the command {command!r}: {exc}")
    for i, token in enumerate(tokens):
        if token == "ft-gateway" or token.endswith("bin/ft-gateway"):
            start = i + 1
        elif token == "gateway" and tokens[i - 1 : i] == ["-m"]:
            start = i + 1
        else:
            continue
        args = []
        for arg in tokens[start:]:
            if set(arg) <= _OPERATORS:
                break
            args.append(arg)
        yield Invocation(where, args, synopsis)


def _shell_commands(block: Block) -> Iterator[tuple[int, str]]:
    """(line, command) for each command of a shell block; in a console block only the
    ``$ `` lines (what follows them is output). Backslash continuations are joined."""
    pending: list[str] = []
    first = 0
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if not pending:
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            first = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        yield first, " ".join([*pending, line])
        pending = []
    if pending:
        yield first, " ".join(pending)


def _all_invocations() -> list[Invocation]:
    found: list[Invocation] = []
    for page in PAGES:
        name = page.relative_to(ROOT)
        for block in blocks(page):
            if block.lang in SHELL:
                for number, command in _shell_commands(block):
                    found.extend(invocations(command, where=f"{name}:{number}"))
        for span in code_spans(page):
            if span.text in NOT_COMMANDS:
                continue
            if span.text.startswith(("ft-gateway ", ".venv/bin/ft-gateway ", "python -m gateway ")):
                # Prose names a command with only some of its arguments.
                found.extend(invocations(span.text, where=span.where, names_only=True))
    return found


INVOCATIONS = _all_invocations()


def test_the_pages_show_every_subcommand() -> None:
    shown = {inv.args[0] for inv in INVOCATIONS if inv.args and inv.args[0] not in TOP_FLAGS}
    assert shown == set(SUBCOMMANDS), f"shown {sorted(shown)}, the CLI has {sorted(SUBCOMMANDS)}"


@pytest.mark.parametrize("inv", INVOCATIONS, ids=str)
def test_command_uses_a_real_subcommand_and_its_flags(inv: Invocation) -> None:
    assert inv.args, f"{inv}: no subcommand"
    if inv.args[0] in TOP_FLAGS:  # ft-gateway --version
        assert len(inv.args) == 1, f"{inv}: ft-gateway's own flags take no subcommand after them"
        return
    name = inv.args[0]
    assert name in SUBCOMMANDS, f"{inv}: no subcommand {name!r} (there are {sorted(SUBCOMMANDS)})"
    known = {s for action in SUBCOMMANDS[name]._actions for s in action.option_strings}
    for arg in inv.args[1:]:
        flag = arg.strip("[]").split("=")[0]
        if flag.startswith("-") and flag not in ("-", "--"):
            assert flag in known, f"{inv}: 'ft-gateway {name}' has no flag {flag} ({sorted(known)})"
    if inv.synopsis:
        return
    try:
        PARSER.parse_args(inv.args)
    except SystemExit:
        pytest.fail(f"{inv}: the real parser refuses it (its message is above)")


@dataclass(frozen=True)
class Example:
    """A console command with the output the page shows for it."""

    where: str
    stdin: bytes | None
    args: list[str]
    output: list[str]


def _runnable(block: Block) -> Iterator[Example]:
    """``$ [echo 'JSON' |] ft-gateway check|explain ...`` with its shown output, when
    every file it names is in the repository (others show files of the reader's own)."""
    lines = block.text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("$ ") or "ft-gateway" not in line:
            continue
        output = []
        for later in lines[i + 1 :]:
            if later.startswith("$ "):
                break
            output.append(later)
        tokens = _tokens(line[2:])
        stdin = None
        if tokens[:1] == ["echo"] and "|" in tokens:
            pipe = tokens.index("|")
            stdin = (" ".join(tokens[1:pipe]) + "\n").encode()
            tokens = tokens[pipe + 1 :]
        if tokens[:1] != ["ft-gateway"] or tokens[1:2] not in (["check"], ["explain"]):
            continue
        files = [t for t in tokens[2:] if not t.startswith("-")]
        if all((ROOT / f).exists() for f in files):
            where = f"{block.page.relative_to(ROOT)}:{block.line + 1 + i}"
            yield Example(where, stdin, tokens[1:], output)


EXAMPLES = [e for page in PAGES for b in blocks(page) if b.lang == "console" for e in _runnable(b)]


def test_some_examples_are_run() -> None:
    assert {e.args[0] for e in EXAMPLES} == {"check", "explain"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.where)
def test_example_prints_what_the_page_shows(
    example: Example, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    for name in list(os.environ):
        if name.startswith("FT_GATEWAY_"):
            monkeypatch.delenv(name)
    if example.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(example.stdin)))
    cli.main(example.args)
    printed = capsys.readouterr().out.splitlines()
    assert printed == example.output, f"{example.where}: the page shows other output"
