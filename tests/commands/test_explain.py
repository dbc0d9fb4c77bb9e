"""``ft-gateway explain``: field by field, and never in disagreement with the server."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app.factory import create_app
from gateway.cli import main
from gateway.commands.explain import explain_request
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
from tests.support.bodies import MESSAGES, MODEL, chat
from tests.support.gateways import MockEngine, asgi_client, gateway_settings
from tests.support.paths import FIXTURES, POLICY, policy_with

OVERLAYS = FIXTURES / "policies" / "good-overlays.yaml"


def chat_bytes(**fields: Any) -> bytes:
    return json.dumps(chat(**fields)).encode()


def explain(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["explain", *args])
    out, err = capsys.readouterr()
    return status, out + err


def write(tmp_path: Path, body: bytes) -> str:
    path = tmp_path / "request.json"
    path.write_bytes(body)
    return str(path)


def test_rejection_is_explained_with_the_exact_400(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = write(tmp_path, chat_bytes(logprobs=True, n=1, user="u", max_completion_tokens=5))
    status, out = explain(["--policy", str(POLICY), request], capsys)
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith("POST /v1/chat/completions   policy ")
    rows = [line.split(maxsplit=2) for line in lines[1:9]]
    assert [r[:2] for r in rows] == [
        ["model", "passed"],
        ["messages", "passed"],
        ["messages[0].role", "passed"],
        ["messages[0].content", "passed"],
        ["logprobs", "rejected"],
        ["n", "passed"],
        ["user", "stripped"],
        ["max_completion_tokens", "renamed"],
    ]
    assert rows[2][2] == "rule for 'user'"
    assert rows[4][2].startswith("Unsupported parameter: 'logprobs' is not supported")
    assert lines[9] == "-> HTTP 400 to the client, the engine is not called:"
    error = json.loads(lines[10])["error"]
    assert error["param"] == "logprobs" and error["code"] == "unsupported_parameter"
    assert len(lines) == 11


def test_nested_decisions_and_fan_out_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    request = write(tmp_path, chat_bytes(messages=messages, n=3, seed=7))
    status, out = explain(["--policy", str(POLICY), request], capsys)
    assert status == 0
    lines = out.splitlines()
    assert "  messages[0].role             renamed    'developer' to 'system'" in lines
    assert "  messages[1].content[0].type  passed     rule for 'text'" in lines
    assert "  n                            fanout     3 requests" in lines
    assert lines[-2] == (
        "-> forwarded to the engine (changed by the policy; sent 3 times, the answers merged "
        "into one):"
    )
    forwarded = json.loads(lines[-1])
    assert forwarded["messages"][0]["role"] == "system" and "n" not in forwarded

    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    status, out = explain(
        ["--policy", str(POLICY), "--json", write(tmp_path, chat_bytes(messages=image))], capsys
    )
    assert status == 1
    result = json.loads(out)
    assert result["error"]["error"]["param"] == "messages[0].content[0].type"
    assert {"field": "messages[0].content[0].type", "outcome": "rejected"}.items() <= next(
        f for f in result["fields"] if f["field"] == "messages[0].content[0].type"
    ).items()
    assert result["fanout"] == 1


def test_forwarded_body_is_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = write(tmp_path, chat_bytes(user="u", max_completion_tokens=5, seed=7))
    status, out = explain(["--policy", str(POLICY), request], capsys)
    assert status == 0
    lines = out.splitlines()
    assert lines[-2] == "-> forwarded to the engine (changed by the policy):"
    assert json.loads(lines[-1]) == {
        "model": MODEL,
        "messages": MESSAGES,
        "seed": 7,
        "max_tokens": 5,
    }


def test_unchanged_body_is_the_clients_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = b'{"model": "m",\n "messages": [{"role": "user", "content": "hi"}], "seed": 1}'
    status, out = explain(["--policy", str(POLICY), write(tmp_path, raw)], capsys)
    assert status == 0
    assert out.endswith(
        "-> forwarded to the engine (unchanged, the client's own bytes):\n" + raw.decode() + "\n"
    )


def test_defaults_overlays_and_profiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = write(
        tmp_path, json.dumps({"model": "big-model", "messages": MESSAGES, "n": 3}).encode()
    )
    status, out = explain(["--policy", str(OVERLAYS), request], capsys)
    assert status == 0
    assert "  temperature  defaulted  0.7" in out.splitlines()
    assert json.loads(out.splitlines()[-1])["n"] == 3  # the model overlay lets n pass

    request = write(tmp_path, chat_bytes(extra=1))
    assert explain(["--policy", str(OVERLAYS), request], capsys)[0] == 1
    status, out = explain(["--policy", str(OVERLAYS), "--profile", "lenient", request], capsys)
    assert status == 0
    assert "  extra        stripped   not named by the policy" in out.splitlines()


def test_report_only_rules_show_what_they_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = policy_with(
        tmp_path,
        "profiles:\n  canary:\n    routes:\n      /v1/chat/completions:\n"
        "        fields:\n          logprobs: {enforcement: report}\n",
    )
    request = write(tmp_path, chat_bytes(logprobs=True, user="u"))
    status, out = explain(["--policy", str(policy), request], capsys)
    assert status == 1 and "report-only" not in out
    status, out = explain(["--policy", str(policy), "--profile", "canary", request], capsys)
    assert status == 0
    lines = out.splitlines()
    at = lines.index("report-only rules would refuse (not enforced):")
    assert lines[at + 1].split() == ["logprobs", "unsupported_parameter"]
    assert lines[at + 2] == "-> were they enforced, HTTP 400 to the client:"
    refusal = json.loads(lines[at + 3])["error"]
    assert (refusal["param"], refusal["code"]) == ("logprobs", "unsupported_parameter")
    # What happens: forwarded with logprobs as sent, the rest of the policy applied.
    forwarded = json.loads(lines[at - 1])
    assert forwarded["logprobs"] is True and "user" not in forwarded
    status, out = explain(
        ["--policy", str(policy), "--profile", "canary", "--json", request], capsys
    )
    result = json.loads(out)
    assert result["reported"] == [{"field": "logprobs", "code": "unsupported_parameter"}]
    assert result["report"]["error"]["code"] == "unsupported_parameter"
    assert result["error"] is None and result["status"] == 200


def test_completions_route_is_guessed_or_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = write(tmp_path, json.dumps({"model": "m", "prompt": "hi", "echo": True}).encode())
    status, out = explain(["--policy", str(POLICY), request], capsys)
    assert status == 1
    assert out.startswith("POST /v1/completions ")
    assert '"param":"echo"' in out
    status, out = explain(
        ["--policy", str(POLICY), "--route", "/v1/chat/completions", request], capsys
    )
    assert out.startswith("POST /v1/chat/completions ")
    assert '"param":"prompt","code":"unknown_parameter"' in out
    assert "  messages  rejected   missing" in out.splitlines()


def test_request_on_stdin_and_json_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(chat_bytes(n=9))))
    status, out = explain(["--policy", str(POLICY), "--json"], capsys)
    assert status == 1
    result = json.loads(out)
    assert result["status"] == 400
    assert result["forwarded"] is None
    assert result["error"]["error"]["param"] == "n"
    assert {"field": "n", "outcome": "rejected"}.items() <= result["fields"][4].items()


def test_bad_input_and_bad_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out = explain(["--policy", str(POLICY), write(tmp_path, b"{not json")], capsys)
    assert status == 1
    assert '"code":"invalid_json"' in out
    status, out = explain(["--policy", str(POLICY), str(tmp_path / "missing.json")], capsys)
    assert status == 2
    broken = FIXTURES / "policies" / "broken" / "unknown-key.yaml"
    status, out = explain(["--policy", str(broken), write(tmp_path, chat_bytes())], capsys)
    assert status == 2
    assert "unknown key 'nuetral'" in out


def test_policy_from_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = write(tmp_path, chat_bytes(extra=1))
    status, out = explain(["--config", "tests/fixtures/configs/good.yaml", request], capsys)
    assert status == 1
    assert "good-overlays.yaml" in out.splitlines()[0]


# The server's answer for each of these must be exactly what explain predicts.
AGREEMENT_CASES = [
    chat_bytes(),
    chat_bytes(logprobs=True),
    chat_bytes(logprobs=False, n=1, logit_bias={}, response_format={"type": "text"}),
    chat_bytes(n=3, logprobs=True),
    chat_bytes(user="u", metadata={"a": "b"}, max_completion_tokens=9),
    chat_bytes(max_completion_tokens=9, max_tokens=9),
    chat_bytes(unknown_thing=1),
    chat_bytes(stream_options={"include_usage": True}),
    chat_bytes(temperature=3),
    chat_bytes(seed=2**63),
    json.dumps({"model": "m", "prompt": "p", "logprobs": 0, "n": 1}).encode(),
    json.dumps({"model": "m", "prompt": "p", "logprobs": None, "n": 1, "user": "x"}).encode(),
    json.dumps({"messages": MESSAGES}).encode(),
    b"[1, 2]",
    b"",
    b'{"model": "m", "messages": [',
]


@pytest.fixture
async def server() -> AsyncIterator[tuple[httpx.AsyncClient, MockEngine]]:
    engine = MockEngine()
    async with asgi_client(create_app(gateway_settings(), transport=engine.transport)) as client:
        yield client, engine


@pytest.mark.anyio
@pytest.mark.parametrize("raw", AGREEMENT_CASES)
async def test_explain_agrees_with_the_server(
    raw: bytes, server: tuple[httpx.AsyncClient, MockEngine]
) -> None:
    client, engine = server
    source, digest = load_policy_file(POLICY)
    result = explain_request(Policy(source, digest=digest), raw)
    response = await client.post(
        result.route, content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == result.status
    if result.error is not None:
        assert response.content == result.error
        assert engine.requests == []
    else:
        assert [r.content for r in engine.requests] == [result.forwarded]
