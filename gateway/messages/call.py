"""The Messages API's Call: Anthropic's error shape, and ``request-id`` on every answer.

Anthropic sends ``request-id`` with every response (the SDKs read it into
``_request_id`` and every APIStatusError's ``request_id``): here it is the
request's own id, the same one ``x-request-id``, the access log and the trace
carry, so one id finds a request everywhere.
"""

from __future__ import annotations

from gateway._types import Headers
from gateway.messages.errors import ANTHROPIC_ERRORS
from gateway.proxy.call import Call
from gateway.proxy.responder import Responder


class MessagesResponder(Responder):
    """A Responder in Anthropic's shape."""

    errors = ANTHROPIC_ERRORS

    async def start(self, status: int, headers: Headers) -> None:
        headers.append((b"request-id", self.request_id))
        await super().start(status, headers)


class MessagesCall(Call):
    """A request to one of the Messages API's routes."""

    __slots__ = ()
    responder_type = MessagesResponder
