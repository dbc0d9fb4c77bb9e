"""The probe's check of today's Responses clients: each recorded default body (Codex CLI,
the OpenAI Agents SDK, the Vercel AI SDK, GitHub Copilot Chat) against a route's policy,
refused only where the file says ft serve lacks the feature; and against the policy the
probe writes for an engine without /v1/responses."""

from __future__ import annotations

from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from gateway.probe.clients import client_bodies, judge_clients, report_lines
from gateway.probe.responses import RESPONSES
from gateway.probe.route import CHAT
from gateway.probe.writer import render_policy
from tests.support.paths import FIXTURES, POLICY
from tests.support.probes import run_probe
from tests.support.toyengine import ToyEngine


def test_the_fixtures_are_the_probes_bodies() -> None:
    names = sorted(p.name for p in (FIXTURES / "clients").glob("*.json"))
    assert len(names) == len(client_bodies()) == 4
    for recorded in client_bodies():
        assert recorded["client"] and recorded["version"] and recorded["sources"]


def test_the_shipped_policy_refuses_only_what_ft_serve_lacks() -> None:
    policy = Policy(load_policy_file(POLICY)[0])
    verdicts = judge_clients(policy)
    expected = {r["client"]: set(r["refused_on_ft_serve"]) for r in client_bodies()}
    for verdict in verdicts:
        refused = expected[verdict.client]
        if not refused:
            assert verdict.refused is None, verdict.line()
        else:
            assert verdict.refused is not None and verdict.refused.param in refused
    lines = report_lines(verdicts)
    assert any("OpenAI Agents SDK" in line and line.endswith(": passes") for line in lines)
    assert any("Codex CLI" in line and "refused at" in line for line in lines)


def test_the_probes_written_policy_is_judged_the_same_way() -> None:
    result = run_probe(ToyEngine(), [CHAT, RESPONSES])
    written = Policy(parse_policy_text(render_policy(result)))
    verdicts = {v.client: v for v in judge_clients(written)}
    assert verdicts["OpenAI Agents SDK (Python)"].refused is None
    assert (
        verdicts["Vercel AI SDK, @ai-sdk/openai's default provider openai(model)"].refused is None
    )
    codex = verdicts["Codex CLI"].refused
    assert codex is not None and codex.param is not None
    # Tool calling is not probed, so it is what stops Codex: not its hints or include.
    assert codex.param.startswith(("tools", "input[", "reasoning.effort")), codex.param
