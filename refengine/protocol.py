"""Request bodies of the two generation routes, parsed like ft serve parses them.

The models allow extra fields (``extra="allow"``), as ft serve's do: every field
the engine does not implement (``logprobs`` and ``top_logprobs`` on chat, ``n``,
``logit_bias``, ``response_format``, ``max_completion_tokens``, tools, anything
unknown) is accepted and silently has no effect. That is the gap the gateway
exists to close. The one exception, also as in ft serve: ``/v1/completions``
rejects ``logprobs`` with a 400.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from refengine.errors import EngineError
from refengine.params import SamplingParams

DEFAULT_CHAT_MAX_TOKENS = 256
DEFAULT_COMPLETION_MAX_TOKENS = 16

Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
_Model = TypeVar("_Model", bound=BaseModel)


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None
    stop: str | list[str] | None = None
    seed: Int64 | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        """The engine's view of the sampling fields (absent = neutral)."""
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        return SamplingParams(
            max_tokens=self.max_tokens if self.max_tokens is not None else default_max_tokens,
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            top_k=self.top_k or 0,
            min_p=self.min_p or 0.0,
            presence_penalty=self.presence_penalty or 0.0,
            frequency_penalty=self.frequency_penalty or 0.0,
            repetition_penalty=self.repetition_penalty or 1.0,
            stop=stop,
            seed=self.seed,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and (self.stream_options or {}).get("include_usage"))


class ChatMessage(BaseModel):
    """One message; content is text or a list of content parts."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(_Sampling):
    """POST /v1/chat/completions."""

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    chat_template_kwargs: dict[str, Any] | None = None

    @property
    def enable_thinking(self) -> bool:
        return bool((self.chat_template_kwargs or {}).get("enable_thinking", True))


class CompletionRequest(_Sampling):
    """POST /v1/completions."""

    prompt: str | list[str] | list[int]
    logprobs: int | None = None


def parse_chat(body: Any) -> ChatCompletionRequest:
    """Validate a chat body or raise EngineError (400)."""
    return _parse(ChatCompletionRequest, body)


def parse_completion(body: Any) -> CompletionRequest:
    """Validate a completions body or raise EngineError (400)."""
    request = _parse(CompletionRequest, body)
    if request.logprobs is not None:
        raise EngineError(
            "logprobs is not supported", param="logprobs", code="unsupported_parameter"
        )
    if isinstance(request.prompt, list) and request.prompt and isinstance(request.prompt[0], str):
        if len(request.prompt) != 1:
            raise EngineError(
                "only one prompt per request is supported", param="prompt", code="invalid_value"
            )
    return request


def _parse(model: type[_Model], body: Any) -> _Model:
    if not isinstance(body, dict):
        raise EngineError("the request body must be a JSON object", code="invalid_type")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        code = "missing_required_parameter" if first["type"] == "missing" else "invalid_value"
        raise EngineError(f"Invalid '{param}': {first['msg']}", param=param, code=code) from exc
