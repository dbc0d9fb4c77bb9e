"""What checking an answer against its JSON Schema costs, per validator library.

``python -m bench.validator_cost [--rounds N] [--number N]``

The answer checks (docs/structured-outputs.md) validate each finished answer's
content, and each tool call's arguments, against the schema the request gave. The
candidates are the well-kept validators on PyPI: ``jsonschema`` (pure Python, the
reference implementation), ``fastjsonschema`` (compiles a schema to Python code;
drafts 4 to 7 only) and ``jsonschema-rs`` (Rust). For a typical schema (what
pydantic writes for a small model: nested object, an array of objects, an enum, an
optional field as ``anyOf`` with null, a pattern, a format, bounds) the table gives,
per library, interleaved round by round so that a noisy machine slows all alike:

- ``compile``: building the validator from the schema (paid once per distinct schema
  while the gateway's cache keeps it);
- ``valid``: checking an answer that conforms (the common case: what every answer
  with a schema pays);
- ``invalid``: finding the first error of one that does not, with its paths;
- ``metaschema``: checking the schema itself against the 2020-12 metaschema (the
  request side, once per request with a schema).

Then the gateway's own steps with the library it uses: ``answer check``, a whole chat
answer through ``check_chat`` (its content parsed, the validator found in the cache,
checked: what an answer costs when ``answers.schema`` is on); ``request check``, the
schema through its rule's SchemaCheck, the first time (``compile``: limits,
metaschema, references, the validator's build, keywords) and then from its cache
(``valid``: the schema's text as the key).

The JSON text of the answer is parsed once (orjson) outside the timing: every
library is given the same parsed value.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from importlib.metadata import version
from typing import Any

import fastjsonschema
import jsonschema
import jsonschema_rs
import orjson

from bench.table import format_number, markdown
from gateway.schemas.answers import check_chat
from gateway.schemas.check import SchemaCheck
from gateway.schemas.expect import Answers, Expectation
from gateway.schemas.rules import JsonSchemaRules

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"type": "string", "enum": ["admin", "editor", "viewer"]},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "postcode": {"type": "string", "pattern": "^[0-9]{5}$"},
        "addresses": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"},
                    "country": {"type": "string", "enum": ["DE", "FR", "US"]},
                },
                "required": ["street", "city", "country"],
                "additionalProperties": False,
            },
        },
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["name", "email", "age", "role", "nickname", "postcode", "addresses", "score"],
    "additionalProperties": False,
}
VALID: dict[str, Any] = {
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "age": 36,
    "role": "editor",
    "nickname": None,
    "postcode": "10115",
    "addresses": [
        {"street": "Unter den Linden 1", "city": "Berlin", "country": "DE"},
        {"street": "1 Rue de Rivoli", "city": "Paris", "country": "FR"},
    ],
    "score": 0.82,
}
INVALID: dict[str, Any] = {**VALID, "addresses": [{**VALID["addresses"][0], "country": "XX"}]}


def _jsonschema_compile() -> Callable[[Any], Any]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return lambda value: next(validator.iter_errors(value), None)


def _fastjsonschema_compile() -> Callable[[Any], Any]:
    check = fastjsonschema.compile(SCHEMA)

    def first(value: Any) -> Any:
        try:
            check(value)
        except fastjsonschema.JsonSchemaValueException as exc:
            return exc
        return None

    return first


def _rs_compile() -> Callable[[Any], Any]:
    validator = jsonschema_rs.validator_for(SCHEMA)
    return lambda value: next(iter(validator.iter_errors(value)), None)


def _rs_fast_compile() -> Callable[[Any], Any]:
    # What the gateway does: is_valid first (no error objects made), errors only then.
    validator = jsonschema_rs.validator_for(SCHEMA)

    def first(value: Any) -> Any:
        return None if validator.is_valid(value) else next(iter(validator.iter_errors(value)))

    return first


LIBRARIES: dict[str, Callable[[], Callable[[Any], Any]]] = {
    f"jsonschema {version('jsonschema')}": _jsonschema_compile,
    f"fastjsonschema {version('fastjsonschema')}": _fastjsonschema_compile,
    f"jsonschema-rs {version('jsonschema-rs')} (iter_errors)": _rs_compile,
    f"jsonschema-rs {version('jsonschema-rs')} (is_valid, then errors)": _rs_fast_compile,
}
METASCHEMA: dict[str, Callable[[], Any]] = {
    "jsonschema (metaschema)": lambda: jsonschema.Draft202012Validator.check_schema(SCHEMA),
    "jsonschema-rs (metaschema)": lambda: jsonschema_rs.meta.validate(SCHEMA),
}


def _gateway_steps() -> dict[str, Callable[[], Any]]:
    expect = Expectation(
        Answers(schema="enforce"), SCHEMA, "response_format.json_schema.schema", {}, None,
        False, False,
    )  # fmt: skip
    message = {"role": "assistant", "content": orjson.dumps(VALID).decode()}
    answer = {"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    rules = JsonSchemaRules(unknown_keywords="pass")
    kept = SchemaCheck(rules)
    where = "response_format.json_schema.schema"
    return {
        "answer check": lambda: check_chat(expect, answer),
        "request check": lambda: kept.refusals(SCHEMA, where, {"name": "person"}),
        "request check, first time": lambda: SchemaCheck(rules).refusals(
            SCHEMA, where, {"name": "person"}
        ),
    }


def _per_call(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number * 1e6


def measure(rounds: int, number: int) -> dict[str, dict[str, list[float]]]:
    """Microseconds per call, per library and step, one list entry per round."""
    steps = _gateway_steps()
    times: dict[str, dict[str, list[float]]] = {
        name: {} for name in [*LIBRARIES, *METASCHEMA, "gateway (jsonschema-rs)"]
    }
    checks = {name: make() for name, make in LIBRARIES.items()}
    for name, check in checks.items():
        if check(VALID) is not None or check(INVALID) is None:
            raise SystemExit(f"{name} decides the sample answers wrongly")
    for _ in range(rounds):
        for name, make in LIBRARIES.items():
            check = checks[name]
            row = times[name]
            row.setdefault("compile", []).append(_per_call(make, max(1, number // 20)))
            for step, sample in (("valid", VALID), ("invalid", INVALID)):
                row.setdefault(step, []).append(_per_call(partial(check, sample), number))
        for name, fn in METASCHEMA.items():
            times[name].setdefault("metaschema", []).append(_per_call(fn, max(1, number // 10)))
        row = times["gateway (jsonschema-rs)"]
        row.setdefault("answer check", []).append(_per_call(steps["answer check"], number))
        row.setdefault("request check", []).append(_per_call(steps["request check"], number))
        first = _per_call(steps["request check, first time"], max(1, number // 20))
        row.setdefault("request check, first time", []).append(first)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.validator_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=2000, help="calls per step and round")
    args = parser.parse_args(argv)
    times = measure(args.rounds, args.number)
    steps = (
        "compile", "valid", "invalid", "metaschema", "answer check", "request check",
        "request check, first time",
    )  # fmt: skip
    rows = [["library", *(f"{s} (us, median)" for s in steps)]]
    for name, row in times.items():
        cells = [format_number(statistics.median(row[s])) if s in row else "-" for s in steps]
        rows.append([name, *cells])
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
