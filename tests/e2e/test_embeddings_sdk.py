"""/v1/embeddings, rerank and tokenize: the openai SDK (or httpx, for the engines' own
APIs) -> the gateway -> the reference engine, over loopback."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from refengine.embedding import WIDTH, embed, normalised
from tests.support.paths import POLICY
from tests.support.sdk import sync_sdk
from tests.support.vectors import EMBEDDING_MODEL, RERANK_MODEL, Counted, engine, gateway

KNOWN = "A list in Python is a sequence."  # words of the reference engine's vocabulary
TEXTS = [f"Sentence number {i} is about the weather in the old town." for i in range(16)]


@pytest.fixture(scope="module")
def chain() -> Iterator[tuple[str, Counted]]:
    with engine() as (engine_url, counted), gateway(engine_url) as url:
        yield url, counted


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def test_the_sdk_default_asks_base64_and_decodes_the_float_answer(
    chain: tuple[str, Counted],
) -> None:
    client = sync_sdk(chain[0])
    default = client.embeddings.create(model=EMBEDDING_MODEL, input=TEXTS)
    floats = client.embeddings.create(model=EMBEDDING_MODEL, input=TEXTS, encoding_format="float")
    assert [d.index for d in default.data] == list(range(16))
    assert all(len(d.embedding) == WIDTH for d in default.data)
    for a, b in zip(default.data, floats.data, strict=True):
        assert a.embedding == pytest.approx(b.embedding, abs=1e-7)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 16


def test_dimensions_truncates_and_renormalises(chain: tuple[str, Counted]) -> None:
    client = sync_sdk(chain[0])
    answer = client.embeddings.create(
        model=EMBEDDING_MODEL, input=TEXTS[:3], encoding_format="float", dimensions=256
    )
    full = client.embeddings.create(model=EMBEDDING_MODEL, input=TEXTS[:3], encoding_format="float")
    for short, long in zip(answer.data, full.data, strict=True):
        assert len(short.embedding) == 256
        assert _norm(short.embedding) == pytest.approx(1.0)
        assert short.embedding == pytest.approx(normalised(long.embedding[:256]))


def test_token_ids_are_refused_naming_input(chain: tuple[str, Counted]) -> None:
    url, counted = chain
    before = counted.seen["/v1/embeddings"]
    client = sync_sdk(url)
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=EMBEDDING_MODEL, input=[[1, 2, 3]])
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == "input"
    assert "Token ids are engine-specific" in error["message"]
    assert counted.seen["/v1/embeddings"] == before


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": ""}, "input", "empty_string"),
        ({"input": ["a", "b", "c", ""]}, "input[3]", "empty_string"),
        ({"input": ["a"] * 2049}, "input", "array_above_max_length"),
        ({"input": []}, "input", "empty_array"),
        ({"input": ["a", 5]}, "input[1]", "invalid_type"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format", "invalid_value"),
        ({"input": "a", "dimensions": 0}, "dimensions", "integer_below_min_value"),
        ({"input": "a", "stream": True}, "stream", "unknown_parameter"),
    ],
)
def test_openai_limits_name_the_path(
    chain: tuple[str, Counted], body: dict[str, object], param: str, code: str
) -> None:
    answer = httpx.post(
        f"{chain[0]}/v1/embeddings", json={"model": EMBEDDING_MODEL, **body}, timeout=30
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, code)


def test_rerank_top_n_at_both_paths(chain: tuple[str, Counted]) -> None:
    documents = ["Dogs bark.", "A Python list is a sequence.", "Rain is wet.", "Lists grow."]
    for path in ("/v1/rerank", "/rerank"):
        answer = httpx.post(
            chain[0] + path,
            json={
                "model": RERANK_MODEL,
                "query": "Python list",
                "documents": documents,
                "top_n": 2,
            },
            timeout=30,
        )
        assert answer.status_code == 200
        results = answer.json()["results"]
        assert len(results) == 2
        assert results[0]["relevance_score"] >= results[1]["relevance_score"]


def test_tokenize_and_detokenize_in_both_shapes(chain: tuple[str, Counted]) -> None:
    url = chain[0]
    vllm = httpx.post(f"{url}/tokenize", json={"model": EMBEDDING_MODEL, "prompt": KNOWN})
    llama = httpx.post(f"{url}/tokenize", json={"content": KNOWN})
    assert vllm.json()["tokens"] == llama.json()["tokens"]
    assert vllm.json()["count"] == len(vllm.json()["tokens"])
    back = httpx.post(f"{url}/detokenize", json={"tokens": llama.json()["tokens"]}).json()
    assert set(back) == {"content"}
    assert back["content"] == KNOWN
    vllm_back = httpx.post(
        f"{url}/detokenize", json={"model": EMBEDDING_MODEL, "tokens": llama.json()["tokens"]}
    )
    assert vllm_back.json() == {"prompt": back["content"]}
    refused = httpx.post(f"{url}/tokenize", json={"content": "a", "with_pieces": True})
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "with_pieces"
    # The vector of the engine's own ids is the text's.
    assert embed(vllm.json()["tokens"]) == embed(llama.json()["tokens"])


def test_a_route_the_policy_does_not_declare_is_a_404(tmp_path: Path) -> None:
    text = POLICY.read_text()
    policy = tmp_path / "chat-only.yaml"
    policy.write_text(text[: text.index("\n  /v1/embeddings:")] + "\n")
    with engine() as (engine_url, counted), gateway(engine_url, policy) as url:
        answer = httpx.post(f"{url}/v1/embeddings", json={"model": EMBEDDING_MODEL, "input": "a"})
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "unknown_url"
        metrics = httpx.get(f"{url}/metrics").text
    assert counted.seen["/v1/embeddings"] == 0
    counted_404 = [
        line
        for line in metrics.splitlines()
        if line.startswith("ft_gateway_requests_total{")
        and 'route="/v1/embeddings"' in line
        and 'status="404"' in line
    ]
    assert counted_404 and counted_404[0].endswith(" 1.0")
