"""The policy's rules for a JSON Schema in a request, and for the answer checked against it.

A field rule's ``json_schema`` says that the field's value is a JSON Schema (chat's
``response_format.json_schema.schema``, the Responses API's ``text.format.schema``,
a tool's ``parameters``) and how it is checked: per keyword, the engine's verdict
(``keywords``, narrowed by where the keyword stands: ``types``, ``beside``,
``without``, ``values``), what a keyword the policy does not name gets
(``unknown_keywords``), the limits that keep a hostile schema from the engine, and
what ``strict: true`` beside it asks for. A route's (and an overlay's) ``answers``
says which answers are checked against what the request asked for, each ``off``,
``report`` or ``enforce``. docs/structured-outputs.md is the reference;
gateway/schemas/ does the checking.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

KeywordAction = Literal["pass", "reject"]
Enforcement = Literal["enforce", "report"]
AnswerCheck = Literal["off", "report", "enforce"]
# The JSON types a keyword's verdict can depend on (the node's ``type``).
NodeType = Literal["string", "number", "integer", "boolean", "object", "array"]
_ENFORCEMENT = (
    "'report': a schema this would refuse is forwarded, the refusal only reported; "
    "unset: as the enclosing rule"
)


class ContextRule(BaseModel):
    """A keyword's verdict where it stands in one context (a type, a sibling, a value)."""

    model_config = ConfigDict(extra="forbid")

    action: KeywordAction = Field(default="pass", description="pass: honoured; reject: a 400")
    reason: str | None = Field(default=None, description="added to the client's error message")
    enforcement: Enforcement | None = Field(default=None, description=_ENFORCEMENT)


class KeywordRule(ContextRule):
    """The engine's verdict on one JSON-Schema keyword, and where it differs."""

    types: dict[NodeType, ContextRule] | None = Field(
        default=None,
        description="by the type the schema node declares (one of a list refusing refuses)",
    )
    beside: dict[str, ContextRule] | None = Field(
        default=None, description="when the node also has this keyword (minLength beside pattern)"
    )
    without: dict[str, ContextRule] | None = Field(
        default=None, description="when the node lacks this keyword (required without properties)"
    )
    values: dict[str, ContextRule] | None = Field(
        default=None, description="by the keyword's value, when it is a string (format's)"
    )
    unknown: ContextRule = Field(
        default_factory=lambda: ContextRule(action="reject"),
        description="with 'values': the rule for a value they do not name (reject by default)",
    )


class SchemaLimits(BaseModel):
    """Bounds on a schema's size and shape (OpenAI's own limits by default); null: off."""

    model_config = ConfigDict(extra="forbid")

    max_depth: int | None = Field(
        default=10, ge=1, description="levels of nesting of the answer (OpenAI: 10)"
    )
    max_nesting: int | None = Field(
        default=64, ge=1, description="schema nodes inside one another, by any keyword"
    )
    max_nodes: int | None = Field(default=10000, ge=1, description="schema nodes in all")
    max_properties: int | None = Field(
        default=5000, ge=0, description="object properties in total (OpenAI: 5000)"
    )
    max_enum_values: int | None = Field(
        default=1000, ge=0, description="enum values across the schema (OpenAI: 1000)"
    )
    large_enum: int | None = Field(
        default=250, ge=0, description="a string enum with more values is a large one (OpenAI)"
    )
    max_large_enum_chars: int | None = Field(
        default=15000, ge=0, description="the characters a large string enum may total (OpenAI)"
    )
    max_total_chars: int | None = Field(
        default=120000,
        ge=0,
        description="property and definition names, enum and const values, in characters "
        "(OpenAI: 120,000)",
    )
    max_pattern_length: int | None = Field(
        default=1000, ge=1, description="characters of one pattern (or patternProperties key)"
    )


class JsonSchemaRules(BaseModel):
    """How a request field that holds a JSON Schema is checked, keyword by keyword."""

    model_config = ConfigDict(extra="forbid")

    keywords: dict[str, KeywordRule] = Field(
        default_factory=dict,
        description="the engine's verdict per JSON-Schema keyword, spelled as JSON Schema "
        "spells it (minLength, $ref, additionalProperties)",
    )
    unknown_keywords: KeywordAction = Field(
        default="reject",
        description="a JSON-Schema keyword 'keywords' does not name (annotations such as "
        "title and description, and words that are not JSON-Schema keywords, always pass)",
    )
    limits: SchemaLimits = Field(default_factory=SchemaLimits)
    strict: Literal["openai", "none"] = Field(
        default="openai",
        description="with strict: true beside the schema: 'openai': it must be in OpenAI's "
        "strict subset, as OpenAI refuses one that is not; 'none': no further check",
    )


class AnswerChecks(BaseModel):
    """Which answers are checked against the request (off, report or enforce); a key left
    out is off, and an overlay's keys are laid over the route's one by one."""

    model_config = ConfigDict(extra="forbid")

    schema_: AnswerCheck | None = Field(
        default=None,
        alias="schema",
        description="a finished answer's content against response_format / text.format "
        "(json_schema: its schema; json_object: a JSON object)",
    )
    tool_arguments: AnswerCheck | None = Field(
        default=None, description="each tool call's arguments against its tool's parameters"
    )
    tool_choice: AnswerCheck | None = Field(
        default=None,
        description="tool_choice 'required' or a named function answered without that call",
    )
    parallel_tool_calls: AnswerCheck | None = Field(
        default=None, description="parallel_tool_calls: false answered with several calls"
    )

    @field_validator("*", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        # YAML 1.1 (PyYAML) reads an unquoted ``off`` as false: it means "off" here.
        return "off" if value is False else value


# The answer checks by their names in the file (AnswerChecks' keys).
ANSWER_CHECKS = ("schema", "tool_arguments", "tool_choice", "parallel_tool_calls")
