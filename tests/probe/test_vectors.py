"""The probe of /v1/embeddings and /v1/rerank against the reference engine, honest or
reproducing the engines' no-ops; the policy it writes, loaded into the gateway in front
of the same engine."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import httpx
import openai
import pytest

from gateway.cli import main
from gateway.policy.engine import Policy, apply_policy
from gateway.policy.loading import parse_policy_text
from gateway.probe.client import EngineClient
from gateway.probe.context import ProbeError
from gateway.probe.runner import ProbeResult, planned_requests, probe_engine
from gateway.probe.vectors import TEXT
from gateway.probe.verdict import HONOURED, IGNORED
from gateway.probe.writer import render_policy
from gateway.routes import EMBEDDINGS, RERANK, guess_route
from tests.support.probes import comments, outcomes, verdict
from tests.support.sdk import sync_sdk
from tests.support.vectors import EMBEDDING_MODEL, RERANK_MODEL, engine, gateway

DAY = date(2026, 12, 1)
EMBEDDING_FIELDS = ("dimensions", "encoding_format", "input", "token_ids", "model")


def _probe(url: str, route: str, model: str) -> ProbeResult:
    with EngineClient(url, timeout=30, max_requests=planned_requests([route])) as client:
        return probe_engine(client, upstream=url, model=model, routes=[route], today=DAY)


def _written(result: ProbeResult, tmp_path: Path) -> Path:
    text = render_policy(result)
    parse_policy_text(text, file="probed.yaml")
    path = tmp_path / "probed.yaml"
    path.write_text(text)
    return path


def test_an_honest_engine_honours_every_embeddings_field() -> None:
    with engine() as (url, _):
        result = _probe(url, EMBEDDINGS, EMBEDDING_MODEL)
    assert outcomes(result, EMBEDDINGS) == {name: HONOURED for name in EMBEDDING_FIELDS}
    assert result.requests <= planned_requests([EMBEDDINGS])


@pytest.mark.parametrize("noop", ["dimensions", "encoding_format", "model"])
def test_each_embeddings_noop_is_found(noop: str) -> None:
    with engine(noop) as (url, _):
        found = outcomes(_probe(url, EMBEDDINGS, EMBEDDING_MODEL), EMBEDDINGS)
    assert found[noop] == IGNORED
    assert [n for n, o in found.items() if o != HONOURED] == [noop]


def test_ignored_dimensions_become_a_400_that_never_reaches_the_engine(tmp_path: Path) -> None:
    with engine("dimensions") as (url, counted):
        policy = _written(_probe(url, EMBEDDINGS, EMBEDDING_MODEL), tmp_path)
        text = comments(policy.read_text())
        assert "dimensions: ignored: 200 without the effect: asked 64 of 1536" in text
        with gateway(url, policy) as gw:
            before = counted.seen[EMBEDDINGS]
            client = sync_sdk(gw)
            with pytest.raises(openai.BadRequestError) as caught:
                client.embeddings.create(model=EMBEDDING_MODEL, input="a cat", dimensions=128)
            assert isinstance(caught.value.body, dict)
            assert caught.value.body["param"] == "dimensions"
            assert counted.seen[EMBEDDINGS] == before
            # Without dimensions the SDK's default (base64) is served as before.
            served = client.embeddings.create(model=EMBEDDING_MODEL, input="a cat")
            assert len(served.data[0].embedding) == 1536
            assert counted.seen[EMBEDDINGS] == before + 1


def test_rerank_top_n_ignored_becomes_a_400(tmp_path: Path) -> None:
    with engine() as (url, _):
        assert set(outcomes(_probe(url, RERANK, RERANK_MODEL), RERANK).values()) == {HONOURED}
    with engine("top_n") as (url, counted):
        result = _probe(url, RERANK, RERANK_MODEL)
        assert outcomes(result, RERANK)["top_n"] == IGNORED
        policy = _written(result, tmp_path)
        with gateway(url, policy) as gw:
            before = counted.seen["/rerank"] + counted.seen[RERANK]
            for path in (RERANK, "/rerank"):
                answer = httpx.post(
                    gw + path,
                    json={"model": RERANK_MODEL, "query": "q", "documents": ["a"], "top_n": 1},
                )
                assert answer.status_code == 400
                assert answer.json()["error"]["param"] == "top_n"
            assert counted.seen["/rerank"] + counted.seen[RERANK] == before


def test_the_cli_probes_embeddings_and_writes_a_policy_that_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "embeddings.yaml"
    with engine("encoding_format") as (url, _):
        argv = ["probe", "--upstream", url, "--model", EMBEDDING_MODEL, "--route", "embeddings"]
        assert main([*argv, "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "encoding_format" in table and "ignored" in table
    assert main(["check", str(out)]) == 0
    text = comments(out.read_text())
    assert "openai-python asks for base64 unless told otherwise" in text
    policy = Policy(parse_policy_text(out.read_text()))
    body = {"model": EMBEDDING_MODEL, "input": "a"}
    refused = apply_policy(policy, EMBEDDINGS, body | {"encoding_format": "base64"}).error
    assert refused is not None and refused.param == "encoding_format"
    assert apply_policy(policy, EMBEDDINGS, body | {"encoding_format": "float"}).error is None


@pytest.mark.parametrize(
    ("body", "route"),
    [
        ({"model": "e", "input": "a", "encoding_format": "float"}, EMBEDDINGS),
        ({"model": "r", "query": "q", "documents": ["a"]}, RERANK),
        ({"model": "m", "input": "a"}, "/v1/responses"),
    ],
)
def test_explain_guesses_the_route_by_its_telling_field(
    body: dict[str, object], route: str
) -> None:
    assert guess_route(body) == route


def test_return_documents_ignored_passes_only_what_the_engine_does(tmp_path: Path) -> None:
    with engine("return_documents") as (url, _):
        result = _probe(url, RERANK, RERANK_MODEL)
        assert outcomes(result, RERANK)["return_documents"] == IGNORED
        policy = Policy(parse_policy_text(render_policy(result)))
    body = {"model": RERANK_MODEL, "query": "q", "documents": ["a"]}
    refused = apply_policy(policy, RERANK, body | {"return_documents": False}).error
    assert refused is not None and refused.param == "return_documents"
    assert apply_policy(policy, "/rerank", body | {"return_documents": True}).error is None


TEXT_VECTOR, OTHER_VECTOR = [0.6, 0.8], [0.8, 0.6]
TEXT_IDS = [2, 651, 4320]  # with llama.cpp's special token in front, as the text is embedded


def llama_cpp_shaped(request: httpx.Request) -> httpx.Response:
    """An engine with llama.cpp's /tokenize (``content``, ``add_special``), answering
    vLLM's ``prompt`` with no tokens as llama-server does; the text, or its ids with the
    special token, embed as the text, anything else as another vector; in a batch, the
    text's vector is another (as llama-server's with two slots, docs/engines.md)."""
    body = json.loads(request.content)
    if request.url.path == "/tokenize":
        if "content" not in body:
            return httpx.Response(200, json={"tokens": []})
        return httpx.Response(200, json={"tokens": TEXT_IDS[0 if body["add_special"] else 1 :]})
    given = body["input"]
    members = given if isinstance(given, list) and isinstance(given[0], str) else [given]
    data = [
        {"index": i, "embedding": TEXT_VECTOR if m in (TEXT, TEXT_IDS) else OTHER_VECTOR}
        for i, m in enumerate(members if len(members) == 1 else ["batched"] * len(members))
    ]
    return httpx.Response(200, json={"data": data, "usage": {"prompt_tokens": 3}})


def test_token_ids_are_judged_by_llama_cpps_tokenize_too() -> None:
    transport = httpx.MockTransport(llama_cpp_shaped)
    with EngineClient("http://llama", transport=transport, max_requests=20) as client:
        result = probe_engine(
            client, upstream="http://llama", model="m", routes=[EMBEDDINGS], today=DAY
        )
    found = verdict(result, EMBEDDINGS, "token_ids")
    assert found.outcome == HONOURED
    assert found.summary == "the engine's own ids (its /tokenize) give the text's vector"
    assert result.requests == planned_requests([EMBEDDINGS])

    # Its ids pass as one input; a batch, which it gets wrong, is refused at its first member.
    policy = Policy(parse_policy_text(render_policy(result)))
    body = {"model": "m", "encoding_format": "float"}
    assert apply_policy(policy, EMBEDDINGS, body | {"input": TEXT_IDS}).error is None
    assert apply_policy(policy, EMBEDDINGS, body | {"input": TEXT}).error is None
    refused = apply_policy(policy, EMBEDDINGS, body | {"input": [TEXT, "b"]}).error
    assert refused is not None and refused.param == "input[0]"


def test_a_vector_a_token_is_no_embedding_and_says_so() -> None:
    """llama-cpp-python's server, with a model whose GGUF names no pooling."""

    def per_token(request: httpx.Request) -> httpx.Response:
        rows = [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": rows}]})

    transport = httpx.MockTransport(per_token)
    with (
        EngineClient("http://lcp", transport=transport, max_requests=20) as client,
        pytest.raises(ProbeError) as caught,
    ):
        probe_engine(client, upstream="http://lcp", model="m", routes=[EMBEDDINGS], today=DAY)
    assert str(caught.value) == (
        "no embedding: HTTP 200, data[0].embedding: a list of 3 lists, not one vector"
    )
