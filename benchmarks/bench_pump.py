"""The one pump (issue 39 item 2) against a baseline tree, side by side.

    python -m benchmarks.bench_pump --baseline DIR [--tasks N] [--rounds R]
                                    [--only NAME,...]

Runs each command below from this tree and from ``DIR`` (a source tree of an
earlier commit, e.g. ``git worktree add /tmp/pump_base 7ee23bc``), each in a
fresh process with ``PYTHONPATH`` set to its tree, alternating base and
candidate within each round (the order swapped every other round), and
prints the median CPU seconds (user + system of the command and its
children) of each and the median of the per-round ratios candidate / base.
The machine is shared: CPU time, not wall time, is the measure. Target:
each ratio at most 1.25.

- ``sweep``: ``sim sweep bounded --tasks N`` (the direct engine, untraced);
- ``traces``: ``sim run bounded --tasks N --traces`` (the direct engine,
  recording every call);
- ``capacity``: ``sim capacity capacity --tasks N`` (the DES engine).

Measured 2026-12-05 (session 11, load 5-7, base 7ee23bc, candidate the
h11-pump branch; median CPU-s base / candidate, median ratio of 3 rounds):
sweep 50k 10.18 / 10.55, 1.031; capacity 50k 20.78 / 23.13, 1.084 (the DES
makes one generator per effect for its answer); traces 20k 7.30 / 7.63,
1.068; sweep 20k 1.015; capacity 20k 0.991.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

COMMANDS = {
    "sweep": ["sweep", "bounded"],
    "traces": ["run", "bounded", "--traces"],
    "capacity": ["capacity", "capacity"],
}


def cpu_of(tree: Path, args: list[str], tasks: int) -> float:
    """CPU seconds (user + system) of ``python -m sim ARGS --tasks N`` run
    from ``tree``, its children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "sim", *args, "--tasks", str(tasks), "--quiet",
                        "--out", out, "--force"], cwd=tree, check=True,
                       env={**os.environ, "PYTHONPATH": str(tree)},
                       stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Parse the arguments, run the rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(COMMANDS))
    args = parser.parse_args()
    names = args.only.split(",")
    print(f"load average at start: {os.getloadavg()}")
    for name in names:
        base, cand, ratios = [], [], []
        for round_ in range(args.rounds):
            trees = [args.baseline, HERE] if round_ % 2 == 0 else [HERE, args.baseline]
            seconds = {tree: cpu_of(tree, COMMANDS[name], args.tasks) for tree in trees}
            base.append(seconds[args.baseline])
            cand.append(seconds[HERE])
            ratios.append(seconds[HERE] / seconds[args.baseline])
        print(f"{name:9s} tasks {args.tasks}: base {statistics.median(base):.2f} CPU-s, "
              f"candidate {statistics.median(cand):.2f} CPU-s, ratio "
              f"{statistics.median(ratios):.3f} (rounds: "
              f"{', '.join(f'{r:.3f}' for r in ratios)})")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
