"""A schema's ``$ref``s: local only, each resolving, and no cycle without a base case.

An engine's grammar compiler follows a ``$ref`` where the answer would: a cycle that
every answer must go round (``{"$defs": {"a": {"properties": {"next": {"$ref":
"#/$defs/a"}}, "required": ["next"]}}}``) asks for an infinite JSON value, and engines
crash or loop on it (vLLM answered 500 "Failed to advance FSM" until vllm#57725). A
recursive schema with a way out (an optional property, an ``anyOf`` branch without
the reference, an array that may be empty) is fine. The check is the grammar
question "which definitions can produce a finite value": a least fixed point over
the referenced nodes, each judged by what its value must hold.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from gateway.schemas.survey import INVALID, Problem, Survey


def resolve(root: Any, ref: str) -> Any:
    """The node a local ``$ref`` names (``#``, ``#/$defs/a``, ``#anchor``), or None."""
    fragment = unquote(ref[1:])
    if not fragment:
        return root
    if not fragment.startswith("/"):
        return None  # an anchor: looked up by the caller
    node = root
    for token in fragment[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def ref_problems(root: Any, found: Survey, invalid: str) -> Problem | None:
    """The first ``$ref`` that is remote, resolves to nothing, or closes a cycle with no
    base case; ``invalid``: the message head of an invalid schema (OpenAI's wording)."""
    if not found.refs:
        return None
    anchors = {
        node["$anchor"]: node for _, node in found.nodes if isinstance(node.get("$anchor"), str)
    }
    targets: dict[int, Any] = {}
    for steps, ref in found.refs:
        if not isinstance(ref, str):
            continue  # the metaschema names a $ref that is not a string
        if not ref.startswith("#"):
            return Problem(
                steps,
                "schema_remote_ref",
                f"Invalid '{{path}}': the reference {ref[:80]!r} is not local to the schema; "
                "this gateway sends no schema whose parts live elsewhere (use $defs).",
            )
        target = resolve(root, ref)
        if target is None:
            target = anchors.get(unquote(ref[1:]))
        if target is None:
            return Problem(
                steps,
                INVALID,
                f"{invalid}: the reference {ref[:80]!r} resolves to nothing (at '{{path}}').",
            )
        targets[id(target)] = target
    finite = _finite_targets(root, targets)
    for steps, ref in found.refs:
        if not isinstance(ref, str):
            continue
        target = resolve(root, ref)
        if target is None:
            target = anchors.get(unquote(ref[1:]))
        if id(target) not in finite:
            return Problem(
                steps,
                "schema_ref_cycle",
                f"Invalid '{{path}}': the reference {ref[:80]!r} closes a cycle with no base "
                "case: every value of it must hold another one, so no finite JSON matches it "
                "(make a property on the way optional, or add an anyOf branch without it).",
            )
    return None


def _finite_targets(root: Any, targets: dict[int, Any]) -> set[int]:
    """The ids of the referenced nodes that a finite value can satisfy."""
    finite: set[int] = set()
    # Each round can only add; a round that adds nothing is the fixed point.
    while True:
        added = False
        memo: dict[int, bool] = {}
        for key, node in targets.items():
            if key not in finite and _finite(node, root, finite, memo):
                finite.add(key)
                added = True
        if not added:
            return finite


def _finite(node: Any, root: Any, finite: set[int], memo: dict[int, bool]) -> bool:
    """Whether ``node`` can be satisfied by a finite value, given which referenced nodes
    can (``finite``). Nesting is bounded by the survey's limits before this runs."""
    if type(node) is not dict:
        return True
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = True  # (a node reached again through itself, in this round: judged below)
    result = True
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        target = resolve(root, ref)
        result = target is None or id(target) in finite
    if result:
        required = node.get("required")
        properties = node.get("properties")
        if isinstance(required, list) and isinstance(properties, dict):
            result = all(
                _finite(properties[name], root, finite, memo)
                for name in required
                if isinstance(name, str) and name in properties
            )
    if result:
        least = node.get("minItems")
        items = node.get("items")
        if isinstance(least, int) and least > 0:
            prefix = node.get("prefixItems")
            if isinstance(prefix, list):
                result = all(_finite(p, root, finite, memo) for p in prefix[:least])
            if (
                result
                and isinstance(items, dict)
                and (not isinstance(prefix, list) or least > len(prefix))
            ):
                result = _finite(items, root, finite, memo)
    if result and isinstance(node.get("allOf"), list):
        result = all(_finite(branch, root, finite, memo) for branch in node["allOf"])
    for choice in ("anyOf", "oneOf"):
        if result and isinstance(node.get(choice), list) and node[choice]:
            result = any(_finite(branch, root, finite, memo) for branch in node[choice])
    memo[key] = result
    return result
