"""The commands' tests run them as a user does: in the repository's root (the paths in
their reports are relative to the working directory), with no FT_GATEWAY_* variable set
but those a test sets."""

from __future__ import annotations

import os

import pytest

from tests.support.paths import ROOT


@pytest.fixture(autouse=True)
def in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for name in list(os.environ):
        if name.startswith("FT_GATEWAY_"):
            monkeypatch.delenv(name)
