"""gateway/policy/values.py: the words of a length error, as OpenAI writes them (the
cases are in tests/fixtures/errors/length.yaml)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gateway.policy.values import ValueSpec
from tests.support.paths import FIXTURES

LENGTH_ERRORS: list[dict[str, Any]] = yaml.safe_load(
    (FIXTURES / "errors" / "length.yaml").read_text()
)


@pytest.mark.parametrize("case", LENGTH_ERRORS, ids=lambda case: case["code"])
def test_a_length_out_of_bounds_is_named_in_openais_words(case: dict[str, Any]) -> None:
    problem = ValueSpec.model_validate(case["spec"]).check(case["value"], "f")
    assert problem is not None
    assert (problem.message, problem.code, problem.param) == (case["message"], case["code"], "f")


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ({"type": "string", "min_length": 1, "max_length": 2}, "ab"),
        ({"type": "array", "min_items": 1, "max_items": 2}, [1, 2]),
    ],
)
def test_a_length_within_bounds_passes(spec: dict[str, Any], value: Any) -> None:
    assert ValueSpec.model_validate(spec).check(value, "f") is None
