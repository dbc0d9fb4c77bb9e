"""Triton's interpreter (TRITON_INTERPRET=1) without its repeated patching of
``triton.language``, for the sampler's kernel tests on the CPU.

A kernel launch (``GridExecutor.__call__``) patches ``triton.language`` for the whole
grid, and undoes it after; but every call of a ``@triton.jit`` device function inside it
(``InterpretedFunction.__call__``) patches the language again, scanning every member of
``tl``, ``tl.tensor`` and ``tl.math`` (triton 3.9). The sampler's kernels call small
device functions inside their loops (``_count_mass`` 40 times a row, ``_in_prefix`` and
``_ordered_key`` in each of those), so about a third of those tests' time went there.
The second patching changes nothing: what the launch patched is no longer a builtin, so
it is skipped, and the rest is set again to what it already is; a device function cannot
run outside a launch. ``skip_repatching`` makes that call a no-op while a launch whose
patching covered the function's ``triton.language`` modules runs; the kernels run the
same code, on the same interpreter semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import triton.language as tl
from triton.runtime import interpreter

_LANGS = (tl, tl.core)


def _langs_of(fn: Callable[..., Any]) -> frozenset[int]:
    return frozenset(id(v) for v in fn.__globals__.values() if any(v is m for m in _LANGS))


class _Launch:
    """The kernel launch under way: the ``triton.language`` modules its patching covered."""

    def __init__(self) -> None:
        self.running = False
        self.patched: frozenset[int] | None = None


def skip_repatching(monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch the interpreter (for the test, through ``monkeypatch``) so that a device
    function called inside a launch does not patch ``triton.language`` again."""
    patch_lang = getattr(interpreter, "_patch_lang", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if patch_lang is None or executor is None:  # another triton: its interpreter as it is
        return
    launch = _Launch()
    run = executor.__call__

    def launched(self: Any, *args: Any, **kwargs: Any) -> Any:
        launch.running, launch.patched = True, None
        try:
            return run(self, *args, **kwargs)
        finally:
            launch.running, launch.patched = False, None

    def once_per_launch(fn: Callable[..., Any]) -> Any:
        langs = _langs_of(fn)
        if launch.patched is not None and langs <= launch.patched:
            return interpreter._LangPatchScope()  # a device function's call: nothing to do
        scope = patch_lang(fn)
        if launch.running:  # the launch's own patching, or a device function's of another
            # module of triton.language (triton.language.standard's tl.zeros, tl.sum see
            # tl.core), which stays patched until the launch ends as it would have
            launch.patched = langs | (launch.patched or frozenset())
        return scope

    monkeypatch.setattr(executor, "__call__", launched)
    monkeypatch.setattr(interpreter, "_patch_lang", once_per_launch)
