"""Live policy reload: on SIGHUP, and on a change of the policy file with ``--watch``.

The new file goes through the same loading and checks as at start-up. If it is
valid, ``GatewayState.policy`` is replaced whole; a request reads that
attribute once, so requests in flight finish under the policy they started
with. If it is not, the live policy stays, and the problems are logged and
counted. Each process reloads for itself (``--workers`` starts several, each
handling its own SIGHUP and watching the file itself).
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

from gateway.observe.metrics import Metrics
from gateway.policy.engine import Policy
from gateway.policy.loading import load_policy_file
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
    error: str | None = None


def read_policy(path: Path) -> Policy:
    """Load, check and compile the policy file at ``path`` (SourceError if invalid)."""
    source, digest = load_policy_file(path)
    return Policy(source, digest=digest, path=str(path))


class PolicyReloader:
    """Reloads ``state.policy`` from its file on request, one reload at a time."""

    def __init__(
        self,
        state: GatewayState,
        *,
        metrics: Metrics | None = None,
        profiles: frozenset[str] = frozenset(),
        also: Callable[[str, frozenset[str]], Awaitable[None]] | None = None,
    ) -> None:
        self.state = state
        # Reloaded with the policy (the rate limits): told the trigger and the
        # live policy's profiles after each attempt.
        self.also = also
        self.metrics = metrics
        # Profiles that API keys select: a new policy must still define them.
        self.profiles = profiles
        self.last: ReloadResult | None = None
        self.attempts = 0
        self._lock = asyncio.Lock()
        self._attempted = asyncio.Condition()
        self._failed_digest: str | None = None

    async def reload(self, trigger: str, *, only_if_changed: bool = False) -> ReloadResult | None:
        """Load the policy file again; the live policy stays unless the file is valid.

        With ``only_if_changed`` (file watching), nothing happens when the file's
        bytes are those of the live policy or of the last one that failed.
        """
        async with self._lock:
            path = self.state.settings.policy
            digest = await anyio.to_thread.run_sync(_digest_or_none, path)
            if only_if_changed and digest in (self.state.policy.digest, self._failed_digest):
                return None
            try:
                policy = await anyio.to_thread.run_sync(read_policy, path)
                self._check_profiles(policy)
            except SourceError as exc:
                result = self._failed(trigger, digest, str(exc), exc_info=False)
                self._failed_digest = digest
            except Exception as exc:  # a reload must never take the gateway down
                error = f"{type(exc).__name__}: {exc}"
                result = self._failed(trigger, digest, error, exc_info=True)
            else:
                result = self._loaded(trigger, policy)
            self.last = result
            if self.metrics is not None:
                self.metrics.policy_reload(result.result)
            if self.also is not None:
                await self.also(trigger, frozenset(self.state.policy.source.profiles))
            async with self._attempted:
                self.attempts += 1
                self._attempted.notify_all()
            return result

    def _check_profiles(self, policy: Policy) -> None:
        missing = sorted(self.profiles - set(policy.source.profiles))
        if missing:
            names = ", ".join(f"'{m}'" for m in missing)
            raise SourceError(
                [
                    Problem(
                        policy.path,
                        1,
                        ("profiles",),
                        f"API keys select profiles this policy does not define: {names}",
                    )
                ]
            )

    async def wait_for_attempts(self, count: int) -> None:
        """Return once ``count`` reloads have been attempted in all."""
        async with self._attempted:
            await self._attempted.wait_for(lambda: self.attempts >= count)

    def _loaded(self, trigger: str, policy: Policy) -> ReloadResult:
        old = self.state.policy
        self._failed_digest = None
        if policy.digest == old.digest:
            logger.info(
                "policy unchanged",
                extra=_policy_fields(old) | {"event": "policy_reload", "trigger": trigger},
            )
            return ReloadResult(UNCHANGED, trigger, policy.loaded_at)
        self.state.policy = policy
        if self.metrics is not None:
            self.metrics.policy_live(policy)
        logger.info(
            "policy loaded",
            extra=_policy_fields(policy)
            | {"event": "policy_reload", "trigger": trigger, "previous_sha256": old.digest},
        )
        return ReloadResult(LOADED, trigger, policy.loaded_at)

    def _failed(
        self, trigger: str, digest: str | None, error: str, *, exc_info: bool
    ) -> ReloadResult:
        logger.error(
            "policy reload failed; the live policy stays",
            exc_info=exc_info,
            extra=_policy_fields(self.state.policy, prefix="live_")
            | {"event": "policy_reload", "trigger": trigger, "file_sha256": digest, "error": error},
        )
        return ReloadResult(FAILED, trigger, datetime.now(UTC), error)

    @contextlib.asynccontextmanager
    async def running(self, *, watch: bool) -> AsyncIterator[None]:
        """Reload on SIGHUP (where this process can receive it) and, with ``watch``, on
        changes of the policy file, until the block exits."""
        wanted = asyncio.Event()
        stop = anyio.Event()

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
            live = self.state.policy
            logger.info(
                "policy live",
                extra=_policy_fields(live) | {"event": "policy_live", "watch": watch},
            )
            try:
                yield
            finally:
                remove()
                stop.set()
                tg.cancel_scope.cancel()

    async def _watch(
        self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # The directory, not the file: editors and Kubernetes ConfigMaps replace
        # a file (rename, symlink swap) rather than write it in place.
        path = Path(os.path.abspath(self.state.settings.policy))
        changes = watchfiles.awatch(
            path.parent,
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
                "cannot watch the policy file; SIGHUP still reloads it",
                extra={"event": "policy_watch", "path": str(path), "error": str(exc)},
            )


def _digest_or_none(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


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
