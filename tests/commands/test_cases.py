"""``ft-gateway test``: the shipped policy passes its case file; a flipped rule fails with
the case's file, line and what differs; exit codes for CI (0 pass, 1 fail, 2 unreadable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from tests.support.commands import ft_gateway
from tests.support.paths import POLICY

CASES = POLICY.parent / "cases" / "ft-serve.yaml"


def test_the_shipped_policy_passes_its_cases_and_they_reach_every_rule() -> None:
    done = ft_gateway(
        "test", "policies/ft-serve.yaml", "policies/cases/ft-serve.yaml", "--coverage"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("policies/cases/ft-serve.yaml: ")
    assert lines[0].endswith(" passed, 0 failed")
    assert lines[-1] == "coverage: 0 rules reached by no case"


def flipped(tmp_path: Path, old: str, new: str) -> Path:
    path = tmp_path / "policy.yaml"
    text = POLICY.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return path


def line_of(name: str) -> int:
    """The line of the case named ``name`` in the shipped case file."""
    lines = CASES.read_text().splitlines()
    return lines.index(f"- name: {name}") + 1


def test_a_flipped_rule_fails_with_a_clear_line(tmp_path: Path) -> None:
    # logprobs moved from reject to pass: its refusal case fails, and only it.
    policy = flipped(
        tmp_path,
        "      logprobs:\n        action: reject\n        type: boolean",
        "      logprobs:\n        action: pass\n        type: boolean",
    )
    done = ft_gateway("test", str(policy), "policies/cases/ft-serve.yaml")
    assert done.returncode == 1
    fails = [line for line in done.stdout.splitlines() if line.startswith("FAIL ")]
    assert fails == [
        f"FAIL policies/cases/ft-serve.yaml:{line_of('logprobs is refused')}: logprobs is "
        "refused (/v1/chat/completions): expected refused on 'logprobs' with "
        "unsupported_parameter, got forwarded unchanged",
    ]
    assert done.stdout.splitlines()[-1].endswith(" passed, 1 failed")


def test_a_changed_range_names_the_path_that_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = flipped(
        tmp_path,
        "      max_completion_tokens: {action: rename, to: max_tokens,",
        "      max_completion_tokens: {action: rename, to: max_new_tokens,",
    )
    assert main(["test", str(policy), str(CASES)]) == 1
    out = capsys.readouterr().out
    assert (
        "max_completion_tokens is renamed to max_tokens (/v1/chat/completions): forwarded body "
        "differs at 'max_tokens': expected 1, got no such field"
    ) in out


CASE = """version: 1
cases:
  - name: a
    body: {model: m, messages: [{role: user, content: hi}], temperature: 5}
    expect: {refused: {param: temperature, code: integer_above_max_value}}
"""


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [
        # temperature is a number: OpenAI says "decimal" whatever the JSON value's form.
        (CASE, 1, "got refused on 'temperature' with decimal_above_max_value"),
        (CASE.replace("integer", "decimal"), 0, "1 cases, 1 passed, 0 failed"),
        (CASE.replace("temperature: 5", "temperature: 1"), 1, "got forwarded unchanged"),
        (CASE + "    profile: nightly\n", 1, "profile 'nightly' is not defined in the policy"),
        (CASE.replace("expect: {", "expect: {changed: 1, "), 2, "cases.yaml:5: cases[0].expect: "),
        (CASE.replace("    body:", "    bdy:"), 2, "cases.yaml:4: cases[0].bdy: unknown key 'bdy'"),
        (CASE.replace("name: a", "name: a\n    route: /v1/audio/speech"), 2, "cases[0].route"),
        ("cases: 3\n", 2, "a case file is a mapping with a list 'cases'"),
    ],
)
def test_case_file_verdicts_and_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, status: int, message: str
) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(text)
    assert main(["test", str(POLICY), str(path)]) == status
    out, err = capsys.readouterr()
    assert message in out + err


def test_an_unreadable_policy_exits_2(tmp_path: Path) -> None:
    done = ft_gateway("test", str(tmp_path / "missing.yaml"), "policies/cases/ft-serve.yaml")
    assert done.returncode == 2
    assert "cannot read file" in done.stderr
