"""What ``check`` says about the rate limits, and what ``explain`` shows of a key's.

``limit_problems`` finds limits that could never apply: for a profile the policy
does not define, for a key name no API key has, or by key or profile while API
keys are off. The server refuses to start with them, as ``check`` reports them.
``describe_limits`` lists a key's limits and where each comes from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gateway.limits.config import RateLimits
from gateway.limits.gcra import LIMIT_NAMES
from gateway.yamlsource import Problem

Where = Callable[[tuple[str, ...], str], Problem]


def limit_problems(
    config: RateLimits, *, key_names: Iterable[str] | None, profiles: Iterable[str], where: Where
) -> list[Problem]:
    """Limits that could never apply (``key_names`` None: API keys are off)."""
    problems: list[Problem] = []
    if key_names is None:
        for section in ("profiles", "keys"):
            if getattr(config, section):
                problems.append(
                    where(
                        ("rate_limits", section),
                        "API keys are off (auth): limits by key or profile never apply; "
                        "use rate_limits.default",
                    )
                )
        return problems
    known = set(profiles)
    for name in config.profiles:
        if name not in known:
            problems.append(
                where(
                    ("rate_limits", "profiles", name),
                    f"profile '{name}' is not defined in the policy's 'profiles'",
                )
            )
    names = set(key_names)
    for name in config.keys:
        if name not in names:
            problems.append(where(("rate_limits", "keys", name), f"no API key is named '{name}'"))
    return problems


def describe_limits(config: RateLimits, client: str | None, profile: str | None) -> list[str]:
    """The lines that show the limits of key ``client`` with ``profile``."""
    layers = [("rate_limits.default", config.default)]
    if profile is not None:
        layers.append((f"rate_limits.profiles.{profile}", config.profiles.get(profile)))
    if client is not None:
        layers.append((f"rate_limits.keys.{client}", config.keys.get(client)))
    who = f"key '{client}'" if client is not None else "every request (no API keys)"
    if profile is not None:
        who += f" (profile {profile})"
    lines = [f"rate limits of {who}, counted in the {config.store} store:"]
    width = max(len(n) for n in LIMIT_NAMES)
    for name in LIMIT_NAMES:
        value: int | None = None
        source = ""
        for label, layer in layers:
            if layer is not None and getattr(layer, name) is not None:
                value, source = getattr(layer, name), label
        shown = f"{value:<8}  from {source}" if value is not None else "-"
        lines.append(f"  {name:<{width}}  {shown}")
    return lines
