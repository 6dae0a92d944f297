"""The ``agent`` column of calls.parquet (the subagent that made a call): a
folder written before it existed reads with it all null, and it round-trips."""

from __future__ import annotations

from dataclasses import replace

import pyarrow.parquet as pq
from traces_helpers import run

from sim.traces import read_traces
from sim.traces.model import CALL_COLUMNS, CALLS_FILE, SUBAGENT_CALL_COLUMNS
from sim.traces.writer import TraceWriter


def write(folder, runs):
    folder.mkdir()
    writer = TraceWriter(folder)
    for r in runs:
        writer.add(r)
    writer.close()
    return folder


def test_a_subagents_calls_keep_their_agent_and_the_parents_stay_null(tmp_path):
    """A run's own calls read back with agent null, a subagent's with its id."""
    parent = run("s", [10, 20, 30])
    parent.calls[1] = replace(parent.calls[1], agent="a1")
    _, calls = read_traces(write(tmp_path / "f", [parent]))
    assert calls["agent"].isna().tolist() == [True, False, True]
    assert calls["agent"].iloc[1] == "a1"


def test_a_folder_without_the_agent_column_reads_with_it_null(tmp_path):
    """calls.parquet written before the column: read, the column added all null,
    in the model's place."""
    folder = write(tmp_path / "f", [run("s", [10, 20])])
    path = folder / CALLS_FILE
    pq.write_table(pq.read_table(path).drop_columns(sorted(SUBAGENT_CALL_COLUMNS)), path)
    assert "agent" not in pq.read_schema(path).names
    _, calls = read_traces(folder)
    assert list(calls.columns) == list(CALL_COLUMNS)
    assert calls["agent"].isna().all() and str(calls["agent"].dtype) == "string"
