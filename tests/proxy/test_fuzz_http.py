"""Fuzzing the HTTP surface: arbitrary bodies and content types, in-process (ASGI,
mocked engine) for speed and over a real uvicorn server for a few. Never a 5xx;
every 4xx OpenAI-shaped and naming its field; what reaches the engine passes
the policy again unchanged; a rejected request never reaches the engine."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from gateway.app.factory import create_app
from gateway.serving.server import uvicorn_options
from gateway.settings import Settings
from tests.support.asgi import read_body
from tests.support.bodies import MODEL, completion
from tests.support.fuzzing import (
    ROUTES,
    check_error_shape,
    check_forwardable,
    content_types,
    fuzz_settings,
    raw_bodies,
)
from tests.support.gateways import gateway_settings
from tests.support.servers import ServerThread

STREAM = (
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}]}\n\n'
    b"data: [DONE]\n\n"
)


class Engine:
    """Records each request body; answers like a healthy engine."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()

    def answer(self, path: str, body: bytes) -> tuple[bytes, bytes]:
        if path == "/v1/models":  # the gateway asking what it serves: not a client's request
            listed = {"object": "list", "data": [{"id": "m"}, {"id": MODEL}]}
            return orjson.dumps(listed), b"application/json"
        with self._lock:
            self.bodies.append((path, body))
        if orjson.loads(body).get("stream") is True:
            return STREAM, b"text/event-stream"
        return orjson.dumps(completion()), b"application/json"

    def __call__(self, request: httpx.Request) -> httpx.Response:
        content, media = self.answer(request.url.path, request.content)
        return httpx.Response(200, content=content, headers={"content-type": media.decode()})


def fuzz_settings_for(upstream: str) -> Settings:
    return gateway_settings(upstream, environ={"FT_GATEWAY_LIMITS__MAX_BODY_BYTES": "16384"})


def post_and_check(
    client: TestClient | httpx.Client, engine: Engine, route: str, raw: bytes, media: str | None
) -> None:
    """Post ``raw`` to ``route``: never a 5xx; what reaches the engine (once, or n times for
    ``n`` served by fan-out) passes the policy again unchanged; a rejection is OpenAI-shaped,
    names its field, and reaches no engine."""
    before = len(engine.bodies)
    headers = {} if media is None else {"content-type": media}
    response = client.post(route, content=raw, headers=headers)
    status = response.status_code
    event(f"status {status}")
    assert status < 500, response.content
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if status == 200:
        n = body.get("n")
        fanout = n if type(n) is int and n > 1 else 1
        assert len(engine.bodies) == before + fanout
        for path, forwarded in engine.bodies[before:]:
            assert path == route
            check_forwardable(route, forwarded)
        return
    assert len(engine.bodies) == before, "a rejected request reached the engine"
    check_error_shape(status, orjson.loads(response.content), body)


@pytest.fixture(scope="module")
def in_process() -> Iterator[tuple[TestClient, Engine]]:
    engine = Engine()
    app = create_app(fuzz_settings_for("http://engine"), transport=httpx.MockTransport(engine))
    with TestClient(app) as client:
        yield client, engine


@fuzz_settings(400)
@given(data=st.data(), route=st.sampled_from(ROUTES), media=content_types)
def test_http_surface_in_process(
    in_process: tuple[TestClient, Engine], data: st.DataObject, route: str, media: str | None
) -> None:
    client, engine = in_process
    post_and_check(client, engine, route, data.draw(raw_bodies(route)), media)


async def _asgi_engine(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    engine: Engine = _ENGINES[scope["server"][1]]
    content, media = (
        engine.answer(scope["path"], body)
        if scope["method"] == "POST"
        else (b"{}", b"application/json")
    )
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", media)]}
    )
    await send({"type": "http.response.body", "body": content})


_ENGINES: dict[int, Engine] = {}


@pytest.fixture(scope="module")
def over_uvicorn() -> Iterator[tuple[httpx.Client, Engine]]:
    engine = Engine()
    with ServerThread(_asgi_engine) as engine_server:
        _ENGINES[engine_server.port] = engine
        settings = fuzz_settings_for(engine_server.url)
        with ServerThread(create_app(settings), **uvicorn_options(settings)) as gateway:
            with httpx.Client(base_url=gateway.url) as client:
                yield client, engine


@fuzz_settings(60)
@given(data=st.data(), route=st.sampled_from(ROUTES), media=content_types)
def test_http_surface_over_uvicorn(
    over_uvicorn: tuple[httpx.Client, Engine], data: st.DataObject, route: str, media: str | None
) -> None:
    client, engine = over_uvicorn
    post_and_check(client, engine, route, data.draw(raw_bodies(route)), media)
