"""``ft-gateway check`` on good and broken config and policy files, through the real CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.policy.loading import load_policy_file
from gateway.yamlsource import SourceError
from tests.support.commands import config_naming_an_unset_engine_key
from tests.support.paths import FIXTURES, POLICY, ROOT, policy_with

BROKEN = FIXTURES / "policies" / "broken"
CHAT = "routes./v1/chat/completions.fields"


def run_check(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["check", *args])
    out = capsys.readouterr().out
    return status, out.splitlines()


# One fixture per mistake the issue lists, with the exact lines check must print.
BROKEN_CASES = {
    "unknown-action": [
        f":6: {CHAT}.logprobs.action: Input should be 'pass', 'reject', 'strip', 'rename', "
        "'default' or 'fanout', got \"rejct\" (did you mean 'reject'?)"
    ],
    "unknown-key": [f":9: {CHAT}.n.nuetral: unknown key 'nuetral' (did you mean 'neutral'?)"],
    "wrong-type": [
        f":5: {CHAT}.model.required: Input should be a valid boolean, unable to interpret input, "
        'got "maybe"',
        f":6: {CHAT}.top_p.maximum: Input should be a valid number, unable to parse string as a "
        'number, got "one"',
        f":7: {CHAT}.n.neutral: Input should be a valid list, got 1",
    ],
    "neutral-fails-check": [
        f':7: {CHAT}.n.neutral[0]: neutral value "1" fails the field\'s own check: Invalid type '
        "for 'n': expected an integer, but got a string instead.",
        f":8: {CHAT}.logprobs.neutral[0]: neutral value 0 fails the field's own check: Invalid "
        "type for 'logprobs': expected a boolean, but got an integer instead.",
    ],
    "rename-onto-named": [
        f":7: {CHAT}.max_completion_tokens.to: renames onto 'max_tokens', which this route also "
        "names with action 'reject': the renamed value would bypass that rule"
    ],
    "two-renames-one-target": [
        f":6: {CHAT}.max_completion_tokens.to: renames onto 'max_tokens', as 'max_new_tokens' "
        "does too",
        f":7: {CHAT}.max_new_tokens.to: renames onto 'max_tokens', as 'max_completion_tokens' "
        "does too",
    ],
    "overlay-undefined-route": [
        ":9: models.some-model.routes./v1/completions: overlay for route '/v1/completions', "
        "which is not defined"
    ],
    "duplicate-key": [f":7: {CHAT}.n: duplicate key (first defined on line 6)"],
    "json-schema-misplaced": [
        ":4: routes./v1/chat/completions.answers.schema: Input should be 'off', 'report' or "
        "'enforce', got \"always\"",
        f":6: {CHAT}.seed.json_schema: 'json_schema' is for a value that is a JSON Schema (an "
        "object), and type excludes objects",
        f":7: {CHAT}.tools.json_schema.keywords.maxLength.action: Input should be 'pass' or "
        "'reject', got \"ignore\"",
        f":7: {CHAT}.tools.json_schema.limits.max_depth: Input should be greater than or equal "
        "to 1, got 0",
    ],
    "invalid-yaml": [":6: (top level): invalid YAML: expected ',' or '}', but got ':'"],
}


@pytest.mark.parametrize("name", sorted(BROKEN_CASES))
def test_each_broken_fixture_is_reported_exactly(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = f"tests/fixtures/policies/broken/{name}.yaml"
    status, lines = run_check([path], capsys)
    assert status == 1
    expected = [path + line for line in BROKEN_CASES[name]]
    noun = "problem" if len(expected) == 1 else "problems"
    assert lines == [*expected, f"{len(expected)} {noun} in 1 of 1 files"]


def test_every_broken_fixture_has_a_case() -> None:
    assert {p.stem for p in BROKEN.glob("*.yaml")} - {"many-problems"} == set(BROKEN_CASES)


def test_all_problems_of_a_file_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    path = "tests/fixtures/policies/broken/many-problems.yaml"
    status, lines = run_check([path], capsys)
    assert status == 1
    where = [line.split(": ", 2)[:2] for line in lines[:-1]]
    assert where == [
        [f"{path}:3", "unknown_fields"],
        [f"{path}:8", f"{CHAT}.model"],  # duplicate key
        [f"{path}:9", f"{CHAT}.n.nuetral"],  # unknown key
        [f"{path}:10", f"{CHAT}.logprobs.neutral[0]"],  # neutral fails its check
        [f"{path}:11", f"{CHAT}.seed.type"],  # unknown type name
        [f"{path}:13", f"{CHAT}.max_completion_tokens.to"],  # rename onto a stripped field
        [f"{path}:14", f"{CHAT}.stop"],  # default without value
        [f"{path}:18", "models.some-model.routes./v1/completions"],  # undefined route
    ]
    assert lines[-1] == "8 problems in 1 of 1 files"


def test_server_load_reports_the_same_problems(capsys: pytest.CaptureFixture[str]) -> None:
    path = "tests/fixtures/policies/broken/many-problems.yaml"
    _, lines = run_check([path], capsys)
    with pytest.raises(SourceError) as info:
        load_policy_file(path)
    assert sorted(str(p) for p in info.value.problems) == sorted(lines[:-1])


@pytest.mark.parametrize(
    "path",
    [*sorted(p.relative_to(ROOT) for p in (ROOT / "policies").glob("*.yaml"))]
    + [Path("tests/fixtures/policies/good-overlays.yaml")],
)
def test_good_policies_pass_with_a_summary(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run_check([str(path)], capsys)
    assert status == 0
    assert len(lines) == 1
    assert lines[0].startswith(f"ok: {path} (")
    assert "field rules" in lines[0] and "sha256 " in lines[0]


def test_no_arguments_checks_the_config_and_its_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, lines = run_check([], capsys)
    assert status == 0
    assert len(lines) == 1
    assert lines[0].startswith(
        "ok: config.yaml (upstream http://127.0.0.1:8000, policy policies/ft-serve.yaml); "
        "policies/ft-serve.yaml (10 routes, "
    )


def test_broken_config(capsys: pytest.CaptureFixture[str]) -> None:
    path = "tests/fixtures/configs/broken.yaml"
    status, lines = run_check(["--config", path], capsys)
    assert status == 1
    assert lines == [
        f"{path}:2: listen.prot: unknown key",
        f"{path}:4: upstream.url: String should match pattern '^https?://[^/]+'",
        f"{path}:6: timeouts.connect: Input should be greater than 0",
        "3 problems in 1 of 1 files",
    ]


def test_config_naming_a_broken_policy(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run_check(["--config", "tests/fixtures/configs/broken-policy.yaml"], capsys)
    assert status == 1
    assert lines[0].startswith("tests/fixtures/policies/broken/unknown-action.yaml:6: ")
    assert lines[-1] == "1 problem in 1 of 2 files"


def test_config_and_extra_policies(capsys: pytest.CaptureFixture[str]) -> None:
    status, lines = run_check(
        ["--config", "tests/fixtures/configs/good.yaml", "policies/ft-serve.yaml"], capsys
    )
    assert status == 0
    checked = [part.split(" (")[0] for part in lines[0].removeprefix("ok: ").split("; ")]
    assert checked == [
        "tests/fixtures/configs/good.yaml",
        "tests/fixtures/policies/good-overlays.yaml",
        "policies/ft-serve.yaml",
    ]


def test_environment_overrides_apply_as_in_serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FT_GATEWAY_POLICY", str(BROKEN / "unknown-key.yaml"))
    monkeypatch.setenv("FT_GATEWAY_PORT", "http")
    status, lines = run_check([], capsys)
    assert status == 1
    assert lines[0].startswith("environment:0: listen.port: Input should be a valid integer")


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    status, lines = run_check([str(missing)], capsys)
    assert status == 1
    assert lines[0] == f"{missing}:1: (top level): cannot read file: No such file or directory"


def test_a_fixed_file_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.yaml"
    shutil.copy(BROKEN / "unknown-action.yaml", path)
    assert run_check([str(path)], capsys)[0] == 1
    path.write_text(path.read_text().replace("rejct", "reject"))
    assert run_check([str(path)], capsys)[0] == 0


def test_command_line_entry_point() -> None:
    path = "tests/fixtures/policies/broken/unknown-key.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check", path, "policies/ft-serve.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        f"{path}:9: {CHAT}.n.nuetral: unknown key 'nuetral' (did you mean 'neutral'?)",
        "1 problem in 1 of 2 files",
    ]


EVERY = "no value can pass, every request with the field would be refused"
HEAD = "routes:\n  /v1/chat/completions:\n    fields:\n      model: {action: pass}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", [":1: (top level): a policy file must be a mapping"]),
        ("- a\n", [":1: (top level): a policy file must be a mapping"]),
        ("version: 1\n", [":1: routes: Field required"]),
        (
            "unkown_fields: strip\n" + HEAD,
            [":1: unkown_fields: unknown key 'unkown_fields' (did you mean 'unknown_fields'?)"],
        ),
        (
            "routes:\n  /v1/chat/completion:\n    fields: {}\n",
            [
                ":2: routes./v1/chat/completion: Input should be '/v1/chat/completions', "
                "'/v1/completions', '/v1/embeddings', '/v1/responses', '/v1/rerank', '/rerank', "
                "'/tokenize', '/detokenize', '/v1/messages' or '/v1/messages/count_tokens', got "
                '"/v1/chat/completion" (did you mean '
                "'/v1/chat/completions'?)"
            ],
        ),
        (
            HEAD.replace("    fields:", "    feilds: {}\n    fields:"),
            [f":3: {CHAT[:-7]}.feilds: unknown key 'feilds' (did you mean 'fields'?)"],
        ),
        (
            HEAD + "      stop: {action: pass, items: {type: string, nulable: false}}\n",
            [f":5: {CHAT}.stop.items.nulable: unknown key 'nulable' (did you mean 'nullable'?)"],
        ),
        (
            HEAD + "      a: {action: rename, to: a}\n",
            [f":5: {CHAT}.a.to: renames onto itself"],
        ),
        (
            HEAD + "      a: {action: pass, requires: {a: 1}}\n",
            [f":5: {CHAT}.a.requires: requires itself"],
        ),
        (
            HEAD + "      t: {action: default, value: 5, type: number, maximum: 2}\n",
            [
                f":5: {CHAT}.t.value: default value fails the field's own check: Invalid 't': "
                "decimal above maximum value. Expected a value <= 2, but got 5 instead."
            ],
        ),
        (
            HEAD + "models:\n  m:\n    routes:\n      /v1/chat/completions:\n        fields:\n"
            "          model: {acton: pass}\n          n: {action: rejct}\n",
            [
                ":10: models.m.routes./v1/chat/completions.fields.model.acton: unknown key "
                "'acton' (did you mean 'action'?)",
                ":11: models.m.routes./v1/chat/completions.fields.n.action: Input should be "
                "'pass', 'reject', 'strip', 'rename', 'default' or 'fanout', got \"rejct\" "
                "(did you mean 'reject'?)",
            ],
        ),
        (
            HEAD + "      messages:\n        action: pass\n        select:\n          key: role\n"
            "          rules:\n            user:\n              fields:\n"
            "                content: {action: pass, tpye: string}\n"
            "            bot: {action: rename, to: robot}\n"
            "            dev: {action: default, value: 1}\n"
            "          unknwn: {action: reject}\n",
            [
                f":12: {CHAT}.messages.select.rules.user.fields.content.tpye: unknown key 'tpye' "
                "(did you mean 'type'?)",
                f":15: {CHAT}.messages.select.unknwn: unknown key 'unknwn' (did you mean "
                "'unknown'?)",
            ],
        ),
        (
            HEAD + "      messages:\n        action: pass\n        select:\n          key: role\n"
            "          rules:\n            bot: {action: rename, to: robot}\n"
            "            dev: {action: default, value: 1}\n"
            "            old: {action: rename, to: gone}\n            gone: {action: reject}\n",
            [
                f":10: {CHAT}.messages.select.rules.bot.to: renames role onto 'robot', which "
                "these rules do not name",
                f":11: {CHAT}.messages.select.rules.dev.action: action 'default' is not for a "
                "select's rules",
                f":12: {CHAT}.messages.select.rules.old.to: renames role onto 'gone', which "
                "these rules reject: the renamed member would bypass that rule",
            ],
        ),
        (
            HEAD + "      stream: {action: pass, type: boolean, fields: {}}\n"
            "      seed: {action: pass, type: integer, select: {key: k}}\n"
            "      name: {action: pass, type: string, pattern: '(unclosed'}\n",
            [
                f":5: {CHAT}.stream.fields: 'fields' is for object values, and type excludes them",
                f":6: {CHAT}.seed.select: 'select' is for arrays of objects or an object, and "
                "type excludes both",
                f":7: {CHAT}.name.pattern: not a regular expression: missing ), unterminated "
                "subpattern at position 0",
            ],
        ),
        (
            HEAD + "      n: {action: fanout, type: integer}\n      best_of: {action: fanout}\n",
            [
                f":5: {CHAT}.n: action 'fanout' needs 'maximum' (the most requests one client "
                "request may become)",
                f":6: {CHAT}.best_of.action: action 'fanout' is only for the field 'n'",
            ],
        ),
        (
            HEAD + "      n: {action: reject, neutral: [2], type: integer}\n"
            "profiles:\n  p:\n    routes:\n      /v1/chat/completions:\n        fields:\n"
            "          n: {maximum: 1}\n",
            [
                ":11: profiles.p.routes./v1/chat/completions.fields.n.neutral[0]: neutral value 2 "
                "fails the field's own check: Invalid 'n': integer above maximum value. Expected "
                "a value <= 1, but got 2 instead."
            ],
        ),
        # Rules no value can pass (the two, and their kin).
        (
            HEAD + "      temperature: {action: pass, type: number, minimum: 2, maximum: 0}\n",
            [
                f":5: {CHAT}.temperature.minimum: minimum 2 is above maximum 0: {EVERY}",
            ],
        ),
        (
            HEAD + "      service_tier:\n        action: pass\n        enum: []\n",
            [f":7: {CHAT}.service_tier.enum: an empty enum: {EVERY}"],
        ),
        (
            HEAD + "      stop: {action: pass, type: array, min_items: 3, max_items: 2,\n"
            "             items: {type: string, min_length: 5, max_length: 4}}\n",
            [
                f":5: {CHAT}.stop.min_items: min_items 3 is above max_items 2: {EVERY}",
                f":6: {CHAT}.stop.items.min_length: min_length 5 is above max_length 4: {EVERY}",
            ],
        ),
        (
            HEAD + "      n: {action: pass, type: integer, minimum: 1.2, maximum: 1.8}\n"
            "      user: {action: pass, type: string, enum: [1, 2]}\n",
            [
                f":5: {CHAT}.n.minimum: no integer lies between minimum and maximum: {EVERY}",
                f":6: {CHAT}.user.enum: every enum value fails the field's own checks: {EVERY}",
            ],
        ),
        (
            HEAD + "      seed: {action: pass, type: integer, minimum: 0}\n"
            "profiles:\n  p:\n    routes:\n      /v1/chat/completions:\n        fields:\n"
            "          seed: {maximum: -1}\n",
            [
                ":11: profiles.p.routes./v1/chat/completions.fields.seed.minimum: minimum 0 is "
                f"above maximum -1: {EVERY}"
            ],
        ),
    ],
)
def test_more_mistakes(
    text: str, expected: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    status, lines = run_check([str(path)], capsys)
    assert status == 1
    assert lines[:-1] == [f"{path}{line}" for line in expected]


def test_api_keys_are_checked_against_the_policy_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.yaml"
    digest = "a" * 64
    keys.write_text(
        f"keys:\n  - {{name: alice, sha256: {digest}, profile: lenient}}\n"
        f"  - {{name: bob, sha256: {'b' * 64}, profile: batch}}\n"
    )
    config = tmp_path / "gw.yaml"
    policy = FIXTURES / "policies" / "good-overlays.yaml"
    config.write_text(f"policy: {policy}\nauth:\n  keys_file: keys.yaml\n")
    status, lines = run_check(["--config", str(config)], capsys)
    assert status == 1
    assert len(lines) == 2
    assert lines[0].startswith(f"{keys}:3: ")
    assert "batch" in lines[0]
    assert lines[1] == "1 problem in 1 of 3 files"

    keys.write_text(f"keys:\n  - {{name: alice, sha256: {digest}, profile: lenient}}\n")
    status, lines = run_check(["--config", str(config)], capsys)
    assert status == 0
    assert lines[0].endswith(f"; {keys} (1 API keys)")


def test_report_only_rules_are_counted_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = policy_with(
        tmp_path, "enforcement: enforce\nprofiles:\n  canary: {enforcement: report}\n"
    )
    status, lines = run_check([str(path)], capsys)
    assert status == 0
    assert lines[0].endswith("; 1 report-only (enforcement: report))")
    status, lines = run_check([str(POLICY)], capsys)
    assert "report-only" not in lines[0]


def test_an_unset_engine_key_variable_fails_check_as_it_fails_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_naming_an_unset_engine_key(tmp_path, monkeypatch)
    status, lines = run_check(["--config", str(config)], capsys)
    assert status == 1
    assert lines == [
        f"{config}:3: upstream.api_key_env: variable FT_TEST_ENGINE_KEY is not set: the engine "
        "would get requests without its key",
        "1 problem in 1 of 2 files",
    ]
    monkeypatch.setenv("FT_TEST_ENGINE_KEY", "sk-engine")
    status, lines = run_check(["--config", str(config)], capsys)
    assert status == 0


def test_limits_are_checked_against_the_keys_as_a_reload_checks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys:\n  - {{name: alice, sha256: {'a' * 64}}}\n")
    config = tmp_path / "gw.yaml"
    config.write_text(
        f"policy: {POLICY}\nauth:\n  keys_file: keys.yaml\n"
        "rate_limits:\n  keys:\n    erin: {requests_per_minute: 1}\n"
    )
    status, lines = run_check(["--config", str(config)], capsys)
    assert status == 1
    assert lines == [
        f"{config}:6: rate_limits.keys.erin: no API key is named 'erin'",
        "1 problem in 1 of 3 files",
    ]
