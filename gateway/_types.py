"""Types every package shares: header lists, and the ASGI aliases (Starlette's own)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import Message, Receive, Scope, Send

# HTTP headers as ASGI servers and the upstream clients carry them: (name, value)
# pairs of bytes, names in lower case.
Headers = list[tuple[bytes, bytes]]
Endpoint = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["Endpoint", "Headers", "Message", "Receive", "Scope", "Send"]
