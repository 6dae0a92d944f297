"""A trace folder replayed without holding it whole (:mod:`sim.drivers.replay.reading`):
the runs a worker reads by row range are those of the whole read, whatever
the row groups; the folder-wide figures and prices are the whole read's; a
folder the index cannot take is read whole, with the same rows."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from recordings import PRICES, conversation, loose, recorded, tool, write_traces

from sim.bad_input import InputError
from sim.cli import main
from sim.drivers.replay.reading import (
    TraceTables,
    folder_index,
    forget,
    read_trace_folder,
    streamed_runs,
)


def _runs(count: int = 23):
    """Runs of 1..6 calls, two models by call, one unknown to any catalogue."""
    out = []
    for i in range(count):
        n = 1 + i % 6
        calls = conversation([[tool("search", q=k)] for k in range(n - 1)] + [[]],
                             first=500 + 11 * i)
        if i % 3 == 0:
            calls = tuple(replace(c, model="mystery-model") for c in calls)
        out.append(recorded(f"r{i:02d}", calls, resolved=i % 2 == 0))
    return out


def _regroup(folder, rows: int) -> None:
    """Rewrite calls.parquet with row groups of ``rows`` calls."""
    path = folder / "calls.parquet"
    pq.write_table(pq.read_table(path), path, row_group_size=rows)


@pytest.mark.parametrize("group", [1, 4, 7, 1000])
def test_a_worker_reads_the_runs_of_the_whole_read_whatever_the_row_groups(tmp_path, group):
    folder = write_traces(tmp_path / "t", _runs())
    _regroup(folder, group)
    whole = read_trace_folder(folder)
    forget()
    assert folder_index(str(folder)) is not None
    for start, stop in ((0, 23), (0, 1), (5, 9), (9, 10), (10, 23), (22, 23), (4, 4)):
        assert streamed_runs(str(folder), start, stop) == whole[start:stop]


def test_the_index_gives_the_figures_and_prices_of_the_whole_read(tmp_path):
    folder = write_traces(tmp_path / "t", _runs())
    _regroup(folder, 5)
    index, tables = folder_index(str(folder)), TraceTables.load(folder)
    assert index is not None and len(index) == len(tables) == 23
    assert (index.tool_calls, index.text_hashes) == (tables.tool_calls, tables.text_hashes)
    known = {"test-model": PRICES}
    for default in ("test-model", "other"):
        template = loose(model=default)
        a = index.pricing(template, known.get)
        b = tables.pricing(template, known.get)
        assert a == b and "mystery-model" in a.recorded


def test_a_folder_not_in_the_runs_order_is_read_whole_with_the_same_rows(tmp_path, capsys):
    folder = write_traces(tmp_path / "t", _runs())
    path = folder / "calls.parquet"
    table = pq.read_table(path)
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), path)
    assert folder_index(str(folder)) is None
    ordered = write_traces(tmp_path / "o", _runs())
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nharness:\n  model: claude-sonnet-4-5\n  prices_date: 2026-01-01\n"
                        "  detector: {enabled: true, repeat_threshold: 2}\n")
    outs = []
    for source, workers in ((folder, 1), (ordered, 2)):
        out = tmp_path / f"out_{source.name}"
        assert main(["replay", str(source), str(scenario), "--workers", str(workers),
                     "--quiet", "--out", str(out)]) == 0
        outs.append(pq.read_table(out / "results.parquet"))
    assert outs[0].num_rows == 23 and outs[0].equals(outs[1])  # the folder's path aside


def test_a_bad_purpose_in_a_streamed_folder_is_named(tmp_path):
    folder = write_traces(tmp_path / "t", _runs())
    path = folder / "calls.parquet"
    table = pq.read_table(path)
    purposes = table.column("purpose").to_pylist()
    purposes[5] = "lunch"
    table = table.set_column(table.schema.get_field_index("purpose"), "purpose",
                             pa.array(purposes, pa.string()))
    pq.write_table(table, path)
    with pytest.raises(InputError, match="purpose is 'lunch'") as error:
        folder_index(str(folder))
    assert "calls.parquet, run" in str(error.value)
