"""The policy file's data model (pydantic; exported as JSON Schema by schema.py).

A policy names, per route, what the gateway does with each request field:

    pass     forward after type and range checks
    reject   400 unless the value is one of the field's ``neutral`` values
    strip    remove before forwarding (counted)
    rename   forward under another name (``to``), after checks
    default  set ``value`` when the field is absent; checked like ``pass`` when present
    fanout   (``n`` only) ask the engine ``n`` times and merge the answers

Rules reach inside values too: ``fields`` holds the rules of an object's keys
(``unknown_fields`` for the keys it does not name), and ``select`` chooses a
rule for each member of an array (or for an object) by the value of one of its
keys: the messages of a chat request by ``role``, their content parts by
``type``; ``token_ids`` is the rule of an embeddings input given as token ids
rather than text; ``json_schema`` says the value is a JSON Schema and how it is
checked (gateway/schemas/rules.py). A chosen rule has the same actions: ``rename`` changes the key's
value (``developer`` -> ``system``), ``strip`` drops the member.

``unknown_fields`` says what happens to fields the route does not name. ``models``
and ``profiles`` hold overlays: partial field rules merged over the route's rules
for one model name, or for clients whose API key names the profile. A route's
``answers`` says which answers are checked against the request (gateway/schemas/rules.py).

``enforcement: report`` (on a rule, a route, an overlay or the whole policy; the
most specific one wins, a rule's holds for everything inside its value) makes
refusals reports: the request goes on as if the rule were absent. Reading a
file and reporting its problems is loading.py's work; compiled.py turns the
rules into what the walk reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.policy.values import ValueSpec, json_equal
from gateway.routes import ROUTE_NAMES as ROUTES
from gateway.schemas.rules import AnswerChecks, JsonSchemaRules

Action = Literal["pass", "reject", "strip", "rename", "default", "fanout"]
UnknownAction = Literal["reject", "strip", "pass"]
# enforce: a refusal is the client's 400; report: the request goes on as if the
# rule were absent, and the would-be refusal is counted, logged and traced.
Enforcement = Literal["enforce", "report"]
_ENFORCEMENT = (
    "'report': a request this would refuse is forwarded, the refusal only reported "
    "(metric, access log, span); unset: as the enclosing rule, route or policy"
)
if TYPE_CHECKING:
    RouteName = str
else:
    # The routes' table, as a Literal: the schema's enum and the loader's "Input should
    # be ..." message name every route there is.
    RouteName = Literal[ROUTES]
SCHEMA_ID = "https://ft-gateway.dev/schema/policy-v1.json"

_UNSET: Any = object()


class FieldRule(ValueSpec):
    """What the gateway does with one request field."""

    action: Action
    required: bool = Field(default=False, description="400 when the field is absent or null")
    neutral: list[Any] = Field(
        default_factory=list,
        description="values that mean 'not asked for'; accepted even when action is reject "
        "(null is always neutral for a nullable field)",
    )
    drop_neutral: bool = Field(
        default=False, description="remove a neutral value instead of forwarding it"
    )
    to: str | None = Field(default=None, description="rename: the name the engine expects")
    value: Any = Field(default=_UNSET, description="default: the value set when absent")
    requires: dict[str, Any] | None = Field(
        default=None,
        description="when set (and not neutral), these other fields must have these values",
    )
    reason: str | None = Field(default=None, description="added to the client's error message")
    enforcement: Enforcement | None = Field(default=None, description=_ENFORCEMENT)
    fields: dict[str, FieldRule] | None = Field(
        default=None, description="an object value: the rules of its keys"
    )
    unknown_fields: UnknownAction = Field(
        default="reject", description="with 'fields': what to do with keys they do not name"
    )
    select: Select | None = Field(
        default=None,
        description="an array of objects (or an object): a rule for each, chosen by one key's "
        "value",
    )
    token_ids: MemberRule | None = Field(
        default=None,
        description="an embeddings 'input' given as token ids (an array of integers, or of "
        "integer arrays): its own rule, e.g. reject, since ids minted by another tokenizer "
        "embed other text",
    )
    json_schema: JsonSchemaRules | None = Field(
        default=None,
        description="the value is a JSON Schema (a response format's, a tool's parameters): "
        "checked keyword by keyword against what the engine honours, within limits",
    )

    @model_validator(mode="after")
    def _action_keys(self) -> FieldRule:
        if self.action == "rename" and not self.to:
            raise ValueError("action 'rename' needs 'to'")
        if self.action != "rename" and self.to is not None:
            raise ValueError("'to' is only for action 'rename'")
        if self.action == "default" and self.value is _UNSET:
            raise ValueError("action 'default' needs 'value'")
        if self.action != "default" and self.value is not _UNSET:
            raise ValueError("'value' is only for action 'default'")
        if self.token_ids is not None and self.token_ids.action not in ("pass", "reject"):
            raise ValueError("'token_ids' takes action 'pass' or 'reject'")
        return self

    @property
    def has_value(self) -> bool:
        return self.value is not _UNSET

    def is_neutral(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        return any(json_equal(value, n) for n in self.neutral)


class MemberRule(FieldRule):
    """The rule a ``select`` chooses for one member: a FieldRule whose action is
    ``pass`` unless it says otherwise."""

    action: Action = "pass"


class Select(BaseModel):
    """Rules for the members of an array, or for an object, chosen by one key's value."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="the key whose value chooses the rule, e.g. 'role' or 'type'")
    rules: dict[str, MemberRule] = Field(
        default_factory=dict, description="the rule for each value of the key"
    )
    unknown: MemberRule = Field(
        default_factory=lambda: MemberRule.model_validate({"action": "reject"}),
        description="the rule for a value that 'rules' does not name (reject by default)",
    )
    absent: str | None = Field(
        default=None,
        description="the key's value to choose by when a member lacks the key (e.g. a "
        "Responses input item without 'type' is a 'message'); unset: the key is required",
    )


SeedGuarantee = Literal["under_load", "alone_only", "ignored"]


class Guarantees(BaseModel):
    """What the engine was measured to guarantee on a route (``ft-gateway probe`` writes
    it); the answers' ``system_fingerprint`` carries it."""

    model_config = ConfigDict(extra="forbid")

    seed: SeedGuarantee | None = Field(
        default=None,
        description="under_load: a seed replays whatever shares the batch; alone_only: "
        "only for a request alone; ignored: never",
    )


class RoutePolicy(BaseModel):
    """The rules of one route."""

    model_config = ConfigDict(extra="forbid")

    unknown_fields: UnknownAction | None = Field(
        default=None, description="overrides the policy-wide rule for this route"
    )
    enforcement: Enforcement | None = Field(default=None, description=_ENFORCEMENT)
    guarantees: Guarantees = Field(default_factory=Guarantees)
    answers: AnswerChecks = Field(
        default_factory=AnswerChecks,
        description="the answers checked against what the request asked (off by default)",
    )
    fields: dict[str, FieldRule] = Field(default_factory=dict)


class RouteOverlay(BaseModel):
    """Partial rules laid over a route's rules: each key replaces that key of the base rule."""

    model_config = ConfigDict(extra="forbid")

    unknown_fields: UnknownAction | None = None
    enforcement: Enforcement | None = Field(default=None, description=_ENFORCEMENT)
    answers: AnswerChecks = Field(
        default_factory=AnswerChecks, description="answer checks laid over the route's"
    )
    fields: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Overlay(BaseModel):
    """Overlays by route, for a model or a client profile."""

    model_config = ConfigDict(extra="forbid")

    enforcement: Enforcement | None = Field(
        default=None, description="the enforcement of every route this overlay applies to"
    )
    answers: AnswerChecks = Field(
        default_factory=AnswerChecks,
        description="answer checks laid over those of every route this overlay applies to",
    )
    routes: dict[str, RouteOverlay] = Field(default_factory=dict)


class PolicyFile(BaseModel):
    """A field policy file."""

    model_config = ConfigDict(extra="forbid", title="ft-gateway field policy")

    version: Literal[1] = 1
    description: str | None = None
    unknown_fields: UnknownAction = Field(
        default="reject", description="what to do with fields a route does not name"
    )
    enforcement: Enforcement = Field(
        default="enforce",
        description="'report': every refusal is only reported (a policy on trial); rules, "
        "routes and overlays may say otherwise",
    )
    routes: dict[RouteName, RoutePolicy]
    models: dict[str, Overlay] = Field(
        default_factory=dict, description="per-model overlays, by the request's 'model'"
    )
    profiles: dict[str, Overlay] = Field(
        default_factory=dict, description="named overlays that an API key can select"
    )


def merge_rule(base: FieldRule | None, patch: dict[str, Any]) -> FieldRule:
    """Lay an overlay's partial rule over a base rule; raises ValidationError."""
    data = base.model_dump(exclude_unset=True) if base is not None else {}
    if base is not None and base.has_value and "value" not in data:
        data["value"] = base.value
    if "action" in patch and patch["action"] != "rename":
        data.pop("to", None)
    if "action" in patch and patch["action"] != "default":
        data.pop("value", None)
    data.update(patch)
    return FieldRule.model_validate(data)
