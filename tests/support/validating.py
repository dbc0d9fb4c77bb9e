"""Validating answers against JSON Schemas in tests: jsonschema with every format of
OpenAI's strict subset asserted (its own checkers, plus date-time, duration and
hostname from the standard library where jsonschema needs optional packages)."""

from __future__ import annotations

import datetime
import functools
import json
import re
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker

_DURATION = re.compile(
    r"P(?:\d+W|(?=\d|T\d)(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+S)?)?)"
)
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)")

# The 2020-12 checkers (the plain FormatChecker() keeps draft 3's "time", without an
# offset), with the ones that need optional packages written here.
CHECKER = FormatChecker(formats=())
CHECKER.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)


def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _DATE_TIME.fullmatch(value):
        return False
    try:
        datetime.datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _time(value: object) -> bool:
    return not isinstance(value, str) or _date_time("1970-01-01T" + value)


def _duration(value: object) -> bool:
    return not isinstance(value, str) or bool(_DURATION.fullmatch(value))


def _hostname(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return len(value) <= 253 and all(_LABEL.fullmatch(p) for p in value.split("."))


CHECKER.checkers.update(
    {
        "date-time": (_date_time, ()),
        "time": (_time, ()),
        "duration": (_duration, ()),
        "hostname": (_hostname, ()),
    }
)


def validator(schema: Any) -> Any:
    """A validator of ``schema`` (draft 2020-12 unless it says otherwise) asserting formats."""
    return _validator(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _validator(text: str) -> Any:
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=CHECKER)


def errors(schema: Any, value: Any) -> list[str]:
    """What is wrong with ``value`` under ``schema``: each error's path and message."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in validator(schema).iter_errors(value)
    ]
