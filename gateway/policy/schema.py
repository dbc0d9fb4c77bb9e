"""The JSON Schema of policy files (`ft-gateway schema`; gateway/policy.schema.json)."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from gateway.policy.file import _UNSET, SCHEMA_ID, PolicyFile


class _SchemaGenerator(GenerateJsonSchema):
    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        # ``value`` has no default, only a marker for "not given".
        if schema.get("default") is _UNSET:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)


def policy_schema() -> dict[str, Any]:
    """JSON Schema of policy files (``ft-gateway schema``)."""
    schema = PolicyFile.model_json_schema(schema_generator=_SchemaGenerator)
    defs = schema["$defs"]
    rule = defs["FieldRule"]
    rule["allOf"] = [
        {
            "if": {"properties": {"action": {"const": action}}, "required": ["action"]},
            "then": {"required": [key]},
        }
        for action, key in (("rename", "to"), ("default", "value"))
    ]
    # An overlay's rule is a patch: the same keys, none of them required.
    patch = {k: v for k, v in rule.items() if k not in ("required", "allOf", "title")}
    patch["title"] = "FieldPatch"
    patch["description"] = "Keys laid over the route's rule of the same field."
    defs["FieldPatch"] = patch
    defs["RouteOverlay"]["properties"]["fields"]["additionalProperties"] = {
        "$ref": "#/$defs/FieldPatch"
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema
