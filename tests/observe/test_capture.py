"""Opt-in capture of request bodies: sampled, capped, redacted, never a key; and the
file it writes is what ``ft-gateway diff --bodies`` reads."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.access.keys import hash_key
from gateway.app.factory import create_app
from gateway.cli import main
from gateway.observe.capture import SECRET, BodyCapture, redact
from gateway.settings import Capture
from tests.support.bodies import CHAT, MODEL
from tests.support.engine import FakeEngine
from tests.support.gateways import gateway_settings
from tests.support.paths import POLICY
from tests.support.sdk import sdk
from tests.support.servers import running_server

CLIENT_KEY = "sk-client-key-3f9a2b71c0"
PROMPT = "My card number is 4111 1111 1111 1111, please remember it."


@pytest.mark.parametrize(
    ("body", "text", "expected"),
    [
        # message text: as many x, so the policy's length checks still hold
        (
            {"messages": [{"role": "user", "content": "Hello there"}]},
            True,
            {"messages": [{"role": "user", "content": "xxxxxxxxxxx"}]},
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
            True,
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "xx"}]}]},
        ),
        ({"prompt": ["ab", "c"], "suffix": "d"}, True, {"prompt": ["xx", "x"], "suffix": "x"}),
        ({"input": "Hi", "instructions": ""}, True, {"input": "xx", "instructions": ""}),
        # kept: what the policy decides by (a stop sequence is the client's words)
        (
            {"model": "m", "temperature": 0.5, "stop": ["END"], "n": 2, "logprobs": True},
            True,
            {"model": "m", "temperature": 0.5, "stop": ["xxx"], "n": 2, "logprobs": True},
        ),
        ({"messages": [{"role": "user", "content": "Hi"}]}, False, None),
        # secrets, wherever they are and whatever redact_text says
        (
            {"metadata": {"note": "key sk-proj-abcdefghijklmnop12"}},
            False,
            {"metadata": {"note": SECRET}},
        ),
        ({"metadata": {"api_key": "short"}}, False, {"metadata": {"api_key": SECRET}}),
        ({"user": "Bearer abcdefgh12345678"}, False, {"user": SECRET}),
        ({"user": "AKIAABCDEFGHIJKLMNOP"}, False, {"user": SECRET}),
        ({"user": "u_" + "a1" * 20}, False, {"user": SECRET}),
        (
            {"messages": [{"role": "user", "content": "token ghp_" + "A" * 30}]},
            False,
            {"messages": [{"role": "user", "content": SECRET}]},
        ),
        ({"user": "alice@example.com"}, False, {"user": "alice@example.com"}),
    ],
)
def test_redaction(body: dict[str, Any], text: bool, expected: dict[str, Any] | None) -> None:
    assert redact(body, text=text) == (body if expected is None else expected)


def capture_overrides(path: Path, keys: Path, **capture: Any) -> dict[tuple[str, ...], Any]:
    overrides: dict[tuple[str, ...], Any] = {
        ("auth", "keys_file"): str(keys),
        ("capture", "enabled"): True,
        ("capture", "path"): str(path),
        **{("capture", k): v for k, v in capture.items()},
    }
    return overrides


@pytest.mark.anyio
async def test_captured_bodies_on_a_real_server(fake_engine: FakeEngine, tmp_path: Path) -> None:
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"keys:\n  - {{name: alice, sha256: {hash_key(CLIENT_KEY)}}}\n")
    path = tmp_path / "bodies.jsonl"
    overrides = capture_overrides(path, keys, sample_ratio=1.0, max_bytes=2000)
    app = create_app(gateway_settings(fake_engine.url, overrides=overrides))
    messages: Any = [{"role": "user", "content": PROMPT}]
    async with running_server(app) as url, sdk(url, api_key=CLIENT_KEY) as client:
        await client.chat.completions.create(model=MODEL, messages=messages, user="u")
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model=MODEL, messages=messages, logprobs=True)
        # Larger than max_bytes: not written.
        big: Any = [{"role": "user", "content": "y" * 3000}]
        await client.chat.completions.create(model=MODEL, messages=big)
    text = path.read_text()
    assert CLIENT_KEY not in text and "4111 1111" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    records = [json.loads(line) for line in text.splitlines()]
    assert [(r["route"], r["profile"], r["model"]) for r in records] == [(CHAT, None, MODEL)] * 2
    assert records[0]["body"] == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x" * len(PROMPT)}],
        "user": "x",  # not listed as clear: the client's words
    }
    assert records[1]["body"]["logprobs"] is True

    # The file is what diff reads: with logprobs passed, the refused one moves.
    candidate = tmp_path / "candidate.yaml"
    candidate.write_text(
        POLICY.read_text().replace(
            "      logprobs:\n        action: reject\n",
            "      logprobs:\n        action: pass\n",
            1,
        )
    )
    assert main(["diff", str(POLICY), str(candidate), "--bodies", str(path)]) == 1


def test_sampling_and_an_unwritable_path(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    draws = iter([0.2, 0.05, 0.7, 0.09])
    capture = BodyCapture(
        Capture(enabled=True, path=tmp_path / "b.jsonl", sample_ratio=0.1),
        chance=lambda: next(draws),
    )
    for _ in range(4):
        capture.record(CHAT, None, {"model": "m"}, 10)
    assert capture.written == 2
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 2
    off = BodyCapture(Capture(enabled=True, path=tmp_path / "none.jsonl", sample_ratio=0.0))
    off.record(CHAT, None, {"model": "m"}, 10)
    assert not (tmp_path / "none.jsonl").exists()
    broken = BodyCapture(
        Capture(enabled=True, path=tmp_path / "missing" / "b.jsonl", sample_ratio=1.0)
    )
    broken.record(CHAT, None, {"model": "m"}, 10)
    broken.record(CHAT, None, {"model": "m"}, 10)
    assert broken.written == 0
    warnings = [r for r in caplog.records if "cannot write captured bodies" in r.getMessage()]
    assert len(warnings) == 1


def test_capture_is_off_by_default() -> None:
    assert create_app(gateway_settings("http://127.0.0.1:9")).state.gateway.capture is None
