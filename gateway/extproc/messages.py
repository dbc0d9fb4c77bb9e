"""The ext_proc protocol's messages (envoy.service.ext_proc.v3, from xds-protos): the
headers read from a ProcessingRequest, and each ProcessingResponse the processor sends.

The one module that builds Envoy's messages: the decision (decision.py) knows nothing
of protobuf, and the stream (stream.py) asks here for what to send.
"""

from __future__ import annotations

from typing import Any

from envoy.config.core.v3 import base_pb2 as core
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2 as mode
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from envoy.type.v3 import http_status_pb2 as http_status

from gateway._types import Headers
from gateway.errors import OPENAI_ERRORS, GatewayError
from gateway.errorshapes import path_error_shape
from gateway.extproc.decision import Forward

_OVERWRITE = core.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
# A request the policy has no say in: no body, no answer headers sent to the processor.
_PASS_BY = mode.ProcessingMode(
    request_body_mode=mode.ProcessingMode.NONE,
    response_header_mode=mode.ProcessingMode.SKIP,
)


def header_list(headers: Any) -> Headers:
    """An HttpHeaders message's headers as (name, value) bytes, pseudo-headers included
    (Envoy sends ``raw_value``; ``value`` where an older one does)."""
    return [
        (h.key.encode("latin-1"), h.raw_value or h.value.encode("latin-1"))
        for h in headers.headers.headers
    ]


def _set_headers(pairs: list[tuple[str, bytes]], removed: tuple[str, ...] = ()) -> Any:
    return ext.HeaderMutation(
        set_headers=[
            core.HeaderValueOption(
                header=core.HeaderValue(key=name, raw_value=value), append_action=_OVERWRITE
            )
            for name, value in pairs
        ],
        remove_headers=list(removed),
    )


def headers_continue(*, policed: bool, removed: tuple[str, ...] = ()) -> Any:
    """The answer to a request's headers: go on (the body comes next). A request the
    policy has no say in (``policed`` False) is passed by: Envoy sends its body and
    its answer's headers to nobody (the filter must allow a mode override), and the
    routing headers ``removed`` go (a client's own would choose Envoy's route)."""
    response = ext.ProcessingResponse(request_headers=ext.HeadersResponse())
    if not policed:
        response.mode_override.CopyFrom(_PASS_BY)
        if removed:
            response.request_headers.response.header_mutation.CopyFrom(_set_headers([], removed))
    return response


def body_continue(forward: Forward) -> Any:
    """The answer to a request's body: go on, with the headers set and, where the policy
    changed the body, the new body and its ``content-length`` (Envoy refuses a replaced
    body whose declared length is the old one). A header set clears the route cache,
    so Envoy routes by the model the engine gets."""
    common = ext.CommonResponse()
    headers = list(forward.headers)
    if forward.body is not None:
        common.body_mutation.body = forward.body
        headers.append(("content-length", str(len(forward.body)).encode()))
    if headers or forward.removed:
        common.header_mutation.CopyFrom(_set_headers(headers, forward.removed))
        common.clear_route_cache = True
    return ext.ProcessingResponse(request_body=ext.BodyResponse(response=common))


def immediate(exc: GatewayError, *, request_id: str, path: str = "") -> Any:
    """Answer the client at once with ``exc`` in the error shape of ``path``'s clients
    (OpenAI's; Anthropic's under /v1/messages, with its ``request-id``) and its status
    (the request goes no further)."""
    shape = path_error_shape(path)
    headers = [("content-type", b"application/json"), ("x-request-id", request_id.encode())]
    if shape is not OPENAI_ERRORS:
        headers.append(("request-id", request_id.encode()))
    headers.extend((name.lower(), value.encode("latin-1")) for name, value in exc.headers.items())
    return ext.ProcessingResponse(
        immediate_response=ext.ImmediateResponse(
            status=http_status.HttpStatus(code=shape.status(exc)),
            headers=_set_headers(headers),
            body=shape.body(exc, request_id),
            details=f"ft_gateway_{exc.code or 'error'}",
        )
    )


def passing(kind: str) -> Any:
    """The empty answer to any other message (``kind``: its field in ProcessingRequest):
    go on unchanged."""
    if kind in ("request_trailers", "response_trailers"):
        return ext.ProcessingResponse(**{kind: ext.TrailersResponse()})
    if kind == "response_headers":
        return ext.ProcessingResponse(response_headers=ext.HeadersResponse())
    if kind in ("request_body", "response_body"):
        return ext.ProcessingResponse(**{kind: ext.BodyResponse()})
    return ext.ProcessingResponse(request_headers=ext.HeadersResponse())


def answer_status(headers: Any) -> int:
    """The ``:status`` of a response's HttpHeaders (0 if absent or not a number)."""
    for h in headers.headers.headers:
        if h.key == ":status":
            value = h.raw_value or h.value.encode()
            return int(value) if value.isdigit() else 0
    return 0
