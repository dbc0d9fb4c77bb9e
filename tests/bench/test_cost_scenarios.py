"""Every cost scenario (bench/cost/) runs end to end on a few calls and prints its rows;
where a scenario's figures are counts or sizes, what they must say is checked (those do
not depend on the machine's load)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.cost import runner
from bench.cost.pieces import exchanges
from bench.fake_engine import embeddings_body
from tests.support.tables import first_cells

Documents = dict[str, dict[str, Any]]


def _run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[Documents, list[str]]:
    out = tmp_path / "run.json"
    assert runner.main([*argv, "--rounds", "1", "--json", str(out)]) == 0
    documents = {d["scenario"]: d for d in json.loads(out.read_text())}
    return documents, first_cells(capsys.readouterr().out)


def _figures(document: dict[str, Any], key: str) -> dict[str, float]:
    return {name: case["figures"].get(key) for name, case in document["cases"].items()}


def test_fanout_and_the_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _run(tmp_path, capsys, "fanout", "merge", "--number", "3", "--set", "n=2")
    assert rows == [
        "request",
        "json single",
        "json n=2",
        "stream single",
        "stream n=2",
        "paced stream single",
        "paced stream n=2",
        "step",
        "checked (single relay and fan-out)",
        "rewritten (fan-out only)",
    ]


def test_responses_beside_chat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents, rows = _run(tmp_path, capsys, "responses", "--number", "3")
    assert rows == [
        "request",
        "json chat",
        "json responses",
        "stream chat",
        "stream responses",
        "paced stream chat",
        "paced stream responses",
    ]
    assert documents["responses"]["cases"]["json responses"]["base"] == "json chat"


def test_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _run(tmp_path, capsys, "store", "--number", "3")
    assert rows == [
        "request",
        "first turn, store none",
        "first turn, SQLite (write)",
        "second turn, SQLite (read + write)",
        "store.put (one answer)",
        "store.get (one continuation)",
    ]


def test_limits_with_one_evalsha_per_redis_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents, rows = _run(tmp_path, capsys, "limiter", "limits", "--number", "20")
    assert rows == [
        "request",
        *(f"{kind}: {gateway}" for kind in ("json", "stream") for gateway in (
            "limits off", "limits on, local", "limits on, shared", "limits on, redis",
            "streams unmetered",
        )),
        "store: call",
        *(f"{store}: {step}" for store in ("local", "shared", "redis") for step in (
            "admit", "settle",
        )),
        "redis via redis-py (not used): admit",
    ]  # fmt: skip
    trips = _figures(documents["limiter"], "tally")
    # One round trip to admit, one to settle after the answer.
    assert (trips["redis: admit"], trips["redis: settle"]) == (1.0, 1.0)
    assert trips["local: admit"] is None


def test_tracing_cases_and_off_alone_as_before_tracing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents, rows = _run(tmp_path, capsys, "tracing", "--number", "5")
    assert rows[1:] == [
        f"{case}: {request}"
        for request in ("chat", "chat, stream")
        for case in ("off", "on, ratio 1.0", "on, ratio 0.01")
    ]
    assert all(v > 0 for v in _figures(documents["tracing"], "wall_us").values())
    _, rows = _run(tmp_path, capsys, "tracing", "--number", "5", "--only", "off")
    assert rows[1:] == ["off: chat", "off: chat, stream"]


def test_a_request_holds_its_answers_bytes_not_its_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents, rows = _run(
        tmp_path, capsys, "memory", "--number", "3", "--only", "chat json,embeddings json"
    )
    assert rows[1:] == ["chat json", "embeddings json"]
    answering = _figures(documents["memory"], "answering")
    peak = _figures(documents["memory"], "peak")
    answer = len(orjson.dumps(embeddings_body()))  # 16 vectors of 1,536 floats
    assert answer <= answering["embeddings json"] < 2 * answer  # the parsed floats let go
    assert answering["chat json"] < answer // 10
    assert peak["embeddings json"] > answering["embeddings json"]


def test_the_observers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents, rows = _run(tmp_path, capsys, "observers", "--number", "200")
    assert rows[1:] == [
        "metrics",
        "access log, json, to /dev/null",
        "access log, text, to /dev/null",
        "metrics + json access log",
    ]
    assert all(v > 0 for v in _figures(documents["observers"], "wall_us").values())


def test_exchanges_look_like_a_finished_stream() -> None:
    (e,) = exchanges(1)
    assert (e.status, e.stream, e.upstream_status, e.bytes_out) == (200, True, 200, 4000)
    assert [o.action for o in e.outcomes] == ["stripped", "neutral"]
    assert e.first_byte is not None and e.upstream_started is not None
    assert e.first_byte > e.upstream_started


def test_the_model_lookup_is_three_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ModelRouter.route, deployment_of (the batches' look-up, since 49ee56f) and
    # Engines.target; a 404 builds its error too. A change that adds work shows here.
    documents, _ = _run(
        tmp_path, capsys, "model-lookup", "--number", "10", "--set", "deployments=3"
    )
    calls = _figures(documents["model-lookup"], "calls")
    assert calls == {"served name": 3, "alias": 3, "unknown": 5}


def test_report_only_rules_add_no_call_where_they_refuse_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents, rows = _run(tmp_path, capsys, "report", "--number", "10")
    calls = _figures(documents["report"], "calls")
    bodies = ("chat, 2 messages", "chat, 10 messages", "completions", "responses")
    assert rows[1:] == [
        f"{body}: {policy}"
        for body in bodies
        for policy in ("shipped", "report-only profile", "whole policy report-only")
    ]
    for body in bodies:
        shipped = calls[f"{body}: shipped"]
        assert shipped > 0
        assert shipped == calls[f"{body}: report-only profile"]
        assert shipped == calls[f"{body}: whole policy report-only"]


def test_the_policy_with_and_without_nested_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents, rows = _run(tmp_path, capsys, "policy", "--number", "10")
    kinds = ("top level only", "with nested rules")
    assert rows[1:] == [f"{n} messages, {kind}" for n in (2, 10, 50) for kind in kinds]
    assert documents["policy"]["options"]["policy"].endswith("policies/ft-serve.yaml")


def test_the_routing_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents, rows = _run(tmp_path, capsys, "routing", "--number", "20", "--set", "replicas=3")
    assert rows[0] == "piece"
    assert "decision: affinity, content key" in rows
    assert "Balancer.request: affinity" in rows
    cpu = _figures(documents["routing"], "cpu_us")
    parts = cpu["key: content hash (17 messages)"] + cpu["place + release: affinity (bounded load)"]
    assert cpu["decision: affinity, content key"] == pytest.approx(parts)


def test_the_validators(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents, rows = _run(tmp_path, capsys, "validators", "--number", "20")
    assert {row.split(": ")[1] for row in rows[1:]} >= {
        "compile", "valid", "invalid", "metaschema", "answer check", "request check",
    }  # fmt: skip
    assert any(re.fullmatch(r"jsonschema-rs [\d.]+ \(iter_errors\): valid", r) for r in rows)


@pytest.mark.slow
def test_a_batch_beside_interactive_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = ["seconds=2", "lines=40", "clients=2", "flood=4"]
    documents, rows = _run(tmp_path, capsys, "batch-share", *(f"--set={o}" for o in options))
    assert rows == ["scenario", "alone", "batch API", "flood"]
    rates = _figures(documents["batch-share"], "lines_per_s")
    assert rates["alone"] is None and rates["batch API"] > 0 and rates["flood"] > 0
