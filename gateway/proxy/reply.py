"""The answer side of a call: the engine's answer, whole or streamed, through its route.

A whole answer is read within ``limits.max_response_bytes`` and parsed once:
an error status is normalised (answers.py) and recorded as the error the client
got; a 2xx gives the record its usage and the trace its reading, then the route
shapes it. A stream goes through the one relay loop (relay.py) with the route's
shaper, and the client's hanging up is noted on the record.
"""

from __future__ import annotations

import time

import orjson

from gateway.errors import UpstreamProtocolError
from gateway.proxy.answers import check_head, error_answer
from gateway.proxy.call import Call
from gateway.proxy.relay import relay_stream
from gateway.proxy.route import Route
from gateway.proxy.safetext import known_secrets
from gateway.settings import Limits
from gateway.upstream.base import UpstreamResponse

_JSON = b"application/json"


async def reply(call: Call, route: Route, response: UpstreamResponse, limits: Limits) -> None:
    """Answer ``call``'s client with the engine's ``response``, as ``route`` says."""
    record, responder = call.record, call.responder
    headers = route.headers.to_client(response.headers)
    if check_head(response.status, headers, stream=record.stream):
        shaper = call.shaper = route.shaper(call)
        await responder.start(response.status, route.stream_headers(headers))
        try:
            async for out in relay_stream(
                response.chunks(),
                shaper,
                max_bytes=limits.max_stream_bytes,
                record=record,
                secrets=lambda: known_secrets(call.headers, route.state.engines.engines),
            ):
                await responder.body(out, more=True)
            if shaper.ended:
                response.finish()  # (its connection may be kept if its body ends soon)
            await responder.body(b"")
        except OSError:
            # The client hung up; the caller closes the engine's response.
            record.client_disconnected = True
        finally:
            record.usage = shaper.usage
        return
    data = await response.read(limits.max_response_bytes)
    record.first_byte = time.perf_counter()
    if response.status >= 400:
        secrets = known_secrets(call.headers, route.state.engines.engines)
        status, headers, data, error = error_answer(
            response.status,
            headers,
            data,
            secrets=secrets,
            shape=responder.errors,
            request_id=responder.request_id,
        )
        record.relayed_error(error)
        await responder.start(status, headers)
        await responder.body(data)
        return
    try:
        answer = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamProtocolError("The engine's answer is not valid JSON.") from None
    if type(answer) is dict:
        record.usage = route.usage(answer)
    if record.trace is not None:
        record.trace.answer(answer)
    if route.shapes:
        shaped = await route.answer(call, answer, data, headers)
        if shaped is not None:
            headers, data = shaped
    del answer  # not held while the client reads (an embeddings answer: ~1 MB parsed)
    headers.append((b"content-length", str(len(data)).encode()))
    await responder.start(response.status, headers)
    await responder.body(data)
