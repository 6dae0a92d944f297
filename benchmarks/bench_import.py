"""``traces import`` of sim-written runs against a plain read of the same Parquet files.

    python -m benchmarks.bench_import [--sizes 1000,10000,100000] [--workers 1,2]
                                      [--rounds R] [--work DIR]

Writes the runs once (``python -m sim run scenarios/bounded.yaml --traces``
for the smallest size and up to 10,000 tasks; a larger size repeats the
10,000-run folder with suffixed run ids, the same calls, in row groups of
sim's writer's size), then, ``rounds``
times and alternating, times:

- the baseline: ``pyarrow.parquet.read_table`` of the folder's two files,
  in a fresh process (``python -c``), the cheapest possible read;
- ``python -m sim traces import FOLDER --out ... --workers W`` for each
  ``W``, in a fresh process (the command a user runs).

It prints the median wall seconds of each, the ratio of the import to the
baseline, the import's median CPU seconds (user + system, its workers
included) and peak resident memory (``ru_maxrss`` of that command, MiB; a
worker's when larger) and the load average at the start, since this machine is shared: the
ratios, not the seconds, are the measure. ``mx`` is the import's peak
memory over the read's (the read holds both files whole: an import that
streams stays near or below it whatever the size). Issue 26's target:
100,000 runs imported in under 25 s with 2 workers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.traces.model import CALLS_FILE, RUNS_FILE
from sim.traces.writer import ROW_GROUP_CALLS

BASE = 10_000
"""The most runs simulated; larger sizes repeat this folder."""


def simulate(folder: Path, tasks: int) -> None:
    """``tasks`` runs of bounded.yaml with traces, into ``folder``."""
    subprocess.run([sys.executable, "-m", "sim", "run", "scenarios/bounded.yaml", "--tasks",
                    str(tasks), "--seed", "11", "--traces", "--quiet", "--force", "--out",
                    str(folder)], check=True, stdout=subprocess.DEVNULL)


def repeat(source: Path, folder: Path, times: int) -> None:
    """``source``'s runs ``times`` over, run ids suffixed ``#k`` (a trace folder)."""
    runs, calls = pq.read_table(source / RUNS_FILE), pq.read_table(source / CALLS_FILE)
    folder.mkdir(parents=True, exist_ok=True)

    def suffixed(table: pa.Table, k: int) -> pa.Table:
        index = table.schema.get_field_index("run_id")
        ids = pc.binary_join_element_wise(table.column("run_id"), pa.scalar(f"#{k}"), "")
        return table.set_column(index, "run_id", ids)

    pq.write_table(pa.concat_tables(suffixed(runs, k) for k in range(times)),
                   folder / RUNS_FILE, compression="zstd")
    with pq.ParquetWriter(folder / CALLS_FILE, calls.schema, compression="zstd") as writer:
        for k in range(times):  # row groups of the size sim's writer uses
            writer.write_table(suffixed(calls, k).cast(calls.schema),
                               row_group_size=ROW_GROUP_CALLS)


def folders(work: Path, sizes: list[int]) -> dict[int, Path]:
    """A trace folder of each size (written once, kept in ``work``)."""
    out = {}
    for size in sizes:
        folder = work / f"runs{size}"
        if not (folder / CALLS_FILE).is_file():
            if size <= BASE:
                simulate(folder, size)
            else:
                base = work / f"runs{BASE}"
                if not (base / CALLS_FILE).is_file():
                    simulate(base, BASE)
                repeat(base, folder, -(-size // BASE))
        out[size] = folder
    return out


def timed(command: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one command: its own
    figures (``wait4``), not the maximum over every child so far."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, command)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default=None, help="where to keep the folders")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_import."))
    print(f"load average at start: {os.getloadavg()}")
    made = folders(work, sizes)
    print(f"{'runs':>8} {'calls':>10} {'read s':>8} {'read MiB':>8} " + " ".join(
        f"{f'w{w} s':>8} {f'w{w} x':>7} {f'w{w} cpu':>8} {f'w{w} MiB':>8} {f'w{w} mx':>7}"
        for w in workers))
    for size, folder in made.items():
        read = [sys.executable, "-c", "import sys, pyarrow.parquet as pq; "
                "[pq.read_table(f'{sys.argv[1]}/{n}') for n in ('runs.parquet', "
                "'calls.parquet')]", str(folder)]
        times: dict[str, list[float]] = {"read": []}
        cpu: dict[str, list[float]] = {}
        memory: dict[str, float] = {"read": 0.0}
        for _ in range(args.rounds):
            wall, _, rss = timed(read)
            times["read"].append(wall)
            memory["read"] = max(memory["read"], rss)
            for w in workers:
                out = work / f"imported{size}_w{w}"
                shutil.rmtree(out, ignore_errors=True)
                wall, seconds, rss = timed([sys.executable, "-m", "sim", "traces", "import",
                                            str(folder), "--out", str(out), "--quiet",
                                            "--workers", str(w)])
                times.setdefault(f"w{w}", []).append(wall)
                cpu.setdefault(f"w{w}", []).append(seconds)
                memory[f"w{w}"] = max(memory.get(f"w{w}", 0.0), rss)
        base = statistics.median(times["read"])
        calls = pq.read_metadata(folder / CALLS_FILE).num_rows
        cells = " ".join(f"{statistics.median(times[f'w{w}']):8.2f} "
                         f"{statistics.median(times[f'w{w}']) / base:7.1f} "
                         f"{statistics.median(cpu[f'w{w}']):8.2f} "
                         f"{memory[f'w{w}']:8.0f} "
                         f"{memory[f'w{w}'] / memory['read']:7.2f}" for w in workers)
        print(f"{size:8d} {calls:10d} {base:8.2f} {memory['read']:8.0f} {cells}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
