"""The reference engine's embedding model and reranker: deterministic unit vectors,
Matryoshka truncation, OpenAI's base64; and its routes, honest and with each no-op."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from refengine import create_app
from refengine.embedding import WIDTH, cosine, embed, from_base64, to_base64, truncated
from refengine.vectors import NOOPS, Vectors
from tests.support.servers import running_server
from tests.support.vectors import EMBEDDING_MODEL, RERANK_MODEL

pytestmark = pytest.mark.anyio
DOCUMENTS = ["The weather is cold.", "A list in Python is a sequence.", "Dogs bark.", "Lists grow."]


def test_vectors_are_deterministic_unit_vectors() -> None:
    a, b = embed([10, 11, 12]), embed([10, 11, 12])
    assert a == b and len(a) == WIDTH
    assert math.sqrt(sum(x * x for x in a)) == pytest.approx(1.0)
    assert embed([12, 11, 10]) != a  # bigrams: word order counts
    assert cosine(a, embed([10, 11, 13])) > cosine(a, embed([40, 41, 42]))


def test_truncation_renormalises_the_prefix() -> None:
    full = embed([3, 4, 5, 6])
    short = truncated(full, 32)
    assert len(short) == 32
    assert math.sqrt(sum(x * x for x in short)) == pytest.approx(1.0)
    ratio = short[0] / full[0]
    assert all(s == pytest.approx(f * ratio) for s, f in zip(short, full[:32], strict=True))


def test_base64_is_little_endian_float32() -> None:
    vector = embed([7, 8])
    text = to_base64(vector)
    raw = base64.b64decode(text)
    assert len(raw) == 4 * WIDTH
    assert struct.unpack("<f", raw[:4])[0] == pytest.approx(vector[0], abs=1e-7)
    assert from_base64(text) == pytest.approx(vector, abs=1e-7)


def test_an_unknown_noop_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown no-op"):
        Vectors(
            create_app().state.engine.tokenizer,
            embedding_model="e",
            rerank_model="r",
            ignore=frozenset({"temperature"}),
            json_body=lambda request: None,  # type: ignore[arg-type,return-value]
        )


async def _client(*ignore: str) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        running_server(create_app(ignore=frozenset(ignore))) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        yield http


@pytest.fixture
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    ignore: tuple[str, ...] = getattr(request, "param", ())
    async for http in _client(*ignore):
        yield http


async def _embeddings(http: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    return await http.post("/v1/embeddings", json={"model": EMBEDDING_MODEL, **fields})


async def test_embeddings_honour_every_field(engine: httpx.AsyncClient) -> None:
    floats = (await _embeddings(engine, input=["a cat", "a dog"])).json()
    assert [d["index"] for d in floats["data"]] == [0, 1]
    assert floats["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    encoded = (await _embeddings(engine, input=["a cat"], encoding_format="base64")).json()
    assert from_base64(encoded["data"][0]["embedding"]) == pytest.approx(
        floats["data"][0]["embedding"], abs=1e-7
    )
    short = (await _embeddings(engine, input="a cat", dimensions=8)).json()
    assert len(short["data"][0]["embedding"]) == 8
    tokens = (await engine.post("/tokenize", json={"content": "a cat"})).json()["tokens"]
    by_ids = (await _embeddings(engine, input=tokens)).json()
    assert by_ids["data"][0]["embedding"] == floats["data"][0]["embedding"]
    unknown = await engine.post("/v1/embeddings", json={"model": "nope", "input": "a"})
    assert unknown.status_code == 404
    too_wide = await _embeddings(engine, input="a", dimensions=WIDTH + 1)
    assert too_wide.status_code == 400 and too_wide.json()["error"]["param"] == "dimensions"


@pytest.mark.parametrize("engine", [NOOPS], indirect=True)
async def test_each_noop_is_silent(engine: httpx.AsyncClient) -> None:
    answer = await engine.post(
        "/v1/embeddings",
        json={"model": "any", "input": "a cat", "dimensions": 8, "encoding_format": "base64"},
    )
    assert answer.status_code == 200
    assert len(answer.json()["data"][0]["embedding"]) == WIDTH  # floats, full width
    ranked = await engine.post(
        "/v1/rerank", json={"model": "any", "query": "list", "documents": DOCUMENTS, "top_n": 1}
    )
    assert len(ranked.json()["results"]) == len(DOCUMENTS)


async def test_rerank_orders_by_relevance(engine: httpx.AsyncClient) -> None:
    body = {"model": RERANK_MODEL, "query": "a list in Python", "documents": DOCUMENTS}
    ranked = (await engine.post("/rerank", json=body | {"top_n": 2})).json()["results"]
    assert [r["index"] for r in ranked][:1] == [1]
    assert len(ranked) == 2 and ranked[0]["document"] == {"text": DOCUMENTS[1]}
    bare = (await engine.post("/v1/rerank", json=body | {"return_documents": False})).json()
    assert all("document" not in r for r in bare["results"])
