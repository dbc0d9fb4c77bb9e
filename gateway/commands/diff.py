"""``ft-gateway diff OLD NEW [--bodies FILE...] [--json]``: two policies by their effect.

The comparison is gateway/policy/diff.py's; this module reads the files, the
recorded bodies (capture files, JSON lines of bodies, or case files) and
prints. Exit 0 when the policies have the same effect (and no body changes
verdict), 1 when they differ, 2 when a file cannot be read, as diff(1) does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from gateway.commands.check import display_path
from gateway.commands.explain import guess_route
from gateway.policy.cases import load_cases
from gateway.policy.diff import (
    NOT_NAMED,
    BodyComparison,
    RuleChange,
    compare_bodies,
    compare_policies,
)
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
from gateway.routes import ROUTE_NAMES as ROUTES
from gateway.yamlsource import Problem, SourceError

Body = tuple[str, str | None, dict[str, Any]]


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = json.dumps(value, separators=(", ", ": "))
    return text if len(text) <= 60 else text[:57] + "..."


def _summary(rule: dict[str, Any] | None) -> str:
    if rule is None:
        return "(no rule)"
    if NOT_NAMED in rule:
        return f"{rule['action']} ({rule[NOT_NAMED]})"
    details = ", ".join(f"{k} {_show(v)}" for k, v in rule.items() if k != "action")
    return f"{rule['action']}" + (f" ({details})" if details else "")


def describe(change: RuleChange) -> str:
    """One change as ``OLD -> NEW`` phrases: the action first, then each other key."""
    old, new = change.old, change.new
    if old is None or new is None or NOT_NAMED in old or NOT_NAMED in new:
        return f"{_summary(old)} -> {_summary(new)}"
    parts: list[str] = []
    for key, (a, b) in change.changes.items():
        if key == "action":
            parts.insert(0, f"{a} -> {b}")
        else:
            parts.append(f"{key} {_show(a)} -> {_show(b)}")
    return "; ".join(parts)


def format_changes(changes: list[RuleChange]) -> list[str]:
    lines: list[str] = []
    width = max((len(c.path) for c in changes), default=0)
    heading = None
    for change in changes:
        here = change.route if not change.context else f"{change.context}, {change.route}"
        if here != heading:
            lines.append(here)
            heading = here
        lines.append(f"  {change.path:<{width}}  {describe(change)}")
    return lines


def format_bodies(result: BodyComparison, sources: list[str]) -> list[str]:
    head = (
        f"bodies: {result.total} from {', '.join(sources)}: {result.change_verdict} change verdict"
    )
    if result.refused_otherwise:
        head += f", {result.refused_otherwise} refused with another error"
    if result.rewritten:
        head += f", {result.rewritten} forwarded as a different body"
    lines = [head]
    width = len(str(max(result.moved.values(), default=0)))
    for (old, new), count in result.moved.most_common():
        lines.append(f"  {count:>{width}}  {old} -> {new}")
    return lines


def _record(data: Any, where: str) -> Body:
    """A body from one recorded line: a capture record or a bare request body."""
    if isinstance(data, dict) and isinstance(data.get("body"), dict):
        route = data.get("route")
        body = data["body"]
        if route not in ROUTES:
            route = guess_route(orjson.dumps(body))
        profile = data.get("profile")
        return str(route), profile if isinstance(profile, str) else None, body
    if isinstance(data, dict):
        return guess_route(orjson.dumps(data)), None, data
    raise SourceError([Problem(where, 0, (), "not a JSON object")])


def read_bodies(path: str) -> Iterator[Body]:
    """The bodies of a capture file or JSON lines of bodies; or of a case file (.yaml)."""
    if path.endswith((".yaml", ".yml")):
        for case in load_cases(path).cases:
            body = case.request()
            yield case.route or guess_route(orjson.dumps(body)), case.profile, body
        return
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise SourceError([Problem(path, 1, (), f"cannot read file: {exc.strerror}")]) from exc
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise SourceError([Problem(path, number, (), f"not JSON: {exc}")]) from exc
        yield _record(data, f"{path}:{number}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("old", metavar="OLD", help="the policy in force")
    p.add_argument("new", metavar="NEW", help="the candidate")
    p.add_argument(
        "--bodies",
        action="append",
        default=[],
        metavar="FILE",
        help="recorded requests (a capture file, JSON lines of bodies, or a case file): "
        "count those that change verdict; may be repeated",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    """Print the differences; 0 if none, 1 if any, 2 if a file cannot be read."""
    try:
        old_source, old_digest = load_policy_file(args.old)
        new_source, new_digest = load_policy_file(args.new)
        old = Policy(old_source, digest=old_digest, path=display_path(args.old))
        new = Policy(new_source, digest=new_digest, path=display_path(args.new))
        bodies = [b for path in args.bodies for b in read_bodies(path)]
    except SourceError as exc:
        print(f"ft-gateway diff: cannot load:\n{exc}", file=sys.stderr)
        return 2
    changes = compare_policies(old, new)
    compared = compare_bodies(old, new, bodies) if args.bodies else None
    if args.json:
        out: dict[str, Any] = {
            "old": {"path": old.path, "sha256": old.digest},
            "new": {"path": new.path, "sha256": new.digest},
            "rules": [c.as_dict() for c in changes],
        }
        if compared is not None:
            out["bodies"] = compared.as_dict()
        sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
    else:
        lines = [
            f"--- {old.path} (sha256 {old.digest[:12]})",
            f"+++ {new.path} (sha256 {new.digest[:12]})",
        ]
        if changes:
            lines += format_changes(changes)
        else:
            lines.append("the same effect on every route, model and profile")
        if compared is not None:
            lines += format_bodies(compared, [display_path(p) for p in args.bodies])
        sys.stdout.write("\n".join(lines) + "\n")
    differ = bool(changes) or (compared is not None and compared.changed > 0)
    return 1 if differ else 0
