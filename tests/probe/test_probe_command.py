"""``ft-gateway probe``, the command, against the reference engine over loopback: the
table it prints, the report and policy it writes, and its refusals of bad input, of
an engine it cannot reach and of a model the engine does not serve. What the probe
finds, and the policy it writes used in the gateway: test_refengine.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gateway.cli import main
from gateway.policy.cases import load_cases
from gateway.policy.loading import load_policy_file
from gateway.policy.schema import policy_schema
from gateway.probe.route import CHAT
from refengine import create_app as create_engine
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.paths import ROOT
from tests.support.servers import ServerThread, free_port


def test_probe_command_prints_the_table_and_writes_report_and_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, report = tmp_path / "engine.yaml", tmp_path / "engine.md"
    with ServerThread(create_engine()) as engine:
        code = main(
            [
                "probe",
                "--upstream",
                engine.url,
                "--model",
                MODEL,
                "--route",
                "chat",
                "--extra",
                json.dumps(NO_THINKING),
                "--out",
                str(out),
                "--report",
                str(report),
            ]
        )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "  seed " in captured.out and "honoured" in captured.out
    assert f"policy written to {out}" in captured.err
    assert main(["check", str(out)]) == 0, capsys.readouterr().out
    # Its first line points editors to the schema, and it validates against it (as
    # the code states it: tests/commands/test_schema.py keeps the file up to date).
    schema_line = out.read_text().splitlines()[0]
    schema_path = out.parent / schema_line.removeprefix("# yaml-language-server: $schema=")
    assert schema_path.resolve() == ROOT / "gateway" / "policy.schema.json"
    jsonschema.validate(yaml.safe_load(out.read_text()), policy_schema())
    policy, _ = load_policy_file(out)
    assert list(policy.routes) == [CHAT]
    fields = policy.routes[CHAT].fields
    assert fields["n"].action == "fanout"
    messages = fields["messages"].select
    assert messages is not None and messages.key == "role"
    assert messages.rules["developer"].to == "system"
    assert messages.unknown.action == "reject"
    text = report.read_text()
    assert "| n | **ignored** | — | n 2: one choice came back |" in text
    assert "| image_url part | **ignored** | — | an image_url part beside a text part" in text
    # Beside the policy, its test cases: the probe's own requests and the verdicts the
    # written policy gives them; they pass against it and fail where another differs.
    cases = tmp_path / "engine.cases.yaml"
    assert f"test cases written to {cases}" in captured.err
    assert main(["test", str(out), str(cases)]) == 0, capsys.readouterr().out
    assert " 0 failed" in capsys.readouterr().out
    written = load_cases(str(cases)).cases
    assert {c.route for c in written} == {CHAT}
    by_name = {c.name: c for c in written}
    refused = by_name[f"{CHAT} temperature=0 (honoured), logprobs=true (ignored)"].expect
    assert (refused.verdict, refused.param, refused.code) == (
        "refused",
        "logprobs",
        "unsupported_parameter",
    )
    assert by_name[f"{CHAT} temperature=1.0 (honoured), n=2 (ignored)"].fanout == 2
    assert f"{CHAT} temperature=0 (honoured), messages [system, user]" in by_name
    # The written policy passes seed; the unpatched sampler's policy would not.
    unpatched = tmp_path / "unpatched.yaml"
    unpatched.write_text(
        out.read_text().replace(
            "      seed:\n        action: pass", "      seed:\n        action: reject", 1
        )
    )
    assert main(["test", str(unpatched), str(cases)]) == 1
    fails = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert fails and all("refused on 'seed' with unsupported_parameter" in f for f in fails)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--extra", "[1]"], "--extra must be a JSON object"),
        (["--extra", "{"], "--extra is not JSON"),
        (["--out", "/nonexistent-dir/p.yaml"], "--out: no such directory: /nonexistent-dir"),
        (["--upstream", "127.0.0.1:8000"], "--upstream must be an http(s) URL"),
        (["--timeout", "0"], "--timeout and --max-requests must be positive"),
    ],
)
def test_probe_command_refuses_bad_input_before_sending_anything(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The upstream is a closed port: any request sent would fail differently.
    base = ["probe", "--upstream", f"http://127.0.0.1:{free_port()}", "--model", MODEL]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err


def test_probe_command_names_the_problem_when_the_engine_cannot_be_reached(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "p.yaml"
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["probe", "--upstream", url, "--model", MODEL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "did not answer the plain request to /v1/chat/completions" in err
    assert "ConnectError" in err
    assert not out.exists()


def test_probe_command_names_the_problem_when_the_model_is_wrong(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ServerThread(create_engine()) as engine:
        code = main(["probe", "--upstream", engine.url, "--model", "gpt-4", "--route", "chat"])
    assert code == 2
    err = capsys.readouterr().err
    assert "(model 'gpt-4'): HTTP 404" in err
