"""``tune`` at scale: wall time, peak RSS and reads of ``calls.parquet`` at
10k/30k/100k recorded runs (issue 37: 100,000 runs under 2 minutes and
2 GiB on 2 cores).

    python -m benchmarks.tune_scale [--runs 10000 30000 100000] [--dir DIR] [--base 2000]

The folders: ``base`` runs of ``scenarios/bounded.yaml`` written as traces
(``python -m sim run ... --traces --seed 7``, once, not timed), tiled to each
size (copy ``k`` of run ``r`` is run ``k:r``, its calls the same rows), so a
folder of N runs holds N/base copies of the same runs (the grid and the
answer stay those of the base; what grows is the work). Each tune runs in a
fresh process (``--child``) with its default knobs (the budgets: tokens,
money, steps; the harness in force the one the traces state: the step
backstop of 50, so the looser steps candidates are forecasts of a world
calibrated to the folder) and reports its wall seconds, CPU seconds, peak
resident memory (``resource.getrusage``: the largest of the process and its
children, MiB), the times ``calls.parquet`` was opened for reading (pyarrow's
``read_table``/``ParquetFile`` and pandas' ``read_parquet``, counted by
wrapping them in the child), the recommendation and the number of candidates.
``--replay-only`` tunes against the traces' harness without its step
backstop, so every candidate tightens it and is replayed (no world is
calibrated): the replay's part alone.
The load average is printed with them: the machine is shared.

Measured 2026-12-05, session 10 (2 cores shared by 9 sessions, load 3-12:
wall times are several times an idle machine's; CPU seconds, the process's
and its workers', are not inflated). Baseline: commit 3114ae8 (every
candidate replays every run, one process); after: 60dc786 (a candidate
replays again only the runs its Limits could stop; 2 forked workers).

==============================  =============================  ============================
tune, tiled bounded runs        baseline 3114ae8               after 60dc786
==============================  =============================  ============================
2,000, replay only              488 s wall, 75.1 CPU s,        61 s wall, 14.6 CPU s,
                                371 MiB, 2 reads of calls      348 MiB, 2 reads
10,000, replay only             (not run; ~5x the 2,000)       706 s wall (load 12),
                                                               96.8 CPU s, 744 MiB, 2 reads
30,000, replay only             (not run)                      837 s wall (load 10),
                                                               238 CPU s, 1,323 MiB, 2 reads
100,000, replay only            (not run)                      869 s wall (load 4), 674
                                                               CPU s, 3,622 MiB, 2 reads
10,000, default (steps 50 in    3,129 s wall (load 10), 488    (not run: the world's
force: 2 forecasts, a world     CPU s, 983 MiB, 3 reads        calibration dominates, and
calibrated)                                                    is unchanged)
==============================  =============================  ============================

Where the rest went (cProfile, 2,000 runs, one process): replaying again
the runs tight candidates stop (62%: a cap at the needs' median stops half
the runs, and those are the long ones), the bootstrap intervals of each
frontier row (24%), the replay in force (13%). Peak memory is the folder
read whole into Python objects (load_tables, then one RecordedRun per run):
3.5 GB at 100,000 runs before any replay.

Measured 2026-12-05, session 11 (2 cores shared by 6 sessions, load 1.5-5),
base 266b217 and after (h11-tunefast: one pass per run for every candidate,
:mod:`sim.tuning.stops`; a bootstrap interval of values already seen found
again, and a row's intervals drawn together), each run alone, the same
folders (``--dir /tmp/tf_scale``), the same recommendation at each size:

==============================  =============================  ============================
tune, tiled bounded runs,       base 266b217                   after (h11-tunefast)
replay only
==============================  =============================  ============================
2,000 (1 worker, frontier and   15.6 CPU s                     4.5 CPU s (runs replayed
stopped_runs JSON compared)                                    again: 9,068 -> 0)
10,000                          93.3 s wall, 75.0 CPU s,       22.0 s wall, 21.7 CPU s,
                                677 MiB, 2 reads               674 MiB, 2 reads
30,000                          288.6 s wall, 231.7 CPU s,     62.7 s wall, 62.0 CPU s,
                                1,335 MiB, 2 reads             1,204 MiB, 2 reads
100,000                         720.4 s wall, 735.3 CPU s,     192.5 s wall, 208.6 CPU s,
                                3,662 MiB, 2 reads             3,784 MiB, 2 reads
==============================  =============================  ============================

Left (cProfile, 2,000 runs, one process, before the paired draws): the bootstrap of the
distinct rows (about a third), the replay in force (a quarter), the
candidates' checks on the marks and ``could_stop`` (a quarter), reading the
folder. The wall time is now about the CPU time: the candidates run one
after another in the parent (only the replay in force is spread over the
workers), and the folder is still held whole (peak memory unchanged; the
marks add about 3% at 100,000 runs). Issue 37's 2 minutes and 2 GiB at
100,000 runs are not reached yet.

Measured 2026-12-05, session 12 (2 cores shared by 6 sessions, load 4-8:
wall times are those of a loaded machine; CPU seconds, the process's and its
workers', much less so). Base d806c1d (the runs read whole into the parent,
the replay in force in 2 forked workers, the candidates one after another in
the parent); after h12-tunep (:mod:`sim.tuning.shards`: 2 worker processes
each read their own half of the folder once, a chunk of 500 runs at a time,
replay it in force and keep only the marks and a few numbers per run; every
candidate is sent to both and answered as numpy arrays; the bootstrap
intervals drawn once at the end, in 2 forked processes). ``calls_reads``
counts the parent's opens only: its checking pass over the calls
(``folder_index``), the pricing of a model the catalogue lacks (``_costed``)
and ``split_by_model``; each worker opens the file once per chunk to read its
own rows (each row group read once, kept for the next chunk). The same
recommendation as the base at each size:

==============================  =============================  ============================
tune, tiled bounded runs,       base d806c1d                   after (h12-tunep)
replay only
==============================  =============================  ============================
10,000                          29.3 s wall (load 4.5),        32.7 s wall (load 3.7),
                                23.8 CPU s, 665 MiB, 2 reads   26.3 CPU s, 474 MiB, 3 reads
30,000                          99.5 s wall (load 4.1),        95.0 s wall (load 3.7),
                                68.1 CPU s, 1,190 MiB, 2 reads 87.6 CPU s, 754 MiB, 3 reads
100,000                         (session 11: 192.5 s wall,     460.0 s wall (load 5.1-8.1),
                                208.6 CPU s, 3,784 MiB)        294.0 CPU s, 1,766 MiB,
                                                               3 reads
==============================  =============================  ============================

Peak memory at 100,000 runs is now under issue 37's 2 GiB (the largest of
the process and its workers; near the end each of the three held 520-575
MiB; in one shard resident memory grows about 12 KB a run, of which
tracemalloc sees about 4.5 KB of Python objects: the rest is what the
chunks' replays leave fragmented). The 2 minutes are not reached:
the CPU seconds did not fall (the work is the same: one replay in force per
run, then each candidate's Limits on the runs it could stop, then the
bootstrap; it is spread over the 2 workers, and rose by 10% at 10,000 runs
and 29% at 30,000 on this loaded machine; likely causes, not measured apart:
the calls are checked twice, by the parent's pass and by each worker's read
of its rows, and two busy processes share the cores with the other sessions'). Where the rest goes
(cProfile, 10,000 runs, one worker, before ``run_params`` was made once per
run): the replay in force about 40% (the harness loop and ``run_params``), the candidates' checks
(``could_stop`` and ``first_stop`` on the marks, for 72 candidates) about
20%, the bootstrap intervals about 17%, reading the folder the rest.

Measured 2026-12-05, session 12, later (2 cores shared with the lead's test
runs, load 2-4.5), base 2489fe9 (h12-tunep and the stops fix) and after
h12-tunez, each run alone, the same folders (``--dir /tmp/tz_scale``, the
same files as ``/tmp/tune_scale``), the same recommendation at each size
(and at 10,000 runs in one process, the frontier's JSON and
``stopped_runs.csv`` byte-equal):

==============================  =============================  ============================
tune, tiled bounded runs,       base 2489fe9                   after (h12-tunez)
replay only
==============================  =============================  ============================
10,000                          23.5 s wall (load 3.8),        22.3 s wall (load 4.1),
                                22.6 CPU s, 446 MiB            15.7 CPU s, 446 MiB
30,000                          113.4 s wall (load 4.2),       55.0 s wall (load 4.5),
                                76.5 CPU s, 566 MiB            47.2 CPU s, 578 MiB
100,000                         368.8 s wall (run at nice 10,  182.5 s wall (load 2-4.5,
                                load 2.8-4.8), 252.9 CPU s,    the lead's tests on both
                                759 MiB                        cores), 175.1 CPU s, 784 MiB
==============================  =============================  ============================

Where the CPU above session 11's went (cProfile and ``gc.callbacks``, one
process): Python's cyclic garbage collector. A shard keeps a few Python
objects per run (its reading in force, its recorded fields, its marks), and
every pass of the oldest generation walks them all; the chunks' replays (many
short-lived objects) and ``could_stop``'s per-run lists of counters for each
candidate set those passes off, so their cost grew with the runs kept times
the passes: at 30,000 runs 21.9 of 79.1 CPU s (106 passes of the oldest
generation, 20 of them in ``could_stop``). Paused (:mod:`sim.engines.gc_paused`)
while a shard reads and replays a chunk and while it answers a candidate: 4.5
of 60.2 CPU s. Then the candidates' checks (9.2 of 35.5 profiled CPU s at
10,000 runs): a candidate at least as loose in its three budgets as one
answered before checks only the runs that one could stop, each from where it
stopped there (the candidate's own Limits decide; a check refuses under a
looser budget no more than under a tighter one): 2.9 s. Not the cause: the
calls checked twice (the parent's ``folder_index`` pass is 0.65 s at 10,000
runs; each worker's check of its row groups, ``checked_calls``, a few ms).
Left (10,000 runs, one process, 27.1 profiled CPU s): the replay in force
14.9 s (the harness loop; reading the rows about 2), the bootstrap intervals
6.5 s (in 2 forked processes; scipy's resampling and the p95's partitions),
the parent's pricing pass 2.6 s (:func:`~sim.drivers.replay.pricing.price_models`
over every run read again, before the workers start: serial), the
candidates' checks 2.9 s, ``folder_index`` 0.65 s. Issue 37's 2 GiB is met
(the peaks here, 759-784 MiB at 100,000 runs, are below session 12's
earlier 1,766 MiB for the same code as the base: not explained, measured
as is); the 2 minutes at 100,000 runs are within reach on an idle machine
(175 CPU s over 2 cores, about 88 s each if evenly spread; the serial
parent's part, the check and pricing passes, is about a tenth) but not
shown on this loaded one. ``calls_reads`` counts every open of the file in
the parent, one per :data:`~sim.drivers.replay.reading.PRICING_CHUNK` of
the pricing pass included (5 at 10,000, 27 at 100,000), the same for both.

Measured 2026-12-05, session 12, on the final tree (e0872a6) with the machine
otherwise idle (load 0.0 at the start, 1.4 at the end), the same 100,000-run
folder (``--runs 100000 --replay-only --dir /tmp/tune_scale``): **93.3 s wall,
163.4 CPU s, 800 MiB peak**, 70 candidates, the same recommendation
(tokens=1,380,000 money=$4.75 steps=36): issue 37's 2 minutes and 2 GiB on
2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent


def base_folder(folder: Path, runs: int) -> Path:
    """A trace folder of ``runs`` runs of ``scenarios/bounded.yaml`` (seed 7)."""
    if not (folder / "calls.parquet").exists():
        subprocess.run([sys.executable, "-m", "sim", "run", "scenarios/bounded.yaml",
                        "--traces", "--tasks", str(runs), "--seed", "7", "--workers", "1",
                        "--quiet", "--out", str(folder)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
    return folder


def tiled(base: Path, folder: Path, runs: int) -> Path:
    """``base`` tiled to ``runs`` runs in ``folder`` (copy ``k`` of run ``r``
    is ``k:r``; the last copy cut short)."""
    if (folder / "calls.parquet").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    r = pq.read_table(base / "runs.parquet")
    c = pq.read_table(base / "calls.parquet")
    ids = r.column("run_id").to_pylist()
    steps = r.column("steps").to_pylist()
    run_parts, call_parts = [], []
    left, k = runs, 0
    while left > 0:
        take = min(left, r.num_rows)
        part = r.slice(0, take)
        part = part.set_column(part.schema.get_field_index("run_id"), "run_id",
                               pa.array([f"{k}:{i}" for i in ids[:take]], pa.string()))
        run_parts.append(part)
        n_calls = sum(steps[:take])
        calls = c.slice(0, n_calls)
        call_ids = calls.column("run_id").to_pylist()
        calls = calls.set_column(calls.schema.get_field_index("run_id"), "run_id",
                                 pa.array([f"{k}:{i}" for i in call_ids], pa.string()))
        call_parts.append(calls)
        left -= take
        k += 1
    pq.write_table(pa.concat_tables(run_parts), folder / "runs.parquet")
    pq.write_table(pa.concat_tables(call_parts), folder / "calls.parquet",
                   row_group_size=100_000)
    return folder


def _count_reads() -> dict[str, int]:
    """Wrap the Parquet readers so that each open of a ``calls.parquet`` is counted."""
    import pandas as pd

    counts = {"calls.parquet": 0}

    def counted(path: Any) -> None:
        if str(path).endswith("calls.parquet"):
            counts["calls.parquet"] += 1

    read_table, parquet_file, read_pandas = pq.read_table, pq.ParquetFile, pd.read_parquet

    def read_table_counted(source: Any, *args: Any, **kwargs: Any) -> Any:
        counted(source)
        return read_table(source, *args, **kwargs)

    class ParquetFileCounted(parquet_file):  # type: ignore[misc, valid-type]
        def __init__(self, source: Any, *args: Any, **kwargs: Any) -> None:
            counted(source)
            super().__init__(source, *args, **kwargs)

    def read_pandas_counted(path: Any, *args: Any, **kwargs: Any) -> Any:
        counted(path)
        return read_pandas(path, *args, **kwargs)

    pq.read_table = read_table_counted
    pq.ParquetFile = ParquetFileCounted  # type: ignore[misc]
    pd.read_parquet = read_pandas_counted
    return counts


def child(folder: str, workers: int | None, replay_only: bool) -> None:
    """Tune ``folder`` here and print the measures as JSON."""
    counts = _count_reads()
    from sim.tuning.search import tune

    start, cpu = time.perf_counter(), time.process_time()
    options: dict[str, Any] = {} if workers is None else {"workers": workers}
    if replay_only:  # the harness the traces state without its step backstop
        from sim.scenario.model import HarnessConfig
        from sim.tuning.inforce import default_harness

        doc = default_harness(folder).model_dump(mode="json")
        doc["budgets"]["steps"] = None
        options["scenario"] = HarnessConfig.model_validate(doc)
    result = tune(folder, **options)
    wall = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "wall_s": round(wall, 1),
        "cpu_s": round(time.process_time() - cpu + kids.ru_utime + kids.ru_stime, 1),
        "peak_mib": round(max(own.ru_maxrss, kids.ru_maxrss) / 1024),
        "calls_reads": counts["calls.parquet"],
        "candidates": len(result.frontier),
        "recommendation": result.recommendation.label, "status": result.status}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--dir", default="/tmp/tune_scale")
    parser.add_argument("--base", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--replay-only", action="store_true",
                        help="no budget in force, so every candidate is replayed (no forecast)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workers, args.replay_only)
        return
    root = Path(args.dir)
    base = base_folder(root / f"base_{args.base}", args.base)
    for n in args.runs:
        folder = tiled(base, root / f"tiled_{n}", n)
        load = os.getloadavg()[0]
        command = [sys.executable, "-m", "benchmarks.tune_scale", "--child", str(folder)]
        if args.workers is not None:
            command += ["--workers", str(args.workers)]
        if args.replay_only:
            command.append("--replay-only")
        out = subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True)
        print(json.dumps({"runs": n, "load": round(load, 1), "replay_only": args.replay_only,
                          **json.loads(out.stdout.strip().splitlines()[-1])}), flush=True)


if __name__ == "__main__":
    main()
