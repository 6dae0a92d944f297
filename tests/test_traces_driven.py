"""The direct engine's ``--traces`` path records in the loop that drives each
task (sim/traces/simulated.py: drive_recorded); the DES engine records through a wrapper around
the harness loop (sim/traces/simulated.py). Both must record the same rows:
here the same tasks are recorded both ways and their tables compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import RunTracer, build_cell, cells_of, traced_tables

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


class WrappingTracer(RunTracer):
    """:class:`RunTracer` without its ``drive``: the engine wraps the loop."""

    drive = None  # type: ignore[assignment]


CASES = [
    ("bounded.yaml", ()),
    ("naive.yaml", ()),
    ("cached.yaml", ()),
    ("tau2.yaml", ()),
    ("bounded_stop_first.yaml", ()),
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
def test_the_inline_recorder_records_the_rows_the_wrapping_one_does(scenario, overrides):
    cell = build_cell(cells_of(load_scenario(SCENARIOS / scenario, list(overrides)))[0])
    tables = []
    for tracer in (RunTracer(), WrappingTracer()):
        records = run_tasks(cell, range(40), tracer)
        tables.append((records, tracer.columns,
                       traced_tables(tracer, cell, records, "results.parquet")))
    (inline_records, inline, inline_tables), (wrapped_records, wrapped, wrapped_tables) = tables
    assert inline_records == wrapped_records
    assert inline.rows == wrapped.rows and inline.tool_rows == wrapped.tool_rows
    assert inline.dropped == wrapped.dropped
    assert inline_tables is not None and wrapped_tables is not None
    assert inline_tables[0].equals(wrapped_tables[0])
    assert inline_tables[1].equals(wrapped_tables[1]) and inline_tables[1].num_rows > 40
