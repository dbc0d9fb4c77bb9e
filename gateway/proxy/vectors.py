"""The routes that generate nothing: POST /v1/embeddings, /v1/rerank (and /rerank),
/tokenize and /detokenize.

Each is policed like chat: a route the policy file does not declare is the 404 an
undeclared path is (nothing passes un-policed), and a declared one forwards what the
policy leaves. They never stream. Their usage is input alone (embeddings report
``prompt_tokens`` and ``total_tokens``, rerank engines often ``total_tokens`` only),
so the limiter reserves the input's estimate and settles on what the engine counted,
never a completion it cannot make.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import GatewayError, NotFound
from gateway.jsonbody.shapes import mixed_input
from gateway.limits.meter import Usage
from gateway.policy.engine import Policy
from gateway.proxy.call import Call
from gateway.proxy.route import Prepared, Route
from gateway.routes import DETOKENIZE, EMBEDDINGS, RERANK, RERANK_BARE, ROUTES, TOKENIZE


def input_usage(answer: dict[str, Any]) -> Usage | None:
    """The usage of an answer that counts input only: ``prompt_tokens`` (or, as many
    rerank engines write it, ``total_tokens`` alone)."""
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    total = usage.get("total_tokens")
    if type(prompt) is not int:
        prompt = total
    if type(prompt) is not int:
        return None
    return Usage(prompt, 0, total if type(total) is int else prompt)


class PolicedRoute(Route):
    """A route served only where the policy declares it (jsonbody/shapes.py's
    DECLARED_ONLY names these routes for the external processor; a test keeps the two
    alike)."""

    def _undeclared(self) -> NotFound | None:
        """The 404 of this route where the policy does not declare it."""
        if self.state.policy.route(self.name or "") is None:
            return NotFound(f"Invalid URL (POST {self.name}).")
        return None

    def refusal(
        self, body: dict[str, Any], *, policy: Policy, profile: str | None
    ) -> GatewayError | None:
        return self._undeclared() or super().refusal(body, policy=policy, profile=profile)

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        if self.state.policy.route(self.name or "") is None:  # (_undeclared, without a call)
            raise NotFound(f"Invalid URL (POST {self.name}).")
        return await super().prepare(call, raw, body)

    def usage(self, answer: dict[str, Any]) -> Usage | None:
        return input_usage(answer)


class EmbeddingsRoute(PolicedRoute):
    """POST /v1/embeddings."""

    row = ROUTES[EMBEDDINGS]

    def refusal(
        self, body: dict[str, Any], *, policy: Policy, profile: str | None
    ) -> GatewayError | None:
        undeclared = self._undeclared()
        if undeclared is not None:
            return undeclared
        return mixed_input(body.get("input")) or super().refusal(
            body, policy=policy, profile=profile
        )

    async def prepare(self, call: Call, raw: bytes, body: dict[str, Any]) -> Prepared:
        # A shape no field rule states (one form per array), checked where the route is
        # served; an undeclared route stays the 404.
        error = mixed_input(body.get("input"))
        if error is not None and self.state.policy.route(EMBEDDINGS) is not None:
            raise error
        return await super().prepare(call, raw, body)


class RerankRoute(PolicedRoute):
    """POST /v1/rerank (vLLM's, TEI's, LocalAI's; Cohere's and Jina's shape)."""

    row = ROUTES[RERANK]


class BareRerankRoute(PolicedRoute):
    """POST /rerank: the same API at the path TEI and llama.cpp serve."""

    row = ROUTES[RERANK_BARE]


class TokenizeRoute(PolicedRoute):
    """POST /tokenize (vLLM's ``prompt``, llama.cpp's ``content``): no model is run."""

    row = ROUTES[TOKENIZE]

    def usage(self, answer: dict[str, Any]) -> Usage | None:
        return Usage(0, 0, 0)


class DetokenizeRoute(TokenizeRoute):
    """POST /detokenize."""

    row = ROUTES[DETOKENIZE]
