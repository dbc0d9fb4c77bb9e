"""A translated Messages stream whose answer is checked as it ends (the policy's
``answers:``, gateway/schemas/answers.py's check_message).

The events go out as the engine's chunks come; the chunks are also put together
(schemas/streamed.py) into the chat answer that the whole-answer path would have
shaped, and at the end that answer, as the client's message, is checked. The end
(``message_delta`` with the stop reason, ``message_stop``) is held until the check
passes; an enforced violation ends the stream with ``event: error`` in its place,
as chat's CheckedChatStream ends with its error event (proxy/openai.py). An engine's
own stream (native mode) is checked the same way, its blocks put together from its
events (native.py's CheckedNativeStream).
"""

from __future__ import annotations

from typing import Any

from gateway.errors import GatewayError
from gateway.messages.shape import message_object
from gateway.messages.stream import MessageStream
from gateway.messages.translate import Wants
from gateway.observe.exchange import Exchange
from gateway.proxy.answercheck import judge
from gateway.schemas.answers import check_message
from gateway.schemas.expect import Expectation
from gateway.schemas.streamed import StreamedChat

_END = b"event: message_delta\n"


class CheckedMessageStream(MessageStream):
    """A MessageStream whose end waits for the answer checks (module docstring)."""

    def __init__(
        self, message_id: str, model: str, wants: Wants, expect: Expectation, record: Exchange
    ) -> None:
        super().__init__(message_id, model, wants)
        self.expect = expect
        self.record = record
        self.streamed = StreamedChat()

    def events(self, raw: bytes, chunks: list[Any], *, done: bool) -> bytes:
        for chunk in chunks:
            self.streamed.feed(chunk)
        return super().events(raw, chunks, done=done)

    async def finish(self) -> tuple[bytes, GatewayError | None]:
        out, failure = await super().finish()
        if failure is not None:
            return out, failure
        try:
            message = message_object(
                self.streamed.answer(),
                message_id=self.message_id,
                model=self.model,
                wants=self.wants,
            )
        except GatewayError as exc:
            return out[: out.rfind(_END)], exc
        enforced = judge(self.record, check_message(self.expect, message))
        if enforced is not None:
            return out[: out.rfind(_END)], enforced
        return out, None
