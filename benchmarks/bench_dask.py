"""Dask against the local pool: wall time of one sweep on each, in the same run.

    python -m benchmarks.bench_dask [--tasks N] [--rounds R] [--scenario PATH]
                                    [--local 1,2,4] [--dask 1,2,4]

Runs ``--tasks`` tasks of the scenario's base cell through the sweep's chunk
runner (:func:`sim.sweeps.chunks.run_chunks`, the path of ``sim run``) on
the local pool of each worker count in ``--local`` (1: in this process) and
on a ``distributed.LocalCluster`` of each process count in ``--dask``
(started as ``--scheduler dask`` starts it, :class:`DaskScheduler`),
``rounds`` times, the local pool first in odd rounds and Dask first in even
ones (so a drifting load cancels over pairs of rounds). For each run it
prints the wall time, the CPU seconds of all its processes (on a shared
machine the fairer measure of the work each does) and the load then; at the
end each one's median wall time in seconds over the rounds (the cluster's
start and stop counted, as a user waits for them, and shown apart too: a
LocalCluster starts in the background while this process runs the first
chunks, so its start shows mostly inside the run) and its ratio to the local
pool of the same worker count measured in the same round (of wall time,
and of CPU seconds in all processes: less sensitive to the load). Every run's
records are checked equal to the first one's (the scheduler and worker count
never change a result). The ratio, not the absolute time, is the measure:
this machine is shared and noisy. On Linux the LocalCluster's workers are
forked from this process (:data:`sim.sweeps.on_dask.START_METHOD`), so every
cluster starts alike; elsewhere the first one of a process also starts
Dask's fork server, as every ``--scheduler dask`` command does.

Target (issue 26, item 4): a 2-process LocalCluster within 1.2x of the
2-worker local pool at 200,000 tasks.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from typing import Any

import pyarrow as pa

from sim.output.chunks import MemoryStore
from sim.scenario.model import load_scenario
from sim.sweeps.cells import CellRun
from sim.sweeps.chunks import run_chunks
from sim.sweeps.plan import Job, plan
from sim.sweeps.schedulers import make_scheduler


def cpu_s() -> tuple[float, float]:
    """CPU seconds (user and system) of this process, and of its children
    waited for: the local pool's workers, and the LocalCluster's (forked by
    its nannies in this process) once the cluster is closed."""
    return tuple(r.ru_utime + r.ru_stime  # type: ignore[return-value]
                 for r in (resource.getrusage(resource.RUSAGE_SELF),
                           resource.getrusage(resource.RUSAGE_CHILDREN)))


def _own_cpu_s() -> float:
    """CPU seconds of the calling process (run in each Dask worker)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def one_run(runs: list[CellRun], tasks: int, scheduler: str | None, workers: int
            ) -> tuple[float, float, float | None, pa.Table]:
    """(wall seconds in all, of which starting and stopping the scheduler,
    the CPU seconds the Dask workers report for themselves (None for the
    local pool), the records) of one sweep."""
    tables: list[pa.Table] = []

    def sink(job: Job, table: pa.Table, extras: Any, side: Any) -> None:
        tables.append(table)

    reported = None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as folder:
        made = make_scheduler(scheduler, workers)
        started = time.perf_counter()
        with made:
            run_chunks(runs, tasks, made, MemoryStore(folder), sink, progress=False)
            ran = time.perf_counter()
            client = getattr(made, "_client", None)
            if client is not None:
                reported = sum(client.run(_own_cpu_s).values())
                ran = time.perf_counter()
    end = time.perf_counter()
    return end - start, (started - start) + (end - ran), reported, pa.concat_tables(tables)


def measure(runs: list[CellRun], tasks: int, kind: str, n: int, label: str
            ) -> tuple[float, float, float, pa.Table]:
    """(wall s, start+stop s, CPU-s of all its processes, records) of one run,
    printed with the load."""
    cpu = cpu_s()
    wall, fixed, reported, table = one_run(runs, tasks, None if kind == "local" else "dask", n)
    own, workers = (b - a for a, b in zip(cpu, cpu_s(), strict=True))
    said = "" if reported is None else f"; the workers report {reported:.1f}"
    print(f"  {label}: {kind} {n}: {wall:.2f} s wall, {own + workers:.1f} "
          f"CPU-s ({own:.1f} in this process, {workers:.1f} in its workers"
          f"{said}), load {os.getloadavg()[0]:.1f}", flush=True)
    return wall, fixed, own + workers, table


def summary(walls: dict[tuple[str, int], list[float]],
            overhead: dict[tuple[str, int], list[float]],
            ratios: dict[int, list[float]], cpu_ratios: dict[int, list[float]]) -> None:
    """Print each scheduler's median wall, start+stop and ratios to the pool."""
    print(f"load average {os.getloadavg()[0]:.1f} (1 min) after the runs")
    print(f"{'scheduler':<28}{'wall s':>9}{'start+stop s':>14}{'vs local':>10}{'CPU-s vs':>10}")
    for (kind, n), values in walls.items():
        name = (f"local pool, {n} workers" if kind == "local" and n > 1 else
                "local, in process" if kind == "local" else f"Dask LocalCluster, {n} procs")
        ratio, cpu_ratio = ((f"{statistics.median(ratios[n]):.2f}x",
                             f"{statistics.median(cpu_ratios[n]):.2f}x")
                            if kind == "dask" and n in ratios else ("", ""))
        print(f"{name:<28}{statistics.median(values):>9.2f}"
              f"{statistics.median(overhead[kind, n]):>14.2f}{ratio:>10}{cpu_ratio:>10}")


def main() -> None:
    """Measure and print the walls and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--local", default="1,2,4",
                        help="local pool worker counts (default 1,2,4)")
    parser.add_argument("--dask", default="1,2,4",
                        help="LocalCluster process counts (default 1,2,4)")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario).model_copy(update={"sweep": {}})
    runs = [CellRun(scenario.name, scenario, ())]
    local = [int(n) for n in args.local.split(",") if n]
    dask = [int(n) for n in args.dask.split(",") if n]
    chunks = len(plan(runs, args.tasks))
    print(f"{args.scenario}: {args.tasks:,} tasks in {chunks} chunks, {os.cpu_count()} CPUs")
    walls: dict[tuple[str, int], list[float]] = {}
    overhead: dict[tuple[str, int], list[float]] = {}
    ratios: dict[int, list[float]] = {}
    cpu_ratios: dict[int, list[float]] = {}
    first: pa.Table | None = None
    for r in range(args.rounds):
        measured: dict[tuple[str, int], tuple[float, float]] = {}
        order = [("local", local), ("dask", dask)]
        for kind, counts in order if r % 2 == 0 else order[::-1]:  # ABBA: drift cancels
            for n in counts:
                wall, fixed, cpu, table = measure(runs, args.tasks, kind, n, f"round {r + 1}")
                first = table if first is None else first
                if not table.equals(first):
                    raise SystemExit(f"{kind} {n}: records differ from the first run's")
                measured[kind, n] = wall, cpu
                walls.setdefault((kind, n), []).append(wall)
                overhead.setdefault((kind, n), []).append(fixed)
        for n in (n for n in dask if ("local", n) in measured):
            (dask_wall, dask_cpu), (pool_wall, pool_cpu) = measured["dask", n], measured["local", n]
            ratios.setdefault(n, []).append(dask_wall / pool_wall)
            cpu_ratios.setdefault(n, []).append(dask_cpu / pool_cpu)
            print(f"  round {r + 1}: Dask {n} / local {n}: {ratios[n][-1]:.2f}x wall, "
                  f"{cpu_ratios[n][-1]:.2f}x CPU-s", flush=True)
    summary(walls, overhead, ratios, cpu_ratios)

if __name__ == "__main__":
    main()
