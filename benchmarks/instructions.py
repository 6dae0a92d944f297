"""Instructions per simulated step (direct engine) or per task (DES), counted
by valgrind's callgrind: a measure the machine's load does not move.

    python -m benchmarks.instructions [--engine direct|des] [--scenario PATH]
                                      [--baseline DIR] [--tasks A,B]

On this shared 2-core machine CPU-time ratios of two trees swing by 10-20%
from round to round at a load of 10-20; instruction counts do not. Each tree
runs in a fresh ``python`` under ``valgrind --tool=callgrind`` twice, for
``A`` and ``B`` tasks (default 100 and 400), with ``PYTHONHASHSEED=0``; the
difference of the two totals divided by the difference in steps (or tasks)
leaves out start-up and imports. Instructions are not time (cache misses and
branch mispredictions are not counted), but a change that removes work shows
up here whatever the load. ``--baseline DIR`` (a source tree of an earlier
commit, e.g. ``git worktree add /tmp/base d1ffa1d``) also counts that tree's,
and prints this tree's ratio: issue 26's targets (the direct engine 1.3x on
bounded.yaml, the DES 2x on capacity.yaml) read as a baseline's count over
this tree's. Takes a minute or two per tree (valgrind runs about 50 times
slower than the plain interpreter).

Measured at ec2ec0b (2026-12-02, one BLAS thread): the direct engine 80,061
instructions per step on bounded.yaml against d1ffa1d's 108,958 (1.361x);
the DES 2,045,501 per task on capacity.yaml (2,068,339 at 9f960f4); with
tasks driven by callbacks (sim/engines/des_task.py, 2026-12-02) 1,677,309
against d1ffa1d's 3,289,633 (1.961x); with the series folded during the run
every 256 tasks (their fold was outside the counted run before, now
inside it) 1,733,009 (1.898x). Since then the DES's series are read after the
run (every tree's: a log not yet folded is folded then), so that work is
counted whichever tree does it: see bench_des.py for the figures. With
the series' points kept as C doubles (array('d'), 5af888a): 1,741,360
(against 1,721,127 with lists of floats, measured the same way; the
points then cost 35% less memory and numpy reads them without a copy).
Session 8 (2026-12-02): the DES clock's run loop (sim/engines/des_clock.py)
and the timer's callbacks bound once, 1,693,385; the rate limiter, the prompt
cache and the fold's loop cut, 1,645,466 (2.000x); the series folded with
numpy, 1,598,182 (2.060x). Per task both trees count less in longer runs:
between 1,000 and 3,000 tasks, 1,556,787 against d1ffa1d's 3,268,137 (2.099x;
``--tasks 1000,3000``, some 5 minutes a tree). Counts of one tree move by a
few hundred per step (a few thousand per DES task) with the tree's location
on disk, so compare trees measured the same way (both through this module).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import sys
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
scenario = load_scenario(sys.argv[1])
cell = build_cell(cells_of(scenario)[0])
tasks = int(sys.argv[2])
if sys.argv[3] == "des":
    from sim.engines.des import DesEngine, arrival_schedule
    result = DesEngine(cell, scenario.des, arrival_schedule(scenario.des, tasks, cell.seed)).run()
    for series in result.series.values():  # read, as every use of a run does (folded)
        series.times, series.values, series.peak
    print(tasks)
else:
    from sim.engines.direct import run_tasks
    print(sum(r.steps for r in run_tasks(cell, range(tasks))))
"""


def count(tree: Path, scenario: str, tasks: int, engine: str) -> tuple[int, int]:
    """(instructions, steps or tasks) of one run of ``tree``'s engine in a fresh
    process under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        # one BLAS thread: numpy's idle BLAS threads spin for a varying number of
        # instructions (a few million per run), noise in a count of ~100,000 per step
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0",
                   OPENBLAS_NUM_THREADS="1")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             "-c", _CHILD, str(Path(scenario).resolve()), str(tasks), engine],
            cwd=tree, env=env, capture_output=True, text=True, check=True)
        total = next(int(line.split()[1]) for line in out.read_text().splitlines()
                     if line.startswith("summary:"))
    return total, int(run.stdout.split()[-1])


def per_unit(tree: Path, scenario: str, sizes: tuple[int, int], engine: str) -> float:
    """Instructions per step (direct) or per task (des) of ``tree``, between the
    two run sizes."""
    (small, n_small), (large, n_large) = (count(tree, scenario, n, engine) for n in sizes)
    return (large - small) / (n_large - n_small)


def main() -> None:
    """Count and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("direct", "des"), default="direct")
    parser.add_argument("--scenario", default=None,
                        help="default scenarios/bounded.yaml (direct), capacity.yaml (des)")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--tasks", default="100,400", help="the two run sizes, A,B")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    scenario = args.scenario or ("scenarios/capacity.yaml" if args.engine == "des"
                                 else "scenarios/bounded.yaml")
    a, b = (int(x) for x in args.tasks.split(","))
    unit = "task" if args.engine == "des" else "step"
    here = Path(__file__).resolve().parent.parent
    mine = per_unit(here, scenario, (a, b), args.engine)
    print(f"{args.engine} engine on {scenario}, tasks {a}-{b}: {mine:,.0f} instructions "
          f"per {unit}")
    if args.baseline is not None:
        base = per_unit(args.baseline.resolve(), scenario, (a, b), args.engine)
        print(f"baseline {args.baseline}: {base:,.0f} instructions per {unit}; "
              f"this tree does {base / mine:.3f}x less work per {unit}")


if __name__ == "__main__":
    main()
