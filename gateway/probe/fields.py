"""What the probe knows of each request field before measuring: the type and range
checks of the OpenAI spec (the same as policies/ft-serve.yaml), the neutral values
(shared/OPENAI-FIELDS.md), and the rules for the fields it does not probe."""

from __future__ import annotations

from typing import Any

from gateway.probe.route import CHAT, COMPLETIONS

Rule = dict[str, Any]

_INT64: Rule = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
_NUMBER_ZERO = [0, 0.0]

# Per probed field: its value checks, plus the neutral values a "reject" rule lets
# through. Floats and integers differ in the policy's JSON comparison, so numeric
# neutrals are listed both ways.
_SAMPLING: dict[str, Rule] = {
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
    "top_k": {"type": "integer", "minimum": -1, "neutral": [-1, 0]},
    "min_p": {"type": "number", "minimum": 0, "maximum": 1, "neutral": _NUMBER_ZERO},
    "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2, "neutral": _NUMBER_ZERO},
    "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2, "neutral": _NUMBER_ZERO},
    "repetition_penalty": {"type": "number", "minimum": 0, "maximum": 10, "neutral": [1, 1.0]},
    "stop": {
        "type": ["string", "array"],
        "max_items": 4,
        "items": {"type": "string", "nullable": False},
    },
    "max_tokens": {"type": "integer", "minimum": 1},
    "seed": _INT64,
    "stream": {"type": "boolean", "neutral": [False]},
    "stream_options": {"type": "object", "requires": {"stream": True}},
    "logit_bias": {
        "type": "object",
        "values": {"type": "integer", "minimum": -100, "maximum": 100, "nullable": False},
        "neutral": [{}],
    },
    "n": {"type": "integer", "minimum": 1, "maximum": 128, "neutral": [1]},
}

# A tool definition's function, as policies/ft-serve.yaml checks it.
_FUNCTION: Rule = {
    "action": "pass",
    "type": "object",
    "required": True,
    "fields": {
        "name": {
            "action": "pass",
            "type": "string",
            "required": True,
            "pattern": "[a-zA-Z0-9_-]{1,64}",
        },
        "description": {"action": "pass", "type": "string"},
        # The tools are refused until probed (structured_rules.py writes them then).
        "parameters": {"action": "pass", "type": "object"},
        "strict": {"action": "pass", "type": "boolean"},
    },
}

PROBED: dict[str, dict[str, Rule]] = {
    CHAT: {
        **_SAMPLING,
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "logprobs": {"type": "boolean", "neutral": [False]},
        "top_logprobs": {
            "type": "integer",
            "minimum": 0,
            "maximum": 20,
            "requires": {"logprobs": True},
        },
        "response_format": {"type": "object", "neutral": [{"type": "text"}]},
    },
    # On completions logprobs is an integer and 0 still returns the chosen token's
    # log-probability: only null is neutral.
    COMPLETIONS: {**_SAMPLING, "logprobs": {"type": "integer", "minimum": 0, "maximum": 5}},
}

# Fields the probe does not measure, in groups with the comment written above each.
UNPROBED: dict[str, list[tuple[str, dict[str, Rule]]]] = {
    CHAT: [
        (
            "The request itself.",
            {
                "model": {"action": "pass", "type": "string", "required": True},
                # messages: written by message_rules.py, from the checks inside them.
            },
        ),
        (
            "Not probed: thinking on/off for Qwen-style chat templates, passed as it comes.",
            {"chat_template_kwargs": {"action": "pass", "type": "object"}},
        ),
        (
            "Not probed: tool calling and other generation features; their neutral values "
            "pass. Flip a rule once the engine is known to implement the feature.",
            {
                # The definitions are checked the way OpenAI checks them, so the rule is
                # ready the day the action becomes pass.
                "tools": {
                    "action": "reject",
                    "type": "array",
                    "neutral": [[]],
                    "select": {
                        "key": "type",
                        "rules": {"function": {"fields": {"function": _FUNCTION}}},
                        "unknown": {"action": "reject"},
                    },
                },
                "tool_choice": {
                    "action": "reject",
                    "type": ["string", "object"],
                    "neutral": ["none"],
                },
                "parallel_tool_calls": {"action": "reject", "type": "boolean", "neutral": [True]},
                "functions": {"action": "reject", "type": "array", "neutral": [[]]},
                "function_call": {
                    "action": "reject",
                    "type": ["string", "object"],
                    "neutral": ["none"],
                },
                "modalities": {"action": "reject", "type": "array", "neutral": [["text"]]},
                "audio": {"action": "reject", "type": "object"},
                "prediction": {"action": "reject", "type": "object"},
                "web_search_options": {"action": "reject", "type": "object"},
                "reasoning_effort": {"action": "reject", "type": "string"},
                "verbosity": {"action": "reject", "type": "string"},
            },
        ),
        (
            "Bookkeeping fields with no effect on the text: removed before forwarding.",
            {
                name: {"action": "strip"}
                for name in (
                    "user",
                    "safety_identifier",
                    "metadata",
                    "store",
                    "prompt_cache_key",
                    "service_tier",
                )
            },
        ),
    ],
    COMPLETIONS: [
        (
            "The request itself.",
            {
                "model": {"action": "pass", "type": "string", "required": True},
                "prompt": {"action": "pass", "type": ["string", "array"], "required": True},
            },
        ),
        (
            "Not probed: completions-only features; their neutral values pass.",
            {
                "best_of": {
                    "action": "reject",
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 20,
                    "neutral": [1],
                },
                "echo": {"action": "reject", "type": "boolean", "neutral": [False]},
                "suffix": {"action": "reject", "type": "string"},
            },
        ),
        ("Bookkeeping: removed before forwarding.", {"user": {"action": "strip"}}),
    ],
}
