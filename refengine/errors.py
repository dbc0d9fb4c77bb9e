"""Errors the engine answers with, in OpenAI's shape.

EngineError                  400 invalid_request_error
 +-- ModelNotFound           404 invalid_request_error / model_not_found
 +-- RouteNotFound           404 invalid_request_error / unknown_url
 +-- EngineFailure           500 server_error (a grammar compiler that fails, on request)
"""

from __future__ import annotations

from typing import Any


class EngineError(Exception):
    """A request the engine refuses, before any response byte is sent."""

    status = 400
    type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {message, type, param, code}}``, all four keys present."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class ModelNotFound(EngineError):
    """The request names a model this engine does not serve."""

    status = 404

    def __init__(self, model: str) -> None:
        super().__init__(
            f"The model `{model}` does not exist.", param="model", code="model_not_found"
        )


class RouteNotFound(EngineError):
    """No route at this path (or not with this method)."""

    status = 404

    def __init__(self, method: str, path: str) -> None:
        super().__init__(f"Invalid URL ({method} {path})", code="unknown_url")


class EngineFailure(EngineError):
    """The engine failed on a request it took (a grammar compiler crashing on a schema)."""

    status = 500
    type = "server_error"
