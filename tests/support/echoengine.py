"""An engine that repeats what it was sent, for the leak tests: a handler for the raw-socket
fake engine (tests/support/engine.py) that puts every credential it received (its own
``Authorization`` first) wherever an engine's words can reach a client: a 4xx message,
``param`` and ``code``, SGLang's flat error, a mid-stream error event, llama.cpp's
``error:`` line, a Responses ``error`` event and ``response.failed``, and its response
headers. The request's ``x-echo`` header says where (``ECHOES``). Standard library only.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.bodies import chunk_event
from tests.support.engine import (
    JSON,
    LAST_CHUNK,
    Seen,
    Wire,
    http_response,
    stream_start,
)

ECHOES = (
    "message",  # 400 {"error": {message, type, param, code}}, each the credentials
    "flat",  # 400 {"object": "error", "message", "param", "code"} (SGLang's shape)
    "unprocessable",  # 422, FastAPI's {"detail": ...} as a message
    "event",  # a good chunk, then data: {"error": {...}} with code 400
    "errorline",  # a good chunk, then llama.cpp's "error: {...}" line
    "responses",  # a Responses stream: created, then an error event and response.failed
    "failedresponse",  # a whole Responses answer (200) whose status is failed, with its error
    "headers",  # a 200 answer whose headers repeat the credentials and name hosts
)
# Header names whose values an engine must never see from a client, and that a careless
# engine repeats; the engine's own key arrives as Authorization.
CREDENTIAL_HEADERS = (b"authorization", b"x-api-key", b"api-key", b"proxy-authorization")


def credentials(request: Seen) -> str:
    """Every credential-like header value the engine received, and the request target."""
    values = [v.decode("latin-1") for n, v in request.headers if n in CREDENTIAL_HEADERS]
    return " ".join([*values, request.target])


def _error(text: str) -> dict[str, Any]:
    return {"message": f"Invalid request: {text}", "type": text, "param": text, "code": text}


def _json(status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> bytes:
    return http_response(status, json.dumps(payload).encode(), headers=[*JSON, *(headers or [])])


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


async def echo(request: Seen, wire: Wire) -> None:
    """Answer as the request's ``x-echo`` says (one of ``ECHOES``), with its credentials."""
    where = (request.header(b"x-echo") or b"message").decode()
    text = credentials(request)
    if where == "message":
        leaky = [(b"set-cookie", b"engine-session=1"), (b"x-echo-authorization", text.encode())]
        await wire.send(_json(400, {"error": _error(text)}, leaky))
    elif where == "flat":
        await wire.send(_json(400, {"object": "error", **_error(text), "code": 400}))
    elif where == "unprocessable":
        detail = {"message": f"Field required; headers were {text}", "param": text}
        await wire.send(_json(422, detail))
    elif where == "event":
        error = {"error": {**_error(text), "code": 400}}
        event = b"data: " + json.dumps(error).encode() + b"\n\n"
        await wire.send(stream_start(chunk_event("t0"), event) + LAST_CHUNK)
    elif where == "errorline":
        line = b"error: " + json.dumps({**_error(text), "code": 400}).encode() + b"\n\n"
        await wire.send(stream_start(chunk_event("t0"), line) + LAST_CHUNK)
    elif where == "responses":
        response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
        failed = {**response, "status": "failed", "error": {"code": text, "message": text}}
        events = [
            _event("response.created", {"type": "response.created", "response": response}),
            _event("error", {**_error(text), "type": "error", "sequence_number": 1}),
            _event("response.failed", {"type": "response.failed", "response": failed}),
        ]
        await wire.send(stream_start(*events) + LAST_CHUNK)
    elif where == "failedresponse":
        failed = {"id": "resp_1", "object": "response", "status": "failed", "output": []}
        await wire.send(_json(200, failed | {"error": {"code": text, "message": text}}))
    elif where == "headers":
        headers = [
            (b"x-echo-authorization", text.encode("latin-1")),
            (b"set-cookie", b"engine-session=s3cr3t-engine-session; Path=/; HttpOnly"),
            (b"x-upstream-host", b"vllm-0.vllm.default.svc.cluster.local:8000"),
            (b"via", b"1.1 10.12.0.7"),
            (b"x-served-by", b"engine-7d9f8b6c4-x2x9z"),
            (b"server", b"uvicorn"),
            (b"retry-after", b"7"),
        ]
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        }
        await wire.send(_json(200, answer, headers))
    else:
        raise ValueError(f"unknown x-echo {where!r}")
