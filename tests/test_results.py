"""Results on disk (sim.output.results): frame, summaries, atomic deterministic files, tables."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sim.output import results
from sim.output.results import (
    cell_summary,
    format_table,
    records_frame,
    write_atomic,
    write_json,
    write_parquet,
    write_report,
    write_results,
)
from sim.task_record import RECORD_FIELDS, TaskRecord

SUMMARY_KEYS = {
    "name", "params", "tasks", "outcomes", "outcome_counts", "steps", "input_tokens",
    "output_tokens", "thinking_tokens", "cost", "wall_s", "cache_hit_share", "retries_mean",
    "nudges_mean", "verifier_rejections_mean", "compactions_mean",
}
DESCRIBE_KEYS = {"p50", "p95", "max", "mean"}
COST_KEYS = {"mean", "p50", "p95", "max", "total"}


def make_record(cell: str = "c", task: int = 0, **changes) -> TaskRecord:
    """A plausible succeeded task; ``changes`` override fields."""
    base = TaskRecord(
        cell=cell, task=task, state="succeeded", reason="verified", outcome="succeeded",
        steps=10, tool_calls=9, input_tokens=20_000, output_tokens=6_000,
        cache_read_tokens=150_000, cache_write_tokens=30_000, thinking_tokens=500,
        cost_usd=0.5, active_s=60.0, wall_s=75.5, retries=1, nudges=0,
        verifier_rejections=0, compactions=0, ground_truth=8, truly_done=True,
    )
    return replace(base, **changes)


def make_cell(cell: str = "c", n: int = 20) -> list[TaskRecord]:
    """n tasks with varied steps, tokens, costs and three outcomes."""
    outcomes = ["succeeded", "needs_human:no_progress", "budget_exhausted:tokens"]
    return [make_record(cell, i, steps=5 + i, input_tokens=1_000 * (i + 1),
                        cost_usd=0.1 * (i + 1), wall_s=10.0 + i, retries=i % 3,
                        nudges=i % 2, outcome=outcomes[min(2, i // 8)],
                        tenant=f"t{i % 2}", truly_done=i < 8)
            for i in range(n)]


def listing(directory: Path) -> list[str]:
    """Every file name in ``directory``, hidden ones included."""
    return sorted(os.listdir(directory))


# ------------------------------------------------------------------ frame

def test_records_frame_has_record_fields_in_order_with_explicit_dtypes():
    """Columns follow RECORD_FIELDS; ints are int64, floats float64, flags bool, text string."""
    frame = records_frame(make_cell(n=3))
    assert list(frame.columns) == list(RECORD_FIELDS)
    assert frame["task"].dtype == np.int64 and frame["steps"].dtype == np.int64
    assert frame["cost_usd"].dtype == np.float64 and frame["wall_s"].dtype == np.float64
    assert frame["truly_done"].dtype == np.bool_
    assert isinstance(frame["outcome"].dtype, pd.StringDtype)
    assert frame["steps"].tolist() == [5, 6, 7]


def test_a_records_table_converts_to_the_frame_of_its_records():
    """Rows gathered as Arrow columns (the Python API's path) are the frame
    records_frame builds from the same records: values, dtypes and index."""
    from sim.output.table import records_table

    records = [*make_cell("a", n=5), make_record("b", 7, reason="", cost_usd=float("nan"))]
    pd.testing.assert_frame_equal(results.table_frame(records_table(records)),
                                  records_frame(records))
    pd.testing.assert_frame_equal(results.table_frame(records_table([])), records_frame([]))


def test_records_frame_of_no_records_has_the_same_columns_and_dtypes():
    """An empty frame is typed like a full one (so concatenation keeps dtypes)."""
    assert records_frame([]).dtypes.equals(records_frame([make_record()]).dtypes)


def test_records_frame_refuses_a_fractional_count():
    """A float in an integer field is an error, not a silent truncation."""
    with pytest.raises((TypeError, ValueError)):
        records_frame([make_record(steps=2.5)])


# ---------------------------------------------------------------- summary

def test_cell_summary_keys_match_the_summary_json_contract():
    """DESIGN.md's keys, with p50/p95/max/mean distributions and a five-number cost."""
    s = cell_summary("c", {"budgets.steps": 50}, records_frame(make_cell()))
    assert set(s) == SUMMARY_KEYS
    for key in ("steps", "input_tokens", "output_tokens", "thinking_tokens", "wall_s"):
        assert set(s[key]) == DESCRIBE_KEYS
    assert set(s["cost"]) == COST_KEYS
    assert s["name"] == "c" and s["params"] == {"budgets.steps": 50} and s["tasks"] == 20


def test_cell_summary_counts_and_shares_outcomes_largest_first():
    """Counts are exact; shares are count / tasks, in the same order."""
    s = cell_summary("c", {}, records_frame(make_cell()))
    assert s["outcome_counts"] == {"budget_exhausted:tokens": 4, "needs_human:no_progress": 8,
                                   "succeeded": 8}
    assert list(s["outcome_counts"]) == ["needs_human:no_progress", "succeeded",
                                         "budget_exhausted:tokens"]
    assert s["outcomes"] == {k: v / 20 for k, v in s["outcome_counts"].items()}
    assert list(s["outcomes"]) == list(s["outcome_counts"])


def test_cell_summary_input_tokens_are_prompt_tokens_and_cache_share_is_their_cached_part():
    """input_tokens = input + cache read + cache write; cache_hit_share = read / prompt."""
    records = [make_record(task=0, input_tokens=100, cache_read_tokens=800, cache_write_tokens=100),
               make_record(task=1, input_tokens=300, cache_read_tokens=0, cache_write_tokens=700)]
    s = cell_summary("c", {}, records_frame(records))
    assert s["input_tokens"] == {"p50": 1_000, "p95": 1_000, "max": 1_000, "mean": 1_000.0}
    assert s["cache_hit_share"] == 800 / 2_000


def test_cache_hit_share_is_zero_without_prompt_tokens():
    """No prompt tokens at all: the share is 0, not a division error."""
    record = make_record(input_tokens=0, cache_read_tokens=0, cache_write_tokens=0)
    assert cell_summary("c", {}, records_frame([record]))["cache_hit_share"] == 0.0


def test_cell_summary_uses_the_percentile_definition_and_means():
    """steps 5..24 (n=20): p50 is sorted[10] = 15, p95 sorted[19] = 24; means per task."""
    s = cell_summary("c", {}, records_frame(make_cell()))
    assert s["steps"] == {"p50": 15, "p95": 24, "max": 24, "mean": 14.5}
    assert s["cost"]["total"] == pytest.approx(0.1 * 210)
    assert s["cost"]["p95"] == pytest.approx(2.0)
    assert s["retries_mean"] == sum(i % 3 for i in range(20)) / 20
    assert s["nudges_mean"] == 0.5 and s["compactions_mean"] == 0.0


def test_cell_summary_of_no_tasks_is_an_error():
    """An empty cell raises ValueError rather than writing undefined percentiles."""
    with pytest.raises(ValueError, match="no tasks"):
        cell_summary("c", {}, records_frame([]))


def test_cell_summary_params_become_plain_json_values():
    """Tuples become lists and numpy scalars numbers, as they would after a JSON round trip."""
    s = cell_summary("c", {"grid": (1, 2), "x": np.float64(0.5)}, records_frame([make_record()]))
    assert s["params"] == {"grid": [1, 2], "x": 0.5}


# ---------------------------------------------------------- atomic writers

def test_write_atomic_writes_the_bytes_and_leaves_no_temporary_file(tmp_path):
    """The target holds exactly the data; nothing else is left in the directory."""
    write_atomic(tmp_path / "a.bin", b"one")
    write_atomic(tmp_path / "a.bin", b"two")
    assert (tmp_path / "a.bin").read_bytes() == b"two"
    assert listing(tmp_path) == ["a.bin"]


def test_write_atomic_failure_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    """If the final rename fails, the previous content survives and no temp file remains."""
    target = tmp_path / "a.json"
    target.write_bytes(b"old")

    def broken_replace(src, dst):
        raise OSError("disk trouble")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk trouble"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert listing(tmp_path) == ["a.json"]


def test_write_json_serialisation_failure_does_not_clobber(tmp_path):
    """An unserialisable object raises before anything is written."""
    target = tmp_path / "summary.json"
    write_json(target, {"ok": 1})
    before = target.read_bytes()
    with pytest.raises(TypeError):
        write_json(target, {"bad": object()})
    with pytest.raises(ValueError):
        write_json(target, {"nan": float("nan")})
    assert target.read_bytes() == before
    assert listing(tmp_path) == ["summary.json"]


def test_write_parquet_serialisation_failure_does_not_clobber(tmp_path):
    """A frame that cannot be written as Parquet raises and leaves the old file intact."""
    target = tmp_path / "results.parquet"
    write_parquet(target, records_frame(make_cell()))
    before = target.read_bytes()
    with pytest.raises(TypeError):
        write_parquet(target, pd.DataFrame({"x": [1j, 2j]}))
    assert target.read_bytes() == before
    assert listing(tmp_path) == ["results.parquet"]


def test_json_is_sorted_indented_newline_terminated_and_identical_twice(tmp_path):
    """Sorted keys, indent 2, one trailing newline, numpy scalars as numbers, same bytes."""
    obj = {"b": np.int64(2), "a": [1.5, np.float64(0.1)], "c": {"z": True, "y": None}}
    write_json(tmp_path / "1.json", obj)
    write_json(tmp_path / "2.json", obj)
    text = (tmp_path / "1.json").read_text()
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"
    assert json.loads(text) == {"a": [1.5, 0.1], "b": 2, "c": {"y": None, "z": True}}


def test_parquet_bytes_are_identical_when_written_twice(tmp_path):
    """Same frame, same bytes: no index, no pandas metadata, no timestamps."""
    frame = records_frame(make_cell())
    write_parquet(tmp_path / "1.parquet", frame)
    write_parquet(tmp_path / "2.parquet", records_frame(make_cell()))
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()
    metadata = pq.read_metadata(tmp_path / "1.parquet").metadata or {}
    assert b"pandas" not in metadata


def test_parquet_round_trips_columns_and_values(tmp_path):
    """Reading the file back gives the same columns, dtypes' kinds and values."""
    frame = records_frame(make_cell())
    write_parquet(tmp_path / "r.parquet", frame)
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert list(back.columns) == list(RECORD_FIELDS)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    assert back["steps"].dtype == np.int64 and back["truly_done"].dtype == np.bool_


# ------------------------------------------------------------------ table

SEED_001_BOUNDED = {
    "name": "bounded harness", "tasks": 10_000,
    "outcomes": {"succeeded": 0.903, "stopped: no progress": 0.0911, "budget: tokens": 0.0059},
    "outcome_counts": {"budget: tokens": 59, "stopped: no progress": 911, "succeeded": 9030},
    "steps": {"p50": 11, "p95": 28, "max": 44, "mean": 12.3},
    "input_tokens": {"p50": 214_500, "p95": 903_000, "max": 1_947_000, "mean": 300_000.0},
    "cost": {"mean": 1.0232, "p50": 0.7, "p95": 2.96, "max": 6.24, "total": 10_232.0},
}


def test_format_table_reproduces_seed_001_output_block():
    """Header, outcomes largest first (width 26, count, share), steps, tokens, cost, spend."""
    expected = "\n".join([
        "== bounded harness, 10000 tasks",
        "  succeeded                   9030   90.3%",
        "  stopped: no progress         911    9.1%",
        "  budget: tokens                59    0.6%",
        "  steps          p50   11  p95   28  max   44",
        "  input tokens   p50   214,500  p95   903,000  max  1,947,000",
        "  cost per task  mean $1.02  p95 $2.96  max $6.24",
        "  total spend    $10,232",
    ])
    assert format_table(SEED_001_BOUNDED) == expected


def test_format_table_derives_counts_from_shares_and_orders_after_a_json_round_trip():
    """Without outcome_counts, counts are share x tasks; JSON's sorted keys do not reorder lines."""
    cell = json.loads(json.dumps(SEED_001_BOUNDED, sort_keys=True))
    del cell["outcome_counts"]
    assert format_table(cell) == format_table(SEED_001_BOUNDED)


def test_a_total_spend_under_100_dollars_keeps_its_cents():
    """A replay of a dozen cheap runs costs cents: "total spend $0" beside
    "mean $0.04" read as free. Totals under $100 show cents; larger ones
    stay whole dollars."""
    def spend(total: float) -> str:
        cell = dict(SEED_001_BOUNDED, cost=dict(SEED_001_BOUNDED["cost"], total=total))
        return format_table(cell).splitlines()[-1]

    assert spend(0.5298) == "  total spend    $0.53"
    assert spend(99.994) == "  total spend    $99.99"
    assert spend(100.0) == "  total spend    $100"
    assert spend(10_232.4) == "  total spend    $10,232"


def test_format_table_widens_for_long_outcome_labels():
    """A label longer than the column still leaves space before its count."""
    cell = dict(SEED_001_BOUNDED, outcome_counts={"cancelled:approval_timeout_long": 10_000},
                outcomes={"cancelled:approval_timeout_long": 1.0})
    line = format_table(cell).splitlines()[1]
    assert line == "  cancelled:approval_timeout_long   10000  100.0%"


# ---------------------------------------------------------------- results

def test_write_results_writes_three_files_with_cells_in_order_and_tasks_by_index(tmp_path):
    """results.parquet (cells as given, tasks sorted), summary.json, report.md; nothing else."""
    b_records = make_cell("b", 5)[::-1]
    out = tmp_path / "deep" / "out"
    summary = write_results(out, {"b": b_records, "a": make_cell("a", 3)}, {"a": {}, "b": {"k": 1}})
    assert listing(out) == ["report.md", "results.parquet", "summary.json"]
    frame = pd.read_parquet(out / "results.parquet")
    assert frame["cell"].tolist() == ["b"] * 5 + ["a"] * 3
    assert frame["task"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert [c["name"] for c in summary["cells"]] == ["b", "a"]
    assert json.loads((out / "summary.json").read_text()) == summary
    assert all(set(c) == SUMMARY_KEYS for c in summary["cells"])


def test_write_results_is_byte_identical_when_run_twice(tmp_path):
    """Same records, same bytes in every file, whatever the folder is called."""
    args = ({"a": make_cell("a"), "b": make_cell("b", 7)}, {"a": {"x": 1}, "b": {"x": 2}})
    write_results(tmp_path / "first", *args)
    write_results(tmp_path / "second", *args)
    for name in ("results.parquet", "summary.json", "report.md"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


@pytest.mark.parametrize(("records", "params", "match"), [
    ({"a": [make_record("a")]}, {"b": {}}, "different cells"),
    ({"a": [make_record("b")]}, {"a": {}}, "other cells"),
    ({"a": [make_record("a", 1), make_record("a", 1)]}, {"a": {}}, "duplicate"),
    ({"a": []}, {"a": {}}, "no tasks"),
])
def test_write_results_refuses_inconsistent_input_and_writes_nothing(tmp_path, records, params,
                                                                     match):
    """Unmatched cell names, foreign records, repeated task indices or empty cells raise."""
    with pytest.raises(ValueError, match=match):
        write_results(tmp_path / "out", records, params)
    assert not (tmp_path / "out").exists()


def test_report_has_definition_labels_and_one_table_per_cell(tmp_path):
    """report.md explains percentiles and outcome labels and holds each cell's table."""
    summary = write_results(tmp_path, {"a": make_cell("a"), "b": make_cell("b", 4)},
                            {"a": {}, "b": {}})
    report = (tmp_path / "report.md").read_text()
    assert "floor(q*n)" in report and "false_success" in report and "state:reason" in report
    for cell in summary["cells"]:
        assert f"## {cell['name']}" in report
        assert format_table(cell) in report
    assert report.startswith("# Simulation results\n")
    write_report(tmp_path / "again.md", summary, title="Simulation results")
    assert (tmp_path / "again.md").read_bytes() == report.encode()
