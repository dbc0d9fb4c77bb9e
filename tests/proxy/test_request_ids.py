"""What an engine gets as ``X-Request-ID``: always a UUID. The engine here refuses any
other, as llama-cpp-python's server does (400, empty body), behind a real gateway with
the default policy, called with the ``openai`` SDK: ``n`` by fan-out and a client's own
request id of any shape pass; the client's id stays the gateway's and the client's, and
reaches the engine as ``X-Client-Request-ID``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import openai
import pytest

from tests.support.engine import FakeEngine, Seen, Wire, http_response
from tests.support.gateways import gateway_in_front_of
from tests.support.requestids import CLIENT_ID_NAMESPACE, choice_id
from tests.support.sdk import sdk

pytestmark = pytest.mark.anyio
MODEL = "m"
MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


def is_uuid(value: bytes | None) -> bool:
    """What llama-cpp-python's request-id middleware accepts (starlette-context's check)."""
    try:
        uuid.UUID((value or b"").decode())
    except ValueError:
        return False
    return True


@pytest.fixture
async def strict_engine() -> AsyncIterator[FakeEngine]:
    """A healthy engine that answers 400 with an empty body to a non-UUID X-Request-ID."""
    engine = FakeEngine()

    async def handler(request: Seen, wire: Wire) -> None:
        if not is_uuid(request.header(b"x-request-id")):
            await wire.send(http_response(400, b""))
            return
        await engine.misbehave(request, wire)

    engine.handler = handler
    async with engine:
        yield engine


@pytest.fixture
async def client(strict_engine: FakeEngine) -> AsyncIterator[openai.AsyncOpenAI]:
    async with gateway_in_front_of(strict_engine.url) as url, sdk(url) as openai_client:
        yield openai_client


async def ask(
    client: openai.AsyncOpenAI, *, stream: bool, n: int = 1, headers: dict[str, str] | None = None
) -> tuple[str, set[int]]:
    """The request id the client got back, and the choice indexes of the answer."""
    create = client.chat.completions.with_raw_response.create
    if stream:
        streamed = await create(
            model=MODEL, messages=MESSAGES, n=n, stream=True, extra_headers=headers
        )
        chunks = [c async for c in streamed.parse()]
        return streamed.headers["x-request-id"], {c.index for k in chunks for c in k.choices}
    whole = await create(model=MODEL, messages=MESSAGES, n=n, extra_headers=headers)
    answer = whole.parse()
    assert all(c.message.content == "ok" for c in answer.choices)
    return whole.headers["x-request-id"], {c.index for c in answer.choices}


def sent_ids(engine: FakeEngine) -> list[bytes]:
    return [r.header(b"x-request-id") or b"" for r in engine.requests]


@pytest.mark.parametrize("stream", [False, True])
async def test_n_two_by_fanout_passes_each_request_its_own_uuid(
    client: openai.AsyncOpenAI, strict_engine: FakeEngine, stream: bool
) -> None:
    gateway_id, choices = await ask(client, stream=stream, n=2)
    assert choices == {0, 1}
    # The gateway's own id: a version-4 UUID's 32 hex digits.
    assert uuid.UUID(gateway_id).hex == gateway_id and uuid.UUID(gateway_id).version == 4
    engine_id = str(uuid.UUID(gateway_id))
    assert sorted(sent_ids(strict_engine)) == sorted(choice_id(engine_id, i) for i in range(2))
    assert all(r.header(b"x-client-request-id") is None for r in strict_engine.requests)


async def test_one_request_sends_the_gateway_id_as_a_uuid(
    client: openai.AsyncOpenAI, strict_engine: FakeEngine
) -> None:
    raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES)
    assert raw.parse().choices[0].message.content == "ok"
    (request,) = strict_engine.requests
    assert request.header(b"x-request-id") == str(uuid.UUID(raw.headers["x-request-id"])).encode()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_id_that_is_not_a_uuid_passes_and_goes_on_in_another_header(
    client: openai.AsyncOpenAI, strict_engine: FakeEngine, stream: bool
) -> None:
    headers = {"X-Request-ID": "my-trace-42", "X-Client-Request-ID": "the client's"}
    assert await ask(client, stream=stream, headers=headers) == ("my-trace-42", {0})
    (request,) = strict_engine.requests
    expected = str(uuid.uuid5(CLIENT_ID_NAMESPACE, "my-trace-42")).encode()
    assert request.header(b"x-request-id") == expected
    # The gateway's copy of the client's id replaces the one the client sent itself.
    assert [v for n, v in request.headers if n == b"x-client-request-id"] == [b"my-trace-42"]


async def test_a_client_id_that_is_not_a_uuid_with_n_two(
    client: openai.AsyncOpenAI, strict_engine: FakeEngine
) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MESSAGES, n=2, extra_headers={"X-Request-ID": "my-trace-42"}
    )
    assert raw.headers["x-request-id"] == "my-trace-42"
    assert len(raw.parse().choices) == 2
    engine_id = str(uuid.uuid5(CLIENT_ID_NAMESPACE, "my-trace-42"))
    assert sorted(sent_ids(strict_engine)) == sorted(choice_id(engine_id, i) for i in range(2))
    assert all(r.header(b"x-client-request-id") == b"my-trace-42" for r in strict_engine.requests)


@pytest.mark.parametrize(
    ("client_id", "engine_id"),
    [
        ("0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5b-d9cb-469f-a165-70867728950e"),
        ("0f8fad5bd9cb469fa16570867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e"),
    ],
)
async def test_a_client_uuid_is_sent_as_itself(
    client: openai.AsyncOpenAI, strict_engine: FakeEngine, client_id: str, engine_id: str
) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=MESSAGES,
        extra_headers={"X-Request-ID": client_id, "X-Client-Request-ID": "the client's"},
    )
    assert raw.headers["x-request-id"] == client_id
    (request,) = strict_engine.requests
    assert request.header(b"x-request-id") == engine_id.encode()
    # Not the gateway's to change: the client's own header crosses as it came.
    assert request.header(b"x-client-request-id") == b"the client's"
