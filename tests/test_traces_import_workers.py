"""`traces import` on worker processes, and trace folders passed through as
columns: the folder written is the same, byte for byte, as one file at a time
in one process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sim.sweeps.schedulers import LocalPool
from sim.traces import folder as trace_folder
from sim.traces.importer import import_traces
from sim.traces.model import CALLS_FILE, REPORT_FILE, RUNS_FILE
from sim.traces.skips import UNREADABLE
from sim.traces.writer import write_runs
from tests.traces_helpers import data_folder, run

FILES = (RUNS_FILE, CALLS_FILE, REPORT_FILE)


def _sources(tmp_path: Path) -> Path:
    """A folder of mixed inputs: tau2 result files (several runs each, some
    skipped), mini-swe-agent trajectories with a file ignored beside them, and
    a trace folder sim wrote."""
    src = tmp_path / "src"
    tau2 = sorted(data_folder("tau2", "raw").iterdir())[:6]
    (src / "tau2").mkdir(parents=True)
    for path in tau2:
        shutil.copy(path, src / "tau2" / path.name)
    shutil.copytree(data_folder("mini-swe-agent"), src / "swe")
    write_runs(_mkdir(src / "simulated"), [run(f"s{i}", [100 + i, 150, 200 + i])
                                           for i in range(5)])
    return src


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _bytes(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in FILES}


def test_two_workers_write_the_bytes_of_one(tmp_path):
    src = _sources(tmp_path)
    one = import_traces([src], tmp_path / "one")
    with LocalPool(2) as pool:
        two = import_traces([src], tmp_path / "two", scheduler=pool)
    assert one.runs > 5 and one.skips  # runs of every kind, and some skipped
    assert set(one.runs_by_source) == {"tau2", "mini-swe-agent", "sim"}
    assert _bytes(tmp_path / "one") == _bytes(tmp_path / "two")
    assert two.to_dict() == one.to_dict()


def test_a_trace_folder_passes_through_as_the_records_would(tmp_path, monkeypatch):
    """Calls stored out of order, runs of several files: the columns path
    writes what the record-by-record path writes."""
    folder = _mkdir(tmp_path / "sim")
    write_runs(folder, [run(f"r{i}", [100, 120 + i, 140][: 1 + i % 3], file=f"f{i % 2}")
                        for i in range(7)])
    calls = pq.read_table(folder / CALLS_FILE)
    pq.write_table(calls.take(pa.array(list(range(calls.num_rows))[::-1])),
                   folder / CALLS_FILE)
    fast = import_traces([folder], tmp_path / "fast")
    monkeypatch.setattr(trace_folder, "tables", lambda path: None)
    slow = import_traces([folder], tmp_path / "slow")
    for name in (RUNS_FILE, CALLS_FILE):
        assert pq.read_table(tmp_path / "fast" / name).equals(
            pq.read_table(tmp_path / "slow" / name))
    assert fast.to_dict() == slow.to_dict()
    assert fast.runs == 7 and fast.run_files == {"f0": 4, "f1": 3}


def _grouped(folder: Path, rows: int) -> None:
    """Rewrite the folder's calls.parquet in row groups of ``rows`` calls."""
    calls = pq.read_table(folder / CALLS_FILE)
    pq.write_table(calls, folder / CALLS_FILE, row_group_size=rows)


def _whole(monkeypatch) -> None:
    """Make the import read trace folders whole, as before streaming."""
    from sim.traces import streaming

    monkeypatch.setattr(streaming, "stream_folder", lambda *args: None)


def test_a_folder_streams_in_slices_the_bytes_of_a_whole_read(tmp_path, monkeypatch):
    """A trace folder in many row groups: streamed in batches by this
    process, or its row groups read by two workers, it is written as when
    read whole, byte for byte."""
    from sim.traces import streaming

    folder = _mkdir(tmp_path / "sim")
    write_runs(folder, [run(f"r{i}", [100, 120 + i, 140, 90][: 1 + i % 4]) for i in range(40)])
    _grouped(folder, 7)
    monkeypatch.setattr(streaming, "BATCH_CALLS", 5)  # slices that cut runs apart
    alone = import_traces([folder], tmp_path / "alone")
    with LocalPool(2) as pool:
        import_traces([folder], tmp_path / "two", scheduler=pool)
    _whole(monkeypatch)
    whole = import_traces([folder], tmp_path / "whole")
    assert alone.runs == 40 and alone.to_dict() == whole.to_dict()
    assert _bytes(tmp_path / "alone") == _bytes(tmp_path / "whole") == _bytes(tmp_path / "two")


def test_a_bad_value_late_in_a_streamed_folder_is_refused_as_a_whole_read_refuses_it(
        tmp_path, monkeypatch):
    """A value out of bounds in the last row group shows after calls were
    written: the import starts again, reads the folder whole and skips it
    with the whole read's reason; the other source is imported as ever."""
    folder = _mkdir(tmp_path / "sim")
    write_runs(folder, [run(f"r{i}", [100, 120]) for i in range(20)])
    calls = pq.read_table(folder / CALLS_FILE)
    latency = calls.column("latency_s").to_pylist()
    latency[-1] = -1.0
    calls = calls.set_column(calls.schema.get_field_index("latency_s"), "latency_s",
                             pa.array(latency, pa.float64()))
    pq.write_table(calls, folder / CALLS_FILE, row_group_size=8)
    other = _mkdir(tmp_path / "other")
    write_runs(other, [run(f"o{i}", [100]) for i in range(3)])
    streamed = import_traces([folder, other], tmp_path / "streamed")
    _whole(monkeypatch)
    whole = import_traces([folder, other], tmp_path / "whole")
    assert streamed.runs == 3 and [s.reason for s in streamed.skips] == [UNREADABLE]
    assert streamed.to_dict() == whole.to_dict()
    assert _bytes(tmp_path / "streamed") == _bytes(tmp_path / "whole")
