"""Claude Code's CLI through the gateway, recorded: run by scripts/claude-code.

Two runs of ``claude -p`` (its nonessential traffic off, Claude model names aliased onto
the reference engine's model by a one-deployment fleet): in front of the reference
engine in its tool mode (``--tools``) under the shipped policy with the Messages API's
tool calling passed (tests/support/anthropic.py:tools_policy), and in front of plain
ft serve's policy (policies/ft-serve.yaml as shipped). Every request Claude Code sent is
recorded as the gateway saw it (method, path, headers, the body; the key's header
masked) with the gateway's answer (status, headers, the body or the stream's event
names and error), in OUT/<run>.jsonl, and OUT/summary.md says what Claude Code sent and
what it was told. Exit 1 unless the tool-mode run got an answer and the plain run a
refusal Claude Code showed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gateway.app.factory import create_app
from gateway.settings import load_settings
from refengine.server import create_app as create_engine
from refengine.structured.options import StructuredOptions
from tests.support.anthropic import tools_policy
from tests.support.bodies import MODEL
from tests.support.paths import POLICY
from tests.support.servers import running_server

# Claude Code's main, opus and haiku models, then the names a subagent is given: the newest
# ids of each family (anthropic 2.15's Model list).
ALIASES = [
    "claude-sonnet-4-6",
    "claude-opus-4-8",
    "claude-haiku-4-5",
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
]
PROMPT = "Say hello in one short sentence."
MASKED = {b"x-api-key", b"authorization"}
ASGI = Callable[..., Awaitable[None]]


class Recorder:
    """An ASGI wrapper that keeps every exchange: the request whole, the answer whole
    (or a stream's event names and its error event)."""

    def __init__(self, app: ASGI) -> None:
        self.app = app
        self.exchanges: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        record: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope.get("query_string", b"").decode(),
            "headers": {
                k.decode(): ("[masked]" if k in MASKED else v.decode("latin-1"))
                for k, v in scope["headers"]
            },
        }
        answer = bytearray()

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                record["status"] = message["status"]
                record["answer_headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
            elif message["type"] == "http.response.body":
                answer.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        finally:
            record["body"] = _json(bytes(body))
            record["answer"] = _answer(bytes(answer), record.get("answer_headers", {}))
            self.exchanges.append(record)


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode(errors="replace")[:2000]


def _answer(data: bytes, headers: dict[str, str]) -> Any:
    if not headers.get("content-type", "").startswith("text/event-stream"):
        return _json(data)
    names, error, text, blocks, stop = [], None, [], [], None
    for event in data.decode(errors="replace").split("\n\n"):
        lines = event.split("\n")
        if len(lines) == 2 and lines[0].startswith("event: "):
            names.append(lines[0][7:])
            payload = json.loads(lines[1][6:])
            if payload["type"] == "error":
                error = payload["error"]
            if payload["type"] == "content_block_start":
                block = payload["content_block"]
                blocks.append(block["type"] + (f" {block['name']}" if "name" in block else ""))
            delta = payload.get("delta") or {}
            if delta.get("type") == "text_delta":
                text.append(delta["text"])
            if payload["type"] == "message_delta":
                stop = delta.get("stop_reason")
    return {"events": names, "error": error, "text": "".join(text), "blocks": blocks, "stop": stop}


def _settings(engine_url: str, policy: Path) -> Any:
    deployment = {
        "name": "reference",
        "upstream": {"url": engine_url},
        "models": [MODEL],
        "aliases": dict.fromkeys(ALIASES, MODEL),
    }
    flags = {("policy",): str(policy), ("deployments",): [deployment]}
    return load_settings(None, overrides=flags, environ={})


async def run_claude(claude: str, url: str, home: Path, more: dict[str, str]) -> dict[str, Any]:
    """``claude -p PROMPT`` against the gateway at ``url``, its home in ``home``, with the
    environment ``more`` beside the base URL, key and models."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-gateway-test",
        "ANTHROPIC_MODEL": ALIASES[0],
        "ANTHROPIC_DEFAULT_SONNET_MODEL": ALIASES[0],
        "ANTHROPIC_DEFAULT_OPUS_MODEL": ALIASES[1],
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": ALIASES[2],
        "CLAUDE_CODE_SUBAGENT_MODEL": ALIASES[0],
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        **more,
    }
    argv = [claude, "-p", PROMPT, "--max-turns", "4", "--output-format", "json"]
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=home, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 300)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
    return {
        "exit": process.returncode,
        "stdout": out.decode(errors="replace")[-4000:],
        "stderr": err.decode(errors="replace")[-4000:],
    }


async def one_run(
    name: str, claude: str, policy: Path, out: Path, more: dict[str, str] | None = None
) -> dict[str, Any]:
    """One run against a fresh engine and gateway; its record written to OUT/<name>.jsonl."""
    engine = create_engine(structured=StructuredOptions(tools=True))
    async with running_server(engine) as engine_url:
        recorder = Recorder(create_app(_settings(engine_url, policy)))
        async with running_server(recorder) as url:
            with tempfile.TemporaryDirectory() as home:
                result = await run_claude(claude, url, Path(home), more or {})
    with (out / f"{name}.jsonl").open("w") as file:
        for exchange in recorder.exchanges:
            file.write(json.dumps(exchange) + "\n")
    return {
        "name": name,
        "policy": str(policy),
        "env": more or {},
        **result,
        "exchanges": recorder.exchanges,
    }


def _sent(exchange: dict[str, Any]) -> list[str]:
    body = exchange["body"] if isinstance(exchange["body"], dict) else {}
    headers = exchange["headers"]
    lines = [
        f"- headers: {', '.join(sorted(headers))}",
        f"  - anthropic-version: {headers.get('anthropic-version')}; anthropic-beta: "
        f"{headers.get('anthropic-beta')}; user-agent: {headers.get('user-agent')}",
        f"- body fields: {', '.join(body)}",
        f"  - model {body.get('model')!r}, max_tokens {body.get('max_tokens')}, stream "
        f"{body.get('stream')}, thinking {json.dumps(body.get('thinking'))}",
    ]
    system = body.get("system")
    if isinstance(system, list):
        first = system[0].get("text", "")[:60] if system and isinstance(system[0], dict) else ""
        lines.append(f"  - system: {len(system)} blocks, the first {first!r}")
    tools = body.get("tools") or []
    if tools:
        keys = sorted({k for t in tools if isinstance(t, dict) for k in t})
        names = [t.get("name") for t in tools if isinstance(t, dict)]
        lines.append(f"  - tools: {len(tools)} ({', '.join(map(str, names))}); their keys: {keys}")
    for key in ("tool_choice", "metadata", "output_config", "context_management"):
        if key in body:
            lines.append(f"  - {key}: {json.dumps(body[key])[:300]}")
    return lines


def _printed(stdout: str) -> str:
    """What ``claude -p --output-format json`` said: its result, or its error."""
    try:
        out = json.loads(stdout)
    except ValueError:
        return f"`{stdout.strip()[:600]}`"
    said = out.get("result") or out.get("terminal_reason") or out.get("subtype")
    return f"is_error {out.get('is_error')}, {out.get('num_turns')} turns: `{str(said)[:400]}`"


def summary(runs: list[dict[str, Any]]) -> str:
    """What Claude Code sent and what it was told, per run, in Markdown."""
    lines = ["# Claude Code through the gateway", ""]
    for run in runs:
        lines += [f"## {run['name']} (policy {run['policy']})", ""]
        if run["env"]:
            lines += [f"With {', '.join(f'{k}={v}' for k, v in run['env'].items())}.", ""]
        lines.append(f"`claude -p` exit {run['exit']}; it printed: {_printed(run['stdout'])}")
        if run["stderr"].strip():
            lines.append(f"(stderr: `{run['stderr'].strip()[:600]}`)")
        lines += ["", "| # | request | status | told |", "|---|---|---|---|"]
        for i, exchange in enumerate(run["exchanges"]):
            answer = exchange["answer"]
            told = ""
            if isinstance(answer, dict) and answer.get("type") == "error":
                told = answer["error"]["message"][:200]
            elif isinstance(answer, dict) and "events" in answer:
                told = (
                    answer["error"]["message"][:200]
                    if answer["error"]
                    else (
                        f"{len(answer['events'])} events, blocks {', '.join(answer['blocks'])}, "
                        f"stop_reason {answer['stop']}: {answer['text'][:60]!r}"
                    )
                )
            elif isinstance(answer, dict) and answer.get("type") == "message":
                told = f"a message: {[b.get('type') for b in answer.get('content', [])]}"
            query = f"?{exchange['query']}" if exchange["query"] else ""
            lines.append(
                f"| {i} | {exchange['method']} {exchange['path']}{query} | "
                f"{exchange.get('status')} | {told.replace('|', '/')} |"
            )
        messages = [e for e in run["exchanges"] if e["path"] == "/v1/messages"]
        if messages:
            lines += ["", "The first Messages request:", ""]
            lines += _sent(messages[0])
        lines.append("")
    return "\n".join(lines)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/claude-code.py")
    parser.add_argument("--claude", required=True, help="the claude executable")
    parser.add_argument("--out", type=Path, required=True, help="where the records go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tools = tools_policy(args.out)
    runs = [
        await one_run("tool-mode", args.claude, tools, args.out),
        await one_run("plain-ft-serve", args.claude, POLICY, args.out),
        # Claude Code's escape hatch: no experimental betas, nor the tool fields they bring.
        await one_run(
            "tool-mode-no-betas",
            args.claude,
            tools,
            args.out,
            {"CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1"},
        ),
    ]
    (args.out / "summary.md").write_text(summary(runs))
    print(summary(runs))
    tool_mode, plain, _ = runs
    answered = tool_mode["exit"] == 0 and any(
        e["path"] == "/v1/messages" and e.get("status") == 200 for e in tool_mode["exchanges"]
    )
    refused = any(e.get("status") == 400 for e in plain["exchanges"])
    if not answered:
        print("claude-code: the tool-mode run got no answer", file=sys.stderr)
    if not refused:
        print("claude-code: the plain run was not refused", file=sys.stderr)
    return 0 if answered and refused else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
