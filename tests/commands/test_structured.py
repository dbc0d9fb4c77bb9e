"""``check``, ``explain``, ``test`` and ``diff`` read the schema rules and the answer
checks as the server does (tests/fixtures/policies/structured.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.commands import ft_gateway
from tests.support.schemas import STRUCTURED, formatted, person

CASES = "tests/fixtures/cases/structured.yaml"


def test_check_counts_a_report_only_keyword() -> None:
    done = ft_gateway("check", str(STRUCTURED))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 report-only" in done.stdout


def test_the_cases_of_schema_rules_pass_and_cover() -> None:
    done = ft_gateway("test", str(STRUCTURED), CASES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 cases, 4 passed, 0 failed" in done.stdout


def test_a_case_expecting_the_wrong_path_fails_naming_it(tmp_path: Path) -> None:
    cases = Path(CASES).read_text().replace("properties.name.maxLength", "properties.name")
    path = tmp_path / "cases.yaml"
    path.write_text(cases)
    done = ft_gateway("test", str(STRUCTURED), str(path))
    assert done.returncode == 1
    assert "response_format.json_schema.schema.properties.name.maxLength" in done.stdout


def test_explain_names_the_keyword_and_the_answer_checks(tmp_path: Path) -> None:
    body = formatted(person(a={"type": "string", "minLength": 1}), tool_choice="required")
    body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": person()}}]
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    done = ft_gateway("explain", "--policy", str(STRUCTURED), "--json", str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == 200
    assert result["answer_checks"] == [
        "schema (enforce): the content against response_format.json_schema.schema",
        "tool_arguments (enforce): each call's arguments (f)",
        "tool_choice (enforce): a call",
    ]
    body["response_format"]["json_schema"]["schema"] = person(a={"type": "string", "maxLength": 1})
    path.write_text(json.dumps(body))
    done = ft_gateway("explain", "--policy", str(STRUCTURED), str(path))
    assert "-> HTTP 400 to the client" in done.stdout
    assert "response_format.json_schema.schema.properties.a.maxLength  rejected" in done.stdout


def test_diff_lists_a_keyword_verdict_and_an_answer_check_that_move(tmp_path: Path) -> None:
    text = STRUCTURED.read_text()
    text = text.replace(
        'maxLength: {action: reject, reason: "The engine ignores maxLength."}',
        'maxLength: {action: pass, reason: "Honoured since 1.2."}',
    ).replace("answers: {schema: enforce,", "answers: {schema: report,", 1)
    path = tmp_path / "candidate.yaml"
    path.write_text(text)
    done = ft_gateway("diff", str(STRUCTURED), str(path), "--json")
    assert done.returncode == 1, done.stderr
    changes = json.loads(done.stdout)["rules"]
    found = {(c["route"], c["path"], c["context"]): c["changes"] for c in changes}
    keyword = "response_format[type=json_schema].json_schema.schema.(json_schema).maxLength"
    assert found[("/v1/chat/completions", keyword, "route")] == {"action": ["reject", "pass"]}
    assert found[("/v1/chat/completions", "(answers)", "route")] == {
        "schema": ["enforce", "report"]
    }
    assert ("/v1/responses", "(answers)", "route") not in found
    # A reason alone is no change.
    reworded = STRUCTURED.read_text().replace("The engine ignores maxLength.", "Dropped.")
    path.write_text(reworded)
    assert ft_gateway("diff", str(STRUCTURED), str(path)).returncode == 0
