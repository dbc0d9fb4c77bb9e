"""``ft-gateway test POLICY CASES...``: a policy's unit tests, for CI.

Each case runs through the server's own steps (``explain_request``: parsing,
the policy, the bytes forwarded), so a case passes here exactly when a client
sending that body gets that verdict. Exit 0 when every case passes, 1 when one
fails (each failure printed with its file, line and the path that differs), 2
when the policy or a case file cannot be read, as ``promtool test rules`` and
``opa test`` do.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from gateway.commands.check import display_path
from gateway.commands.explain import Explanation, explain_request, guess_route
from gateway.policy.cases import CHANGED, REFUSED, UNCHANGED, Case, CaseFile, load_cases
from gateway.policy.diff import flatten, touched
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
from gateway.yamlsource import SourceError


def first_difference(expected: Any, got: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, as ``path: expected X, got Y``; None if equal."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in [*expected, *(k for k in got if k not in expected)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                return f"'{where}': expected {_show(expected[key])}, got no such field"
            if key not in expected:
                return f"'{where}': expected no such field, got {_show(got[key])}"
            found = first_difference(expected[key], got[key], where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list):
        for index, (a, b) in enumerate(zip(expected, got, strict=False)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        if len(expected) != len(got):
            return f"'{path}': expected {len(expected)} items, got {len(got)}"
        return None
    if type(expected) is not type(got) or expected != got:
        return f"'{path or '(body)'}': expected {_show(expected)}, got {_show(got)}"
    return None


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _got(result: Explanation) -> str:
    error = result.refusal
    if error is not None:
        return f"refused on '{error.param}' with {error.code}"
    return "forwarded changed" if result.changed else "forwarded unchanged"


def check_case(policy: Policy, case: Case) -> str | None:
    """Why ``case`` fails against ``policy``, or None when it passes."""
    if case.profile is not None and case.profile not in policy.source.profiles:
        return f"profile '{case.profile}' is not defined in the policy"
    result = explain_request(
        policy, orjson.dumps(case.request()), route=case.route, profile=case.profile
    )
    expect = case.expect
    error = result.refusal
    if expect.verdict == REFUSED:
        if error is None:
            return f"expected {expect}, got {_got(result)}"
        if (error.param, error.code) != (expect.param, expect.code):
            return f"expected {expect}, got {_got(result)}: {error.message}"
    elif error is not None:
        return f"expected {expect}, got {_got(result)}: {error.message}"
    elif expect.verdict == UNCHANGED and result.changed:
        forwarded = orjson.loads(result.forwarded or b"{}")
        return f"expected {expect}, got forwarded changed at " + (
            first_difference(case.request(), forwarded) or "(the same JSON, other bytes)"
        )
    elif expect.verdict == CHANGED:
        forwarded = orjson.loads(result.forwarded or b"{}")
        difference = first_difference(expect.body, forwarded)
        if difference is not None:
            return f"forwarded body differs at {difference}"
    if case.fanout is not None and result.fanout != case.fanout:
        return f"expected fan-out to {case.fanout} requests, got {result.fanout}"
    if case.reported is not None:
        got = [(o.field, o.detail) for o in result.reported]
        if got != case.reported:
            return f"expected report-only refusals {case.reported}, got {got}"
    return None


def run_cases(policy: Policy, cases: CaseFile) -> list[str]:
    """One line per failing case: ``FILE:LINE: NAME (ROUTE, profile P): why``."""
    failures = []
    for case in cases.cases:
        why = check_case(policy, case)
        if why is not None:
            where = case.route or "route guessed"
            if case.profile is not None:
                where += f", profile {case.profile}"
            name = f"{case.name} " if case.name else ""
            failures.append(f"{cases.file}:{case.line}: {name}({where}): {why}")
    return failures


def uncovered(policy: Policy, files: list[CaseFile]) -> list[str]:
    """The named rules (``ROUTE PATH``, paths as ``diff`` names them) and each route's
    rule for unknown fields, that no case reaches."""
    reached: set[tuple[str, str]] = set()
    for cases in files:
        for case in cases.cases:
            body = case.request()
            route = case.route or guess_route(orjson.dumps(body))
            compiled = policy.route(route, profile=case.profile)
            if compiled is not None:
                reached |= {(route, path) for path in touched(compiled, body)}
    missing = []
    for route in policy.routes:
        compiled = policy.route(route)
        for path in flatten(compiled) if compiled is not None else {}:
            if (route, path) not in reached and ".(unknown fields)" not in path:
                missing.append(f"{route} {path}")
    return missing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("policy", metavar="POLICY", help="the policy file under test")
    p.add_argument("cases", nargs="+", metavar="CASES", help="case files (YAML)")
    p.add_argument(
        "--coverage",
        action="store_true",
        help="also list the rules no case reaches (and fail if there is one)",
    )


def run(args: argparse.Namespace) -> int:
    """0 if every case passes, 1 if one fails, 2 if a file cannot be read."""
    try:
        source, digest = load_policy_file(args.policy)
        files = [load_cases(path) for path in args.cases]
    except SourceError as exc:
        print(f"ft-gateway test: cannot load:\n{exc}", file=sys.stderr)
        return 2
    policy = Policy(source, digest=digest, path=display_path(args.policy))
    failed = 0
    for cases in files:
        failures = run_cases(policy, cases)
        for line in failures:
            print(f"FAIL {line}")
        passed = len(cases.cases) - len(failures)
        print(f"{cases.file}: {len(cases.cases)} cases, {passed} passed, {len(failures)} failed")
        failed += len(failures)
    if args.coverage:
        missing = uncovered(policy, files)
        for line in missing:
            print(f"NOT COVERED {line}")
        print(f"coverage: {len(missing)} rules reached by no case")
        failed += len(missing)
    return 1 if failed else 0
