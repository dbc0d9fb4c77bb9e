"""The ``batches:`` section of config.yaml: where files and batches are kept and how the
runner shares the engines (docs/batches.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DAY = 86400


class Batches(BaseModel):
    """The Batch API: /v1/files and /v1/batches, and the runner of their lines."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="serve /v1/files and /v1/batches")
    backend: Literal["sqlite", "redis"] = Field(
        default="sqlite",
        description="sqlite (files on disk and metadata in a SQLite file, in the state "
        "directory: every worker of one host) or redis (files and metadata in Redis: every "
        "worker and pod, one of which runs each batch)",
    )
    directory: Path | None = Field(
        default=None,
        description="sqlite: where files and batches.sqlite3 are kept (unset: batches/ in "
        "$XDG_STATE_HOME/ft-gateway, else ~/.local/state/ft-gateway)",
    )
    url: str = Field(
        default="redis://127.0.0.1:6379/0", pattern=r"^rediss?://", description="redis: server"
    )
    key_prefix: str = Field(default="ft-gateway:batch:", description="redis: key prefix")
    concurrency: int = Field(
        default=8, ge=1, description="a deployment's batch lines in flight at most (per runner)"
    )
    max_file_bytes: int = Field(
        default=200 * 1024 * 1024, ge=1024, description="largest file uploaded"
    )
    max_lines: int = Field(default=50_000, ge=1, description="lines of one batch at most")
    file_ttl: float = Field(
        default=30 * DAY,
        gt=0,
        description="seconds a batch file is kept when its upload names no expires_after",
    )
    lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="a batch whose runner died is taken over after this long (live "
        "runners renew their lease)",
    )
    poll_seconds: float = Field(
        default=2.0, gt=0, description="how often a runner looks for batches to run or resume"
    )
    retry_seconds: float = Field(
        default=1.0,
        gt=0,
        description="first wait before a line the engines could not take (503, 429) is sent "
        "again; doubled each time, to 30 s at most",
    )
