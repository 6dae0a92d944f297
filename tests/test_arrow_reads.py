"""Arrow reads files by path, never through a Python file object.

A Parquet file handed to Arrow as a Python file (what ``pandas.read_parquet``
does with a local path) is read into buffers that are Python objects, and the
threaded reader behind ``pq.read_table`` is torn down on one of Arrow's threads
after the read returns. When that thread drops the last such buffer while the
interpreter exits, it is killed asking for the GIL inside a C++ destructor and
the process aborts after its work is done ("terminate called without an active
exception", exit 134; apache/arrow#34314). ``replay`` did, now and then, reading
its results back last thing (the core's stack: ``PyBuffer::~PyBuffer`` <- a
Future of the Parquet read cache <- ``SerializedFile`` <- the scan's
``ExecPlanImpl`` destroyed on an Arrow worker <- ``PyGILState_Ensure`` ->
``pthread_exit`` -> ``std::terminate``).

Whether the abort shows is timing (1 run in tens), so these tests check the
cause: every Parquet read of the commands that read Arrow files (run --traces,
replay, traces import, read_results, tune's and calibrate's reads of a trace
folder) gets a path. ``benchmarks/exit_aborts.py`` counts aborts over many runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sim.cli import main

_READERS = ("read_table", "read_schema", "read_metadata", "read_pandas")


def _paths_only(source: Any) -> bool:
    if isinstance(source, list | tuple):
        return all(_paths_only(s) for s in source)
    return isinstance(source, str | os.PathLike)


@pytest.fixture
def arrow_sources(monkeypatch) -> Iterator[list[tuple[str, Any]]]:
    """Every source handed to pyarrow.parquet's readers while the test runs,
    as ``(reader, source)``; pandas reaches them through the same module."""
    seen: list[tuple[str, Any]] = []

    def spied(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def reader(source: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((name, source))
            return real(source, *args, **kwargs)
        return reader

    for name in _READERS:
        monkeypatch.setattr(pq, name, spied(name, getattr(pq, name)))
    real_init = pq.ParquetFile.__init__

    def parquet_file(self: Any, source: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(("ParquetFile", source))
        real_init(self, source, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "__init__", parquet_file)
    yield seen


def _handles(seen: list[tuple[str, Any]]) -> list[str]:
    return [f"{name}({type(source).__name__})" for name, source in seen
            if not _paths_only(source)]


def test_the_spy_sees_a_python_file_handed_to_arrow(tmp_path, arrow_sources):
    """The check can fail: a Python file handed to Arrow is seen (what
    pandas.read_parquet of a local path does, the cause of the abort)."""
    import pyarrow as pa

    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with open(path, "rb") as handle:
        pq.read_table(handle)
    pq.ParquetFile(path)
    assert _handles(arrow_sources) == ["read_table(BufferedReader)"]
    assert [name for name, _ in arrow_sources] == ["read_table", "ParquetFile"]


def test_commands_read_parquet_by_path(tmp_path, arrow_sources, capsys):
    """run --traces, replay, traces import, read_results and the trace-folder
    reads of tune and calibrate give Arrow paths, never a Python file."""
    from sim.api.simulating import read_results
    from sim.calibration.jobs import prices_date
    from sim.tuning.inforce import default_harness

    runs, replayed, imported = tmp_path / "runs", tmp_path / "replay", tmp_path / "imported"
    assert main(["run", "bounded", "--traces", "--tasks", "30", "--workers", "1", "--quiet",
                 "--out", str(runs)]) == 0
    assert main(["replay", str(runs), "bounded", "--out", str(replayed), "--quiet"]) == 0
    assert main(["traces", "import", str(runs), "--out", str(imported), "--quiet"]) == 0
    read_results(replayed)
    default_harness(imported)
    prices_date(str(imported))  # None: simulated runs record no start
    capsys.readouterr()
    read = {Path(source).name for _, source in arrow_sources if _paths_only(source)}
    assert {"results.parquet", "runs.parquet", "calls.parquet"} <= read
    assert _handles(arrow_sources) == []


def test_read_parquet_is_what_pandas_reads(tmp_path):
    """sim.parquet.read_parquet returns what pandas.read_parquet does
    (dtypes, values, index), whole or a few columns."""
    import pandas as pd

    from sim.output.files import write_parquet
    from sim.parquet import read_parquet

    frame = pd.DataFrame({"i": pd.array([1, None, 3], dtype="Int64"), "f": [0.5, 1.5, None],
                          "s": ["a", None, "c"], "b": [True, False, True]})
    path = tmp_path / "f.parquet"
    write_parquet(path, frame, {"k": 1})
    pd.testing.assert_frame_equal(read_parquet(path), pd.read_parquet(path))
    pd.testing.assert_frame_equal(read_parquet(path, columns=["s", "i"]),
                                  pd.read_parquet(path, columns=["s", "i"]))
