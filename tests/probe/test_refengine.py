"""The probe against the reference engine over loopback, in both sampler modes; the
policy it writes, loaded into the gateway in front of the same engine. The command
line: test_probe_command.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.app.factory import create_app
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.file import PolicyFile
from gateway.policy.loading import load_policy_file
from gateway.probe.checks import MODEL as MODEL_FIELD
from gateway.probe.checks import UNKNOWN, UNKNOWN_FIELD
from gateway.probe.client import EngineClient
from gateway.probe.fields import PROBED
from gateway.probe.messages import (
    AUDIO_PART,
    DEVELOPER_ROLE,
    FILE_PART,
    IMAGE_PART,
    SYSTEM_ROLE,
    TEXT_PART,
    TOOL_MESSAGE,
    UNKNOWN_ROLE,
    tool_exchange,
)
from gateway.probe.parts import part
from gateway.probe.route import CHAT, COMPLETIONS
from gateway.probe.runner import ProbeResult, planned_requests, probe_engine
from gateway.probe.verdict import HONOURED, IGNORED, REJECTED
from gateway.probe.writer import render_policy
from refengine import create_app as create_engine
from tests.support.batchgate import wave_gate
from tests.support.bodies import MODEL, NO_THINKING
from tests.support.gateways import gateway_settings
from tests.support.paths import POLICY
from tests.support.probes import outcomes
from tests.support.sdk import sync_sdk
from tests.support.servers import ServerThread

# What ft serve (and so the reference engine) does with each field; seed per mode.
HONOURED_BY_BOTH = [
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "max_tokens",
    "stop",
    "stream",
    "stream_options",
    MODEL_FIELD,  # it answers 404 model_not_found to a name it does not serve
]
EXPECTED = {
    CHAT: {f: HONOURED for f in HONOURED_BY_BOTH}
    | {
        "logit_bias": IGNORED,
        "n": IGNORED,
        "logprobs": IGNORED,
        "top_logprobs": IGNORED,
        "response_format": IGNORED,
        "max_completion_tokens": IGNORED,
        UNKNOWN: IGNORED,
        # Its ChatML template renders any role string and a message's text parts; it
        # drops other parts, and an assistant's tool calls, without a word.
        SYSTEM_ROLE: HONOURED,
        DEVELOPER_ROLE: HONOURED,
        UNKNOWN_ROLE: IGNORED,
        TEXT_PART: HONOURED,
        IMAGE_PART: IGNORED,
        AUDIO_PART: IGNORED,
        FILE_PART: IGNORED,
        TOOL_MESSAGE: IGNORED,
    },
    COMPLETIONS: {f: HONOURED for f in HONOURED_BY_BOTH}
    | {"logit_bias": IGNORED, "n": IGNORED, "logprobs": REJECTED, UNKNOWN: IGNORED},
}


@dataclass
class Probed:
    mode: str
    engine_url: str
    result: ProbeResult
    policy_path: Path


@pytest.fixture(scope="module", params=["patched", "unpatched"])
def probed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Probed]:
    mode = request.param
    # One mode probes with thinking off, the other with the engine's default (on).
    extra = NO_THINKING if mode == "patched" else {}
    app = create_engine(unpatched_sampler=mode == "unpatched")
    with ServerThread(app) as engine:
        budget = planned_requests([CHAT, COMPLETIONS])
        with EngineClient(engine.url, timeout=30, max_requests=budget) as client:
            result = probe_engine(
                client,
                upstream=engine.url,
                model=MODEL,
                routes=[CHAT, COMPLETIONS],
                extra=extra,
                before_wave=wave_gate(app),
            )
        path = tmp_path_factory.mktemp(mode) / "probed.yaml"
        path.write_text(render_policy(result))
        yield Probed(mode, engine.url, result, path)


def test_seed_is_honoured_by_the_patched_sampler_and_ignored_by_the_unpatched(
    probed: Probed,
) -> None:
    expected = HONOURED if probed.mode == "patched" else IGNORED
    for route in (CHAT, COMPLETIONS):
        assert outcomes(probed.result, route)["seed"] == expected


@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_every_other_field_is_found_as_the_engine_implements_it(probed: Probed, route: str) -> None:
    found = outcomes(probed.result, route)
    found.pop("seed")
    assert found == EXPECTED[route]


def test_the_probe_stays_within_its_request_budget(probed: Probed) -> None:
    # 113 for the fields, 24 for tool calling; the keywords' 625 only where JSON mode holds.
    assert planned_requests([CHAT, COMPLETIONS]) == 113 + 24 + 625
    assert probed.result.requests <= 113 + 24


def test_the_evidence_inside_messages_is_the_prompt_tokens(probed: Probed) -> None:
    found = probed.result.route(CHAT)
    assert found is not None
    image = found.verdict(IMAGE_PART)
    assert image is not None
    assert "dropped without a word" in image.summary
    assert "prompt tokens, as many as for the text part alone" in image.summary
    assert '"type": "image_url"' in image.trials[0].sent
    assert "prompt tokens" in image.trials[0].got
    tool = found.verdict(TOOL_MESSAGE)
    assert tool is not None
    assert tool.summary.startswith("the tool call is dropped")
    assert "tool call arguments 9 words longer: +0" in tool.summary


def _without_reasons(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_reasons(v) for k, v in value.items() if k != "reason"}
    if isinstance(value, list):
        return [_without_reasons(v) for v in value]
    return value


def _rules(policy: PolicyFile, route: str) -> dict[str, dict[str, Any]]:
    """The route's rules as written (defaults left out), the reasons at every depth too."""
    fields = policy.routes[route].fields
    return {
        name: _without_reasons(json.loads(json.dumps(rule.model_dump(exclude_unset=True))))
        for name, rule in fields.items()
    }


def test_the_written_policy_is_the_hand_written_one(probed: Probed) -> None:
    written, _ = load_policy_file(probed.policy_path)
    hand, _ = load_policy_file(POLICY)
    for route in (CHAT, COMPLETIONS):
        ours, theirs = _rules(written, route), _rules(hand, route)
        if route == COMPLETIONS and probed.result.extra:
            # Sent with every probe request (--extra), so passed on this route too.
            assert ours.pop("chat_template_kwargs") == {"action": "pass"}
        assert set(ours) == set(theirs)
        # The engine refuses completions' logprobs: the probe also drops its null.
        ours["logprobs"].pop("drop_neutral", None)
        # policies/ft-serve.yaml describes the patched sampler.
        if probed.mode == "unpatched":
            assert ours.pop("seed") == {**theirs.pop("seed"), "action": "reject"}
        assert ours == theirs
    assert written.unknown_fields == hand.unknown_fields == "reject"


# Requests whose decision both policies must agree on: the roles, the parts, tool
# messages and n, as clients send them.
TEXT = {"type": "text", "text": "Tell me about lists."}
USER = {"role": "user", "content": "Tell me about lists."}
DECISIONS: dict[str, dict[str, Any]] = {
    "system and user": {"messages": [{"role": "system", "content": "Be brief."}, USER]},
    "a conversation": {
        "messages": [USER, {"role": "assistant", "content": "A list is.", "name": "a"}, USER]
    },
    "text parts": {
        "messages": [{"role": "system", "content": [TEXT]}, {**USER, "content": [TEXT]}]
    },
    "a refusal part": {
        "messages": [
            USER,
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
            USER,
        ]
    },
    "developer": {"messages": [{"role": "developer", "content": "Be brief."}, USER]},
    "developer and system": {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "system", "content": "Be kind."},
            USER,
        ]
    },
    "wizard": {"messages": [{"role": "wizard", "content": "Be brief."}, USER]},
    "no role": {"messages": [{"content": "Be brief."}]},
    "image part": {"messages": [{**USER, "content": [TEXT, part("image_url")]}]},
    "audio part": {"messages": [{**USER, "content": [TEXT, part("input_audio")]}]},
    "file part": {"messages": [{**USER, "content": [TEXT, part("file")]}]},
    "an unknown part": {"messages": [{**USER, "content": [TEXT, {"type": "video"}]}]},
    "image part in a system message": {
        "messages": [{"role": "system", "content": [part("image_url")]}, USER]
    },
    "tool message": {"messages": tool_exchange()},
    "tool message alone": {
        "messages": [USER, {"role": "tool", "tool_call_id": "c", "content": "Sunny."}]
    },
    "no tool calls": {
        "messages": [USER, {"role": "assistant", "content": "Hi.", "tool_calls": []}]
    },
    "function role": {"messages": [{"role": "function", "name": "f", "content": "x"}]},
    "a text part without text": {"messages": [{**USER, "content": [{"type": "text"}]}]},
    "n 3": {"messages": [USER], "n": 3},
    "n 9": {"messages": [USER], "n": 9},
    "n 1": {"messages": [USER], "n": 1},
}


def _decision(policy: Policy, fields: dict[str, Any]) -> tuple[Any, ...]:
    decision = apply_policy(policy, CHAT, {"model": MODEL, **fields})
    error = decision.error
    shown = (error.param, error.code) if error is not None else None
    return shown, decision.body, decision.fanout


def test_the_written_policy_decides_inside_messages_as_the_hand_written_one(
    probed: Probed,
) -> None:
    written = Policy(load_policy_file(probed.policy_path)[0])
    hand = Policy(load_policy_file(POLICY)[0])
    for name, fields in DECISIONS.items():
        assert _decision(written, fields) == _decision(hand, fields), name
    # What the table holds, so that agreeing means something.
    wizard, _, _ = _decision(written, DECISIONS["wizard"])
    assert wizard == ("messages[0].role", "invalid_value")
    image, _, _ = _decision(written, DECISIONS["image part"])
    assert image == ("messages[0].content[1].type", "unsupported_value")
    tool, _, _ = _decision(written, DECISIONS["tool message"])
    assert tool == ("messages[1].tool_calls", "unsupported_value")
    _, developer, _ = _decision(written, DECISIONS["developer"])
    assert developer["messages"][0]["role"] == "system"
    assert _decision(written, DECISIONS["n 3"])[2] == 3


# A value each probed field is sent with through the gateway; neutral values below.
PROBE_VALUES: dict[str, dict[str, Any]] = {
    "temperature": {"temperature": 0.5},
    "seed": {"seed": 7},
    "top_k": {"top_k": 5},
    "top_p": {"top_p": 0.9},
    "min_p": {"min_p": 0.1},
    "presence_penalty": {"presence_penalty": 0.5},
    "frequency_penalty": {"frequency_penalty": 0.5},
    "repetition_penalty": {"repetition_penalty": 1.2},
    "logit_bias": {"logit_bias": {"100": 5}},
    "max_tokens": {"max_tokens": 3},
    "max_completion_tokens": {"max_completion_tokens": 3},
    "stop": {"stop": ["zzz"]},
    "n": {"n": 2},
    "top_logprobs": {"top_logprobs": 2},
    "response_format": {"response_format": {"type": "json_object"}},
    "stream": {"stream": True},
    "stream_options": {"stream": True, "stream_options": {"include_usage": True}},
    UNKNOWN: {UNKNOWN_FIELD: 1},
}
NEUTRAL: dict[str, list[dict[str, Any]]] = {
    CHAT: [
        {"n": 1},
        {"logprobs": False},
        {"logit_bias": {}},
        {"response_format": {"type": "text"}},
        {"stream": False},
    ],
    COMPLETIONS: [{"n": 1}, {"logprobs": None}, {"logit_bias": {}}],
}


@pytest.fixture(scope="module")
def gateway(probed: Probed) -> Iterator[openai.OpenAI]:
    settings = gateway_settings(probed.engine_url, policy=probed.policy_path)
    with ServerThread(create_app(settings)) as server, sync_sdk(server.url) as client:
        yield client


def _send(client: openai.OpenAI, route: str, fields: dict[str, Any]) -> Any:
    """One request through the gateway with the SDK; fields it has no argument for go in
    extra_body. Returns the answer (a stream is read to its end)."""
    known = {"temperature", "seed", "top_p", "presence_penalty", "frequency_penalty", "stop"}
    known |= {"max_tokens", "n", "logit_bias", "stream", "stream_options", "logprobs"}
    if route == CHAT:
        known |= {"max_completion_tokens", "top_logprobs", "response_format"}
    args = {k: v for k, v in fields.items() if k in known}
    extra = {k: v for k, v in fields.items() if k not in known} | NO_THINKING
    if route == CHAT:
        answer: Any = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Tell me about lists."}],
            extra_body=extra,
            **args,
        )
    else:
        extra.pop("chat_template_kwargs")
        answer = client.completions.create(
            model=MODEL, prompt="A list is", extra_body=extra, **({"max_tokens": 8} | args)
        )
    return list(answer) if fields.get("stream") else answer


@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_the_written_policy_turns_exactly_the_unhonoured_fields_into_400s(
    probed: Probed, gateway: openai.OpenAI, route: str
) -> None:
    verdicts = {
        f: o for f, o in outcomes(probed.result, route).items() if f in PROBED[route] | {UNKNOWN: 1}
    }
    values = dict(PROBE_VALUES)
    values["logprobs"] = {"logprobs": True if route == CHAT else 1}
    refused: set[str] = set()
    for field in verdicts:
        try:
            answer = _send(gateway, route, values[field])
        except openai.BadRequestError as exc:
            assert exc.param == (UNKNOWN_FIELD if field == UNKNOWN else field)
            refused.add(field)
            continue
        if field == "max_completion_tokens":
            # Renamed onto max_tokens, which the engine honours.
            assert answer.usage.completion_tokens <= 3
    # n is served by fan-out; max_completion_tokens renamed onto max_tokens.
    expected = {f for f, o in verdicts.items() if o != HONOURED} - {"max_completion_tokens", "n"}
    assert refused == expected
    assert ("seed" in refused) == (probed.mode == "unpatched")


def _chat(client: openai.OpenAI, messages: Any) -> Any:
    """A chat request with the SDK; ``messages`` as sent, roles the SDK does not type too."""
    return client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4, extra_body=NO_THINKING
    )


@pytest.mark.parametrize(
    ("name", "param"),
    [
        ("wizard", "messages[0].role"),
        ("image part", "messages[0].content[1].type"),
        ("audio part", "messages[0].content[1].type"),
        ("file part", "messages[0].content[1].type"),
        ("tool message", "messages[1].tool_calls"),
    ],
)
def test_the_written_policy_refuses_inside_messages_what_the_engine_would_not_see(
    gateway: openai.OpenAI, name: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(gateway, DECISIONS[name]["messages"])
    assert caught.value.status_code == 400
    assert caught.value.param == param


@pytest.mark.parametrize("name", ["system and user", "a conversation", "text parts", "developer"])
def test_the_written_policy_lets_through_what_the_engine_renders(
    gateway: openai.OpenAI, name: str
) -> None:
    answer = _chat(gateway, DECISIONS[name]["messages"])
    # Passed and answered (a 400 would raise). Not the text itself: the reference
    # model samples, and its first token may be the end of the answer (content "").
    [choice] = answer.choices
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    assert answer.usage is not None and answer.usage.prompt_tokens > 0


@pytest.mark.parametrize("route", [CHAT, COMPLETIONS])
def test_neutral_values_of_rejected_fields_still_pass(
    probed: Probed, gateway: openai.OpenAI, route: str
) -> None:
    for fields in NEUTRAL[route]:
        _send(gateway, route, fields)
