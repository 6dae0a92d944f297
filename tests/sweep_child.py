"""A sweep run as a child process by tests/test_sweeps.py (so it can be
killed): ``python tests/sweep_child.py SCENARIO TASKS WORKERS OUT [PAUSE_S]``
streams the records of SCENARIO's sweep to OUT/results.parquet, keeping its
chunks in OUT/.partial (resuming what is kept there); PAUSE_S seconds of
sleep after each chunk make the run last long enough to be interrupted.

It also holds what the Ctrl-C tests of tests/test_sweeps*.py share: a command
prefix that starts a child as a terminal starts a command, and their time
bound."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from sim.output.chunks import ChunkStore
from sim.output.stream import ParquetStream
from sim.output.table import RECORD_SCHEMA
from sim.scenario.model import load_scenario
from sim.sweeps.cells import cells_of
from sim.sweeps.chunks import fingerprint, run_chunks
from sim.sweeps.plan import plan
from sim.sweeps.schedulers import make_scheduler


def sweep(scenario: str, tasks: int, workers: int, out: Path, pause_s: float = 0.0,
          scheduler: str | None = None) -> Path:
    """Run (or resume) the sweep; return the results file."""
    runs = cells_of(load_scenario(scenario, [f"tasks={tasks}"]))
    out.mkdir(parents=True, exist_ok=True)
    store = ChunkStore(out / ".partial", fingerprint(runs, tasks, plan(runs, tasks)),
                       resume=True)

    def sink(job, table, extras, side) -> None:
        stream.write(table)
        time.sleep(pause_s)

    with ParquetStream(out / "results.parquet", RECORD_SCHEMA) as stream, \
            make_scheduler(scheduler, workers) as where:
        run_chunks(runs, tasks, where, store, sink, progress=False)
    store.remove()
    return out / "results.parquet"


AS_FROM_A_TERMINAL = [sys.executable, "-c", "import os, signal, sys; "
                      "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.argv[1], sys.argv[1:])"]
"""A prefix that starts a command with SIGINT at its default, as a terminal
starts a foreground command, whatever this test process inherited. A
non-interactive shell starts its background jobs (``cmd &`` in a script, a CI
step run in the background, as this suite once was) with SIGINT ignored, so
that Ctrl-C to the script leaves them running; Python and ``sim`` keep that
ignore, as programs should (such a run is stopped with ``kill``: SIGTERM ends
it at once, its finished chunks kept for ``--resume``). Without this prefix
the Ctrl-C tests ran to their end in CI (24-37 s) and failed."""

STOP_S = 3.0
"""The longest a sweep may take from Ctrl-C to its exit on a machine whose
load is at most its core count (seconds). The stop costs 0.25-0.4 CPU-seconds
(parent and workers; measured from rusage), 0.5-1.2 s of wall time at load
9-12 on 2 cores, and it is mostly the interpreter's exit."""


def stop_bound_s() -> float:
    """:data:`STOP_S` scaled by the machine's load per core when that is over
    1: a process then gets about cores/load of a CPU, and the stop is CPU
    work. The runs of the Ctrl-C tests are CPU work (or sleeps) many times
    longer than this bound, so a sweep that goes on after the signal fails."""
    return STOP_S * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


if __name__ == "__main__":
    args = sys.argv[1:]
    sweep(args[0], int(args[1]), int(args[2]), Path(args[3]),
          float(args[4]) if len(args) > 4 else 0.0)
