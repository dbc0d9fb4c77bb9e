"""The Starlette app: ft serve's OpenAI routes in front of the batcher."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import sampler
from refengine.batcher import Engine, Row
from refengine.errors import EngineError, ModelNotFound, RouteNotFound
from refengine.events import Finished, RowEvent, ToolArguments, ToolCallStart
from refengine.model import TrigramModel, default_model
from refengine.modes import PER_ROW, UNPATCHED
from refengine.params import SamplingParams
from refengine.prefixcache import Prefill, PrefixCache
from refengine.protocol import (
    DEFAULT_CHAT_MAX_TOKENS,
    DEFAULT_COMPLETION_MAX_TOKENS,
    parse_chat,
    parse_completion,
)
from refengine.responses import DONE, Reply
from refengine.structured.answer import Plan, plan_answer
from refengine.structured.options import StructuredOptions
from refengine.structured.request import read_request
from refengine.template import render_chat
from refengine.tokenizer import Tokenizer
from refengine.vectors import Vectors

DEFAULT_MODEL_NAME = "Qwen3.8-Flash-Next"
DEFAULT_EMBEDDING_MODEL = "ref-embedding-1"
DEFAULT_RERANK_MODEL = "ref-reranker-1"


def create_app(
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    max_batch: int = 32,
    unpatched_sampler: bool = False,
    seed_mode: str = PER_ROW,
    batch_variant_logits: bool = False,
    step_delay_ms: float = 0.0,
    model: TrigramModel | None = None,
    prefill_ms_per_token: float = 0.0,
    prefix_cache_blocks: int = 0,
    block_size: int = 16,
    ignore: frozenset[str] = frozenset(),
    structured: StructuredOptions | None = None,
) -> Starlette:
    """The engine app; ``app.state.engine`` is the batcher (its ``stats`` for tests),
    ``app.state.prefill`` the prefill model (a prefix cache of ``prefix_cache_blocks``
    blocks of ``block_size`` tokens, none if 0; prefill time per uncached token).
    ``seed_mode`` and ``batch_variant_logits``: the engine to reproduce (modes.py).
    ``ignore``: the embedding and rerank fields to ignore silently (vectors.py).
    ``structured``: structured outputs and tools (off: ignored, as ft serve ignores them;
    structured/options.py)."""
    options = structured or StructuredOptions()
    engine = Engine(
        model or default_model(),
        max_batch=max_batch,
        unpatched_sampler=unpatched_sampler,
        seed_mode=seed_mode,
        batch_variant_logits=batch_variant_logits,
        step_delay_s=step_delay_ms / 1000.0,
    )
    tokenizer = engine.tokenizer
    words = answer_words(tokenizer)
    cache = (
        PrefixCache(block_size=block_size, capacity=prefix_cache_blocks)
        if prefix_cache_blocks
        else None
    )
    prefill = Prefill(seconds_per_token=prefill_ms_per_token / 1000.0, cache=cache)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop_task = asyncio.create_task(engine.run())
        try:
            yield
        finally:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task

    async def chat_completions(request: Request) -> Response:
        chat = parse_chat(await _json_body(request))
        _check_model(chat.model, model_name)
        messages = [m.model_dump() for m in chat.messages]
        params = chat.sampling_params(DEFAULT_CHAT_MAX_TOKENS)
        asked = read_request(chat.model_extra or {}, messages, options)
        plan = Plan()
        if asked is not None:
            key = _draw_key(params.seed, params.temperature, engine.seed_mode)
            plan = plan_answer(
                asked, key=key, words=words, max_tokens=params.max_tokens, options=options
            )
        prompt = tokenizer.encode(render_chat(messages, enable_thinking=chat.enable_thinking))
        reply = Reply("chat", model_name, len(prompt), cache_details=cache is not None)
        start = _Start(
            engine, prefill, prompt, params, reply, thinking=chat.enable_thinking, plan=plan
        )
        if chat.stream:
            return _event_stream(start, include_usage=chat.include_usage)
        return await _collect(request, start)

    async def completions(request: Request) -> Response:
        completion = parse_completion(await _json_body(request))
        _check_model(completion.model, model_name)
        raw = completion.prompt
        if isinstance(raw, str):
            prompt = tokenizer.encode(raw)
        elif raw and isinstance(raw[0], str):
            prompt = tokenizer.encode(str(raw[0]))
        else:
            prompt = [int(t) for t in raw]
            if any(not 0 <= t < tokenizer.vocab_size for t in prompt):
                raise EngineError("prompt token id out of range", param="prompt")
        params = completion.sampling_params(DEFAULT_COMPLETION_MAX_TOKENS)
        reply = Reply("completion", model_name, len(prompt), cache_details=cache is not None)
        start = _Start(engine, prefill, prompt, params, reply, thinking=False)
        if completion.stream:
            return _event_stream(start, include_usage=completion.include_usage)
        return await _collect(request, start)

    async def models(request: Request) -> Response:
        # Every name it serves, as vLLM lists its own: a gateway in front refuses others.
        names = (model_name, DEFAULT_EMBEDDING_MODEL, DEFAULT_RERANK_MODEL)
        cards = [{"id": n, "object": "model", "created": 0, "owned_by": "refengine"} for n in names]
        return JSONResponse({"object": "list", "data": cards})

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    vectors = Vectors(
        tokenizer,
        embedding_model=DEFAULT_EMBEDDING_MODEL,
        rerank_model=DEFAULT_RERANK_MODEL,
        ignore=ignore,
        json_body=_json_body,
    )
    app = Starlette(
        routes=[
            *vectors.routes(),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={EngineError: _engine_error, HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.prefill = prefill
    app.state.model_name = model_name
    app.state.structured = options
    return app


def answer_words(tokenizer: Tokenizer) -> list[str]:
    """The words a drawn JSON string is made of: the vocabulary's, most frequent first."""
    return [w for w in tokenizer.tokens if w.isascii() and w.isalpha()][:_ANSWER_WORDS]


_ANSWER_WORDS = 2000


def _draw_key(seed: int | None, temperature: float, seed_mode: str) -> int:
    """The key of a structured answer's draws: the seed (one drawn if none, or always
    when the sampler ignores seeds), 0 at temperature 0 (one answer, like greedy)."""
    if temperature == 0:
        return 0
    if seed is None or seed_mode == UNPATCHED:
        return sampler.random_seed()
    return seed


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EngineError(f"the request body is not valid JSON: {exc}") from exc


def _check_model(requested: str, served: str) -> None:
    if requested != served:
        raise ModelNotFound(requested)


@dataclass(eq=False)
class _Start:
    """A request about to enter the engine: prefill (cache lookup, its time), then the batch."""

    engine: Engine
    prefill: Prefill
    prompt: list[int]
    params: SamplingParams
    reply: Reply
    _: KW_ONLY
    thinking: bool
    plan: Plan = field(default_factory=Plan)
    row: Row | None = None  # once submitted

    async def submit(self) -> Row:
        self.reply.cached_tokens = await self.prefill.run(self.prompt)
        self.row = self.engine.submit(
            self.prompt,
            self.params,
            thinking=self.thinking,
            script=self.plan.script,
            script_end=self.plan.end,
            stop_label=self.plan.stop_label,
        )
        return self.row

    def end(self) -> None:
        """Leave the batch (a no-op once finished) and cache what was computed."""
        if self.row is not None:
            self.engine.cancel(self.row)
            self.prefill.keep(self.prompt + self.row.generated)


async def _collect(request: Request, start: _Start) -> Response:
    """The whole reply; if the client hangs up first, the row leaves the batch."""

    async def text() -> tuple[str, list[dict[str, Any]], str, int]:
        row = await start.submit()
        parts: list[str] = []
        calls: list[dict[str, Any]] = []
        while not isinstance(event := await row.events.get(), Finished):
            if isinstance(event, str):
                parts.append(event)
            elif isinstance(event, ToolCallStart):
                calls.append(_call(event))
            else:
                calls[event.index]["function"]["arguments"] += event.text
        return "".join(parts), calls, event.reason, len(row.generated)

    async def hang_up() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    collecting = asyncio.ensure_future(text())
    watching = asyncio.ensure_future(hang_up())
    try:
        await asyncio.wait((collecting, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        collecting.cancel()
        watching.cancel()
        start.end()
    if not collecting.done() or collecting.cancelled():
        return Response(status_code=499)  # nobody is listening any more
    content, calls, reason, generated = collecting.result()
    return JSONResponse(start.reply.body(content, reason, generated, tool_calls=calls))


def _call(start: ToolCallStart) -> dict[str, Any]:
    """A tool call as OpenAI's message holds it, its arguments still empty."""
    return {"id": start.id, "type": "function", "function": {"name": start.name, "arguments": ""}}


def _delta(reply: Reply, event: RowEvent, *, include_usage: bool) -> bytes:
    """The chunk of one piece of the answer."""
    if isinstance(event, ToolCallStart):
        call = {"index": event.index} | _call(event)
        return reply.chunk(tool_call=call, with_usage_key=include_usage)
    if isinstance(event, ToolArguments):
        piece = {"index": event.index, "function": {"arguments": event.text}}
        return reply.chunk(tool_call=piece, with_usage_key=include_usage)
    return reply.chunk(text=str(event), with_usage_key=include_usage)


def _event_stream(start: _Start, *, include_usage: bool) -> Response:
    reply = start.reply

    async def events() -> AsyncIterator[bytes]:
        # Starlette cancels this generator when the client disconnects: the finally
        # then takes the row out of the batch, so the engine stops generating it.
        try:
            row = await start.submit()  # prefill: the first chunk comes after it
            if reply.route == "chat":
                yield reply.chunk(text="", role=True, with_usage_key=include_usage)
            while not isinstance(event := await row.events.get(), Finished):
                yield _delta(reply, event, include_usage=include_usage)
            yield reply.chunk(finish_reason=event.reason, with_usage_key=include_usage)
            if include_usage:
                yield reply.usage_chunk(len(row.generated))
            yield DONE
        finally:
            start.end()

    return StreamingResponse(events(), media_type="text/event-stream")


async def _engine_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, EngineError):  # registered for EngineError only
        raise exc
    return JSONResponse(exc.body(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # registered for HTTPException only
        raise exc
    if exc.status_code in (404, 405):
        error = RouteNotFound(request.method, request.url.path)
        return JSONResponse(error.body(), status_code=exc.status_code)
    message = EngineError(str(exc.detail))
    return JSONResponse(message.body(), status_code=exc.status_code)
