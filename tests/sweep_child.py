"""A sweep run as a child process by tests/test_sweeps.py (so it can be
killed): ``python tests/sweep_child.py SCENARIO TASKS WORKERS OUT [PAUSE_S]``
streams the records of SCENARIO's sweep to OUT/results.parquet, keeping its
chunks in OUT/.partial (resuming what is kept there); PAUSE_S seconds of
sleep after each chunk make the run last long enough to be interrupted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sim.output.chunks import ChunkStore
from sim.output.stream import ParquetStream
from sim.output.table import RECORD_SCHEMA
from sim.scenario.model import load_scenario
from sim.sweeps.cells import cells_of
from sim.sweeps.chunks import fingerprint, plan, run_chunks
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


if __name__ == "__main__":
    args = sys.argv[1:]
    sweep(args[0], int(args[1]), int(args[2]), Path(args[3]),
          float(args[4]) if len(args) > 4 else 0.0)
