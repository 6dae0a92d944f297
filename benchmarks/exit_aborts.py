"""How often a command dies at the interpreter's exit: runs ``python -m sim
ARGS`` many times, a fresh process each, and counts the exit statuses.

    python -m benchmarks.exit_aborts --runs 100 [--nice 19] [--keep DIR] -- \\
        replay TRACES SCENARIO --out OUT --force --quiet

The case it was written for: ``replay`` aborted now and then after writing its
results ("terminate called without an active exception", SIGABRT, status 134):
an Arrow worker dropped the last Python buffer of a Parquet file that pandas
had handed Arrow as a Python file object, while the interpreter exited
(:func:`sim.parquet.read_parquet`; apache/arrow#34314). Each run has
``PYTHONFAULTHANDLER`` set, so an abort prints every Python thread's stack;
with ``--keep DIR`` the stderr of each failing run is kept there. Prints the
runs, the statuses and how many of each (0: clean; 134 or -6: an abort), and
the load average at the start and the end: the abort is a race, far more
frequent on a loaded machine, so compare variants at similar loads (or
alternate them). The runs import the ``sim`` of the current directory first,
then ``PYTHONPATH``'s: to measure another tree, run this file by its path from
a directory without ``sim`` (``cd /tmp && PYTHONPATH=TREE python
.../benchmarks/exit_aborts.py ...``). Measured on the replay of a 20-run
folder at load 8-20: 28 aborts in 100 before the fix, 0 in 100 after,
alternating runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path


def run_once(args: list[str], nice: int, keep: Path | None, index: int) -> int:
    """One ``python -m sim ARGS`` at niceness ``nice``; its exit status."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    done = subprocess.run([sys.executable, "-m", "sim", *args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          preexec_fn=lambda: os.nice(nice), check=False)
    if done.returncode and keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"run{index:04d}.stderr").write_bytes(done.stderr)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="processes to run (default 50)")
    parser.add_argument("--nice", type=int, default=19, help="niceness (default 19)")
    parser.add_argument("--keep", type=Path, help="keep each failing run's stderr here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then sim's arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    start = os.getloadavg()[0]
    statuses = Counter(run_once(command, args.nice, args.keep, i) for i in range(args.runs))
    aborts = statuses[134] + statuses[-6]
    print(f"python -m sim {' '.join(command)}")
    print(f"runs {args.runs}, aborts {aborts}, statuses "
          + ", ".join(f"{code}: {n}" for code, n in sorted(statuses.items()))
          + f"; load {start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
