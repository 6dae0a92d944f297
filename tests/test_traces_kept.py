"""How a traced sweep's chunks reach the trace files: kept by the workers
themselves on this machine, handed to the sink from memory when their turn is
near, read back from the store once otherwise; the side tables written to
Parquet with no dictionary tried on their nearly distinct columns. Whatever the
path, the tables are the ones :func:`run_chunk` computes."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sim.output.chunks
from sim.output.chunks import ChunkStore
from sim.output.stream import ParquetStream, dictionary_columns
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from sim.sweeps.chunks import DISTINCT_COLUMNS, HELD_CHUNKS, KEPT, Handover, run_chunk, run_chunks
from sim.sweeps.plan import plan
from sim.sweeps.schedulers import InProcess, LocalPool
from sim.traces.model import CALLS_SCHEMA, RUNS_SCHEMA

BOUNDED = Path(__file__).resolve().parents[1] / "scenarios" / "bounded.yaml"


@pytest.fixture(scope="module")
def bounded() -> tuple[Any, Any]:
    runs = cells_of(load_scenario(BOUNDED))
    return runs, build_cell(runs[0])


def same(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> bool:
    return sorted(a) == sorted(b) and all(a[n].equals(b[n], check_metadata=True) for n in a)


def test_a_worker_keeps_a_traced_chunk_in_the_store_itself(tmp_path: Path, bounded: Any) -> None:
    """With ``keep`` a traced direct chunk is written to its file in the store
    and KEPT returned; the store gives back the tables computed without it."""
    runs, cell = bounded
    job = plan(runs, 120)[1]
    table, extras, side = run_chunk(runs[0], cell, job, "sim")
    store = ChunkStore(tmp_path / "p", "x", resume=False)
    assert run_chunk(runs[0], cell, job, "sim", None, str(store.chunk_path(job.key))) == KEPT
    assert store.has(job.key) and store.keys() == {job.key}
    back, back_extras, back_side = store.take(job.key)
    assert back.equals(table) and back_extras is None and extras is None
    assert side is not None and same(back_side, side)
    assert [p.name for p in (tmp_path / "p").iterdir() if p.name.endswith(".tmp")] == []


def test_a_worker_whose_write_fails_hands_the_tables_back(tmp_path: Path, bounded: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk in the worker is no error there: the tables go back to the
    parent (which keeps them or says why it cannot), nothing is left behind."""
    runs, cell = bounded
    job = plan(runs, 60)[0]
    expected = run_chunk(runs[0], cell, job, "sim")

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    store = ChunkStore(tmp_path / "p", "x", resume=False)
    monkeypatch.setattr(sim.output.chunks.os, "replace", full)
    table, extras, side = run_chunk(runs[0], cell, job, "sim", None, str(store.chunk_path(job.key)))
    assert table is not None and expected[0] is not None and table.equals(expected[0])
    assert side is not None and expected[2] is not None and same(side, expected[2])
    assert extras is None and store.keys() == set()
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == ["manifest.json"]


def test_an_untraced_chunk_is_never_kept_by_the_worker(tmp_path: Path, bounded: Any) -> None:
    """``keep`` is for traced chunks: a plain one comes back as tables."""
    runs, cell = bounded
    job = plan(runs, 60)[0]
    store = ChunkStore(tmp_path / "p", "x", resume=False)
    table, _, side = run_chunk(runs[0], cell, job, None, None, str(store.chunk_path(job.key)))
    assert table is not None and table.num_rows == job.tasks and side is None
    assert store.keys() == set()


def test_take_is_get_and_sides_from_one_read(tmp_path: Path, bounded: Any) -> None:
    runs, cell = bounded
    job = plan(runs, 60)[0]
    table, _, side = run_chunk(runs[0], cell, job, "sim")
    assert table is not None and side is not None
    store = ChunkStore(tmp_path / "p", "x", resume=False)
    store.put("k", table, {"capacity": {"W": 1.5}}, side)
    back, extras, back_side = store.take("k")
    assert back.equals(store.get("k")[0])
    assert extras == store.get("k")[1] == {"capacity": {"W": 1.5}}
    assert same(back_side, store.sides("k")) and same(back_side, side)


def test_a_killed_write_leaves_no_temporary_file_on_resume(tmp_path: Path) -> None:
    """A chunk's temporary file cut short by a kill is removed when the store resumes."""
    store = ChunkStore(tmp_path / "p", "x", resume=False)
    left = tmp_path / "p" / ".c00000-t0000000000.arrow.abc123.tmp"
    left.write_bytes(b"cut short")
    ChunkStore(tmp_path / "p", "x", resume=True)
    assert not left.exists() and store.keys() == set()


class CountingStore(ChunkStore):
    """A ChunkStore that counts the chunks the parent puts and takes back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = {"put": 0, "take": 0}

    def put(self, *args: Any, **kwargs: Any) -> None:
        self.calls["put"] += 1
        super().put(*args, **kwargs)

    def take(self, key: str) -> Any:
        self.calls["take"] += 1
        return super().take(key)


def sunk(tmp_path: Path, name: str, scheduler: Any, runs: Any, tasks: int
         ) -> tuple[list[tuple[str, pa.Table, dict[str, pa.Table] | None]], CountingStore]:
    store = CountingStore(tmp_path / name, "x", resume=False)
    seen: list[tuple[str, pa.Table, dict[str, pa.Table] | None]] = []
    with scheduler:
        run_chunks(runs, tasks, scheduler, store,
                   lambda job, table, extras, side: seen.append((job.key, table, side)),
                   progress=False, traces="sim")
    return seen, store


def test_every_path_hands_the_sink_the_same_chunks_in_order(tmp_path: Path, bounded: Any) -> None:
    """In this process every chunk is due when it arrives: kept, then handed
    over from memory (never read back). On two local workers each chunk is
    kept by its worker (the parent puts none) and read back once. The sink
    sees the same tables, in plan order, either way."""
    runs, _ = bounded
    tasks = 300  # 6 chunks of 50
    here, store_here = sunk(tmp_path, "here", InProcess(), runs, tasks)
    pool, store_pool = sunk(tmp_path, "pool", LocalPool(2), runs, tasks)
    keys = [job.key for job in plan(runs, tasks)]
    assert [k for k, _, _ in here] == [k for k, _, _ in pool] == keys and len(keys) == 6
    for (_, table, side), (_, table2, side2) in zip(here, pool, strict=True):
        assert table.equals(table2) and side is not None and side2 is not None
        assert same(side, side2)
    assert store_here.calls == {"put": 6, "take": 0}
    assert store_pool.calls == {"put": 0, "take": 6}


@pytest.mark.parametrize(("schema", "table"), [(CALLS_SCHEMA, "calls"), (RUNS_SCHEMA, "runs")])
def test_the_side_streams_plain_columns_are_the_files_own(tmp_path: Path, bounded: Any,
                                                         schema: pa.Schema, table: str) -> None:
    """:func:`dictionary_columns` names the Parquet file's leaf columns; a
    stream told to write some plain writes those without a dictionary and the
    others as the default stream does, and the file reads back as its."""
    runs, cell = bounded
    side = run_chunk(runs[0], cell, plan(runs, 60)[0], "sim")[2]
    assert side is not None
    data = side[table]
    with ParquetStream(tmp_path / "plain.parquet", schema, plain=DISTINCT_COLUMNS[table]) as s:
        s.write(data)
    with ParquetStream(tmp_path / "default.parquet", schema) as s:
        s.write(data)
    meta = pq.ParquetFile(tmp_path / "plain.parquet").metadata
    paths = [meta.row_group(0).column(i).path_in_schema for i in range(meta.num_columns)]
    assert dictionary_columns(schema, ()) == paths
    default = pq.ParquetFile(tmp_path / "default.parquet").metadata.row_group(0)
    for i, path in enumerate(paths):
        encodings = meta.row_group(0).column(i).encodings
        if path in DISTINCT_COLUMNS[table]:
            assert "RLE_DICTIONARY" not in encodings, path
        else:  # (a boolean column never has one)
            assert encodings == default.column(i).encodings, path
    plain = pq.read_table(tmp_path / "plain.parquet")
    assert plain.equals(pq.read_table(tmp_path / "default.parquet"), check_metadata=True)
    assert plain.equals(data)
    with pytest.raises(ValueError, match="no such columns"):
        dictionary_columns(schema, ("nope",))


def test_chunks_arriving_out_of_order_reach_the_sink_in_plan_order(tmp_path: Path,
                                                                   bounded: Any) -> None:
    """Chunks finishing last-first: those whose turn was near on arrival are
    handed over from memory, the rest read back once; the sink sees plan order."""
    runs, cell = bounded
    jobs = plan(runs, 500)  # 10 chunks of 50
    results = {job.key: run_chunk(runs[0], cell, job, "sim") for job in jobs}
    store = CountingStore(tmp_path / "p", "x", resume=False)
    seen: list[str] = []
    handover = Handover(jobs, store, lambda job, table, extras, side: seen.append(job.key),
                        "sim", set())
    for job in reversed(jobs):
        handover.keep(job, *results[job.key])
        handover.drain()
    assert seen == [job.key for job in jobs]
    assert store.calls == {"put": len(jobs), "take": len(jobs) - HELD_CHUNKS}
    assert handover.written == len(jobs) and handover.done == {job.key for job in jobs}
