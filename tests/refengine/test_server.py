"""The reference engine on the wire: OpenAI routes over a real uvicorn server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from refengine import create_app
from refengine.batcher import Engine
from tests.support.bodies import CHAT, COMPLETIONS, MODEL, NO_THINKING
from tests.support.sdk import sdk, sync_sdk
from tests.support.servers import ServerThread, running_server

pytestmark = pytest.mark.anyio


def _chat(content: str = "Invent a name for a cat.", **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **fields}


def _completion(prompt: str | list[str] = "The list", **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": prompt, **fields}


@pytest.fixture
async def engine_url() -> AsyncIterator[tuple[str, Engine]]:
    app = create_app()
    async with running_server(app) as url:
        yield url, app.state.engine


@pytest.fixture
async def client(engine_url: tuple[str, Engine]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=engine_url[0], timeout=30) as http:
        yield http


async def _sse(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an event stream, ``[DONE]`` as the string."""
    events: list[Any] = []
    async for line in response.aiter_lines():
        if line:
            assert line.startswith("data: ")
            data = line.removeprefix("data: ")
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def _stream(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> list[Any]:
    async with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return await _sse(response)


def _check_usage(usage: dict[str, int]) -> None:
    assert usage["prompt_tokens"] > 0
    assert usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_chat_completion_shape(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, json=_chat(seed=7, **NO_THINKING))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == MODEL
    [choice] = body["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["message"]["content"]
    assert choice["logprobs"] is None
    assert choice["finish_reason"] in ("stop", "length")
    _check_usage(body["usage"])


async def test_completion_shape_and_default_max_tokens(client: httpx.AsyncClient) -> None:
    response = await client.post(COMPLETIONS, json=_completion(seed=7, temperature=0.0))
    assert response.status_code == 200
    body = response.json()
    assert body["id"].startswith("cmpl-")
    assert body["object"] == "text_completion"
    [choice] = body["choices"]
    assert set(choice) == {"index", "text", "logprobs", "finish_reason"}
    assert choice["text"].startswith(" ")  # a completion continues its prompt
    assert choice["logprobs"] is None
    _check_usage(body["usage"])
    assert body["usage"]["completion_tokens"] <= 16


async def test_chat_stream_matches_the_non_streaming_reply(client: httpx.AsyncClient) -> None:
    request = _chat(seed=11, max_tokens=30)
    whole = (await client.post(CHAT, json=request)).json()
    events = await _stream(client, CHAT, request | {"stream": True})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("usage" not in c for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert text.startswith("<think>\n")  # thinking is on by default
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": whole["choices"][0]["finish_reason"],
    }


async def test_completion_stream_with_usage(client: httpx.AsyncClient) -> None:
    request = _completion(seed=5, max_tokens=12)
    whole = (await client.post(COMPLETIONS, json=request)).json()
    streamed = request | {"stream": True, "stream_options": {"include_usage": True}}
    events = await _stream(client, COMPLETIONS, streamed)
    assert events[-1] == "[DONE]"
    *chunks, usage_chunk = events[:-1]
    assert all(c["object"] == "text_completion" and c["usage"] is None for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == whole["usage"]


async def test_chat_stream_include_usage(client: httpx.AsyncClient) -> None:
    request = _chat(seed=5, max_tokens=12, stream=True, stream_options={"include_usage": True})
    events = await _stream(client, CHAT, request)
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 12  # thinking: no early end
    _check_usage(usage_chunk["usage"])


async def test_max_tokens_ends_with_length(client: httpx.AsyncClient) -> None:
    body = (await client.post(CHAT, json=_chat(max_tokens=4))).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_stop_strings_end_the_text_before_them(
    client: httpx.AsyncClient, stream: bool
) -> None:
    # The first seed whose answer has a fifth word: the model is trained on the running
    # CPython's pydoc topics, so which seed that is depends on the interpreter's version.
    for seed in range(21, 61):
        request = _chat(seed=seed, max_tokens=40, **NO_THINKING)
        full = (await client.post(CHAT, json=request)).json()
        text = full["choices"][0]["message"]["content"]
        words = text.split()
        if len(words) > 4 and " " + words[3] in text:
            break
    else:
        raise AssertionError(f"no seed in 21-60 gives an answer of five words: {text!r}")
    stop = " " + words[3]
    cut = text[: text.index(stop)]
    stopped = request | {"stop": ["never-in-the-output", stop]}
    if stream:
        events = await _stream(client, CHAT, stopped | {"stream": True})
        got = "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1])
        reason = events[-2]["choices"][0]["finish_reason"]
    else:
        body = (await client.post(CHAT, json=stopped)).json()
        got, reason = body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"]
    assert (got, reason) == (cut, "stop")


async def test_models_lists_every_served_model(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [MODEL, "ref-embedding-1", "ref-reranker-1"]


@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [
        (CHAT, _chat() | {"model": "gpt-4o"}, 404, "model"),
        (COMPLETIONS, _completion() | {"model": "gpt-4o"}, 404, "model"),
        (CHAT, {"model": MODEL}, 400, "messages"),
        (CHAT, _chat(temperature=-1), 400, "temperature"),
        (CHAT, _chat(top_p=0), 400, "top_p"),
        (CHAT, _chat(max_tokens=0), 400, "max_tokens"),
        (CHAT, _chat(seed=2**63), 400, "seed"),
        (COMPLETIONS, _completion(logprobs=1), 400, "logprobs"),  # as ft serve does
        (COMPLETIONS, _completion(prompt=["a", "b"]), 400, "prompt"),
        (CHAT, [1, 2], 400, None),
    ],
)
async def test_bad_requests_get_openai_errors(
    client: httpx.AsyncClient, path: str, body: Any, status: int, param: str | None
) -> None:
    response = await client.post(path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


async def test_malformed_json_and_unknown_routes(client: httpx.AsyncClient) -> None:
    response = await client.post(CHAT, content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    response = await client.get("/v1/engines")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_url"


IGNORED = {
    "logprobs": True,
    "top_logprobs": 5,
    "n": 3,
    "logit_bias": {"17": 100, "42": -100},
    "response_format": {"type": "json_object"},
    "max_completion_tokens": 2,
    "some_field_nobody_knows": {"x": 1},
}


async def test_unimplemented_fields_are_silently_ignored(client: httpx.AsyncClient) -> None:
    """The gap the gateway closes: 200, one choice, logprobs null, and no effect at all."""
    request = _chat(seed=99, max_tokens=24, **NO_THINKING)
    plain = (await client.post(CHAT, json=request)).json()
    response = await client.post(CHAT, json=request | IGNORED)
    assert response.status_code == 200
    body = response.json()
    assert len(body["choices"]) == 1
    assert body["choices"][0]["logprobs"] is None
    assert body["choices"][0]["message"] == plain["choices"][0]["message"]
    assert body["usage"] == plain["usage"]


async def test_a_client_that_disconnects_is_dropped_from_the_batch(
    engine_url: tuple[str, Engine], client: httpx.AsyncClient
) -> None:
    _, engine = engine_url
    engine.pause()  # line the request up so it is surely still running when we leave
    request = _chat(max_tokens=10**6, stream=True)
    async with client.stream("POST", CHAT, json=request) as response:
        lines = response.aiter_lines()
        first = await anext(lines)
        assert json.loads(first.removeprefix("data: "))["choices"][0]["delta"]["role"]
        engine.resume()
        with anyio.fail_after(30):
            await engine.wait_until(lambda s: s.active == 1 and s.steps >= 3)
        engine.pause()
    with anyio.fail_after(30):
        await engine.wait_until(lambda s: s.cancelled == 1)
    assert engine.stats.active == engine.stats.waiting == 0
    assert engine.stats.finished == 0
    steps = engine.stats.steps
    engine.resume()
    reply = await client.post(COMPLETIONS, json=_completion(max_tokens=1))
    assert reply.status_code == 200
    assert engine.stats.steps == steps + 1  # the dropped row was never stepped again


async def test_a_non_streaming_client_that_hangs_up_is_dropped_too(
    engine_url: tuple[str, Engine], client: httpx.AsyncClient
) -> None:
    _, engine = engine_url
    engine.pause()

    async def post() -> None:
        await client.post(COMPLETIONS, json=_completion(max_tokens=10**6))

    async with anyio.create_task_group() as group:
        group.start_soon(post)
        with anyio.fail_after(30):
            await engine.wait_until(lambda s: s.waiting == 1)
        group.cancel_scope.cancel()  # the client gives up and closes its connection
    with anyio.fail_after(30):
        await engine.wait_until(lambda s: s.cancelled == 1)
    assert engine.stats.waiting == engine.stats.active == engine.stats.admitted == 0
    engine.resume()


async def _replays(url: str, engine: Engine, *, rounds: int) -> list[str]:
    """The same seeded request, each time batched with 8 others of different lengths."""
    contents: list[str] = []
    async with sdk(url) as client:

        async def other(i: int, r: int) -> None:
            await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": f"Question {i} of round {r}"}],
                max_tokens=3 + (5 * i + 7 * r) % 37,
                temperature=0.9,
                extra_body={"top_k": 40 + i},
            )

        async def target() -> None:
            reply = await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Invent a name for a cat."}],
                max_tokens=40,
                temperature=1.0,
                seed=1234,
                extra_body=NO_THINKING,
            )
            contents.append(reply.choices[0].message.content or "")

        for r in range(rounds):
            engine.pause()
            async with anyio.create_task_group() as group:
                for i in range(8):
                    group.start_soon(other, i, r)
                    if i == r % 8:
                        group.start_soon(target)
                with anyio.fail_after(30):
                    await engine.wait_until(lambda s: s.waiting == 9)
                engine.resume()
    return contents


async def test_seeded_replays_are_identical_under_real_batching(
    engine_url: tuple[str, Engine],
) -> None:
    url, engine = engine_url
    contents = await _replays(url, engine, rounds=4)
    assert engine.stats.max_batch_seen >= 9
    assert len(set(contents)) == 1, contents
    assert contents[0]


async def test_seeded_replays_differ_with_the_unpatched_sampler() -> None:
    app = create_app(unpatched_sampler=True)
    async with running_server(app) as url:
        contents = await _replays(url, app.state.engine, rounds=3)
    assert len(set(contents)) > 1, contents


def test_different_seeds_differ_through_the_sync_sdk() -> None:
    with ServerThread(create_app()) as server:
        with sync_sdk(server.url) as client:
            texts = [
                client.completions.create(model=MODEL, prompt="The list", max_tokens=20, seed=s)
                .choices[0]
                .text
                for s in (1, 2, 1)
            ]
    assert texts[0] == texts[2]
    assert texts[0] != texts[1]
