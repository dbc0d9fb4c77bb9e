"""The role of ``instructions`` in the chat request, taken from the policy.

OpenAI describes ``instructions`` as "a system (or developer) message inserted
into the model's context". The translation asks the route's own policy what it
does with a developer message: passed as it is, the instructions go as
``developer``; renamed (ft serve's template has no developer role, so its policy
renames it to ``system``), they go under the new name; refused, or with no
message rules at all, as ``system``, which every chat engine takes.
"""

from __future__ import annotations

import weakref

from gateway.policy.engine import Policy, apply_policy

ROUTE = "/v1/responses"
_PROBE = {"type": "message", "role": "developer", "content": "."}
_FALLBACK = "system"
_known: weakref.WeakKeyDictionary[Policy, dict[str | None, str]] = weakref.WeakKeyDictionary()


def instructions_role(policy: Policy, profile: str | None) -> str:
    """The chat role ``instructions`` take under ``policy`` for a key with ``profile``
    (worked out once per policy and profile: a reload brings a new Policy)."""
    roles = _known.setdefault(policy, {})
    role = roles.get(profile)
    if role is None:
        role = roles[profile] = _ask(policy, profile)
    return role


def _ask(policy: Policy, profile: str | None) -> str:
    decision = apply_policy(policy, ROUTE, {"model": ".", "input": [dict(_PROBE)]}, profile=profile)
    if decision.error is not None:
        return _FALLBACK
    items = decision.body.get("input")
    if isinstance(items, list) and items and isinstance(items[0], dict):
        role = items[0].get("role")
        if role in ("developer", "system"):
            return str(role)
    return _FALLBACK
