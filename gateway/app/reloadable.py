"""Everything a reload may change, built and checked by one function.

Start-up (``create_app``), reload (SIGHUP, ``--watch``, ``ft-gateway reload``) and
``ft-gateway check`` all call ``load_reloadable``, so a config that ``check`` passes
is one that start-up and reload accept. It reads the policy, the API keys (checked
against the policy's profiles), the rate limits (checked against the keys and the
profiles) and the engine's key variable, and raises one SourceError with every
problem of all of them.

A reload may change ``policy``, ``auth`` and ``rate_limits`` (but for its
``store`` and ``redis``); ``restart_only_changes`` names every other key whose
value differs from the live one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.access.keys import Keyring, load_keyring
from gateway.fleet.check import access_problems, load_fleet_policies
from gateway.limits.report import limit_problems
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
from gateway.settings import Settings
from gateway.yamlsource import Location, Problem, SourceError, YamlDocument, load_yaml

_RELOADABLE: tuple[Location, ...] = (
    ("policy",),
    ("auth",),
    ("rate_limits",),
    ("model_access",),
    ("deployments",),
)
_RESTART_ONLY: tuple[Location, ...] = (("rate_limits", "store"), ("rate_limits", "redis"))


@dataclass(frozen=True)
class Reloadable:
    """What a reload swaps at once: the policy, the API keys and the settings they came
    with (whose ``rate_limits`` are the limits)."""

    settings: Settings
    policy: Policy
    keyring: Keyring | None  # None: no API keys configured
    # Each deployment's policy by its name (the fleet; empty: one deployment, ``policy``).
    policies: Mapping[str, Policy] = field(default_factory=dict)


def read_policy(path: Path) -> Policy:
    """Load, check and compile the policy file at ``path`` (SourceError if invalid)."""
    source, digest = load_policy_file(path)
    return Policy(source, digest=digest, path=str(path))


class ConfigLines:
    """Problems located in the config file the settings came from (read only when
    there is a problem to locate)."""

    def __init__(self, settings: Settings) -> None:
        source = settings.source
        self.file = source[0] if source is not None else None
        self._doc: YamlDocument | None = None

    def problem(self, path: Location, message: str) -> Problem:
        if self.file is None:
            return Problem("config", 0, path, message)
        if self._doc is None:
            try:
                self._doc = load_yaml(self.file)
            except SourceError:
                return Problem(self.file, 0, path, message)
        return self._doc.problem(path, message)


def load_reloadable(
    settings: Settings,
    *,
    policy: Policy | None = None,
    environ: Mapping[str, str] | None = None,
) -> Reloadable:
    """The policy, keys and limits ``settings`` name, checked against one another;
    SourceError with every problem. ``policy``: use this one instead of the file."""
    environ = os.environ if environ is None else environ
    config = ConfigLines(settings)
    problems: list[Problem] = []
    name = settings.upstream.api_key_env
    if name is not None and not environ.get(name):
        problems.append(
            config.problem(
                ("upstream", "api_key_env"),
                f"variable {name} is not set: the engine would get requests without its key",
            )
        )
    if policy is None:
        try:
            policy = read_policy(settings.policy)
        except SourceError as exc:
            problems.extend(exc.problems)
    policies = load_fleet_policies(settings, policy, config.problem, problems, environ)
    profiles = {p for one in (policy, *policies.values()) if one for p in one.source.profiles}
    keyring: Keyring | None = None
    auth = settings.auth
    if policy is not None and auth.enabled:
        try:
            keyring = load_keyring(
                auth.keys_file, auth.keys_env, profiles=profiles, environ=environ
            )
        except SourceError as exc:
            problems.extend(exc.problems)
    if policy is not None and (keyring is not None or not auth.enabled):
        problems.extend(
            limit_problems(
                settings.rate_limits,
                key_names=[k.name for k in keyring.keys] if keyring is not None else None,
                profiles=profiles,
                where=config.problem,
            )
        )
    if policy is not None and (keyring is not None or not auth.enabled):
        key_names = [k.name for k in keyring.keys] if keyring is not None else None
        problems.extend(access_problems(settings, key_names, profiles, config.problem))
    if problems or policy is None:
        raise SourceError(problems)
    return Reloadable(settings, policy, keyring, policies)


def restart_only_changes(live: Settings, new: Settings) -> list[Location]:
    """The keys whose new value a reload cannot apply (they take a restart)."""
    return sorted(
        (p for p in _differences(live.declared, new.declared, ()) if not _reloadable(p)),
        key=lambda p: tuple(str(k) for k in p),
    )


def _reloadable(path: Location) -> bool:
    if any(path[: len(r)] == r for r in _RESTART_ONLY):
        return False
    return any(path[: len(r)] == r for r in _RELOADABLE)


def _differences(old: Any, new: Any, path: Location) -> Iterator[Location]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            yield from _differences(old.get(key), new.get(key), (*path, key))
    elif old != new:
        yield path
