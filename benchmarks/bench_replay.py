"""Replay wall time at 1 and 2 workers, against a read of the same Parquet files.

    python -m benchmarks.bench_replay [--runs N ...] [--rounds R] [--scenario PATH]

For each N: writes a sim trace folder of N runs (``python -m sim run bounded
--traces --tasks N``, once, not timed), then alternates, ``rounds`` times,
the baseline (this process reads the folder's ``runs.parquet`` and
``calls.parquet`` with pyarrow into pandas: what any replay must do first)
and ``python -m sim replay FOLDER SCENARIO --workers W`` for W = 1 and 2 (the
wall time a user waits, interpreter start and imports included, and the CPU
seconds all its processes used, which the load does not inflate). Prints the
median seconds of each, each replay's ratio to the read, the 2-worker speed-up
and whether the two replays wrote the same results.parquet (they must). The
ratios, not the absolute times, are the measure: the machine is shared; the
load average is printed with them. Issue 26 asks for a replay of 100,000
runs under 60 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq


def write_traces(folder: Path, runs: int, scenario: str) -> Path:
    """A sim trace folder of ``runs`` runs of ``scenario`` (seed 7)."""
    subprocess.run([sys.executable, "-m", "sim", "run", scenario, "--traces", "--tasks",
                    str(runs), "--seed", "7", "--quiet", "--out", str(folder)],
                   check=True, stdout=subprocess.DEVNULL)
    return folder


def read_seconds(folder: Path) -> float:
    """Seconds to read the folder's two Parquet files into pandas."""
    start = time.perf_counter()
    for name in ("runs.parquet", "calls.parquet"):
        pq.read_table(folder / name).to_pandas()
    return time.perf_counter() - start


def replay_seconds(folder: Path, scenario: str, workers: int, out: Path
                   ) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, every process of it) of
    ``sim replay`` over the folder with ``workers`` processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sim", "replay", str(folder), scenario, "--workers",
                    str(workers), "--quiet", "--force", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(runs: int, rounds: int, scenario: str, work: Path) -> dict[str, float | bool]:
    """Median seconds of the read and of the replays at 1 and 2 workers."""
    folder = write_traces(work / f"traces_{runs}", runs, scenario)
    times: dict[str, list[float]] = {"read": [], "1": [], "2": [], "cpu1": [], "cpu2": []}
    for _ in range(rounds):
        times["read"].append(read_seconds(folder))
        for workers in (1, 2):
            wall, cpu = replay_seconds(folder, scenario, workers,
                                       work / f"replay_{runs}_{workers}")
            times[str(workers)].append(wall)
            times[f"cpu{workers}"].append(cpu)
    same = (pq.read_table(work / f"replay_{runs}_1" / "results.parquet")
            .equals(pq.read_table(work / f"replay_{runs}_2" / "results.parquet")))
    return {**{k: statistics.median(v) for k, v in times.items()}, "identical": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_replay_") as tmp:
        for runs in args.runs:
            m = measure(runs, args.rounds, args.scenario, Path(tmp))
            read = float(m["read"])
            print(f"{runs:,} runs, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
            print(f"  read runs+calls.parquet  {read:8.2f} s")
            for workers in (1, 2):
                wall = float(m[str(workers)])
                print(f"  replay, {workers} worker{'s' if workers > 1 else ' '}      "
                      f"{wall:8.2f} s  ({wall / read:,.1f}x the read; "
                      f"{float(m[f'cpu{workers}']):.1f} CPU s)")
            print(f"  2 workers vs 1: {float(m['1']) / float(m['2']):.2f}x faster; "
                  f"results identical: {m['identical']}")


if __name__ == "__main__":
    main()
