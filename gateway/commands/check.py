"""``ft-gateway check``: validate config and policy files without starting anything.

Like ``nginx -t``: every problem of every file is reported as
``file:line: key.path: what is wrong``, so an edit is caught before it goes live.
The config, the policy, the API keys, the limits against the keys and the
engine's key variable are built by ``load_reloadable``, the function start-up and
reload call: what ``check`` passes, a reload accepts (but for a change of a key
that takes a restart, which only the running gateway can see).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.app.reloadable import load_reloadable
from gateway.policy.engine import Policy
from gateway.policy.loading import check_policy
from gateway.settings import Settings, config_path, load_settings
from gateway.yamlsource import Problem, SourceError, decode_source, parse_yaml, read_source


@dataclass
class CheckedFile:
    """One file's result: its problems, or a short description when it is valid."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    summary: str = ""
    profiles: tuple[str, ...] | None = None  # a valid policy's profile names


def display_path(path: str | Path) -> str:
    """``path`` relative to the working directory when it lies under it."""
    text = str(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:  # pragma: no cover - another drive on Windows
        return text
    return text if relative.startswith("..") else relative


def check_policy_path(path: str | Path) -> CheckedFile:
    """Check one policy file: YAML, duplicate keys, schema and semantic rules, all at once."""
    name = display_path(path)
    result = CheckedFile(name)
    try:
        data = read_source(path)
        doc = parse_yaml(decode_source(data, file=name), file=name, problems=result.problems)
    except SourceError as exc:
        result.problems.extend(exc.problems)
        return result
    source, problems = check_policy(doc)
    result.problems.extend(problems)
    if source is not None and not result.problems:
        policy = Policy(source, digest=hashlib.sha256(data).hexdigest(), path=name)
        rules = sum(len(r.fields) for r in source.routes.values())
        overlays = len(source.models) + len(source.profiles)
        result.summary = (
            f"{len(policy.routes)} routes, {rules} field rules, {overlays} overlays, "
            f"sha256 {policy.digest[:12]}"
        )
        reporting = _report_only(source.model_dump(exclude_defaults=True))
        if reporting:
            # Said every time the file is checked, so a trial is not forgotten.
            result.summary += f"; {reporting} report-only (enforcement: report)"
        result.profiles = tuple(source.profiles)
    return result


def _report_only(data: object) -> int:
    """How many places of a policy's data say ``enforcement: report``."""
    if isinstance(data, dict):
        own = int(data.get("enforcement") == "report")
        return own + sum(_report_only(v) for v in data.values())
    if isinstance(data, list):
        return sum(_report_only(v) for v in data)
    return 0


def check_config_path(
    path: str | Path | None, *, environ: Mapping[str, str]
) -> tuple[CheckedFile, Settings | None]:
    """Check a config file (with ``FT_GATEWAY_*`` applied, as ``serve`` would); also
    returns the settings, or None when the config itself is invalid."""
    result = CheckedFile(display_path(path) if path is not None else "<defaults>")
    try:
        settings = load_settings(path, environ=environ)
    except SourceError as exc:
        result.problems.extend(exc.problems)
        return result, None
    result.summary = f"upstream {settings.upstream.url}, policy {display_path(settings.policy)}"
    return result, settings


def check_files(
    config: str | Path | None,
    policies: Sequence[str | Path],
    *,
    environ: Mapping[str, str],
) -> list[CheckedFile]:
    """Check ``config``, the policy and API keys it names, then ``policies``. With no
    policies and no config, the config ``serve`` would use is checked (defaults if none)."""
    results: list[CheckedFile] = []
    paths = list(policies)
    settings: Settings | None = None
    if config is not None or not paths:
        checked, settings = check_config_path(config, environ=environ)
        results.append(checked)
        if settings is not None:
            paths.insert(0, settings.policy)
    seen: set[Path] = set()
    for path in paths:
        key = Path(path).resolve()
        if key not in seen:
            seen.add(key)
            results.append(check_policy_path(path))
    if settings is not None:
        check_reloadable(settings, results, environ=environ)
    return results


def check_reloadable(
    settings: Settings, results: list[CheckedFile], *, environ: Mapping[str, str]
) -> None:
    """Add to ``results`` what start-up and reload would refuse (the same function
    builds it): the keys against the policy, the limits against the keys, the engine's
    key variable. A problem already reported (the policy's own) is not repeated."""
    auth = settings.auth
    keys: CheckedFile | None = None
    if auth.enabled:
        where = display_path(auth.keys_file) if auth.keys_file is not None else f"${auth.keys_env}"
        keys = CheckedFile(where)
        results.append(keys)
    try:
        live = load_reloadable(settings, environ=environ)
    except SourceError as exc:
        reported = {_identity(p) for r in results for p in r.problems}
        for problem in exc.problems:
            if _identity(problem) in reported:
                continue
            _result_for(results, problem.file).problems.append(problem)
        return
    if keys is not None and live.keyring is not None:
        keys.summary = f"{len(live.keyring.keys)} API keys"


def _identity(problem: Problem) -> tuple[Path, int, tuple[str | int, ...], str]:
    return (Path(problem.file).resolve(), problem.line, problem.path, problem.message)


def _result_for(results: list[CheckedFile], file: str) -> CheckedFile:
    path = Path(file).resolve()
    for result in results:
        if Path(result.path).resolve() == path:
            return result
    result = CheckedFile(display_path(file))
    results.append(result)
    return result


def format_report(results: Sequence[CheckedFile]) -> tuple[str, int]:
    """The text ``check`` prints and its exit status (1 if any problem)."""
    lines = [str(p) for r in results for p in sorted(r.problems, key=lambda p: p.line)]
    count = len(lines)
    if count:
        bad = sum(1 for r in results if r.problems)
        noun = "problem" if count == 1 else "problems"
        lines.append(f"{count} {noun} in {bad} of {len(results)} files")
        return "\n".join(lines) + "\n", 1
    described = "; ".join(f"{r.path} ({r.summary})" for r in results)
    return f"ok: {described}\n", 0


def run(args: argparse.Namespace) -> int:
    """Print every problem in the config and policy files; 1 if any, else 0."""
    config = config_path(args.config) if args.config or not args.policies else None
    results = check_files(config, args.policies, environ=os.environ)
    text, status = format_report(results)
    sys.stdout.write(text)
    return status
