"""One ext_proc stream: Envoy opens one per HTTP request and sends its headers, its
buffered body and (where the filter sends them) its answer's headers; the processor
answers each in turn.

The record of a policed request (observe/exchange.py) is told to the observers, as
``serve`` tells them: when the answer's headers pass (its status, the time to them),
else when the stream ends (status 0: the client or Envoy gave up first), or at once
when the processor answers the client itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as ext_grpc

from gateway.errors import GatewayError, RateLimited
from gateway.extproc import messages
from gateway.extproc.decision import Decider, internal_error
from gateway.extproc.request import Request

logger = logging.getLogger("gateway")


# (The generated servicer is untyped, xds-protos shipping no stubs: subclassing Any.)
class ExternalProcessor(ext_grpc.ExternalProcessorServicer):  # type: ignore[misc]
    """The ext_proc service: each stream's messages through the Decider."""

    def __init__(self, decider: Decider) -> None:
        self.decider = decider

    async def Process(
        self, request_iterator: AsyncIterable[Any], context: Any
    ) -> AsyncIterator[Any]:
        """Answer one HTTP request's messages, in order."""
        request: Request | None = None
        try:
            async for message in request_iterator:
                kind = message.WhichOneof("request")
                if kind == "request_headers":
                    request, answer = self._headers(message.request_headers)
                elif kind == "request_body" and request is not None and request.route:
                    answer = self._body(request, message.request_body)
                elif kind == "response_headers" and request is not None:
                    answer = self._answered(request, message.response_headers)
                else:
                    answer = messages.passing(kind)
                if answer is not None:
                    yield answer
        finally:
            if request is not None:
                self._finish(request)

    def _headers(self, headers: Any) -> tuple[Request, Any]:
        request = Request(messages.header_list(headers))
        policed = request.route is not None
        if policed:
            state = self.decider.state
            if state.tracer is not None:
                state.tracer.begin(request.record, request.headers)
            state.observer.started(request.record)
        answer = self._guarded(request, None)
        if answer is not None:
            return request, answer
        if policed and headers.end_of_stream:  # a POST with no body: refused as serve does
            return request, self._guarded(request, b"")
        removed = () if policed else self.decider.routing_headers
        return request, messages.headers_continue(policed=policed, removed=removed)

    def _body(self, request: Request, body: Any) -> Any:
        request.body.append(body.body)
        if not body.end_of_stream:
            # Buffered mode sends one message; a streamed one comes in parts.
            return messages.passing("request_body")
        raw = request.body[0] if len(request.body) == 1 else b"".join(request.body)
        request.body = []
        return self._guarded(request, raw)

    def _guarded(self, request: Request, raw: bytes | None) -> Any:
        """The decision on the headers (``raw`` None: None to go on) or on the body,
        with the client's error, or a 500 for a failure of the processor, as the
        immediate response."""
        decider = self.decider
        record = request.record
        try:
            if raw is None:
                decider.admit(request)
                return None
            forward = decider.decide(request, raw)
        except GatewayError as exc:
            return self._refuse(request, exc)
        except Exception as exc:
            logger.exception("unexpected error in the external processor", exc_info=exc)
            record.error_code = "internal_error"
            return self._refuse(request, internal_error())
        record.upstream_started = time.perf_counter()
        return messages.body_continue(forward)

    def _refuse(self, request: Request, exc: GatewayError) -> Any:
        record = request.record
        record.failed(exc)
        if isinstance(exc, RateLimited):
            record.rate_limited = exc.limit
        answer = messages.immediate(exc, request_id=record.request_id, path=record.path)
        record.status = answer.immediate_response.status.code
        record.bytes_out = len(answer.immediate_response.body)
        self._finish(request)
        return answer

    def _answered(self, request: Request, headers: Any) -> Any:
        record = request.record
        status = messages.answer_status(headers)
        record.status = record.upstream_status = status
        record.first_byte = time.perf_counter()
        self._finish(request)
        return messages.passing("response_headers")

    def _finish(self, request: Request) -> None:
        if request.finished or request.route is None:
            return
        request.finished = True
        self.decider.state.observer.finished(request.record)
