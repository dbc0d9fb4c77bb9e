"""system_fingerprint's value: made of what serves the request, computed once per
policy load and route (the proxy's tests show it in the answers)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateway.policy.engine import Policy
from gateway.policy.file import PolicyFile
from gateway.policy.fingerprint import Fingerprints, fingerprint

BASE = {"engine": "ft-serve 0bca88f", "policy_digest": "ab" * 32, "seed": "under_load"}


def _policy(seed: str | None, digest: str = "d1") -> Policy:
    routes: dict[str, Any] = {"/v1/chat/completions": {"guarantees": {"seed": seed}, "fields": {}}}
    routes["/v1/completions"] = {"fields": {}}
    return Policy(PolicyFile.model_validate({"routes": routes}), digest=digest)


def test_a_fingerprint_has_openais_form() -> None:
    assert re.fullmatch(r"fp_[0-9a-f]{10}", fingerprint(**BASE))
    assert fingerprint(**BASE) == fingerprint(**BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"engine": "ft-serve 1c2d3e4"},
        {"policy_digest": "cd" * 32},
        {"seed": "alone_only"},
        {"seed": None},
        {"deployment": "eu-west"},
    ],
)
def test_it_changes_with_whatever_serves_the_request(change: dict[str, Any]) -> None:
    assert fingerprint(**(BASE | change)) != fingerprint(**BASE)


def test_it_is_computed_once_per_policy_and_per_route() -> None:
    prints = Fingerprints(engine="e")
    policy = _policy("under_load")
    chat = prints.of(policy, "/v1/chat/completions")
    assert prints.of(policy, "/v1/chat/completions") is chat  # not computed again
    # The completions route measured no guarantee: its own fingerprint.
    assert prints.of(policy, "/v1/completions") != chat
    assert prints.of(_policy("alone_only"), "/v1/chat/completions") != chat
    assert prints.of(_policy("under_load", digest="d2"), "/v1/chat/completions") != chat
    assert Fingerprints(engine="other").of(policy, "/v1/chat/completions") != chat
