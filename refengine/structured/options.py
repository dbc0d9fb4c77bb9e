"""What the reference engine does with structured outputs and tools: the flags.

Off (the default) it is ft serve: ``response_format``, ``tools``, ``tool_choice`` and
``parallel_tool_calls`` are accepted and ignored. On, it honours them as an engine with
a grammar backend does, and each defect flag reproduces a way real engines fall short
(shared/STRUCTURED-OUTPUTS.md sections 3, 6 and 8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refengine.structured.schema import SchemaRules


@dataclass(frozen=True)
class StructuredOptions:
    """``response_format``: honour json_object and json_schema; ``tools``: honour tools,
    tool_choice and parallel_tool_calls; ``schema``: what the converter drops, refuses or
    crashes on; the rest are defects, each off by default."""

    response_format: bool = False
    tools: bool = False
    schema: SchemaRules = field(default_factory=SchemaRules)
    prose_for_required: bool = False  # tool_choice required: prose, labelled tool_calls
    ignore_named_choice: bool = False  # a named function: taken as auto (llama.cpp)
    ignore_parallel_false: bool = False  # parallel_tool_calls false: several calls anyway
    ignore_choice_none: bool = False  # tool_choice none: taken as auto
    json_whitespace: bool = False  # JSON mode with no "JSON" in the messages: whitespace

    @property
    def enabled(self) -> bool:
        """Whether any of it is on (off: the fields are ignored, as ft serve ignores them)."""
        return self.response_format or self.tools
