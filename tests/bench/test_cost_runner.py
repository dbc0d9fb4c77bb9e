"""The cost runner (bench/cost/): the registry, the options, how each kind of figure is
taken, the table with its ratios, differences and sums, the JSON, and the comparison
with another checkout; on toy scenarios, whose figures are known."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.cost import registry, runner
from bench.cost.measure import FIGURES, figure, measure, medians, ratios
from bench.cost.report import Result, beside, table
from bench.cost.scenario import Case, Context, Scenario, cases
from tests.support.paths import ROOT
from tests.support.tables import first_cells

pytestmark = pytest.mark.anyio


def _leaf(n: int) -> int:
    return n + 1


def _two_calls() -> int:
    return _leaf(1) + _leaf(2) + len("ab")


def test_every_registered_scenario_loads_under_its_own_name() -> None:
    names = [entry.name for entry in registry.ENTRIES]
    assert len(set(names)) == len(names)
    for name in names:
        scenario = registry.load(name)
        assert scenario.name == name and scenario.title
        for key in (*scenario.compare, *scenario.added):
            assert key in scenario.figures, (name, key)
        for _, parts in scenario.sums:
            assert parts


def test_scenarios_are_chosen_by_name_prefix_or_all() -> None:
    assert registry.select(["fanout"]) == ["fanout"]
    assert registry.select(["limit"]) == ["limits", "limiter"]
    assert registry.select(["all"]) == [entry.name for entry in registry.ENTRIES]
    with pytest.raises(ValueError, match="unknown scenario"):
        registry.select(["nope"])


def test_options_take_their_defaults_type() -> None:
    scenario = Scenario(
        "toy", "t", cases(lambda ctx: []), options={"n": 3, "on": False, "path": Path("/a")}
    )
    assert runner.options_for(scenario, {}) == {"n": 3, "on": False, "path": Path("/a")}
    chosen = runner.options_for(scenario, {"n": "5", "on": "yes", "path": "/b", "other": "x"})
    assert chosen == {"n": 5, "on": True, "path": Path("/b")}
    with pytest.raises(ValueError):
        runner.options_for(scenario, {"n": "five"})
    with pytest.raises(ValueError, match="not a boolean"):
        runner.options_for(scenario, {"on": "maybe"})


def test_an_option_no_chosen_scenario_has_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="--set colour: no scenario chosen has it"):
        runner.main(["model-lookup", "--set", "colour=red"])
    with pytest.raises(SystemExit):
        runner.main(["model-lookup", "--rounds", "0"])
    with pytest.raises(SystemExit):
        runner.main(["model-lookup", "--number", "0"])


def test_without_a_scenario_the_runner_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main([]) == 0
    rows = first_cells(capsys.readouterr().out)
    assert rows == ["scenario", *(entry.name for entry in registry.ENTRIES)]


def _toy(**kwargs: Any) -> Scenario:
    return Scenario("toy", "a toy", cases(lambda ctx: []), **kwargs)


async def test_counts_are_the_measured_calls_own_less_its_callable() -> None:
    scenario = _toy(figures=("calls", "builtin", "opcodes"))
    found = await measure(scenario, [Case("two", _two_calls)], rounds=3, number=5)
    # _leaf twice (not _two_calls itself); len (not the setprofile that ends the count).
    assert (found["two"]["calls"], found["two"]["builtin"]) == ([2.0], [1.0])
    one = await measure(scenario, [Case("one", lambda: _leaf(1))], rounds=1, number=5)
    assert 0 < one["one"]["opcodes"][0] < found["two"]["opcodes"][0]


async def test_times_are_one_value_a_round_and_async_calls_are_awaited() -> None:
    calls: list[str] = []

    async def slow() -> None:
        calls.append("slow")
        await asyncio.sleep(0)

    scenario = _toy(figures=("p50_us", "wall_us", "cpu_us"), warmup=4)
    found = await measure(
        scenario, [Case("fast", lambda: calls.append("fast")), Case("slow", slow, share=2)],
        rounds=3, number=10,
    )  # fmt: skip
    assert {k: len(v) for k, v in found["slow"].items()} == {"p50_us": 3, "wall_us": 3, "cpu_us": 3}
    # 4 warm-up calls, then 10 a round (slow: 2 warm-up, 5 a round), rounds interleaved.
    assert calls.count("fast") == 4 + 30 and calls.count("slow") == 2 + 15
    assert all(v >= 0 for v in found["fast"]["wall_us"])


async def test_a_tally_counts_per_call_and_finish_runs_each_round() -> None:
    seen = {"n": 0, "flushed": 0}

    def call() -> None:
        seen["n"] += 2

    def finish() -> None:
        seen["flushed"] += 1

    case = Case("c", call, tally=lambda: float(seen["n"]), finish=finish)
    found = await measure(_toy(figures=("tally",)), [case], rounds=4, number=7)
    assert found["c"]["tally"] == [2.0] * 4 and seen["flushed"] == 4


async def test_memory_is_what_a_call_allocated_and_kept() -> None:
    kept: list[bytes] = []

    def call() -> dict[str, int]:
        kept.append(b"x" * 100_000)
        return {}

    found = await measure(_toy(figures=("peak", "kept")), [Case("m", call)], rounds=1, number=3)
    assert found["m"]["kept"][0] >= 100_000 and found["m"]["peak"][0] >= 100_000


async def test_a_call_may_report_its_own_figures() -> None:
    async def run() -> dict[str, float]:
        return {"lines_per_s": 7.0, "ignored": 1.0}

    scenario = _toy(figures=("lines_per_s",), warmup=0, rounds=2, number=1)
    found = await measure(scenario, [Case("r", run)], rounds=2, number=1)
    assert found["r"]["lines_per_s"] == [7.0, 7.0] and "ignored" not in found["r"]
    assert figure("lines_per_s").kind == "reported" and FIGURES["cpu_us"].kind == "time"


def test_ratios_are_paired_round_by_round_and_sums_add_rows() -> None:
    samples = {"a": {"cpu_us": [10.0, 20.0, 30.0]}, "b": {"cpu_us": [5.0, 20.0, 10.0]}}
    assert ratios(samples, "a", "b", "cpu_us") == pytest.approx(2.0)  # of 2, 1, 3
    assert math.isnan(ratios(samples, "a", "missing", "cpu_us"))
    summed = medians(samples, (("a + b", ("a", "b")), ("a + c", ("a", "c"))))
    assert summed["a + b"] == {"cpu_us": [30.0]} and "a + c" not in summed


def _result() -> Result:
    scenario = _toy(
        figures=("cpu_us", "calls"),
        compare=("cpu_us",),
        added=("calls",),
        sums=(("both", ("base", "other")),),
        labels={"case": "request", "cpu_us": "CPU us"},
    )
    cases_ = [Case("base", lambda: None), Case("other", lambda: None, base="base")]
    samples = {
        "base": {"cpu_us": [10.0, 10.0, 10.0], "calls": [4.0]},
        "other": {"cpu_us": [15.0, 30.0, 20.0], "calls": [6.0]},
    }
    return Result(scenario, cases_, samples, 3, 100, {})


def _cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()]


def test_the_table_gives_ratios_differences_and_sums() -> None:
    lines = _cells(table(_result()))
    assert lines[0] == ["request", "CPU us", "Python calls", "CPU us ratio", "+Python calls"]
    assert lines[2] == ["base", "10", "4", "", ""]
    assert lines[3] == ["other", "20", "6", "2", "2"]  # the median of 1.5, 3, 2; 6 - 4
    assert lines[4][:3] == ["both", "30", "10"]


def test_another_trees_figures_stand_beside_this_ones() -> None:
    other = {"base": {"cpu_us": 5.0, "calls": 4.0}, "other": {"cpu_us": 40.0, "calls": 3.0}}
    lines = _cells(beside(_result(), "/old", other))
    assert lines[0][:4] == ["request", "CPU us (/old)", "CPU us", "ratio"]
    assert lines[2] == ["base", "5", "10", "2", "4", "4", "1"]
    assert lines[3] == ["other", "40", "20", "0.500", "3", "6", "2"]


def test_the_json_holds_each_case_medians_and_rounds() -> None:
    document = _result().document()
    assert document["cases"]["other"]["figures"] == {"cpu_us": 20.0, "calls": 6.0}
    assert document["cases"]["other"]["rounds"]["cpu_us"] == [15.0, 30.0, 20.0]
    assert document["cases"]["other"]["base"] == "base"
    assert list(document["cases"]) == ["base", "other", "both"]


async def test_a_setup_is_entered_and_left_around_the_measurement() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def setup(ctx: Context) -> AsyncIterator[list[Case]]:
        events.append(f"start {ctx.option('n')} {ctx.directory.is_dir()}")
        yield [Case("kept", lambda: None), Case("left out", lambda: None)]
        events.append("stop")

    scenario = Scenario("toy", "t", setup, figures=("wall_us",), options={"n": 1})
    result = await runner.run_scenario(scenario, rounds=1, number=2, options={"n": 2}, only=["k"])
    assert events == ["start 2 True", "stop"]
    assert list(result.samples) == ["kept"] and result.rounds == 1


def test_a_baseline_runs_the_scenario_on_the_other_checkout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # This checkout as its own baseline: the counts are the same, run in another process.
    out = tmp_path / "run.json"
    argv = ["model-lookup", "--rounds", "1", "--number", "10", "--baseline", str(ROOT)]
    assert runner.main([*argv, "--json", str(out)]) == 0
    lines = _cells(capsys.readouterr().out.split("\n", 1)[1].strip())
    assert lines[0][:4] == ["asked", f"Python calls ({ROOT})", "Python calls", "ratio"]
    for line in lines[2:]:
        assert line[1] == line[2] and line[3] == "1"
    assert json.loads(out.read_text())[0]["scenario"] == "model-lookup"
