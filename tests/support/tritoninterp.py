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

``untraced_language`` keeps coverage's tracer out of the interpreter's own code. On
Python 3.11 a trace function slows every line the interpreter runs, measured or not
(each instruction goes through the tracing path, unspecialised), and under coverage
the kernel tests spent most of their time in triton's and numpy's Python: each
``tl.*`` call and tensor operator inside a kernel is a few hundred lines of theirs.
The kernels' own lines stay traced: only the patched ``triton.language`` members are
run with the tracer set aside, and given it back when they return.
"""

from __future__ import annotations

import functools
import sys
import types
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


# Patched members that call the kernel's own functions (a reduction's combine function):
# traced as they are, so those functions' lines are measured.
_CALLS_THE_KERNELS = frozenset({"reduce", "associative_scan"})


def _untraced(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        tracer = sys.gettrace()
        sys.settrace(None)
        try:
            return fn(*args, **kwargs)
        finally:
            # coverage's tracer installs itself again from this (its settrace(gettrace())).
            sys.settrace(tracer)

    return call


def untraced_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a trace function (coverage), run the interpreter's patched
    ``triton.language`` members without it; no change where nothing traces."""
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if sys.gettrace() is None or scope_type is None:
        return
    set_attr = scope_type.set_attr

    def set_untraced(self: Any, obj: object, name: str, value: object) -> None:
        if isinstance(value, types.FunctionType) and name not in _CALLS_THE_KERNELS:
            value = _untraced(value)
        set_attr(self, obj, name, value)

    monkeypatch.setattr(scope_type, "set_attr", set_untraced)
