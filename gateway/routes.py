"""The routes the gateway serves (OpenAI's, the engines' own, Anthropic's Messages API): one
row each, read by everything that names a route.

A row is plain data (this module imports nothing of the gateway), so the pure parts
read it without loading the proxy: the policy file's route names (policy/file.py),
tracing's operation names, the CLI's ``--route`` choices, ``explain``'s guess, the
limiter's reservation and affinity's content key. The proxy's factory picks the
row's route class by name (``"module:Class"``, imported only when mounted, as
uvicorn picks its protocol implementations), per mode where a route has more than
one (the ``upstream`` setting the row's ``mode`` names: ``responses``,
``messages``). Adding a route is one class and one row here (CONTRIBUTING.md,
"How to add a route").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RouteRow:
    """What the gateway knows of one route before any request comes."""

    path: str
    operation: str  # the GenAI operation name tracing gives its spans
    marker: str  # the body field that says a request is meant for this route (explain)
    content: str  # the field whose leading part is affinity's content key
    max_tokens: tuple[str, ...]  # the fields the limiter reserves the completion by
    classes: dict[str, str]  # mode -> "module:Class" of its route ("" is the only mode)
    mode: str = ""  # the upstream setting that picks the mode (translate, native), if any
    # "module:NAME" of the ErrorShape its clients read ("": OpenAI's), for what answers
    # outside the proxy (explain); the proxy's comes with the route's Call.
    errors: str = ""


CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
RESPONSES = "/v1/responses"
EMBEDDINGS = "/v1/embeddings"
RERANK = "/v1/rerank"
RERANK_BARE = "/rerank"  # the spelling TEI, llama.cpp and vLLM also serve
TOKENIZE = "/tokenize"  # vLLM's and llama.cpp's (no OpenAI API)
DETOKENIZE = "/detokenize"
MESSAGES = "/v1/messages"  # Anthropic's Messages API (Claude Code, the Anthropic SDKs)
COUNT_TOKENS = "/v1/messages/count_tokens"

_COMPLETION_LIMITS = ("max_tokens", "max_completion_tokens")
_OPENAI = "gateway.proxy.openai:"
_VECTORS = "gateway.proxy.vectors:"
_RESPONSES = {
    "translate": "gateway.responses.route:TranslatedResponses",
    "native": "gateway.responses.native:NativeResponses",
}
_MESSAGES = {
    "translate": "gateway.messages.route:TranslatedMessages",
    "native": "gateway.messages.native:NativeMessages",
}
_ANTHROPIC = "gateway.messages.errors:ANTHROPIC_ERRORS"
_COUNT_TOKENS = {
    "translate": "gateway.messages.count:TranslatedCount",
    "native": "gateway.messages.native:NativeCount",
}
# Path, operation (the GenAI conventions name none of its own for the Responses API
# or the Messages API: "chat"), marker, content, max_tokens, classes, mode.
ROUTES: dict[str, RouteRow] = {
    CHAT: RouteRow(
        CHAT, "chat", "messages", "messages", _COMPLETION_LIMITS, {"": _OPENAI + "ChatRoute"}
    ),
    COMPLETIONS: RouteRow(
        COMPLETIONS,
        "text_completion",
        "prompt",
        "prompt",
        _COMPLETION_LIMITS,
        {"": _OPENAI + "CompletionsRoute"},
    ),
    # Before the Responses API's row: an embeddings body has "input" too, so explain
    # guesses it by the field only it has.
    EMBEDDINGS: RouteRow(
        EMBEDDINGS, "embeddings", "encoding_format", "input", (), {"": _VECTORS + "EmbeddingsRoute"}
    ),
    RESPONSES: RouteRow(
        RESPONSES, "chat", "input", "input", ("max_output_tokens",), _RESPONSES, "responses"
    ),
    RERANK: RouteRow(RERANK, "rerank", "documents", "query", (), {"": _VECTORS + "RerankRoute"}),
    RERANK_BARE: RouteRow(
        RERANK_BARE, "rerank", "documents", "query", (), {"": _VECTORS + "BareRerankRoute"}
    ),
    TOKENIZE: RouteRow(
        TOKENIZE, "tokenize", "add_special_tokens", "prompt", (), {"": _VECTORS + "TokenizeRoute"}
    ),
    DETOKENIZE: RouteRow(
        DETOKENIZE, "detokenize", "tokens", "tokens", (), {"": _VECTORS + "DetokenizeRoute"}
    ),
    # Its body keeps the conversation in ``messages`` as chat's does: explain tells it by
    # a top-level ``system`` (guess_route).
    MESSAGES: RouteRow(
        MESSAGES, "chat", "system", "messages", ("max_tokens",), _MESSAGES, "messages", _ANTHROPIC
    ),
    # A body like the Messages API's without max_tokens: explain never guesses it (no
    # marker; --route names it). Nothing is generated, nothing reserved.
    COUNT_TOKENS: RouteRow(
        COUNT_TOKENS, "count_tokens", "", "messages", (), _COUNT_TOKENS, "messages", _ANTHROPIC
    ),
}
ROUTE_NAMES = tuple(ROUTES)


def guess_route(body: object) -> str:
    """The route a request body is meant for: with ``messages``, chat completions unless
    it has the Messages API's top-level ``system``; else the first route whose marker
    field it has, else chat completions."""
    if not isinstance(body, dict):
        return CHAT
    if ROUTES[CHAT].marker in body:
        return MESSAGES if ROUTES[MESSAGES].marker in body else CHAT
    for row in ROUTES.values():
        if row.marker and row.marker in body:
            return row.path
    return CHAT
