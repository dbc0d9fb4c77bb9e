"""A config file that a test writes to see it refused (``refused_config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.settings import load_settings
from gateway.yamlsource import SourceError


def refused_config(
    directory: Path, text: str, *, environ: dict[str, str] | None = None
) -> SourceError:
    """The error that loading ``directory/gw.yaml``, holding ``text``, raises (with
    ``environ`` as the environment, empty by default)."""
    path = directory / "gw.yaml"
    path.write_text(text)
    with pytest.raises(SourceError) as info:
        load_settings(path, environ=environ or {})
    return info.value
