"""Gateway settings: config.yaml validated once, then command-line flags, then
``FT_GATEWAY_*`` environment variables (for containers), each overriding the last.

Environment names: ``FT_GATEWAY_HOST``, ``_PORT``, ``_UPSTREAM``, ``_POLICY`` for
the common ones, and ``FT_GATEWAY_<SECTION>__<KEY>`` for any key, e.g.
``FT_GATEWAY_TIMEOUTS__CONNECT=2``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from gateway.deployments import URL_PATTERN, Deployment, ModelAccess
from gateway.deployments import Upstream as Upstream  # the section's model, named here too
from gateway.limits.config import Metering, RateLimits
from gateway.yamlsource import Problem, SourceError, YamlDocument, load_yaml

ENV_PREFIX = "FT_GATEWAY_"
_ENV_ALIASES: dict[str, tuple[str, ...]] = {
    "HOST": ("listen", "host"),
    "PORT": ("listen", "port"),
    "UPSTREAM": ("upstream", "url"),
    "POLICY": ("policy",),
    "LOG_LEVEL": ("log", "level"),
}
# The policy serve uses when none is named: installed with the package (in the
# repository, gateway/policies/ft-serve.yaml links to policies/ft-serve.yaml).
SHIPPED_POLICY = Path(__file__).resolve().parent / "policies" / "ft-serve.yaml"
# Paths in a config file that are relative to that file (not to the working directory).
_FILE_PATHS: tuple[tuple[str, ...], ...] = (
    ("policy",),
    ("auth", "keys_file"),
    ("store", "path"),
    ("server", "pidfile"),
    ("capture", "path"),
    ("batches", "directory"),
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Listen(_Section):
    """Where the gateway accepts connections."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve /metrics on this port (same host) instead of the main one",
    )


class Timeouts(_Section):
    """Seconds. ``response``: headers and whole non-streaming body; ``stream_idle``:
    the longest silence between two chunks of a stream."""

    connect: float = Field(default=5.0, gt=0)
    response: float = Field(default=600.0, gt=0)
    stream_idle: float = Field(default=120.0, gt=0)


class Limits(_Section):
    """Size limits."""

    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_response_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="largest non-streaming engine answer"
    )
    max_stream_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        description="largest streamed engine answer; past it the stream ends with an error event",
    )
    max_response_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="an engine answer's status line and headers; more is a 502 "
        "(upstream_header_too_large)",
    )
    max_response_headers: int = Field(
        default=100, ge=8, description="header lines of an engine answer; more is a 502"
    )


class Server(_Section):
    """The HTTP server's own limits (seconds and bytes), and graceful shutdown."""

    header_timeout: float = Field(
        default=10.0,
        gt=0,
        description="from a new connection or a request's first byte to "
        "the end of its headers (slow-loris defence)",
    )
    body_timeout: float = Field(default=60.0, gt=0, description="to receive a whole request body")
    max_header_bytes: int = Field(
        default=64 * 1024, ge=1024, description="request line and headers; more gets 431"
    )
    keep_alive_timeout: int = Field(default=5, ge=1, description="idle client connections")
    limit_concurrency: int = Field(
        default=2048, ge=1, description="connections or requests at once; more get 503"
    )
    drain_timeout: float = Field(
        default=30.0, ge=0, description="on SIGTERM, how long requests in flight may still run"
    )
    pidfile: Path | None = Field(
        default=None,
        description="where serve writes its pid for 'ft-gateway reload' (unset: "
        "ft-gateway-PORT.pid in $XDG_RUNTIME_DIR/ft-gateway, else the state directory, "
        "$XDG_STATE_HOME/ft-gateway or ~/.local/state/ft-gateway)",
    )


class Auth(_Section):
    """API keys. Off unless ``keys_file`` or ``keys_env`` names where the key hashes are."""

    keys_file: Path | None = Field(
        default=None, description="YAML file of key hashes (see gateway/access/keys.py)"
    )
    keys_env: str | None = Field(
        default=None,
        description="name of an environment variable holding 'name:sha256[:profile]' entries",
    )

    @property
    def enabled(self) -> bool:
        return self.keys_file is not None or self.keys_env is not None


class Log(_Section):
    """What the gateway writes to stdout: one line per request, and its own events."""

    format: Literal["json", "text"] = Field(default="json", description="json, or text for humans")
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="the least severe lines written"
    )
    requests: bool = Field(default=True, description="one line per request")


class Tracing(_Section):
    """OpenTelemetry traces over OTLP/HTTP. A key left unset falls back to the standard
    ``OTEL_*`` variable the SDK reads (see docs/tracing.md); a key set here wins."""

    enabled: bool = Field(default=False, description="one span per request, exported over OTLP")
    endpoint: str | None = Field(
        default=None,
        pattern=URL_PATTERN,
        description="the collector's traces URL, e.g. http://127.0.0.1:4318/v1/traces "
        "(unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    service_name: str | None = Field(
        default=None, description="service.name (unset: OTEL_SERVICE_NAME, else ft-gateway)"
    )
    sample_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of new traces kept; a client's sampled traceparent is followed "
        "(unset: OTEL_TRACES_SAMPLER, else every trace)",
    )
    capture_content: bool = Field(
        default=False, description="put prompt and completion text in spans (never keys)"
    )
    export_timeout: float = Field(default=10.0, gt=0, description="seconds per OTLP export")
    queue_size: int = Field(
        default=2048, ge=1, description="spans waiting for export; past it they are dropped"
    )
    schedule_delay: float = Field(
        default=1.0, gt=0, description="seconds between exports of the waiting spans"
    )


class Capture(_Section):
    """Request bodies written to a file for ``ft-gateway diff --bodies`` (off by default;
    see docs/policy.md#recorded-bodies for what is kept and what is not)."""

    enabled: bool = Field(default=False, description="write a sample of request bodies")
    path: Path = Field(
        default=Path("captured-bodies.jsonl"),
        description="the JSON-lines file they are appended to (relative to the config file)",
    )
    sample_ratio: float = Field(
        default=0.01, ge=0, le=1, description="share of requests whose body is written"
    )
    max_bytes: int = Field(
        default=65536, ge=1, description="a body larger than this is not written"
    )
    redact_text: bool = Field(
        default=True,
        description="replace every string not listed as clear (the model, roles, types, "
        "tool names, enumerated settings) by as many 'x'; secret-looking strings are "
        "replaced whatever this says",
    )


class Store(_Section):
    """Where /v1/responses keeps responses for ``previous_response_id`` and GET/DELETE."""

    backend: Literal["none", "memory", "sqlite", "redis"] = Field(
        default="sqlite",
        description="sqlite (a file under the state directory: every worker of one host), "
        "redis (shared by workers and pods), memory (one process), or none "
        "(previous_response_id is a 400)",
    )
    path: Path | None = Field(
        default=None,
        description="sqlite: the file (unset: responses.sqlite3 in $XDG_STATE_HOME/ft-gateway, "
        "else ~/.local/state/ft-gateway)",
    )
    url: str = Field(
        default="redis://127.0.0.1:6379/0", pattern=r"^rediss?://", description="redis: server"
    )
    ttl: float = Field(default=30 * 86400, gt=0, description="seconds a response is kept")
    key_prefix: str = Field(default="ft-gateway:response:", description="redis: key prefix")
    max_bytes_per_key: int | None = Field(
        default=256 * 1024 * 1024,
        ge=1,
        description="the most bytes the responses of one API key (or one bearer token, "
        "with keys off) may fill in the store; past it a request that would store one "
        "more gets 429 insufficient_quota (store: false still passes). None: no bound",
    )


class ExtProc(_Section):
    """``ft-gateway extproc``: the policy as an Envoy external processor (docs/envoy.md)."""

    host: str = Field(default="127.0.0.1", description="the gRPC listen address")
    port: int = Field(default=9002, ge=0, le=65535, description="the gRPC port (0: any free one)")
    profile_header: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9-]+$",
        description="take the API-key profile from this request header, set by Envoy's own "
        "authentication (Envoy must remove it from clients' requests); unset: from the "
        "key Envoy forwards (auth.keys_file / keys_env), else none",
    )
    model_header: str = Field(
        default="x-ft-gateway-model",
        pattern=r"^[a-z0-9-]+$",
        description="the header set to the model the engine gets, for Envoy to route by "
        "(the route cache is cleared)",
    )
    deployment_header: str = Field(
        default="x-ft-gateway-deployment",
        pattern=r"^[a-z0-9-]+$",
        description="with deployments: the header set to the deployment serving the model",
    )
    drain_timeout: float = Field(
        default=5.0, ge=0, description="on SIGTERM: how long streams in flight may finish"
    )


class Batches(_Section):
    """The Batch API: /v1/files and /v1/batches, and the runner of their lines."""

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
        default=30 * 86400,
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


class Settings(_Section):
    """Everything the gateway needs to start."""

    listen: Listen = Field(default_factory=Listen)
    upstream: Upstream = Field(default_factory=Upstream)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    limits: Limits = Field(default_factory=Limits)
    auth: Auth = Field(default_factory=Auth)
    server: Server = Field(default_factory=Server)
    policy: Path = Field(
        default=SHIPPED_POLICY,
        description="the field policy file (default: the one installed with ft-gateway)",
    )
    watch_policy: bool = Field(
        default=False, description="reload the policy when its file changes (SIGHUP always does)"
    )
    log: Log = Field(default_factory=Log)
    tracing: Tracing = Field(default_factory=Tracing)
    store: Store = Field(default_factory=Store)
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    metering: Metering = Field(default_factory=Metering)
    deployments: list[Deployment] = Field(
        default_factory=list,
        description="several engine deployments, picked by the request's model (docs/fleet.md); "
        "empty: the upstream and policy above serve any model name",
    )
    model_access: ModelAccess = Field(
        default_factory=ModelAccess,
        description="API keys and profiles limited to some models (others get a 404)",
    )
    capture: Capture = Field(default_factory=Capture)
    extproc: ExtProc = Field(default_factory=ExtProc)
    batches: Batches = Field(default_factory=Batches)
    # Where these settings came from (the config file and the flags), so that a
    # reload can read the file again (gateway/limits/reload.py).
    _source: tuple[str | None, dict[tuple[str, ...], Any]] | None = PrivateAttr(default=None)
    # The settings as loaded, before serve fills in what it decides (the port that
    # port 0 became, the pidfile): what a reload compares its new settings with.
    _declared: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> tuple[str | None, dict[tuple[str, ...], Any]] | None:
        """(config file, flag overrides) these settings were loaded from."""
        return self._source

    @property
    def declared(self) -> dict[str, Any]:
        """These settings as they were loaded (JSON types), whatever was changed since."""
        return self._declared or self.model_dump(mode="json")

    def upstream_api_key(self) -> str | None:
        """The engine's API key, read from the environment variable the config names."""
        if self.upstream.api_key_env is None:
            return None
        return os.environ.get(self.upstream.api_key_env) or None


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


_ADDRESS = (("upstream", "url"), ("upstream", "urls"), ("upstream", "dns"))


def _replace_address(data: dict[str, Any], path: tuple[str, ...]) -> bool:
    # A flag or variable that names the engine replaces the file's engine list
    # whichever of url/urls the file used. True: every address key is now the flag's.
    if path not in _ADDRESS[:2]:
        return False
    upstream = data.get("upstream")
    if isinstance(upstream, dict):
        data["upstream"] = {k: v for k, v in upstream.items() if k not in ("url", "urls", "dns")}
    return True


def env_overrides(environ: Mapping[str, str]) -> dict[tuple[str, ...], Any]:
    """``FT_GATEWAY_*`` variables as key paths. A value written as a YAML (or JSON)
    list or mapping, ``["http://a:8000", "http://b:8000"]``, is that list or mapping."""
    out: dict[tuple[str, ...], Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX + "CONFIG":
            continue
        key = name[len(ENV_PREFIX) :]
        path = _ENV_ALIASES.get(key) or tuple(p.lower() for p in key.split("__") if p)
        if path:
            out[path] = _structured(value)
    return out


def _structured(value: str) -> Any:
    if not value.lstrip().startswith(("[", "{")):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value  # validation then names the variable


def load_settings(
    config: str | Path | None = None,
    *,
    overrides: Mapping[tuple[str, ...], Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from a config file, flag overrides and the environment.

    Raises SourceError naming the file (or "command line" / "environment"),
    the key path and the line of every problem.
    """
    environ = os.environ if environ is None else environ
    doc = load_yaml(config) if config is not None else YamlDocument(file="<defaults>", data={})
    if doc.data is None:
        doc.data = {}
    if not isinstance(doc.data, dict):
        raise SourceError([doc.problem((), "a config file must be a mapping")])
    data: dict[str, Any] = dict(doc.data)
    origin: dict[tuple[str, ...], str] = {}
    for path, value in (overrides or {}).items():
        if value is not None:
            if _replace_address(data, path):
                origin.update(dict.fromkeys(_ADDRESS, "command line"))
            _set(data, path, value)
            origin[path] = "command line"
    for path, value in env_overrides(environ).items():
        if _replace_address(data, path):
            origin.update(dict.fromkeys(_ADDRESS, "environment"))
        _set(data, path, value)
        origin[path] = "environment"
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(str(p) for p in err["loc"])
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            msg = msg.removeprefix("Value error, ")
            source = next((o for p, o in origin.items() if loc[: len(p)] == p), None)
            if source is None:
                # A section's own check (upstream's url/urls): blame a flag or variable
                # that set a key of it, rather than the file's line for the section.
                source = next((o for p, o in origin.items() if p[: len(loc)] == loc), None)
            if source is not None:
                problems.append(Problem(source, 0, loc, msg))
            else:
                problems.append(doc.problem(loc, msg))
        raise SourceError(problems) from exc
    file = str(Path(config).resolve()) if config is not None else None
    settings._source = (file, dict(overrides or {}))
    if config is not None:
        here = Path(config).resolve().parent
        for path in _FILE_PATHS:
            if path in origin or not _given(doc.data, path):
                continue  # a flag or variable: relative to the working directory
            *sections, key = path
            node: Any = settings
            for section in sections:
                node = getattr(node, section)
            value = getattr(node, key)
            if isinstance(value, Path) and not value.is_absolute():
                setattr(node, key, here / value)
        if ("deployments",) not in origin:  # each deployment's policy, as ``policy``
            for deployment in settings.deployments:
                if deployment.policy is not None and not deployment.policy.is_absolute():
                    deployment.policy = here / deployment.policy
    settings._declared = settings.model_dump(mode="json")
    return settings


def _given(data: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return data is not None


def config_path(arg: str | None) -> str | None:
    """The config file: the flag, else ``$FT_GATEWAY_CONFIG``, else ./config.yaml if present."""
    if arg:
        return arg
    env = os.environ.get("FT_GATEWAY_CONFIG")
    if env:
        return env
    return "config.yaml" if os.path.exists("config.yaml") else None
