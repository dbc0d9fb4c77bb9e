"""bench/request_cost.py: runs, and an embeddings call (16 inputs, a 1,536-wide float
answer) holds its answer's bytes while answering, not its parse."""

from __future__ import annotations

import orjson
import pytest

from bench import request_cost
from bench.fake_engine import embeddings_body


def test_prints_a_row_per_kind_with_the_answer_held_not_its_parse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert request_cost.main(["--number", "3", "--cpu-number", "3"]) == 0
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()[2:]
    ]
    assert [row[0] for row in rows] == ["chat json", "embeddings json"]
    chat, embeddings = ({"answering": int(r[2]), "peak": int(r[3])} for r in rows)
    answer = len(orjson.dumps(embeddings_body()))
    assert answer <= embeddings["answering"] < 2 * answer  # the parsed floats let go
    assert chat["answering"] < answer // 10
    assert embeddings["peak"] > embeddings["answering"]
