"""What a route refuses of a body before its fields' rules, pure: a route served only
where the policy declares it, and the one shape no field rule states (an embeddings
``input`` mixing its forms). The proxy's routes (proxy/vectors.py) and the external
processor (gateway/extproc/) both ask ``body_problem``."""

from __future__ import annotations

from typing import Any

from gateway.errors import GatewayError, InvalidRequest, NotFound
from gateway.policy.engine import Policy
from gateway.policy.values import json_type
from gateway.routes import DETOKENIZE, EMBEDDINGS, RERANK, RERANK_BARE, TOKENIZE

# The routes that generate nothing: a route the policy file does not declare is the 404
# an undeclared path is (nothing passes un-policed).
DECLARED_ONLY = frozenset({EMBEDDINGS, RERANK, RERANK_BARE, TOKENIZE, DETOKENIZE})
_ARTICLE = {"string": "a string", "integer": "an integer", "array": "an array"}


def body_problem(
    route: str, policy: Policy, body: dict[str, Any], method: str, path: str
) -> GatewayError | None:
    """The error of a request (``method``, ``path``) to ``route`` that ``policy`` refuses
    before any field rule, or None."""
    if route not in DECLARED_ONLY:
        return None
    if policy.route(route) is None:
        return NotFound(f"Invalid URL ({method} {path}).")
    if route == EMBEDDINGS:
        return mixed_input(body.get("input"))
    return None


def mixed_input(value: Any) -> InvalidRequest | None:
    """The error for an embeddings ``input`` array that mixes its forms (text with token
    ids, ids with id arrays), naming the first member that differs from the first."""
    if type(value) is not list or not value:
        return None
    first = type(value[0])
    for index, member in enumerate(value):
        if type(member) is not first:  # one comparison a member: no call
            param = f"input[{index}]"
            expected, got = json_type(value[0]), json_type(member)
            return InvalidRequest(
                f"Invalid type for '{param}': expected {_ARTICLE.get(expected, expected)} like "
                f"'input[0]', but got {_ARTICLE.get(got, got)} instead.",
                param=param,
                code="invalid_type",
            )
    return None
