"""One recorder for every driver (sim/traces/simulated.py: RunRecorder, an
observer of the pump in sim/harness/pump.py): the direct engine and the DES
engine with unlimited capacity drive the same runs, so the recorder must
record the same rows in both. Here the same tasks are recorded both ways and
their call tables compared (the clock columns to float rounding: the DES
clock adds durations to the arrival time)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import RunTracer, build_cell, cells_of, traced_tables

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
TASKS = 40
UNLIMITED = ("engine=des", "des.capacity={}", "des.operations=[]", "des.resume={share: 0}")
CLOCKS = ("started_s", "latency_s")

CASES = [
    ("bounded.yaml", ()),
    ("naive.yaml", ()),
    ("cached.yaml", ("sweep={}",)),
    ("tau2.yaml", ()),
    # summary calls move the history under the recorder; a model grader's checks are calls
    ("bounded.yaml", ("harness.context.compact_at_tokens=20000",
                      "harness.verifier.name=model_grader")),
    # thinking blocks before the reply: responses of two blocks
    ("bounded.yaml", ("harness.thinking.enabled=true", "harness.thinking.budget_tokens=200",
                      "harness.max_output_tokens=900", "world.tokens.thinking=150")),
    # truncated replies (max_tokens) are compacted and continued; model errors retried
    ("bounded.yaml", ("world.faults.max_tokens=0.2", "world.faults.server_error=0.05",
                      "world.faults.rate_limit=0.05")),
]


@pytest.mark.parametrize(("scenario", "overrides"), CASES)
def test_the_direct_and_des_engines_record_the_same_calls(scenario, overrides):
    """40 tasks, recorded by the direct engine and by the DES engine with
    unlimited capacity: the same records, the same call rows (every field;
    the clock fields to a relative 1e-9) and the same runs table."""
    loaded = load_scenario(SCENARIOS / scenario, [*UNLIMITED, *overrides, f"tasks={TASKS}"])
    cell = build_cell(cells_of(loaded)[0])
    direct = RunTracer()
    direct_records = run_tasks(cell, range(TASKS), direct)
    des = RunTracer()
    arrivals = arrival_schedule(loaded.des, TASKS, cell.seed)
    des_records = sorted(DesEngine(cell, loaded.des, arrivals, des).run().records,
                         key=lambda r: r.task)
    assert [(r.task, r.outcome, r.steps, r.cost_usd) for r in direct_records] == [
        (r.task, r.outcome, r.steps, r.cost_usd) for r in des_records]
    direct_calls = traced_tables(direct, cell, direct_records, "results.parquet")[1]
    des_calls = traced_tables(des, cell, direct_records, "results.parquet")[1]
    assert direct_calls.num_rows > TASKS
    # compare the calls run by run, in call order
    left = direct_calls.sort_by([("run_id", "ascending"), ("call", "ascending")])
    right = des_calls.sort_by([("run_id", "ascending"), ("call", "ascending")])
    assert left.num_rows == right.num_rows
    for column in left.column_names:
        if column in CLOCKS:
            assert left[column].to_pylist() == pytest.approx(right[column].to_pylist(),
                                                             rel=1e-9, abs=1e-6), column
        else:
            assert left[column].equals(right[column]), column
