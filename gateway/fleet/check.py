"""The fleet checked whole, by the function start-up, reload and ``check`` share
(app/reloadable.py): the table itself (gateway/deployments.py), each deployment's policy,
its overlays against the models it serves, its engine's key variable."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from gateway.deployments import fleet_problems
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
from gateway.settings import Settings
from gateway.yamlsource import Location, Problem, SourceError

# The upstream settings that pick a route's class (gateway/routes.py): one per gateway.
_MODES = (("responses", "Responses"), ("messages", "Messages"))


def load_fleet_policies(
    settings: Settings,
    default: Policy | None,
    where: Callable[[Location, str], Problem],
    problems: list[Problem],
    environ: Mapping[str, str],
) -> dict[str, Policy]:
    """Each deployment's policy by its name (a file named by several is read once);
    the fleet's problems are added to ``problems``."""
    deployments = settings.deployments
    if not deployments:
        return {}
    for location, message in fleet_problems(deployments):
        problems.append(where(("deployments", *location), message))
    read: dict[Path, Policy | None] = {}
    policies: dict[str, Policy] = {}
    for i, deployment in enumerate(deployments):
        at: Location = ("deployments", i)
        for setting, api in _MODES:
            mode = getattr(settings.upstream, setting)
            if getattr(deployment.upstream, setting) != mode:
                problems.append(
                    where(
                        (*at, "upstream", setting),
                        f"the {api} mode is the gateway's (upstream.{setting}: {mode}) "
                        "for every deployment",
                    )
                )
        variable = deployment.upstream.api_key_env
        if variable is not None and not environ.get(variable):
            problems.append(
                where(
                    (*at, "upstream", "api_key_env"),
                    f"variable {variable} is not set: the engine would get requests "
                    "without its key",
                )
            )
        if deployment.policy is None:
            policy = default
        else:
            path = deployment.policy.resolve()
            if path not in read:
                try:
                    source, digest = load_policy_file(path)
                    read[path] = Policy(source, digest=digest, path=str(deployment.policy))
                except SourceError as exc:
                    problems.extend(exc.problems)
                    read[path] = None
            policy = read[path]
        if policy is None:
            continue
        policies[deployment.name] = policy
        for model in policy.source.models:
            if model not in deployment.models:
                problems.append(
                    where(
                        (*at, "policy"),
                        f"{policy.path} has an overlay for model {model!r}, which "
                        f"{deployment.name!r} does not serve (its models: {deployment.models})",
                    )
                )
    return policies


def access_problems(
    settings: Settings,
    key_names: Collection[str] | None,
    profiles: Collection[str],
    where: Callable[[Location, str], Problem],
) -> list[Problem]:
    """``model_access`` against the keys, the profiles and the fleet's model names."""
    access = settings.model_access
    names = {n for d in settings.deployments for n in d.names()}
    problems: list[Problem] = []
    for section, known, what in (
        ("keys", key_names, "API key"),
        ("profiles", profiles, "profile"),
    ):
        for name, models in getattr(access, section).items():
            at: Location = ("model_access", section, name)
            if known is not None and name not in known:
                problems.append(where(at, f"no {what} is named {name!r}"))
            for i, model in enumerate(models):
                if names and model not in names:
                    problems.append(
                        where((*at, i), f"no deployment serves {model!r} (nor is it an alias)")
                    )
    served = {m for d in settings.deployments for m in d.models}
    for model in settings.rate_limits.models:
        if served and model not in served:
            problems.append(
                where(
                    ("rate_limits", "models", model),
                    f"no deployment serves {model!r} (limits are by the name an engine serves)",
                )
            )
    return problems
