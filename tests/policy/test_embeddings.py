"""The default policy's /v1/embeddings, rerank and tokenize rules, as tables: OpenAI's
input limits named by path, and token-id input as its own rule, refused by default and
passed by an overlay."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.policy.engine import PASSED, REJECTED, Policy, apply_policy
from gateway.policy.loading import load_policy_file, parse_policy_text
from gateway.policy.walk import is_token_ids
from gateway.yamlsource import SourceError
from tests.support.paths import POLICY

EMBEDDINGS = "/v1/embeddings"
MODEL = "ref-embedding-1"
PASSING_IDS = """
models:
  ref-embedding-1:
    routes:
      /v1/embeddings:
        fields:
          input: {token_ids: {action: pass}}
"""


@pytest.fixture(scope="module")
def policy() -> Policy:
    source, digest = load_policy_file(POLICY)
    return Policy(source, digest=digest)


def _embed(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, **fields}


@pytest.mark.parametrize(
    "body",
    [
        _embed(input="a cat"),
        _embed(input=["a cat", "a dog"]),
        _embed(input=["x"] * 2048, encoding_format="base64", dimensions=256, user="u1"),
        _embed(input="a", encoding_format="float"),
    ],
)
def test_text_input_passes_unchanged(policy: Policy, body: dict[str, Any]) -> None:
    decision = apply_policy(policy, EMBEDDINGS, body)
    assert decision.error is None and decision.body is body and not decision.changed


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (_embed(input=""), "input", "empty_string"),
        (_embed(input=["a", "", "b"]), "input[1]", "empty_string"),
        (_embed(input=["a"] * 2049), "input", "array_above_max_length"),
        (_embed(input=[]), "input", "empty_array"),
        (_embed(input=[None]), "input[0]", "invalid_type"),
        (_embed(input=[[1, 2], []]), "input[1]", "empty_array"),
        (_embed(input=[[1, -2]]), "input[0][1]", "integer_below_min_value"),
        (_embed(input=[1, 2]), "input", "unsupported_value"),
        (_embed(input=[[1, 2], [3]]), "input", "unsupported_value"),
        (_embed(input="a", encoding_format="int8"), "encoding_format", "invalid_value"),
        (_embed(input="a", dimensions=0), "dimensions", "integer_below_min_value"),
        (_embed(input="a", dimensions=1.5), "dimensions", "invalid_type"),
        ({"input": "a"}, "model", "missing_required_parameter"),
        (_embed(), "input", "missing_required_parameter"),
    ],
)
def test_openai_limits_and_token_ids(
    policy: Policy, body: dict[str, Any], param: str, code: str
) -> None:
    error = apply_policy(policy, EMBEDDINGS, body).error
    assert error is not None
    assert (error.param, error.code) == (param, code)


def test_token_ids_refusal_gives_the_reason(policy: Policy) -> None:
    decision = apply_policy(policy, EMBEDDINGS, _embed(input=[[791, 4062]]))
    assert decision.error is not None
    assert decision.error.message == (
        "Unsupported value: 'input' given as token ids is not supported by this deployment. "
        "Token ids are engine-specific: send the text (LangChain's OpenAIEmbeddings sends "
        "ids unless given check_embedding_ctx_length=False)."
    )
    assert [(o.field, o.action) for o in decision.outcomes] == [("input", REJECTED)]


def test_an_overlay_passes_token_ids_for_one_model() -> None:
    text = POLICY.read_text() + PASSING_IDS
    source = parse_policy_text(text, file="overlay.yaml")
    policy = Policy(source)
    for input_ in ([1, 2, 3], [[1, 2], [3]]):
        decision = apply_policy(policy, EMBEDDINGS, _embed(input=input_), trace=True)
        assert decision.error is None
        assert ("input", PASSED, "token ids") in [
            (o.field, o.action, o.detail) for o in decision.outcomes
        ]
        other = apply_policy(policy, EMBEDDINGS, {"model": "other", "input": input_})
        assert other.error is not None and other.error.param == "input"


@pytest.mark.parametrize(
    ("value", "ids"),
    [("a", False), (["a"], False), ([], False), ([1], True), ([[1]], True), ([{"a": 1}], False)],
)
def test_what_counts_as_token_ids(value: Any, ids: bool) -> None:
    assert is_token_ids(value) is ids


@pytest.mark.parametrize(
    ("route", "body", "param"),
    [
        ("/v1/rerank", {"model": "r", "query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
        ("/rerank", {"model": "r", "query": "", "documents": ["a"]}, "query"),
        ("/v1/rerank", {"model": "r", "query": "q", "documents": []}, "documents"),
        ("/tokenize", {"content": "a", "with_pieces": True}, "with_pieces"),
        ("/tokenize", {"messages": []}, "messages"),
        ("/detokenize", {"tokens": [1, "a"]}, "tokens[1]"),
    ],
)
def test_rerank_and_tokenize_rules(
    policy: Policy, route: str, body: dict[str, Any], param: str
) -> None:
    error = apply_policy(policy, route, body).error
    assert error is not None and error.param == param


def test_token_ids_takes_pass_or_reject_only() -> None:
    text = POLICY.read_text().replace(
        'token_ids: {action: reject, reason: "Token ids are engine-specific: send the text '
        "(LangChain's OpenAIEmbeddings sends ids unless given "
        'check_embedding_ctx_length=False)."}',
        "token_ids: {action: strip}",
    )
    with pytest.raises(SourceError, match="'token_ids' takes action 'pass' or 'reject'"):
        parse_policy_text(text, file="strip.yaml")
