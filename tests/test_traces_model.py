"""The trace model (sim/traces/model.py, writer.py): its columns, the one
tokenizer approximation, canonical arguments, the checked reader and the
atomic, deterministic, streaming writer."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from traces_helpers import call, run

from sim.bad_input import InputError
from sim.traces import writer as writer_module
from sim.traces.model import (
    CALL_COLUMNS,
    CALLS_FILE,
    LATER_CALL_COLUMNS,
    RUN_COLUMNS,
    RUNS_FILE,
    TOOL_CALL_FIELDS,
    TOOL_CALL_TYPE,
    ToolCallRecord,
    approx_tokens,
    canonical_arguments,
    joined_sha256,
    read_traces,
    sha256_text,
)
from sim.traces.writer import TraceWriter, atomic_folder, write_runs

REQUIRED_RUN_COLUMNS = ("run_id", "source", "file", "task_id", "model", "steps", "input_tokens",
                        "cache_read_tokens", "cache_write_tokens", "output_tokens",
                        "reasoning_tokens", "cost_usd", "exit", "resolved", "started_at",
                        "duration_s", "step_limit", "cost_limit_usd", "error_limit")
REQUIRED_CALL_COLUMNS = ("run_id", "call", "model", "input_tokens", "cache_read_tokens",
                         "cache_write_tokens", "output_tokens", "reasoning_tokens", "cost_usd",
                         "finish_reason", "started_s", "latency_s", "text_tokens", "tool_calls",
                         "observation_tokens")


def write_folder(folder: Path, runs: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    writer = TraceWriter(folder)
    for r in runs:
        writer.add(r)
    writer.close()
    return folder


def test_the_model_has_the_agreed_columns_in_order_with_their_types():
    """runs and calls carry the columns other modules build on (extra ones after)."""
    assert tuple(RUN_COLUMNS)[:len(REQUIRED_RUN_COLUMNS)] == REQUIRED_RUN_COLUMNS
    assert tuple(CALL_COLUMNS)[:len(REQUIRED_CALL_COLUMNS)] == REQUIRED_CALL_COLUMNS
    assert RUN_COLUMNS["started_at"][0] == pa.timestamp("us", tz="UTC")
    assert CALL_COLUMNS["tool_calls"][0] == pa.list_(TOOL_CALL_TYPE)
    for name in ("text_sha256", "observation_sha256"):  # added later: after the others
        assert CALL_COLUMNS[name][:2] == (pa.string(), True)
        assert list(CALL_COLUMNS).index(name) >= len(REQUIRED_CALL_COLUMNS)
    assert [f.name for f in TOOL_CALL_TYPE] == list(TOOL_CALL_FIELDS) == [
        "id", "name", "arguments", "result_tokens", "result_sha256", "error", "duration_s"]
    for name in ("input_tokens", "steps", "call"):
        column = RUN_COLUMNS.get(name) or CALL_COLUMNS[name]
        assert column[0] == pa.int64() and column[1] is False


@given(st.text(max_size=200))
def test_approx_tokens_is_characters_over_four_rounded_up(text):
    """The one approximation: ceil(len/4) tokens, 0 for no text."""
    assert approx_tokens(text) == math.ceil(len(text) / 4)


def test_approx_tokens_of_missing_text_is_zero():
    assert approx_tokens(None) == 0


def test_canonical_arguments_sort_keys_drop_spaces_and_keep_unicode():
    """Equal arguments give equal strings, whatever the source's key order."""
    assert canonical_arguments({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert canonical_arguments('{"b": 1, "a": "\\u00e9"}') == '{"a":"é","b":1}'
    assert canonical_arguments("not json {") == "not json {"  # kept verbatim
    assert canonical_arguments(None) is None


def test_sha256_text_is_the_hex_digest_of_utf8():
    assert sha256_text("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    assert sha256_text(None) is None


def test_joined_sha256_hashes_the_recorded_texts_joined_by_newlines_in_order():
    """None entries are left out; no recorded text at all is None (not the hash of "")."""
    assert joined_sha256(["a", None, "b"]) == sha256_text("a\nb") != joined_sha256(["b", "a"])
    assert joined_sha256(["only"]) == sha256_text("only")
    assert joined_sha256([""]) == sha256_text("")
    assert joined_sha256([]) is None and joined_sha256([None]) is None


def test_written_runs_read_back_with_sums_and_steps_from_their_calls(tmp_path):
    """The writer computes steps and token sums from the calls; the reader
    returns pandas frames with nullable dtypes and tool calls as dicts."""
    first = run("a", [100, 150, 200], model="m", exit="done", resolved=True,
                started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))))
    first.calls[1] = replace(first.calls[1], tool_calls=[ToolCallRecord(
        name="grep", id="x", arguments='{"q":1}', result_tokens=7, result_sha256="h",
        error=True, duration_s=0.5)])
    first.calls[2].usage.cache_read_tokens, first.calls[2].usage.input_tokens = 150, 50
    runs, calls = read_traces(write_folder(tmp_path / "t", [first, run("b", [])]))
    assert runs["run_id"].tolist() == ["a", "b"]
    assert runs["steps"].tolist() == [3, 0]
    assert runs["input_tokens"].tolist() == [300, 0]
    assert runs["cache_read_tokens"].tolist() == [150, 0]
    assert runs["output_tokens"].tolist() == [30, 0]
    assert runs["started_at"].iloc[0] == datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert str(runs["steps"].dtype) == "Int64" and str(runs["resolved"].dtype) == "boolean"
    assert calls["call"].tolist() == [0, 1, 2]
    assert calls["tool_calls"].iloc[1] == [{"id": "x", "name": "grep", "arguments": '{"q":1}',
                                            "result_tokens": 7, "result_sha256": "h",
                                            "error": True, "duration_s": 0.5}]
    assert calls["tool_calls"].iloc[0] == []


def test_a_naive_start_time_is_taken_as_utc(tmp_path):
    runs, _ = read_traces(write_folder(tmp_path / "t", [
        run("a", [1], started_at=datetime(2026, 1, 2, 3, 4, 5))]))
    assert runs["started_at"].iloc[0] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_the_writer_refuses_a_duplicate_run_id_and_an_unknown_source(tmp_path):
    writer = TraceWriter(tmp_path)
    writer.add(run("a", [1]))
    with pytest.raises(ValueError, match="duplicate"):
        writer.add(run("a", [2]))
    with pytest.raises(ValueError, match="source"):
        writer.add(run("b", [2], source="nope"))
    writer.abort()


def test_calls_stream_out_in_row_groups(tmp_path, monkeypatch):
    """A long import never holds every call: calls are flushed in row groups."""
    monkeypatch.setattr(writer_module, "ROW_GROUP_CALLS", 10)
    folder = write_folder(tmp_path / "t", [run(f"r{i}", [10] * 4) for i in range(10)])
    assert pq.ParquetFile(folder / CALLS_FILE).num_row_groups >= 3
    runs, calls = read_traces(folder)
    assert len(calls) == 40 and runs["steps"].sum() == 40


def test_same_runs_give_identical_bytes(tmp_path):
    records = lambda: [run("a", [5, 6], model="m"), run("b", [7])]  # noqa: E731
    one = write_folder(tmp_path / "one", records())
    two = write_folder(tmp_path / "two", records())
    for name in (RUNS_FILE, CALLS_FILE):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def test_write_runs_puts_both_tables_into_an_existing_folder(tmp_path):
    (tmp_path / "results.parquet").write_bytes(b"kept")
    write_runs(tmp_path, [run("a", [1, 2])])
    runs, calls = read_traces(tmp_path)
    assert len(runs) == 1 and len(calls) == 2
    assert (tmp_path / "results.parquet").read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == [CALLS_FILE, "results.parquet",
                                                          RUNS_FILE]


def test_atomic_folder_renames_only_a_finished_folder(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError), atomic_folder(target) as tmp:
        (tmp / "x").write_text("half")
        raise RuntimeError("import failed")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_folder(target) as tmp:
        (tmp / "x").write_text("whole")
    assert (target / "x").read_text() == "whole"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_folder_refuses_a_non_empty_target_unless_forced(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(InputError, match="not empty"), atomic_folder(target):
        pass
    with atomic_folder(target, force=True) as tmp:
        (tmp / "new").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


# ------------------------------------------------------------- bad folders

def rewrite(folder: Path, name: str, change) -> None:
    table = pq.read_table(folder / name)
    pq.write_table(change(table), folder / name)


def set_column(table: pa.Table, name: str, values: list, kind=None) -> pa.Table:
    index = table.schema.get_field_index(name)
    kind = kind or table.schema.field(name).type
    return table.set_column(index, pa.field(name, kind), pa.array(values, type=kind))


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / "t", [run("a", [10, 20]), run("b", [30])])


@pytest.mark.parametrize(("name", "change", "column", "message"), [
    (RUNS_FILE, lambda t: t.drop_columns(["exit"]), "exit", "missing column"),
    (CALLS_FILE, lambda t: t.drop_columns(["tool_calls"]), "tool_calls", "missing column"),
    (RUNS_FILE, lambda t: set_column(t, "steps", ["2", "1"], pa.string()), "steps",
     "type string, expected int64"),
    (RUNS_FILE, lambda t: set_column(t, "run_id", ["a", None]), "run_id", "null values"),
    (RUNS_FILE, lambda t: set_column(t, "run_id", ["a", "a"]), "run_id", "more than once"),
    (RUNS_FILE, lambda t: set_column(t, "steps", [2, 3]), "steps", "has steps 3 but 1 calls"),
    (RUNS_FILE, lambda t: set_column(t, "input_tokens", [30, 31]), "input_tokens",
     "not the sum of its calls"),
    (CALLS_FILE, lambda t: set_column(t, "call", [0, 2, 0]), "call", "not numbered"),
    (CALLS_FILE, lambda t: set_column(t, "run_id", ["a", "a", "zz"]), "run_id", "unknown run"),
    (CALLS_FILE, lambda t: set_column(t, "output_tokens", [-1, 10, 10]), "output_tokens",
     "negative"),
])
def test_a_broken_folder_is_an_input_error_naming_file_and_column(folder, name, change, column,
                                                                  message):
    rewrite(folder, name, change)
    with pytest.raises(InputError) as raised:
        read_traces(folder)
    assert raised.value.source == str(folder / name)
    assert raised.value.path == column
    assert message in str(raised.value)


def test_missing_files_and_non_parquet_are_input_errors(tmp_path, folder):
    with pytest.raises(InputError, match="no such directory"):
        read_traces(tmp_path / "nope")
    (folder / CALLS_FILE).unlink()
    with pytest.raises(InputError, match=r"missing calls\.parquet"):
        read_traces(folder)
    (folder / CALLS_FILE).write_text(json.dumps({"not": "parquet"}))
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_traces(folder)


def test_extra_columns_are_kept_after_the_model_columns(folder):
    rewrite(folder, RUNS_FILE, lambda t: t.append_column("domain", pa.array(["x", "y"])))
    runs, _ = read_traces(folder)
    assert runs.columns[-1] == "domain" and list(runs.columns[:len(RUN_COLUMNS)]) == list(
        RUN_COLUMNS)


@pytest.fixture
def hashed_folder(tmp_path) -> Path:
    """A folder whose calls carry text and observation hashes."""
    first = run("a", [10, 20])
    first.calls[0] = replace(first.calls[0], text_sha256="t0", observation_sha256="o0")
    first.calls[1] = replace(first.calls[1], text_sha256="t1")
    return write_folder(tmp_path / "new", [first, run("b", [30])])


def test_a_folder_written_before_the_hash_columns_reads_with_them_null(hashed_folder, tmp_path):
    """calls.parquet of the old schema (no text_sha256, observation_sha256):
    the checked reader adds both, all null, in the model's place; every other
    column reads as before; import and replay take the folder too."""
    from sim.drivers.replay.reading import read_trace_folder
    from sim.traces import import_traces

    old = tmp_path / "old"
    old.mkdir()
    for name in (RUNS_FILE, CALLS_FILE):
        (old / name).write_bytes((hashed_folder / name).read_bytes())
    rewrite(old, CALLS_FILE, lambda t: t.drop_columns(sorted(LATER_CALL_COLUMNS)))
    assert {"text_sha256", "observation_sha256"} == LATER_CALL_COLUMNS
    assert not LATER_CALL_COLUMNS & set(pq.read_schema(old / CALLS_FILE).names)
    runs, calls = read_traces(old)
    new_runs, new_calls = read_traces(hashed_folder)
    assert list(calls.columns) == list(CALL_COLUMNS)
    for name in LATER_CALL_COLUMNS:
        assert calls[name].isna().all() and str(calls[name].dtype) == "string"
        assert new_calls[name].notna().any()
    others = [c for c in CALL_COLUMNS if c not in LATER_CALL_COLUMNS]
    assert calls[others].equals(new_calls[others]) and runs.equals(new_runs)
    import_traces([old], tmp_path / "again")
    _, again = read_traces(tmp_path / "again")
    assert again[sorted(LATER_CALL_COLUMNS)].isna().all().all()
    replayed = read_trace_folder(old)
    assert [c.text_sha256 for r in replayed for c in r.calls] == [None] * 3
    assert [c.observation_sha256 for r in replayed for c in r.calls] == [None] * 3


def test_only_the_later_columns_may_be_missing(hashed_folder):
    """A folder lacking another call column is still refused."""
    rewrite(hashed_folder, CALLS_FILE, lambda t: t.drop_columns(["text_sha256", "purpose"]))
    with pytest.raises(InputError, match="missing column") as raised:
        read_traces(hashed_folder)
    assert raised.value.path == "purpose"


def test_call_helper_builds_prompt_from_parts():
    u = call(100, read=60, write=10).usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) == (30, 60, 10)
    assert u.prompt_tokens == 100


def test_canonical_json_of_flat_string_objects_is_json_dumps_text():
    """The direct path for flat objects of strings writes what json.dumps does."""
    import json
    import random

    from sim.traces.model import canonical_json

    rng = random.Random(3)
    alphabet = 'ab"\\/\n\t\x00\x7fé\u2028漢\ud800 '
    for _ in range(2_000):
        obj = {"".join(rng.choices(alphabet, k=rng.randint(0, 5))):
               "".join(rng.choices(alphabet, k=rng.randint(0, 9)))
               for _ in range(rng.randint(0, 4))}
        assert canonical_json(obj) == json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                                 ensure_ascii=False)
    assert canonical_json({"b": "1", "a": 2}) == '{"a":2,"b":"1"}'  # not flat strings: json
