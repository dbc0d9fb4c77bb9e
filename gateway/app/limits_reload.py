"""Rate limits reloaded with the policy: on SIGHUP (and ``--watch``), from the config
file the gateway started with, read again with the same flags and environment.
(In app/, beside the policy reload: it reads settings.py, which imports
gateway/limits/config.py, so it cannot live in limits/.)

The limits by key, by profile and the default change at once; the counters stay
(a key keeps what it used). A config whose limits are invalid, or that does not
load, is refused and the live limits stay, as a broken policy is refused.
``store`` and ``redis`` need a restart: a change of them is logged and left.
"""

from __future__ import annotations

import logging

import anyio

from gateway.limits.limiter import Limiter
from gateway.limits.report import limit_problems
from gateway.settings import Settings, load_settings
from gateway.yamlsource import Problem, SourceError

logger = logging.getLogger("gateway.reload")


class LimitsReloader:
    """Reads ``rate_limits`` again for ``limiter`` (None: limits were off at start)."""

    def __init__(
        self, settings: Settings, limiter: Limiter | None, *, key_names: list[str] | None
    ) -> None:
        self.settings = settings
        self.limiter = limiter
        self.key_names = key_names

    def _read(self, profiles: frozenset[str]) -> Settings | None:
        source = self.settings.source
        if source is None:
            return None
        file, overrides = source
        if file is None:
            return None
        settings = load_settings(file, overrides=overrides)
        problems = limit_problems(
            settings.rate_limits,
            key_names=self.key_names,
            profiles=profiles,
            where=lambda path, message: Problem(str(file), 0, path, message),
        )
        if problems:
            raise SourceError(problems)
        return settings

    async def reload(self, trigger: str, profiles: frozenset[str]) -> None:
        """Read the config file again and apply its limits (``profiles``: the live
        policy's); logs what happened."""
        try:
            settings = await anyio.to_thread.run_sync(self._read, profiles)
        except SourceError as exc:
            logger.error(
                "rate limits reload failed; the live limits stay",
                extra={"event": "rate_limits_reload", "trigger": trigger, "error": str(exc)},
            )
            return
        if settings is None:
            return
        new = settings.rate_limits
        limiter = self.limiter
        if limiter is None:
            if new.enabled:
                logger.warning(
                    "rate limits were off at start: restart the gateway to turn them on",
                    extra={"event": "rate_limits_reload", "trigger": trigger},
                )
            return
        old = limiter.config
        if (new.store, new.redis) != (old.store, old.redis):
            logger.warning(
                "rate_limits.store and rate_limits.redis change only with a restart",
                extra={"event": "rate_limits_reload", "trigger": trigger},
            )
        new = new.model_copy(update={"store": old.store, "redis": old.redis})
        if new == old:
            return
        limiter.reconfigure(new)
        logger.info(
            "rate limits reloaded", extra={"event": "rate_limits_reload", "trigger": trigger}
        )
