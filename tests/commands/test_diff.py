"""``ft-gateway diff``: two policies by their effect (layout, anchors and texts do not
count), per route and overlay, and over recorded bodies; exit 0 same, 1 differ, 2 unreadable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gateway.cli import main
from tests.support.bodies import MODEL
from tests.support.commands import ft_gateway
from tests.support.paths import POLICY


def edited(tmp_path: Path, *replacements: tuple[str, str], more: str = "") -> Path:
    """The shipped policy with the first occurrence of each ``old`` (the chat route's)
    replaced, and ``more`` appended."""
    text = POLICY.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "candidate.yaml"
    path.write_text(text + more)
    return path


def test_the_same_policy_laid_out_otherwise_has_the_same_effect(tmp_path: Path) -> None:
    # Re-written with no comments, no anchors, keys in another order, other reasons.
    data = yaml.safe_load(POLICY.read_text())
    chat = data["routes"]["/v1/chat/completions"]["fields"]
    chat["logprobs"]["reason"] = "Not yet."
    data["routes"]["/v1/chat/completions"]["fields"] = dict(reversed(list(chat.items())))
    path = tmp_path / "same.yaml"
    path.write_text(yaml.safe_dump(data, default_flow_style=False))
    done = ft_gateway("diff", "policies/ft-serve.yaml", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[2] == "the same effect on every route, model and profile"


CANARY = """profiles:
  canary:
    routes:
      /v1/chat/completions:
        fields:
          logprobs: {enforcement: report}
          n: {maximum: 16}
"""


def test_only_the_verdicts_that_differ_are_listed(tmp_path: Path) -> None:
    candidate = edited(
        tmp_path,
        ("maximum: 2}\n      top_p", "maximum: 1.5}\n      top_p"),
        (
            "      seed: {action: pass, type: integer, minimum: -9223372036854775808, maximum: "
            "9223372036854775807}",
            "      seed: {action: reject, type: integer}",
        ),
        ("            function: {action: reject,", "            function: {action: strip,"),
        more=CANARY,
    )
    done = ft_gateway("diff", "policies/ft-serve.yaml", str(candidate))
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[2:] == [
        "/v1/chat/completions",
        "  messages[role=function]  reject -> strip",
        "  temperature              maximum 2 -> 1.5",
        "  seed                     pass -> reject; minimum -9223372036854775808 -> (none); "
        "maximum 9223372036854775807 -> (none)",
        "profile canary, /v1/chat/completions",
        '  logprobs                 enforcement "enforce" -> "report"',
        "  n                        maximum 8 -> 16",
    ]
    done = ft_gateway("diff", "policies/ft-serve.yaml", str(candidate), "--json")
    data = json.loads(done.stdout)
    first = data["rules"][0]
    assert (first["context"], first["route"], first["path"]) == (
        "route",
        "/v1/chat/completions",
        "messages[role=function]",
    )
    assert first["changes"] == {"action": ["reject", "strip"]}
    assert [r["context"] for r in data["rules"]][-2:] == ["profile canary"] * 2


def test_a_route_one_policy_leaves_out_is_one_line(tmp_path: Path) -> None:
    data = yaml.safe_load(POLICY.read_text())
    del data["routes"]["/v1/responses"]
    path = tmp_path / "two-routes.yaml"
    path.write_text(yaml.safe_dump(data))
    done = ft_gateway("diff", "policies/ft-serve.yaml", str(path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()[2:]
    assert lines[0] == "/v1/responses"
    assert lines[1].split(maxsplit=2)[:2] == ["(the", "route)"]
    assert "named -> not named; rules " in lines[1] and lines[1].endswith(" -> (none)")
    assert len(lines) == 2


def test_recorded_bodies_that_change_verdict_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = edited(
        tmp_path,
        ("      logprobs:\n        action: reject\n", "      logprobs:\n        action: pass\n"),
    )
    user = [{"role": "user", "content": "hi"}]
    lines = [
        {"model": MODEL, "messages": user, "logprobs": True},
        {"model": MODEL, "messages": user, "logprobs": True, "top_logprobs": 2},
        {"model": MODEL, "messages": user, "user": "u"},
        {
            "route": "/v1/chat/completions",
            "profile": None,
            "body": {"model": MODEL, "messages": user, "logprobs": True},
        },
        {"model": MODEL, "prompt": "hi", "logprobs": 2},
    ]
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["diff", str(POLICY), str(candidate), "--bodies", str(bodies)]) == 1
    out = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(out) if line.startswith("bodies: "))
    assert out[at:] == [
        f"bodies: 5 from {bodies}: 2 change verdict, 1 refused with another error",
        "  2  refused 'logprobs' unsupported_parameter -> unchanged",
        "  1  refused 'logprobs' unsupported_parameter -> refused 'top_logprobs' "
        "unsupported_parameter",
    ]
    assert main(["diff", str(POLICY), str(candidate), "--bodies", str(bodies), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)["bodies"]
    assert (found["bodies"], found["change_verdict"], found["refused_otherwise"]) == (5, 2, 1)
    # A case file is a source of bodies too, and the same policy changes none.
    cases = str(POLICY.parent / "cases" / "ft-serve.yaml")
    assert main(["diff", str(POLICY), str(POLICY), "--bodies", cases]) == 0
    assert " 0 change verdict" in capsys.readouterr().out


def test_an_unreadable_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    done = ft_gateway(
        "diff", "policies/ft-serve.yaml", "policies/ft-serve.yaml", "--bodies", str(bad)
    )
    assert done.returncode == 2
    assert f"{bad}:1: " in done.stderr
    done = ft_gateway("diff", "policies/ft-serve.yaml", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2
