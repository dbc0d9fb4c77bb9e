"""Below the field on each real engine: the probe's keyword table and tool checks, the
policy it wrote refusing each keyword it found ignored at its path, and the gateway's
answer checks catching an answer that breaks its schema when that keyword is let through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import load_policy_file
from gateway.probe import tools
from gateway.probe.keywords import CASES, PROMPT, case_named, wrapped
from gateway.probe.report import KEYWORDS, TOOLS
from tests.realengine.engines import MODEL_NAME, Running
from tests.realengine.enginesdoc import Row, parse_report
from tests.realengine.probing import Probed, serve_gateway
from tests.support.validating import errors

pytestmark = pytest.mark.realengine

CHAT = "/v1/chat/completions"
FORMAT = "response_format.json_schema.schema"
SAMPLES = 8


def _rows(probed: Probed, section: str) -> list[Row]:
    return parse_report(probed.report.read_text()).routes.get(section, [])


def _body(schema: Any, *, strict: bool = True, **fields: Any) -> dict[str, Any]:
    return {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": PROMPT}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "probe", "schema": wrapped(schema), "strict": strict},
        },
        "max_tokens": 200,
        **fields,
    }


def test_the_probe_measures_tool_calling_and_each_keyword(probed: Probed) -> None:
    assert probed.returncode == 0, probed.output
    assert [r.field for r in _rows(probed, TOOLS)] == list(tools.FIELDS)
    # Each keyword measured, whatever chat's one json_object request found.
    keywords = _rows(probed, KEYWORDS)
    assert [r.field for r in keywords] == [c.name for c in CASES]
    assert not [r for r in keywords if "not measured" in r.evidence]


def test_the_written_policy_refuses_each_ignored_keyword_at_its_path(probed: Probed) -> None:
    policy = Policy(load_policy_file(probed.policy)[0])
    rows = _rows(probed, KEYWORDS)
    honoured_type = any(r.field == "type" and r.verdict == "honoured" for r in rows)
    # Keywords the policy refuses somewhere (a verdict other than honoured): a case's
    # schema may hold one beside its own (minItems beside items, then beside if),
    # and which are refused varies from run to run on a real model.
    refused = {case_named(r.field).keyword for r in rows if r.verdict != "honoured"}
    for row in rows:
        case = case_named(row.field)
        # Not strict: strict mode's own rule (every object closed by additionalProperties
        # false) would refuse the cases of an object without properties first, at
        # another path, whatever the keyword's verdict.
        decision = apply_policy(policy, CHAT, _body(case.schema, strict=False))
        if row.verdict == "honoured":
            assert decision.error is None or not (decision.error.param or "").endswith(
                f".v.{case.keyword}"
            ), (row, decision.error)
            continue
        assert decision.error is not None, row
        if honoured_type:
            at = (decision.error.param or "").removeprefix(f"{FORMAT}.properties.v.")
            # Its own keyword, or one beside it in its schema that is refused too.
            assert at == case.keyword or (at in case.schema and at in refused), (row, at)
    # enum's case is a string's enum: it passes where type is verified too.
    honoured = [
        case_named(r.field)
        for r in rows
        if r.verdict == "honoured" and r.field == "enum" and honoured_type
    ]
    for case in honoured:
        assert apply_policy(policy, CHAT, _body(case.schema)).error is None


def _let_through(policy: Path, out: Path) -> Path:
    """The written policy with every keyword passed (answer checks left enforced): a
    schema the probe found ignored, or could not verify (``type`` at a few samples),
    reaches the engine, and only the answer check stands between its answer and the
    client."""
    loaded = yaml.safe_load(policy.read_text())
    chat = loaded["routes"][CHAT]
    wrapper = chat["fields"]["response_format"]["select"]["rules"]["json_schema"]["fields"]
    table = wrapper["json_schema"]["fields"]["schema"]["json_schema"]
    table["keywords"] = {name: {"action": "pass"} for name in table["keywords"]}
    out.write_text(yaml.safe_dump(loaded, sort_keys=False))
    return out


def test_an_answer_that_breaks_its_schema_reaches_the_client_as_the_gateways_error(
    probed: Probed, served: Running, tmp_path: Path
) -> None:
    rows = _rows(probed, KEYWORDS)
    ignored = [
        case_named(r.field)
        for r in rows
        if r.verdict == "ignored" and case_named(r.field).context is None
    ]
    if not ignored:
        # Nothing found ignored (its json_schema refused whole, or nothing dropped):
        # no keyword whose answers could break their schema on this engine.
        pytest.skip("no keyword found ignored on this engine")
    case = ignored[0]
    policy = _let_through(probed.policy, tmp_path / "let-through.yaml")
    seen: list[str] = []
    with serve_gateway(served.url, policy) as gateway:
        for seed in range(SAMPLES):
            answer = httpx.post(
                gateway.url + CHAT,
                json=_body(case.schema, seed=1 + seed, temperature=1.0),
                timeout=300,
            )
            if answer.status_code == 200:
                choice = answer.json()["choices"][0]
                if choice["finish_reason"] == "stop":
                    value = json.loads(choice["message"]["content"])
                    assert errors(wrapped(case.schema), value) == [], value
                seen.append("ok")
                continue
            error = answer.json()["error"]
            assert answer.status_code == 502, answer.text
            assert error["code"] == "answer_violates_schema"
            assert error["param"].startswith("choices[0].message.content")
            seen.append(error["code"])
    assert "answer_violates_schema" in seen, (case.name, seen)
