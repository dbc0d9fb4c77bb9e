"""A report-only rule on one profile, end to end on a real server: that profile's request
is forwarded, another profile's is refused by the same rule, and the would-be refusal
shows in the metric, the access-log line and the span, with the 400 it would have been."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.app.factory import create_app
from tests.support.bodies import CHAT, MESSAGES, MODEL
from tests.support.engine import FakeEngine
from tests.support.gateways import gateway_settings
from tests.support.limits import key_of, write_keys
from tests.support.metrics import Scrape
from tests.support.otlp import otlp_receiver
from tests.support.paths import policy_with
from tests.support.sdk import sdk
from tests.support.servers import running_server

pytestmark = pytest.mark.anyio

ALICE = key_of("alice")
CANARY = key_of("canary")
# The shipped policy refuses logprobs; the canary profile only reports it.
CANARY_PROFILE = """
profiles:
  canary:
    routes:
      /v1/chat/completions:
        fields:
          logprobs: {enforcement: report}
"""


def log_line(out: str, request_id: str) -> dict[str, Any]:
    for line in out.splitlines():
        if line.startswith("{") and f'"request_id":"{request_id}"' in line:
            record: dict[str, Any] = json.loads(line)
            return record
    raise LookupError(f"no access-log line for {request_id}")


async def test_a_report_only_rule_on_one_profile(
    fake_engine: FakeEngine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = policy_with(tmp_path, CANARY_PROFILE)
    keys = write_keys(tmp_path, {"alice": None, "canary": "canary"})
    async with otlp_receiver() as (receiver, traces):
        overrides: dict[tuple[str, ...], Any] = {
            ("auth", "keys_file"): str(keys),
            ("tracing", "enabled"): True,
            ("tracing", "endpoint"): traces,
            ("tracing", "schedule_delay"): 0.01,
        }
        app = create_app(gateway_settings(fake_engine.url, policy=policy, overrides=overrides))
        async with running_server(app) as url:
            async with sdk(url, api_key=CANARY) as canary:
                answer = await canary.chat.completions.create(
                    model=MODEL,
                    messages=MESSAGES,
                    logprobs=True,
                    extra_headers={"x-request-id": "req-canary"},
                )
            assert answer.choices
            seen = fake_engine.find("req-canary")
            assert seen is not None and json.loads(seen.body)["logprobs"] is True

            async with sdk(url, api_key=ALICE) as alice:
                with pytest.raises(openai.BadRequestError) as refused:
                    await alice.chat.completions.create(
                        model=MODEL,
                        messages=MESSAGES,
                        logprobs=True,
                        extra_headers={"x-request-id": "req-alice"},
                    )
            assert refused.value.code == "unsupported_parameter"
            assert fake_engine.find("req-alice") is None

            async with httpx.AsyncClient(base_url=url) as client:
                metrics = Scrape(
                    (
                        await client.get("/metrics", headers={"authorization": f"Bearer {ALICE}"})
                    ).text
                )
            server, _ = await receiver.trace_of("req-canary")
    assert metrics.labelled("ft_gateway_policy_reported_total") == {
        frozenset(
            {("route", CHAT), ("field", "logprobs"), ("verdict", "unsupported_parameter")}
        ): 1.0
    }
    assert (
        metrics(
            "ft_gateway_policy_decisions_total",
            route=CHAT,
            field="logprobs",
            action="rejected",
        )
        == 1.0
    )

    out = capsys.readouterr().out
    line = log_line(out, "req-canary")
    assert line["status"] == 200 and line["policy"] == "passed" and line["error"] is None
    assert line["reported"] == {
        "status": 400,
        "code": "unsupported_parameter",
        "param": "logprobs",
        "fields": {"logprobs": "unsupported_parameter"},
    }
    refused_line = log_line(out, "req-alice")
    assert refused_line["status"] == 400 and refused_line["reported"] is None

    assert server.attributes["ft_gateway.policy.verdict"] == "passed"
    assert server.attributes["ft_gateway.policy.reported"] == ["logprobs:unsupported_parameter"]
    assert server.events["ft_gateway.policy.reported"] == {
        "http.response.status_code": 400,
        "error.type": "unsupported_parameter",
        "ft_gateway.policy.param": "logprobs",
    }
    assert "error.type" not in server.attributes
