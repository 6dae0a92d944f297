"""Replay wall time, CPU and peak memory at 1k/10k/100k runs, at 1 and 2
workers and on Dask, against a read of the same Parquet files.

    python -m benchmarks.bench_replay [--runs N ...] [--rounds R] [--scenario PATH] [--no-dask]

For each N: writes a sim trace folder of N runs (``python -m sim run bounded
--traces --tasks N``, once, not timed), then alternates, ``rounds`` times,
the baseline (this process reads the folder's ``runs.parquet`` and
``calls.parquet`` with pyarrow into pandas: what any replay must do first)
and ``python -m sim replay FOLDER SCENARIO`` with ``--workers 1``,
``--workers 2`` and ``--workers 2 --scheduler dask`` (the wall time a user
waits, interpreter start and imports included; the CPU seconds of the
command and every process it started, which the load does not inflate; and
the peak resident memory of its largest process). Prints the median of
each, each replay's ratio to the read, and whether the replays wrote the
same results.parquet (they must). The ratios, not the absolute times, are
the measure: the machine is shared; the load average is printed with them.
Issue 26 asks for a replay of 100,000 runs under 60 s with 2 workers, and
memory flat in the number of runs.

Measured 2026-12-02, session 3 (load 16-23 on 2 cores shared by six
sessions, so wall times are several times an idle machine's; CPU seconds
are not inflated):

=========  ==========  =====================  ======================  ===============
runs       read (s)    1 worker: wall / CPU   2 workers: wall / CPU   dask, 2: wall
=========  ==========  =====================  ======================  ===============
1,000      0.93        18.1 s / 2.9 s         26.9 s / 3.0 s          54.2 s
10,000     3.20        51.5 s / 7.7 s         41.2 s / 8.1 s          57.9 s
100,000    14.61       428 s / 62.3 s         216 s / 65.2 s          315 s
=========  ==========  =====================  ======================  ===============

Peak RSS then 307 / 436 / 1,452 MiB: the parent read the whole folder.
Session 4 (the folder streamed: checked a batch at a time, each worker
reading its chunk's calls by row range), load 9-19: 10,000 runs 53.7 s /
7.9 CPU s at 1 worker (410 MiB, 1.42x the read's 288 MiB), 38.2 s / 7.9 CPU
s at 2 workers (333 MiB, 1.16x); 100,000 runs at 2 workers (``/usr/bin/time
-v``) 215 s wall at load 9-12, 71.2 CPU s, peak RSS 578 MiB, 0.40x the
read's 1,460 MiB; 539 MiB (0.37x) once the parent drops the written rows
before reading the folder back: 70.5 CPU s, 215 s wall at load 17-22 (what
remains grows with the results rows the parent holds, about 200 MiB at
100k). Results identical at 1 and 2 workers and on Dask.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

MODES: dict[str, tuple[str, ...]] = {
    "1 worker": ("--workers", "1"),
    "2 workers": ("--workers", "2"),
    "dask, 2": ("--workers", "2", "--scheduler", "dask"),
}


def write_traces(folder: Path, runs: int, scenario: str) -> Path:
    """A sim trace folder of ``runs`` runs of ``scenario`` (seed 7)."""
    if not (folder / "calls.parquet").exists():
        subprocess.run([sys.executable, "-m", "sim", "run", scenario, "--traces", "--tasks",
                        str(runs), "--seed", "7", "--workers", "2", "--quiet", "--out",
                        str(folder)], check=True, stdout=subprocess.DEVNULL)
    return folder


def read_once(folder: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of reading the folder's
    two Parquet files into pandas, in a fresh process (the baseline)."""
    return _measured([sys.executable, "-c", "import sys, pyarrow.parquet as pq; "
                      "[pq.read_table(f'{sys.argv[1]}/{n}').to_pandas() for n in "
                      "('runs.parquet', 'calls.parquet')]", str(folder)], "the read")


def _measured(command: list[str], what: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system, the command and every process
    it waited for) and peak RSS (MiB, its largest process) of ``command``."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{what} failed ({child.returncode})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def replay_once(folder: Path, scenario: str, options: tuple[str, ...], out: Path
                ) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one ``sim replay``
    over the folder (:func:`_measured`)."""
    return _measured([sys.executable, "-m", "sim", "replay", str(folder), scenario, *options,
                      "--quiet", "--force", "--out", str(out)],
                     f"sim replay {' '.join(options)}")


def measure(runs: int, rounds: int, scenario: str, work: Path, modes: list[str]
            ) -> tuple[dict[str, float], bool]:
    """Median seconds of the read and of each replay mode, peak RSS, identity."""
    folder = write_traces(work / f"traces_{runs}", runs, scenario)
    times: dict[str, list[float]] = {"read": [], "rss read": []}
    for _ in range(rounds):
        wall, _, rss = read_once(folder)
        times["read"].append(wall)
        times["rss read"].append(rss)
        for mode in modes:
            wall, cpu, rss = replay_once(folder, scenario, MODES[mode],
                                         work / f"replay_{runs}_{mode}")
            for key, value in (("wall", wall), ("cpu", cpu), ("rss", rss)):
                times.setdefault(f"{key} {mode}", []).append(value)
    first = pq.read_table(work / f"replay_{runs}_{modes[0]}" / "results.parquet")
    same = all(first.equals(pq.read_table(work / f"replay_{runs}_{m}" / "results.parquet"))
               for m in modes[1:])
    return {k: statistics.median(v) for k, v in times.items()}, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--no-dask", action="store_true", help="skip --scheduler dask")
    parser.add_argument("--keep", help="a folder to keep the trace folders in (reused)")
    args = parser.parse_args()
    modes = [m for m in MODES if not (args.no_dask and m.startswith("dask"))]
    with tempfile.TemporaryDirectory(prefix="bench_replay_") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for runs in args.runs:
            m, same = measure(runs, args.rounds, args.scenario, work, modes)
            read = m["read"]
            print(f"{runs:,} runs, {args.rounds} round(s), load {os.getloadavg()[0]:.1f} "
                  f"on {os.cpu_count()} cores")
            print(f"  read runs+calls.parquet  {read:8.2f} s, peak RSS "
                  f"{m['rss read']:,.0f} MiB")
            for mode in modes:
                wall, rss = m[f"wall {mode}"], m[f"rss {mode}"]
                print(f"  replay, {mode:<10} {wall:8.2f} s wall ({wall / read:,.1f}x the "
                      f"read), {m[f'cpu {mode}']:6.1f} CPU s, "
                      f"peak RSS {rss:,.0f} MiB ({rss / m['rss read']:.2f}x the read's)")
            if "wall 1 worker" in m and "wall 2 workers" in m:
                print(f"  2 workers vs 1: {m['wall 1 worker'] / m['wall 2 workers']:.2f}x faster")
            print(f"  results identical across modes: {same}")


if __name__ == "__main__":
    main()
