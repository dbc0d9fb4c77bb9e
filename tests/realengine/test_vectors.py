"""/v1/embeddings and /tokenize, /detokenize against each real engine serving embeddings
(a process of its own, as an embedding deployment is): ``ft-gateway probe --route
embeddings``, and where it writes a policy, the gateway with that policy called with the
``openai`` SDK; tokenize through the gateway with the default policy. Rerank is not
here: no reranker model installs from the package registries (docs/engines.md)."""

from __future__ import annotations

import base64
import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.realengine.engines import (
    ENGINES,
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    MODEL_NAME,
    Running,
    engine,
    running,
)
from tests.realengine.probing import Probed, assert_check_passes, probe, serve_gateway
from tests.support.paths import POLICY
from tests.support.sdk import sync_sdk

pytestmark = pytest.mark.realengine

EMBEDDINGS = "/v1/embeddings"
TEXT = "Rain fell on the old town."
TEXTS = [TEXT, "A list in Python is a mutable sequence."]
# The engines whose embeddings the probe measures (llama-cpp-python's answers a vector a
# token with this model: test_the_probe_measures_embeddings_or_says_why_not).
PROBED = [name for name in ENGINES if name == LLAMA_SERVER]
# llama-cpp-python's server tokenizes at /extras/tokenize only, which no engine API shares.
NO_TOKENIZE = [name for name in ENGINES if name == LLAMA_CPP_PYTHON]


class Embedders:
    """Each engine serving embeddings, started once and probed once, on first use; and the
    gateways in front of them (with the probe's policy, or the default one)."""

    def __init__(self, out_dir: Path, stack: contextlib.ExitStack) -> None:
        self.out_dir = out_dir
        self.stack = stack
        self.served: dict[str, Running] = {}
        self.probed: dict[str, Probed] = {}
        self.gateways: dict[tuple[str, str], str] = {}

    def engine(self, name: str) -> Running:
        if name not in self.served:
            self.served[name] = self.stack.enter_context(
                running(engine(name), self.out_dir, embedding=True)
            )
        return self.served[name]

    def probe(self, name: str) -> Probed:
        if name not in self.probed:
            self.probed[name] = probe(self.engine(name), self.out_dir, route="embeddings")
        return self.probed[name]

    def gateway(self, name: str, policy: str = "probed") -> str:
        """The gateway's URL in front of ``name``: with the probe's policy, or ``default``."""
        if (name, policy) not in self.gateways:
            if policy == "probed":
                probed = self.probe(name)
                if probed.returncode != 0:
                    pytest.fail(f"the probe wrote no policy:\n{probed.output}")
                path = probed.policy
            else:
                path = POLICY
            server = self.stack.enter_context(serve_gateway(self.engine(name).url, path))
            self.gateways[name, policy] = server.url
        return self.gateways[name, policy]


@pytest.fixture(scope="module")
def embedders(out_dir: Path) -> Iterator[Embedders]:
    with contextlib.ExitStack() as stack:
        yield Embedders(out_dir, stack)


def direct(url: str, path: str, body: dict[str, Any]) -> Any:
    """The engine's own answer to ``body`` (no gateway)."""
    answer = httpx.post(url + path, json=body, timeout=120)
    answer.raise_for_status()
    return answer.json()


def vector(url: str, text: str) -> Any:
    body = {"model": MODEL_NAME, "input": text, "encoding_format": "float"}
    return direct(url, EMBEDDINGS, body)["data"][0]["embedding"]


def rule(probed: Probed, field: str) -> dict[str, Any]:
    found: dict[str, Any] = probed.rules["routes"][EMBEDDINGS]["fields"][field]
    return found


def sdk(url: str) -> openai.OpenAI:
    return sync_sdk(url, timeout=120)


@pytest.mark.parametrize("name", ENGINES)
def test_the_probe_measures_embeddings_or_says_why_not(embedders: Embedders, name: str) -> None:
    answer = vector(embedders.engine(name).url, TEXT)
    probed = embedders.probe(name)
    if all(isinstance(x, int | float) for x in answer):
        assert probed.returncode == 0, probed.output
        assert "## /v1/embeddings" in probed.report.read_text()
        assert_check_passes(probed.policy)
    else:
        # A vector per token (a list of lists): not OpenAI's one vector per input.
        assert all(isinstance(row, list) for row in answer)
        assert probed.returncode == 2
        assert "no embedding: HTTP 200, data[0].embedding: a list of " in probed.output
        assert " lists, not one vector" in probed.output


@pytest.mark.parametrize("name", PROBED)
def test_the_sdk_gets_the_engines_vector(embedders: Embedders, name: str) -> None:
    own = vector(embedders.engine(name).url, TEXT)
    answer = sdk(embedders.gateway(name)).embeddings.create(
        model=MODEL_NAME, input=TEXT, encoding_format="float"
    )
    (data,) = answer.data
    assert data.embedding == own
    assert answer.usage.prompt_tokens == answer.usage.total_tokens > 0


@pytest.mark.parametrize("name", PROBED)
def test_the_sdk_default_base64_as_the_policy_says(embedders: Embedders, name: str) -> None:
    """openai-python asks for base64 unless told otherwise, and decodes it."""
    own = vector(embedders.engine(name).url, TEXT)
    client = sdk(embedders.gateway(name))
    if "base64" in rule(embedders.probe(name), "encoding_format").get("enum", []):
        (data,) = client.embeddings.create(model=MODEL_NAME, input=TEXT).data
        assert data.embedding == pytest.approx(own, abs=1e-6)
        raw = client.embeddings.with_raw_response.create(
            model=MODEL_NAME, input=TEXT, encoding_format="base64"
        )
        encoded = raw.http_response.json()["data"][0]["embedding"]
        assert len(base64.b64decode(encoded)) == 4 * len(own)
        assert struct.unpack(f"<{len(own)}f", base64.b64decode(encoded)) == pytest.approx(
            own, abs=1e-6
        )
    else:
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model=MODEL_NAME, input=TEXT)
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == "encoding_format"


@pytest.mark.parametrize("name", PROBED)
def test_dimensions_as_the_policy_says(embedders: Embedders, name: str) -> None:
    """llama.cpp returns the whole vector whatever ``dimensions`` asks
    (ggml-org/llama.cpp#25210): the probe's policy refuses what the engine ignores."""
    client = sdk(embedders.gateway(name))
    asked = 8
    if rule(embedders.probe(name), "dimensions")["action"] == "reject":
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(
                model=MODEL_NAME, input=TEXT, encoding_format="float", dimensions=asked
            )
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == "dimensions"
    else:
        (data,) = client.embeddings.create(
            model=MODEL_NAME, input=TEXT, encoding_format="float", dimensions=asked
        ).data
        assert len(data.embedding) == asked
    # Asked of the engine itself, the field is taken and has no effect.
    own = direct(
        embedders.engine(name).url,
        EMBEDDINGS,
        {"model": MODEL_NAME, "input": TEXT, "encoding_format": "float", "dimensions": asked},
    )
    ignored = len(own["data"][0]["embedding"]) != asked
    assert ignored == (rule(embedders.probe(name), "dimensions")["action"] == "reject")


@pytest.mark.parametrize("name", PROBED)
def test_a_batch_as_the_policy_says(embedders: Embedders, name: str) -> None:
    url = embedders.engine(name).url
    client = sdk(embedders.gateway(name))
    # A batch is an array of strings: what the rule's items take (none: no arrays at all).
    items = rule(embedders.probe(name), "input").get("items", {}).get("type", [])
    if "string" in (items if isinstance(items, list) else [items]):
        answer = client.embeddings.create(model=MODEL_NAME, input=TEXTS, encoding_format="float")
        assert [d.index for d in answer.data] == [0, 1]
        for data, text in zip(answer.data, TEXTS, strict=True):
            assert data.embedding == pytest.approx(vector(url, text), abs=1e-4)
    else:
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model=MODEL_NAME, input=TEXTS, encoding_format="float")
        assert isinstance(caught.value.body, dict)
        # input itself where it takes one string, else its first member (ids pass)
        assert caught.value.body["param"] in ("input", "input[0]")
        # What the engine itself does with the batch: not each text's own vector.
        batch = direct(
            url, EMBEDDINGS, {"model": MODEL_NAME, "input": TEXTS, "encoding_format": "float"}
        )["data"]
        lone = [vector(url, text) for text in TEXTS]
        assert any(
            d["embedding"] != pytest.approx(own, abs=1e-5)
            for d, own in zip(batch, lone, strict=True)
        )


@pytest.mark.parametrize("name", PROBED)
def test_token_ids_as_the_policy_says(embedders: Embedders, name: str) -> None:
    """The engine's own ids of the text (with its special tokens, as it embeds text)."""
    url = embedders.engine(name).url
    ids = direct(url, "/tokenize", {"content": TEXT, "add_special": True})["tokens"]
    client = sdk(embedders.gateway(name))
    token_ids = rule(embedders.probe(name), "input").get("token_ids", {"action": "pass"})
    if token_ids["action"] == "pass":
        (data,) = client.embeddings.create(
            model=MODEL_NAME, input=ids, encoding_format="float"
        ).data
        assert data.embedding == pytest.approx(vector(url, TEXT), abs=1e-5)
    else:
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model=MODEL_NAME, input=ids, encoding_format="float")
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == "input"


@pytest.mark.parametrize("name", PROBED)
def test_tokenize_and_detokenize_through_the_gateway(embedders: Embedders, name: str) -> None:
    """llama.cpp's shape (``content``) through the default policy's /tokenize."""
    url, engine_url = embedders.gateway(name, "default"), embedders.engine(name).url
    body = {"model": MODEL_NAME, "content": TEXT}
    tokens = httpx.post(f"{url}/tokenize", json=body, timeout=60)
    assert tokens.status_code == 200
    assert tokens.json() == direct(engine_url, "/tokenize", body)
    ids = tokens.json()["tokens"]
    assert ids and all(type(t) is int for t in ids)
    back = httpx.post(f"{url}/detokenize", json={"model": MODEL_NAME, "tokens": ids}, timeout=60)
    assert back.status_code == 200
    assert back.json() == {"content": TEXT}
    # vLLM's shape: llama-server answers it with no tokens (docs/engines.md).
    vllm = {"model": MODEL_NAME, "prompt": TEXT}
    assert httpx.post(f"{url}/tokenize", json=vllm, timeout=60).json() == {"tokens": []}
    refused = httpx.post(f"{url}/tokenize", json={**body, "with_pieces": True}, timeout=60)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "with_pieces"


@pytest.mark.parametrize("name", NO_TOKENIZE)
def test_tokenize_where_the_engine_serves_none(embedders: Embedders, name: str) -> None:
    """The engine's 404 comes back as the gateway's error for a failed engine request;
    the engine's own path is not a route of the gateway (nothing passes un-policed)."""
    url, engine_url = embedders.gateway(name, "default"), embedders.engine(name).url
    body = {"model": MODEL_NAME, "content": TEXT}
    assert httpx.post(f"{engine_url}/tokenize", json=body, timeout=60).status_code == 404
    answer = httpx.post(f"{url}/tokenize", json=body, timeout=60)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "upstream_error"
    own = httpx.post(f"{url}/extras/tokenize", json={"input": TEXT}, timeout=60)
    assert own.status_code == 404
    assert own.json()["error"]["code"] == "unknown_url"
