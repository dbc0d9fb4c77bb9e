"""The engine's routes beyond generation: /v1/embeddings, /v1/rerank (and /rerank),
/tokenize and /detokenize, over the embedding model of embedding.py.

``ignore`` reproduces the silent no-ops engines are known for, so the gateway's
probe can be tested both ways: ``dimensions`` (llama.cpp returns the full width,
ggml-org/llama.cpp#25210), ``encoding_format`` (floats whatever was asked: SGLang
before PR #32481, KoboldCpp, LitServe), ``top_n`` (every document ranked: LocalAI
#6700), ``model`` (any name served: TEI), ``return_documents`` (documents always
returned).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from refengine.embedding import WIDTH, cosine, embed, to_base64, truncated
from refengine.errors import EngineError, ModelNotFound
from refengine.tokenizer import Tokenizer

NOOPS = ("dimensions", "encoding_format", "top_n", "model", "return_documents")
MAX_INPUTS = 2048
MAX_MODEL_LEN = 8192
_Body = Callable[[Request], Coroutine[Any, Any, Any]]


class Vectors:
    """The embedding and rerank routes of one engine."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        embedding_model: str,
        rerank_model: str,
        ignore: frozenset[str] = frozenset(),
        json_body: _Body,
    ) -> None:
        unknown = ignore - set(NOOPS)
        if unknown:
            raise ValueError(f"unknown no-op(s): {sorted(unknown)}")
        self.tokenizer = tokenizer
        self.embedding_model = embedding_model
        self.rerank_model = rerank_model
        self.ignore = ignore
        self._body = json_body

    def routes(self) -> list[Route]:
        """The Starlette routes."""
        return [
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/v1/rerank", self.rerank, methods=["POST"]),
            Route("/rerank", self.rerank, methods=["POST"]),
            Route("/tokenize", self.tokenize, methods=["POST"]),
            Route("/detokenize", self.detokenize, methods=["POST"]),
        ]

    def _model(self, body: dict[str, Any], served: str) -> str:
        model = body.get("model")
        if "model" in self.ignore:
            return served
        if model != served:
            raise ModelNotFound(str(model))
        return served

    def _ids(self, value: Any, param: str) -> list[int]:
        if isinstance(value, str):
            if not value:
                raise EngineError(f"'{param}' cannot be an empty string", param=param)
            return self.tokenizer.encode(value)
        if isinstance(value, list) and value and all(type(t) is int for t in value):
            if any(not 0 <= t < self.tokenizer.vocab_size for t in value):
                raise EngineError(f"'{param}': token id out of range", param=param)
            return list(value)
        raise EngineError(f"'{param}' must be a string or an array of token ids", param=param)

    def inputs(self, value: Any) -> list[list[int]]:
        """The token ids of each input of an embeddings request."""
        if isinstance(value, str) or (
            isinstance(value, list) and value and all(type(t) is int for t in value)
        ):
            return [self._ids(value, "input")]
        if not isinstance(value, list) or not value:
            raise EngineError("'input' must be a string or a non-empty array", param="input")
        if len(value) > MAX_INPUTS:
            raise EngineError(f"'input' has more than {MAX_INPUTS} items", param="input")
        return [self._ids(item, f"input[{i}]") for i, item in enumerate(value)]

    async def embeddings(self, request: Request) -> Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise EngineError("the body must be a JSON object")
        model = self._model(body, self.embedding_model)
        inputs = self.inputs(body.get("input"))
        dimensions = body.get("dimensions")
        if dimensions is not None and "dimensions" not in self.ignore:
            if type(dimensions) is not int or not 1 <= dimensions <= WIDTH:
                raise EngineError(
                    f"'dimensions' must be an integer from 1 to {WIDTH}", param="dimensions"
                )
        else:
            dimensions = None
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise EngineError(
                "'encoding_format' must be 'float' or 'base64'", param="encoding_format"
            )
        if "encoding_format" in self.ignore:
            encoding = "float"
        data = []
        for index, ids in enumerate(inputs):
            vector = embed(ids)
            if dimensions is not None:
                vector = truncated(vector, dimensions)
            shown: Any = to_base64(vector) if encoding == "base64" else vector
            data.append({"object": "embedding", "index": index, "embedding": shown})
        tokens = sum(len(ids) for ids in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def rerank(self, request: Request) -> Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise EngineError("the body must be a JSON object")
        model = self._model(body, self.rerank_model)
        query = body.get("query")
        documents = body.get("documents")
        if not isinstance(query, str) or not query:
            raise EngineError("'query' must be a non-empty string", param="query")
        if not isinstance(documents, list) or not documents:
            raise EngineError("'documents' must be a non-empty array", param="documents")
        texts = [d.get("text") if isinstance(d, dict) else d for d in documents]
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise EngineError(f"'documents[{i}]' must be a string", param=f"documents[{i}]")
        top_n = body.get("top_n")
        if top_n is not None and (type(top_n) is not int or top_n < 1):
            raise EngineError("'top_n' must be an integer >= 1", param="top_n")
        query_ids = self.tokenizer.encode(query)
        question = embed(query_ids)
        tokens = len(query_ids)
        results = []
        for index, text in enumerate(texts):
            ids = self.tokenizer.encode(str(text))
            tokens += len(ids)
            result: dict[str, Any] = {
                "index": index,
                "relevance_score": cosine(question, embed(ids)),
            }
            if body.get("return_documents", True) is not False or "return_documents" in self.ignore:
                result["document"] = {"text": text}
            results.append(result)
        results.sort(key=lambda r: (-r["relevance_score"], r["index"]))
        if top_n is not None and "top_n" not in self.ignore:
            results = results[:top_n]
        return JSONResponse(
            {
                "id": f"rerank-{tokens}-{len(texts)}",
                "model": model,
                "results": results,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def tokenize(self, request: Request) -> Response:
        """vLLM's shape (``prompt`` -> count, max_model_len, tokens) or llama.cpp's
        (``content`` -> tokens)."""
        body = await self._body(request)
        if not isinstance(body, dict):
            raise EngineError("the body must be a JSON object")
        if "content" in body:
            content = body["content"]
            if not isinstance(content, str):
                raise EngineError("'content' must be a string", param="content")
            return JSONResponse({"tokens": self.tokenizer.encode(content)})
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise EngineError("'prompt' must be a string", param="prompt")
        tokens = self.tokenizer.encode(prompt)
        return JSONResponse(
            {"count": len(tokens), "max_model_len": MAX_MODEL_LEN, "tokens": tokens}
        )

    async def detokenize(self, request: Request) -> Response:
        """vLLM's shape (with ``model``: -> prompt) or llama.cpp's (-> content)."""
        body = await self._body(request)
        if not isinstance(body, dict):
            raise EngineError("the body must be a JSON object")
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            raise EngineError("'tokens' must be an array of token ids", param="tokens")
        if any(not 0 <= t < self.tokenizer.vocab_size for t in tokens):
            raise EngineError("'tokens': token id out of range", param="tokens")
        text = self.tokenizer.decode(tokens)
        return JSONResponse({"prompt": text} if "model" in body else {"content": text})
