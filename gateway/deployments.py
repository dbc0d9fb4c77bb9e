"""The engines in config.yaml: the ``upstream`` section (one deployment's replicas,
client, routing, queue) and a fleet's ``deployments`` (each with its upstream, policy,
the model names it serves and aliases), ``model_access``, and the fleet's own checks.

Plain data and pure checks (it imports no more of the gateway than the routing
settings and the errors), so the settings, ``check``, the fleet's runtime
(gateway/fleet/) and the external processor (gateway/extproc/) all read it: the
table from each client-facing name to its deployment (``placements``) is made here.
Empty ``deployments`` (the default) is the single deployment: the top-level
``upstream`` and ``policy``, serving the names ``upstream.models`` lists or, unset, those
its engine lists (gateway/fleet/served.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.errors import GatewayError, InvalidRequest, ModelNotFound
from gateway.routing.config import Affinity, Dns, Queue

URL_PATTERN = r"^https?://[^/]+"
_Row = TypeVar("_Row")


def _url_list(value: Any) -> Any:
    if isinstance(value, str):
        return [u.strip() for u in value.split(",") if u.strip()]
    return value


class Upstream(BaseModel):
    """The engine behind the gateway: one (``url``) or several replicas (``urls``)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(default="http://127.0.0.1:8000", pattern=URL_PATTERN)
    urls: list[Annotated[str, Field(pattern=URL_PATTERN)]] = Field(
        default_factory=list,
        min_length=1,
        description="several engine replicas (instead of url); a string is split at commas",
    )
    eject_seconds: float = Field(
        default=10.0,
        gt=0,
        description="a replica that refuses connections stays out this long, then must "
        "pass a health check",
    )
    health_path: str = Field(default="/v1/models", pattern=r"^/")
    identity: str | None = Field(
        default=None,
        description="what serves the requests, for system_fingerprint: the engine's build, "
        "model and flags (e.g. 'ft-serve 0bca88f Qwen3.8-Flash-Next-NVFP4 tp2'); change it "
        "when they change. Default: the engine URL(s)",
    )
    api_key_env: str | None = Field(
        default=None,
        description="name of the environment variable that holds the engine's API key "
        "(never the key itself)",
    )
    client: Literal["httpx", "aiohttp", "httptools"] = Field(
        default="httptools",
        description="upstream HTTP client: httpx, aiohttp, or httptools (the fastest; "
        "plain HTTP/1.1 only)",
    )
    max_connections: int = Field(default=1000, ge=1, description="per replica")
    responses: Literal["translate", "native"] = Field(
        default="translate",
        description="/v1/responses: translate to chat completions, or forward to the "
        "engine's own /v1/responses (native)",
    )
    messages: Literal["translate", "native"] = Field(
        default="translate",
        description="/v1/messages and /v1/messages/count_tokens (Anthropic's Messages API): "
        "translate to chat completions, or forward to the engine's own (native: vLLM, "
        "llama.cpp's server)",
    )
    # Engine-aware routing (docs/routing.md).
    routing: Literal["least_in_flight", "affinity"] = Field(
        default="least_in_flight",
        description="least_in_flight, or affinity: a key's requests stay on one replica "
        "while its load is within affinity.load_factor",
    )
    affinity: Affinity = Field(default_factory=Affinity)
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        description="requests in flight per replica (per gateway process) at most; past it "
        "they wait in the queue. None: no limit",
    )
    queue: Queue = Field(default_factory=Queue)
    dns: Dns | None = Field(default=None, description="replicas from a DNS name (instead of urls)")
    models: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None,
        min_length=1,
        description="one deployment: the model names clients may ask for (any other is the "
        "404 of an unknown model, and GET /v1/models lists these). Unset: the names the "
        "engine's own GET /v1/models lists, read at the first request (docs/fleet.md). "
        "A fleet's deployment gives its models beside its upstream instead",
    )

    @model_validator(mode="before")
    @classmethod
    def _several(cls, data: Any) -> Any:
        # FT_GATEWAY_UPSTREAM and --upstream set url; commas there mean several.
        if isinstance(data, dict):
            if data.get("dns") is not None and "urls" in data:
                raise ValueError("give 'urls' or 'dns' (replicas from a DNS name), not both")
            url = data.get("url")
            if isinstance(url, str) and "," in url:
                if "urls" in data:
                    raise ValueError("give 'url' (one engine) or 'urls' (several), not both")
                data = {k: v for k, v in data.items() if k != "url"}
                data["urls"] = url
            if "urls" in data:
                if "url" in data:
                    raise ValueError("give 'url' (one engine) or 'urls' (several), not both")
                data = {**data, "urls": _url_list(data["urls"])}
                if isinstance(data["urls"], list) and data["urls"]:
                    data["url"] = data["urls"][0]
        return data

    @property
    def replicas(self) -> list[str]:
        """Every engine base URL: ``urls``, or ``url`` alone."""
        return list(self.urls) if self.urls else [self.url]

    def engine_identity(self) -> str:
        """The engine part of system_fingerprint: ``identity`` as configured, else the
        addresses the engine is reached at (its URLs, or its DNS name)."""
        if self.identity:
            return self.identity
        if self.urls:
            return ",".join(self.urls)
        if self.dns is not None:
            return f"dns:{self.dns.name}:{self.dns.port}"
        return self.url


# A deployment's name is a metrics label and a log field: bounded by the config,
# and plain enough for both.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class Alias(BaseModel):
    """A client-facing model name the gateway rewrites to a served one."""

    model_config = ConfigDict(extra="forbid")

    to: str = Field(min_length=1, description="the served model name the engine gets")
    hidden: bool = Field(default=False, description="left out of GET /v1/models")

    @model_validator(mode="before")
    @classmethod
    def _plain(cls, data: Any) -> Any:
        # "alias: served" is the short form of {to: served}.
        return {"to": data} if isinstance(data, str) else data


class Deployment(BaseModel):
    """One engine deployment of the fleet: its replicas, its policy, its models."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="its name in metrics, logs and /readyz")
    upstream: Upstream = Field(description="its engine, as the top-level upstream section")
    policy: Path | None = Field(
        default=None, description="its policy file (unset: the top-level policy)"
    )
    models: list[str] = Field(min_length=1, description="the model names its engine serves")
    aliases: dict[str, Alias] = Field(
        default_factory=dict, description="client-facing name -> a name this deployment serves"
    )
    failover: str | None = Field(
        default=None,
        description="the deployment that takes its requests when all its replicas are out "
        "or its queue sheds; it must serve the same models",
    )
    owned_by: str = Field(default="ft-gateway", description="owned_by in GET /v1/models")

    @model_validator(mode="after")
    def _models_here(self) -> Deployment:
        if self.upstream.models is not None:
            raise ValueError("a deployment's model names are its 'models', not upstream.models")
        return self

    def names(self) -> Iterator[str]:
        """Every name a client may ask this deployment by (served, then aliases)."""
        yield from self.models
        yield from self.aliases


class ModelAccess(BaseModel):
    """Which models an API key, or the keys of a profile, may use (by the names clients
    send: served names and aliases). A key or profile not named here may use any."""

    model_config = ConfigDict(extra="forbid")

    keys: dict[str, list[str]] = Field(
        default_factory=dict, description="API key name -> the model names it may use"
    )
    profiles: dict[str, list[str]] = Field(
        default_factory=dict,
        description="policy profile -> the model names its keys may use (a key's own list wins)",
    )


Location = tuple[str | int, ...]


def find_model(deployments: Sequence[Deployment], name: str) -> tuple[Deployment, str] | None:
    """The deployment a request for ``name`` goes to and the name its engine gets."""
    for deployment in deployments:
        if name in deployment.models:
            return deployment, name
        alias = deployment.aliases.get(name)
        if alias is not None:
            return deployment, alias.to
    return None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one client-facing model name goes: its deployment and the name its engine
    gets (the fleet table's row, before any pool is opened)."""

    deployment: Deployment
    served: str
    alias: bool = False  # the client's name is rewritten to ``served``
    hidden: bool = False  # an alias left out of GET /v1/models


def placements(deployments: Sequence[Deployment]) -> dict[str, Placement]:
    """The fleet table: every name a client may ask by (served names at their primary
    deployment, then aliases) with its Placement."""
    table = {model: Placement(d, model) for model, d in primaries(deployments).items()}
    for deployment in deployments:
        for name, alias in deployment.aliases.items():
            table[name] = Placement(deployment, alias.to, alias=True, hidden=alias.hidden)
    return table


def place(table: Mapping[str, _Row], model: object) -> _Row:
    """``model``'s row of a fleet table; the 400 of a missing or non-string model, the
    404 of a name no deployment serves."""
    found = table.get(model) if isinstance(model, str) else None
    if found is not None:
        return found
    raise unplaced(model)


def unplaced(model: object) -> GatewayError:
    """The error of a model a fleet cannot place: missing (400), not a string (400),
    served by no deployment (404)."""
    if model is None:
        return InvalidRequest(
            "Missing required parameter: 'model'.",
            param="model",
            code="missing_required_parameter",
        )
    if not isinstance(model, str):
        return InvalidRequest(
            "Invalid type for 'model': expected a string.", param="model", code="invalid_type"
        )
    return ModelNotFound(model)


def _standby(deployments: Sequence[Deployment], one: str, other: str) -> bool:
    """Whether ``one`` and ``other`` are a deployment and its failover (either way round):
    the only two that may serve the same name."""
    failover = {d.name: d.failover for d in deployments}
    return failover.get(one) == other or failover.get(other) == one


def primaries(deployments: Sequence[Deployment]) -> dict[str, Deployment]:
    """The deployment each served name goes to: the one that serves it and is not the
    failover of another that serves it too."""
    taken: dict[str, Deployment] = {}
    for deployment in deployments:
        for model in deployment.models:
            first = taken.get(model)
            if first is None or first.name == deployment.failover:
                taken[model] = deployment
    return taken


def fleet_problems(deployments: Sequence[Deployment]) -> list[tuple[Location, str]]:
    """What makes a fleet ambiguous or unroutable, as (key path, message): a deployment
    named twice, a name served (or aliased) twice, an alias onto a name its deployment
    does not serve, a failover that is unknown or serves other models."""
    problems: list[tuple[Location, str]] = []
    by_name: dict[str, int] = {}
    owner: dict[str, str] = {}
    for i, deployment in enumerate(deployments):
        if deployment.name in by_name:
            problems.append(((i, "name"), f"deployment {deployment.name!r} is named twice"))
        by_name.setdefault(deployment.name, i)
        for j, model in enumerate(deployment.models):
            first = owner.get(model)
            if first is not None and not _standby(deployments, first, deployment.name):
                problems.append(
                    ((i, "models", j), f"model {model!r} is already served by {first!r}")
                )
            owner.setdefault(model, deployment.name)
    for i, deployment in enumerate(deployments):
        for alias, target in deployment.aliases.items():
            where: Location = (i, "aliases", alias)
            if alias in owner and owner[alias] != f"alias of {deployment.name}":
                problems.append((where, f"{alias!r} is already a model name of {owner[alias]!r}"))
                continue
            owner[alias] = f"alias of {deployment.name}"
            if target.to not in deployment.models:
                elsewhere = owner.get(target.to)
                hint = f" (served by {elsewhere!r}: alias it there)" if elsewhere else ""
                problems.append(
                    ((*where, "to"), f"{target.to!r} is not served by {deployment.name!r}{hint}")
                )
        if deployment.failover is not None:
            where = (i, "failover")
            other = by_name.get(deployment.failover)
            if other is None:
                problems.append((where, f"no deployment is named {deployment.failover!r}"))
            elif other == i:
                problems.append((where, "a deployment cannot fail over to itself"))
            else:
                missing = set(deployment.models) - set(deployments[other].models)
                if missing:
                    problems.append(
                        (
                            where,
                            f"{deployment.failover!r} does not serve {sorted(missing)}: "
                            "failover never answers with another model",
                        )
                    )
    return problems
