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


def _body(schema: Any, **fields: Any) -> dict[str, Any]:
    return {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": PROMPT}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "probe", "schema": wrapped(schema), "strict": True},
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
    for row in rows:
        case = case_named(row.field)
        decision = apply_policy(policy, CHAT, _body(case.schema))
        if row.verdict == "honoured":
            assert decision.error is None or not (decision.error.param or "").endswith(
                f".v.{case.keyword}"
            ), (row, decision.error)
            continue
        assert decision.error is not None, row
        if honoured_type:
            assert decision.error.param == f"{FORMAT}.properties.v.{case.keyword}", row
    honoured = [case_named(r.field) for r in rows if r.verdict == "honoured" and r.field == "enum"]
    for case in honoured:
        assert apply_policy(policy, CHAT, _body(case.schema)).error is None


def _let_through(policy: Path, keyword: str, out: Path) -> Path:
    """The written policy with ``keyword`` passed (answer checks left enforced)."""
    loaded = yaml.safe_load(policy.read_text())
    chat = loaded["routes"][CHAT]
    wrapper = chat["fields"]["response_format"]["select"]["rules"]["json_schema"]["fields"]
    table = wrapper["json_schema"]["fields"]["schema"]["json_schema"]
    table["keywords"][keyword] = {"action": "pass"}
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
        # Nothing the engine drops to let through: its policy refuses no honoured keyword.
        assert all(r.verdict == "honoured" for r in rows if case_named(r.field).context is None)
        return
    case = ignored[0]
    policy = _let_through(probed.policy, case.keyword, tmp_path / "let-through.yaml")
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
