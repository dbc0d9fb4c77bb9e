"""Live reload: on SIGHUP (``ft-gateway reload`` sends it), and with ``--watch`` on a
change of the policy, keys or config file.

A reload reads the config file again (with the flags and environment the process
started with) and builds the policy, the API keys and the rate limits with
``load_reloadable``, as start-up and ``check`` do. It is all or nothing: if any
part is invalid, or the config changes a key that takes a restart, nothing
changes, and the problems are logged, counted, shown in ``/readyz`` and written
to this process's status file for ``ft-gateway reload``. Otherwise the policy,
the keys and the limits are swapped at once; a request reads each once, so
requests in flight finish as they started. Each process reloads for itself
(``--workers`` starts several, each handling its own SIGHUP and watching the
files itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio
import watchfiles
from anyio.abc import TaskStatus

from gateway.access.keys import ApiKey, Keyring
from gateway.app.reloadable import (
    ConfigLines,
    Reloadable,
    load_reloadable,
    restart_only_changes,
)
from gateway.app.reloadstatus import ReloadStatus, remove_status, status_dir, write_status
from gateway.fleet.access import make_gate
from gateway.fleet.reload import fleet_reload_problems
from gateway.fleet.router import ModelRouter
from gateway.observe.metrics import Metrics
from gateway.observe.modelnames import configured_models
from gateway.policy.engine import Policy
from gateway.settings import Settings, load_settings
from gateway.state import GatewayState
from gateway.yamlsource import Problem, SourceError

logger = logging.getLogger("gateway.reload")
LOADED = "loaded"
UNCHANGED = "unchanged"
FAILED = "failed"
# Editors write a file in several steps; changes within this many ms are one.
WATCH_DEBOUNCE_MS = 200


@dataclass(frozen=True)
class ReloadResult:
    """The outcome of one reload attempt."""

    result: str  # loaded, unchanged or failed
    trigger: str  # SIGHUP, watch, ...
    at: datetime
    error: str | None = None  # failed: every problem, with its file (the log's, reload's)
    changed: tuple[str, ...] = ()  # loaded: "policy", "API keys", "rate limits"
    reason: str | None = None  # failed: what /readyz shows, no file, no detail


class Reloader:
    """Reloads the policy, the API keys and the rate limits on request, one reload at
    a time (``keyring``: the keys the app started with)."""

    def __init__(
        self,
        state: GatewayState,
        *,
        metrics: Metrics | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.keys: tuple[ApiKey, ...] | None = keyring.keys if keyring is not None else None
        self.last: ReloadResult | None = None
        # Swaps in a reloaded fleet's table if the reload changes it, True if it did (set
        # by the app's lifespan, which reopens pools; the external processor swaps its
        # table of policies).
        self.refleet: Callable[[Reloadable], bool] | None = None
        # Told each attempt's result (the external processor's gRPC health shows it).
        self.on_result: Callable[[ReloadResult], Awaitable[None]] | None = None
        self.attempts = 0
        self._lock = asyncio.Lock()
        self._attempted = asyncio.Condition()
        self._live_digest: str | None = None
        self._failed_digest: str | None = None
        pidfile = state.settings.server.pidfile
        self.status_dir = status_dir(pidfile) if pidfile is not None else None

    async def reload(self, trigger: str, *, only_if_changed: bool = False) -> ReloadResult | None:
        """Read the files again; nothing changes unless all of them are valid.

        With ``only_if_changed`` (file watching), nothing happens when the files'
        bytes are those of the live state or of the last attempt that failed.
        """
        async with self._lock:
            digest = await anyio.to_thread.run_sync(self._digest)
            if only_if_changed and digest in (self._live_digest, self._failed_digest):
                return None
            try:
                new = await anyio.to_thread.run_sync(self._prepare)
            except SourceError as exc:
                count = len(exc.problems)
                reason = (
                    f"The files did not pass the checks ({count} problem"
                    f"{'' if count == 1 else 's'}); the gateway's log and "
                    "'ft-gateway reload' name them."
                )
                result = self._failed(trigger, digest, str(exc), reason, exc_info=False)
                self._failed_digest = digest
            except Exception as exc:  # a reload must never take the gateway down
                error = f"{type(exc).__name__}: {exc}"
                reason = "The reload failed inside the gateway; its log has the details."
                result = self._failed(trigger, digest, error, reason, exc_info=True)
            else:
                result = self._apply(trigger, new)
                self._live_digest, self._failed_digest = digest, None
            self.last = result
            if self.metrics is not None:
                self.metrics.policy_reload(result.result)
            if self.on_result is not None:
                await self.on_result(result)
            async with self._attempted:
                self.attempts += 1
                self._write_status()
                self._attempted.notify_all()
            return result

    async def wait_for_attempts(self, count: int) -> None:
        """Return once ``count`` reloads have been attempted in all."""
        async with self._attempted:
            await self._attempted.wait_for(lambda: self.attempts >= count)

    def _files(self) -> list[Path]:
        settings = self.state.settings
        source = settings.source
        files = [settings.policy, *(d.policy for d in settings.deployments if d.policy)]
        if source is not None and source[0] is not None:
            files.append(Path(source[0]))
        if settings.auth.keys_file is not None:
            files.append(settings.auth.keys_file)
        return files

    def _digest(self) -> str:
        digest = hashlib.sha256()
        for path in self._files():
            digest.update(str(path).encode() + b"\0")
            try:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                digest.update(b"unreadable")
        return digest.hexdigest()

    def _read_settings(self) -> Settings:
        live = self.state.settings
        source = live.source
        if source is None or source[0] is None:
            return live  # no config file: the policy and keys files are read again
        file, overrides = source
        return load_settings(file, overrides=overrides)

    def _prepare(self) -> Reloadable:
        """Build the new state, or SourceError with every reason it cannot be."""
        settings = self._read_settings()
        config = ConfigLines(settings)
        problems: list[Problem] = [
            config.problem(path, "changes only with a restart (reload leaves it as it is)")
            for path in restart_only_changes(self.state.settings, settings)
        ]
        problems.extend(fleet_reload_problems(self.state.settings, settings, config.problem))
        if self.state.limiter is None and settings.rate_limits.enabled:
            problems.append(
                config.problem(
                    ("rate_limits",),
                    "rate limits were off at start: turning them on takes a restart",
                )
            )
        try:
            new = load_reloadable(settings)
        except SourceError as exc:
            problems.extend(exc.problems)
        if problems:
            raise SourceError(problems)
        return new

    def _apply(self, trigger: str, new: Reloadable) -> ReloadResult:
        state = self.state
        old = state.policy
        changed: list[str] = []
        if new.policy.digest != old.digest:
            state.policy = new.policy
            if self.metrics is not None:
                self.metrics.policy_live(new.policy)
            changed.append("policy")
        keys = new.keyring.keys if new.keyring is not None else None
        if keys != self.keys:
            state.authenticate = new.keyring.authenticate if new.keyring is not None else None
            self.keys = keys
            changed.append("API keys")
        limits = new.settings.rate_limits
        limiter = state.limiter
        if limiter is not None:
            limits = limits.model_copy(
                update={"store": limiter.config.store, "redis": limiter.config.redis}
            )
            if limits != limiter.config:
                limiter.reconfigure(limits)
                changed.append("rate limits")
        if self.refleet is not None and self.refleet(new):
            changed.append("deployments")
        access = new.settings.model_access
        if access != state.settings.model_access:
            state.models = make_gate(access)
            # (A reload never turns the fleet on or off: fleet_reload_problems.)
            fleet = bool(new.settings.deployments)
            state.router = ModelRouter(state) if fleet or state.models else None
            changed.append("model access")
        if self.metrics is not None:
            policies = [new.policy, *new.policies.values()]
            self.metrics.name_models(configured_models(new.settings, policies))
        state.settings = state.settings.model_copy(
            update={
                "policy": new.settings.policy,
                "auth": new.settings.auth,
                "rate_limits": limits,
                "model_access": access,
                "deployments": new.settings.deployments,
            }
        )
        fields = _policy_fields(state.policy) | {"event": "reload", "trigger": trigger}
        if not changed:
            logger.info("reload: nothing changed", extra=fields | {"changed": []})
            return ReloadResult(UNCHANGED, trigger, datetime.now(UTC))
        if "policy" in changed:
            fields["previous_sha256"] = old.digest
        logger.info("reloaded: " + ", ".join(changed), extra=fields | {"changed": changed})
        return ReloadResult(LOADED, trigger, datetime.now(UTC), changed=tuple(changed))

    def _failed(
        self, trigger: str, digest: str | None, error: str, reason: str, *, exc_info: bool
    ) -> ReloadResult:
        logger.error(
            "reload failed; the live policy, API keys and rate limits stay",
            exc_info=exc_info,
            extra=_policy_fields(self.state.policy, prefix="live_")
            | {"event": "reload", "trigger": trigger, "files_sha256": digest, "error": error},
        )
        return ReloadResult(FAILED, trigger, datetime.now(UTC), error, reason=reason)

    def _write_status(self) -> None:
        if self.status_dir is None:
            return
        last = self.last
        status = ReloadStatus(
            os.getpid(),
            self.attempts,
            last.result if last is not None else "started",
            last.error if last is not None else None,
            last.changed if last is not None else (),
        )
        try:
            write_status(self.status_dir, status)
        except OSError as exc:
            logger.error(
                "cannot write the reload status: 'ft-gateway reload' will not see this process",
                extra={"event": "reload_status", "path": str(self.status_dir), "error": str(exc)},
            )

    @contextlib.asynccontextmanager
    async def running(self, *, watch: bool) -> AsyncIterator[None]:
        """Reload on SIGHUP (where this process can receive it) and, with ``watch``, on
        changes of the policy, keys or config file, until the block exits."""
        wanted = asyncio.Event()
        stop = anyio.Event()
        self._live_digest = await anyio.to_thread.run_sync(self._digest)

        async def serve_signals() -> None:
            while True:
                await wanted.wait()
                wanted.clear()
                await self.reload("SIGHUP")

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_signals)
            if watch:
                await tg.start(self._watch, stop)
            remove = _on_sighup(wanted.set)
            async with self._attempted:
                self._write_status()
            live = self.state.policy
            logger.info(
                "policy live",
                extra=_policy_fields(live) | {"event": "policy_live", "watch": watch},
            )
            try:
                yield
            finally:
                remove()
                if self.status_dir is not None:
                    remove_status(self.status_dir, os.getpid())
                stop.set()
                tg.cancel_scope.cancel()

    async def _watch(
        self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # The directories, not the files: editors and Kubernetes ConfigMaps replace
        # a file (rename, symlink swap) rather than write it in place.
        directories = sorted({Path(os.path.abspath(f)).parent for f in self._files()})
        changes = watchfiles.awatch(
            *directories,
            watch_filter=None,
            debounce=WATCH_DEBOUNCE_MS,
            recursive=False,
            stop_event=stop,
        )
        # The caller resumes after this task's next await, which comes after the
        # watcher is set up in the first step of the loop below: no change is missed.
        task_status.started()
        try:
            async for _ in changes:
                await self.reload("watch", only_if_changed=True)
        except Exception as exc:
            logger.error(
                "cannot watch the files; SIGHUP still reloads them",
                extra={
                    "event": "policy_watch",
                    "paths": [str(d) for d in directories],
                    "error": str(exc),
                },
            )


def _policy_fields(policy: Policy, *, prefix: str = "") -> dict[str, str]:
    return {
        "path": policy.path,
        f"{prefix}sha256": policy.digest,
        f"{prefix}loaded_at": policy.loaded_at.isoformat(),
    }


def _on_sighup(callback: Callable[[], object]) -> Callable[[], None]:
    """Call ``callback`` on SIGHUP; returns the function that stops it. Signals reach
    only the main thread of a process: elsewhere (a server on a test thread) this
    does nothing."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, callback)
    except (ValueError, RuntimeError, NotImplementedError, AttributeError):
        logger.info("SIGHUP reload is not available in this thread", extra={"event": "sighup"})
        return lambda: None

    def remove() -> None:
        loop.remove_signal_handler(signal.SIGHUP)

    return remove
