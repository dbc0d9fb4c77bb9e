"""``ft-gateway check`` on a fleet: each mistake of the table named at its line in the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.cli import main
from tests.support.paths import FIXTURES, POLICY

OVERLAYS = FIXTURES / "policies" / "good-overlays.yaml"  # an overlay for "big-model"
GOOD = f"""\
policy: {POLICY}
deployments:
  - name: chat
    upstream: {{urls: ["http://127.0.0.1:9001", "http://127.0.0.1:9002"], routing: affinity}}
    models: [alpha]
    aliases:
      gpt-4o-mini: alpha
      alpha-legacy: {{to: alpha, hidden: true}}
    owned_by: team-a
  - name: chat-b
    upstream: {{url: "http://127.0.0.1:9003"}}
    models: [beta]
"""


def check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    status = main(["check", "--config", str(config)])
    return status, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    "edit",
    [
        ("", ""),
        # A failover serves the same name: the two may share it (and only they).
        ("owned_by: team-a", "failover: chat-b"),
    ],
)
def test_a_good_fleet_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str]
) -> None:
    text = GOOD.replace("models: [beta]", "models: [beta, alpha]") if edit[0] else GOOD
    status, lines = check(tmp_path, text.replace(*edit) if edit[0] else text, capsys)
    assert (status, lines[0][:4]) == (0, "ok: "), lines


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("models: [beta]", "models: [beta, alpha]"),
            ":12: deployments[1].models[1]: model 'alpha' is already served by 'chat'",
        ),
        (
            ("models: [beta]", "models: [beta]\n    aliases: {alpha: beta}"),
            ":13: deployments[1].aliases.alpha: 'alpha' is already a model name of 'chat'",
        ),
        (
            ("gpt-4o-mini: alpha", "gpt-4o-mini: beta"),
            ":7: deployments[0].aliases.gpt-4o-mini.to: 'beta' is not served by 'chat' "
            "(served by 'chat-b': alias it there)",
        ),
        (
            ("gpt-4o-mini: alpha", "gpt-4o-mini: nobody"),
            ":7: deployments[0].aliases.gpt-4o-mini.to: 'nobody' is not served by 'chat'",
        ),
        (
            ("owned_by: team-a", "failover: chat-b"),
            ":9: deployments[0].failover: 'chat-b' does not serve ['alpha']: "
            "failover never answers with another model",
        ),
        (
            ("owned_by: team-a", "failover: chat-c"),
            ":9: deployments[0].failover: no deployment is named 'chat-c'",
        ),
        (
            ("name: chat-b", "name: chat"),
            ":10: deployments[1].name: deployment 'chat' is named twice",
        ),
        (
            ("owned_by: team-a", f"policy: {OVERLAYS}"),
            f":9: deployments[0].policy: {OVERLAYS} has an overlay for model 'big-model', "
            "which 'chat' does not serve (its models: ['alpha'])",
        ),
        (
            ("upstream: {url:", "upstream: {responses: native, url:"),
            ":11: deployments[1].upstream.responses: the Responses mode is the gateway's "
            "(upstream.responses: translate) for every deployment",
        ),
    ],
)
def test_each_fleet_mistake_is_named_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str], expected: str
) -> None:
    status, lines = check(tmp_path, GOOD.replace(*edit), capsys)
    assert status == 1
    config = str(tmp_path / "config.yaml")
    assert [line.removeprefix(config) for line in lines[:-1]] == [expected]
