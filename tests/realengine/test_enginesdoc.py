"""The generator of docs/engines.md (tests/realengine/enginesdoc.py), on what the probe
writes for the toy engine: every verdict is read back from the report as the probe found
it, each is paired with what the written policy does, and the page names the engines,
their versions and where they differ. Part of the default suite: it needs no real engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import yaml

from gateway.probe.client import EngineClient
from gateway.probe.report import KEYWORDS, NATIVE_KEYWORDS, TOOLS, render_markdown
from gateway.probe.responses import RESPONSES
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import ProbeResult, probe_engine
from gateway.probe.writer import render_policy
from tests.realengine.enginesdoc import Row, load, main, parse_report, policy_does, render
from tests.support.probes import DAY
from tests.support.toyengine import DROP, ToyEngine

NATIVE_SECTION = """## /v1/responses

/v1/responses: served natively (max_output_tokens ignored, stream honoured): upstream.responses: \
native is possible

- **max_output_tokens**: ignored: max_output_tokens 1: 12 output tokens came back
- **stream**: honoured: 9 events ending in response.completed
"""


def probed(toy: ToyEngine) -> ProbeResult:
    """The toy probed on chat, completions and /v1/responses, which it does not serve."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == RESPONSES:
            return httpx.Response(404, json={"detail": "Not Found"})
        return toy(request)

    with EngineClient("http://toy", transport=httpx.MockTransport(handler)) as client:
        return probe_engine(
            client,
            upstream="http://toy",
            model="toy",
            routes=[CHAT, COMPLETIONS, RESPONSES],
            today=DAY,
        )


TOY = ToyEngine(ignore={"seed", "n", "logit_bias"}, reject={"logprobs"}, inside={"file": DROP})


def test_the_report_is_read_back_verdict_for_verdict() -> None:
    result = probed(TOY)
    report = parse_report(render_markdown(result))
    for route in (CHAT, COMPLETIONS):
        found = result.route(route)
        assert found is not None
        expected = [(v.field, v.outcome) for v in found.verdicts]
        assert [(r.field, r.verdict) for r in report.routes[route]] == expected
        assert all(r.evidence for r in report.routes[route])
    assert "not served natively" in report.responses_line
    assert report.routes[RESPONSES] == []


def test_native_responses_verdicts_are_read_from_their_lines() -> None:
    report = parse_report(NATIVE_SECTION)
    assert report.responses_line.startswith("/v1/responses: served natively")
    assert [(r.field, r.verdict) for r in report.routes[RESPONSES]] == [
        ("max_output_tokens", "ignored"),
        ("stream", "honoured"),
    ]


def test_each_verdict_is_paired_with_what_the_written_policy_does() -> None:
    policy = yaml.safe_load(render_policy(probed(TOY)))
    does = {name: policy_does(policy, CHAT, name) for name in ("temperature", "n", "seed")}
    assert does == {"temperature": "pass", "n": "fan-out (n up to 8)", "seed": "400"}
    assert policy_does(policy, CHAT, "logit_bias") == "400; neutral `{}` passes"
    assert policy_does(policy, CHAT, "logprobs") == "400; neutral `false` accepted, not forwarded"
    assert policy_does(policy, CHAT, "(unknown field)") == "400 `unknown_parameter`"
    assert policy_does(policy, CHAT, "system role") == "pass"
    assert policy_does(policy, CHAT, "text part") == "pass"
    assert policy_does(policy, CHAT, "file part") == "400"  # dropped by the engine
    assert policy_does(policy, CHAT, "(unknown role)") == "400"
    assert policy_does(policy, RESPONSES, "max_output_tokens") == "pass"
    assert policy_does(policy, CHAT, "no_such_field") == "no rule (reject, as any unnamed field)"


def write_run(out: Path, name: str, version: str, result: ProbeResult) -> None:
    about = {"engine": name, "version": version, "model": "toy.gguf", "model_sha256": "ab12"}
    (out / f"{name}.json").write_text(json.dumps(about))
    (out / f"{name}.report.md").write_text(render_markdown(result))
    (out / f"{name}.policy.yaml").write_text(render_policy(result))


def test_the_page_names_each_engine_and_where_they_differ(tmp_path: Path) -> None:
    write_run(tmp_path, "engine-a", "1.0", probed(TOY))
    write_run(tmp_path, "engine-b", "2.0", probed(ToyEngine(ignore={"n"})))
    page_path = tmp_path / "engines.md"
    assert main([str(tmp_path), str(page_path)]) == 0
    page = page_path.read_text()
    assert page == render(load(tmp_path))
    assert "| engine-a | 1.0 | toy.gguf | `ab12` | translate (not served) |" in page
    assert "| engine-b | 2.0 | toy.gguf | `ab12` | translate (not served) |" in page
    assert "| seed | **ignored** | 400 | **honoured** | pass |" in page
    differences = page.split("## Where the engines differ")[1].split("\n## ")[0]
    assert f"- `{CHAT}` seed: engine-a ignored, engine-b honoured" in differences
    assert f"`{CHAT}` n:" not in differences  # ignored by both


def test_one_engine_is_compared_with_nothing(tmp_path: Path) -> None:
    write_run(tmp_path, "engine-a", "1.0", probed(TOY))
    page = render(load(tmp_path))
    assert "- one engine measured in this run (engine-a): nothing to compare" in page


def test_no_reports_is_an_error(tmp_path: Path) -> None:
    assert main([str(tmp_path), str(tmp_path / "engines.md")]) == 1
    assert not (tmp_path / "engines.md").exists()


EMBEDDINGS_REPORT = """## /v1/embeddings

| field | verdict | confidence | evidence |
|---|---|---|---|
| dimensions | **ignored** | — | 200 without the effect: asked 64 of 640, got a vector of 640 |
| input | **ignored** | — | 200 without the effect: the first not the text's own vector |
| token_ids | **honoured** | — | the engine's own ids (its /tokenize) give the text's vector |
"""
EMBEDDINGS_POLICY = """version: 1
routes:
  /v1/embeddings:
    fields:
      model: {action: pass, type: string, enum: [m]}
      input:
        {action: pass, type: [string, array], items: {type: integer}, token_ids: {action: pass}}
      dimensions: {action: reject, type: integer, reason: "This engine ignores it."}
"""


def test_the_embeddings_probe_is_a_table_or_what_it_said(tmp_path: Path) -> None:
    write_run(tmp_path, "engine-a", "1.0", probed(TOY))
    write_run(tmp_path, "engine-b", "2.0", probed(TOY))
    (tmp_path / "engine-a.embeddings.report.md").write_text(EMBEDDINGS_REPORT)
    (tmp_path / "engine-a.embeddings.policy.yaml").write_text(EMBEDDINGS_POLICY)
    (tmp_path / "engine-b.embeddings.probe.txt").write_text(
        "ft-gateway probe: no embedding: HTTP 200\n"
    )
    runs = load(tmp_path)
    assert policy_does(runs[0].policy, "/v1/embeddings", "dimensions") == "400"
    assert policy_does(runs[0].policy, "/v1/embeddings", "token_ids") == "pass"
    assert policy_does(runs[0].policy, "/v1/embeddings", "model") == "only `m` (another: 400)"
    assert policy_does(runs[0].policy, "/v1/embeddings", "input") == (
        "one input, text or token ids (a batch: 400)"
    )
    assert policy_does(runs[1].policy, "/v1/embeddings", "input") == "route not declared (404)"
    page = render(runs)
    section = page.split("## /v1/embeddings")[1].split("\n## ")[0]
    assert "engine-b: not measured, the probe said `no embedding: HTTP 200`" in (section)
    assert "| dimensions | **ignored** | 400 | **not measured** | route not declared (404) |" in (
        section
    )
    differences = page.split("## Where the engines differ")[1].split("\n## ")[0]
    assert "- `/v1/embeddings` token_ids: engine-a honoured, engine-b not measured" in differences


def test_one_string_only_where_batches_are_refused() -> None:
    policy = {"routes": {"/v1/embeddings": {"fields": {"input": {"type": "string"}}}}}
    assert policy_does(policy, "/v1/embeddings", "input") == "one string only (a batch: 400)"


def test_a_verdict_of_two_words_is_read() -> None:
    """seed's "alone only" (reproducible alone, not under load), as llama-server's."""
    report = parse_report(
        "## /v1/chat/completions\n\n| field | verdict | confidence | evidence |\n"
        "|---|---|---|---|\n| seed | **alone only** | 0.984 | reproducible alone only |\n"
    )
    assert report.verdict(CHAT, "seed") == Row("seed", "alone only", "reproducible alone only")


def test_below_the_field_each_keyword_and_tool_check_is_paired_with_its_rule() -> None:
    keywords = {
        "maxLength": {"action": "reject"},
        "minimum": {"action": "pass", "types": {"number": {"action": "reject"}}},
        "format": {"values": {"email": {"action": "pass"}}, "unknown": {"action": "reject"}},
    }
    schema = {"json_schema": {"keywords": keywords}}
    wrapper = {"fields": {"json_schema": {"fields": {"schema": schema}}}}
    fields = {
        "tool_choice": {"action": "reject", "neutral": ["auto"]},
        "parallel_tool_calls": {"action": "pass"},
        "response_format": {"select": {"rules": {"json_schema": wrapper}}},
    }
    policy = {"routes": {"/v1/chat/completions": {"fields": fields}}}
    said = {
        name: policy_does(policy, KEYWORDS, name)
        for name in ("maxLength", "minimum", "minimum on number", "format email", "format uuid")
    }
    assert said == {
        "maxLength": "400",
        "minimum": "pass",
        "minimum on number": "400",
        "format email": "pass",
        "format uuid": "400",
    }
    assert policy_does(policy, KEYWORDS, "uniqueItems") == "400 (not named)"
    assert policy_does(policy, TOOLS, "tool_choice required") == '400; neutral `"auto"` passes'
    assert policy_does(policy, TOOLS, "parallel_tool_calls false") == "pass"
    assert policy_does({"routes": {}}, NATIVE_KEYWORDS, "maxLength") == "json_schema refused"
