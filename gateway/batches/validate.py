"""A batch's input file checked as OpenAI checks it, before any line is sent.

Each line must be a JSON object with a ``custom_id`` (a string, unique in the
file), ``method`` POST, a ``url`` equal to the batch's endpoint and a ``body``
(a JSON object, not a stream). A file with any line that is not so fails
validation: the batch goes to ``failed`` with one error per such line, each
naming its line number (1 is the first). A well-formed line's body is then put
to ``judge``: the answer the live route would give it before any engine sees
it (its model's deployment, that deployment's policy). A line it refuses is
not a malformed file: it is kept with its refusal, which becomes its line of
the error file, and it is never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.batches.objects import batch_error
from gateway.errors import GatewayError

# Errors listed for a failed file at most (the first ones, by line).
MAX_ERRORS = 1000
Judge = Callable[[dict[str, Any]], GatewayError | None]


@dataclass(slots=True)
class Line:
    """One well-formed request of a batch."""

    number: int  # its line in the file, from 1
    custom_id: str
    body: dict[str, Any]
    refusal: GatewayError | None = None  # the live route's answer without the engine


@dataclass(slots=True)
class Checked:
    """A file's lines, or why it fails validation."""

    lines: list[Line]
    errors: list[dict[str, Any]]


def _problem(number: int, entry: Any, endpoint: str) -> tuple[str, str, str | None] | None:
    """(code, message, param) of what is wrong with a parsed line, or None."""
    if not isinstance(entry, dict):
        return "invalid_json_line", "This line is not a JSON object.", None
    custom_id = entry.get("custom_id")
    if custom_id is None:
        return "missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id"
    if not isinstance(custom_id, str) or not custom_id:
        return "invalid_type", "Invalid 'custom_id': expected a non-empty string.", "custom_id"
    method = entry.get("method")
    if method != "POST":
        return (
            "invalid_method",
            f"Invalid 'method': {orjson.dumps(method).decode()}. Only POST is supported.",
            "method",
        )
    url = entry.get("url")
    if url != endpoint:
        return (
            "url_mismatch",
            f"The URL of this request ({orjson.dumps(url).decode()}) does not match the "
            f"batch's endpoint ({endpoint}).",
            "url",
        )
    body = entry.get("body")
    if body is None:
        return "missing_required_parameter", "Missing required parameter: 'body'.", "body"
    if not isinstance(body, dict):
        return "invalid_type", "Invalid 'body': expected a JSON object.", "body"
    if body.get("stream") is True:
        return (
            "invalid_value",
            "A batch request cannot stream: remove 'stream' or set it to false.",
            "body.stream",
        )
    return None


def check_file(content: bytes, *, endpoint: str, max_lines: int, judge: Judge) -> Checked:
    """The lines of ``content`` (JSONL) for a batch of ``endpoint``, each judged, or the
    errors that fail the file."""
    raw = content.split(b"\n")
    if raw and not raw[-1].strip():
        raw.pop()  # the file's last newline ends a line; it starts none
    if not raw:
        return Checked([], [batch_error("empty_file", "The input file has no requests.")])
    if len(raw) > max_lines:
        message = f"The input file has {len(raw)} requests; a batch takes at most {max_lines}."
        return Checked([], [batch_error("too_many_tasks", message)])
    lines: list[Line] = []
    errors: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(raw, start=1):
        try:
            entry = orjson.loads(text)
        except orjson.JSONDecodeError:
            errors.append(
                batch_error(
                    "invalid_json_line", "This line is not parseable as valid JSON.", line=number
                )
            )
            continue
        problem = _problem(number, entry, endpoint)
        if problem is None and entry["custom_id"] in seen:
            problem = (
                "duplicate_custom_id",
                f"The custom_id '{entry['custom_id']}' is also the custom_id of line "
                f"{seen[entry['custom_id']]}: each request of a batch needs its own.",
                "custom_id",
            )
        if problem is not None:
            errors.append(batch_error(problem[0], problem[1], line=number, param=problem[2]))
            continue
        seen[entry["custom_id"]] = number
        if not errors:  # once the file fails, its bodies are not worth judging
            lines.append(Line(number, entry["custom_id"], entry["body"]))
    if errors:
        return Checked([], errors[:MAX_ERRORS])
    for line in lines:
        line.refusal = judge(line.body)
    return Checked(lines, [])


def models_of(lines: list[Line]) -> str | None:
    """The batch's ``model``: the one model every line names, else None."""
    models = {line.body.get("model") for line in lines}
    if len(models) == 1:
        (model,) = models
        return model if isinstance(model, str) else None
    return None
