"""Direct engine vs two baselines, on scenarios/bounded.yaml.

    python -m benchmarks.bench_direct [--tasks N] [--rounds R] [--scenario PATH]
                                      [--baseline DIR]

Runs the plain loop (:mod:`benchmarks.plain_loop`: the random process in plain
Python with ``random.Random``, the honest yardstick), the bare loop
(:mod:`benchmarks.bare_loop`: the same process drawing from the world's own
per-task streams) and the direct engine, alternating, ``rounds`` times in one
process, and prints simulated steps per CPU second of each
(``time.process_time``: time other processes take from this one does not count;
median over rounds) and the engine's ratio to each baseline. The ratios, not
the absolute speeds, are the measure: this machine is shared and noisy.
Targets: the direct engine at no less than 1/8 of the bare loop (issue 3);
3x the steps per CPU second of the 2026-12 engine (issue 14), read off the
plain-loop ratio, which does not move when our stream set-up gets cheaper.

``--baseline DIR`` (a source tree of an earlier commit, e.g.
``git worktree add /tmp/base d1ffa1d``) also runs that tree's direct engine
and this tree's, each in a fresh subprocess, alternating within each round,
and prints this engine's speed-up over the baseline (median of per-round
ratios) and the load average: the measure of issue 26 item 5 (target 1.3x
on bounded.yaml against d1ffa1d). At a load of 10-20 those per-round ratios
swing by 10-20%; :mod:`benchmarks.instructions` counts instructions per step
instead, which the load does not move.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bare_loop import bare_task
from benchmarks.plain_loop import plain_task
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from sim.world.streams import StreamPool


def measure_baseline(scenario, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the bare loop on ``tasks`` tasks."""
    h = scenario.harness
    pool = StreamPool()
    start = time.process_time()
    steps = 0
    for i in range(tasks):
        steps += bare_task(scenario.world, scenario.seed, i, pool,
                           max_steps=h.budgets.steps or 10**9,
                           max_tokens=h.budgets.tokens or 10**15,
                           detector=h.detector.enabled, retry=h.retry.retry_tool_errors,
                           verify=h.verifier.name != "none", window=h.context_window)[1]
    return steps, time.process_time() - start


def measure_plain(scenario, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the plain loop on ``tasks`` tasks."""
    h = scenario.harness
    start = time.process_time()
    steps = 0
    for i in range(tasks):
        steps += plain_task(scenario.world, scenario.seed, i,
                            max_steps=h.budgets.steps or 10**9,
                            max_tokens=h.budgets.tokens or 10**15,
                            detector=h.detector.enabled, retry=h.retry.retry_tool_errors,
                            verify=h.verifier.name != "none", window=h.context_window)[1]
    return steps, time.process_time() - start


def measure_engine(cell, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the direct engine on ``tasks`` tasks."""
    start = time.process_time()
    records = run_tasks(cell, range(tasks))
    return sum(r.steps for r in records), time.process_time() - start


_CHILD = """
import sys, time
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
cell = build_cell(cells_of(load_scenario(sys.argv[1]))[0])
run_tasks(cell, range(100))
start = time.process_time()
records = run_tasks(cell, range(int(sys.argv[2])))
print(sum(r.steps for r in records) / (time.process_time() - start))
"""


def measure_tree(tree: Path, scenario: str, tasks: int) -> float:
    """Steps per CPU second of the direct engine of source tree ``tree``, in
    a fresh process (``tasks`` tasks after 100 to warm up)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(scenario).resolve()),
                          str(tasks)], cwd=tree, env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a source tree to compare this tree's engine with")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    cell = build_cell(cells_of(scenario)[0])
    plain_rates, bare_rates, engine_rates = [], [], []
    plain_ratios, bare_ratios, speedups = [], [], []
    here = Path(__file__).resolve().parent.parent
    for _ in range(args.rounds):
        if args.baseline is not None:
            base = measure_tree(args.baseline, args.scenario, args.tasks)
            speedups.append(measure_tree(here, args.scenario, args.tasks) / base)
        steps, seconds = measure_plain(scenario, args.tasks)
        plain = steps / seconds
        steps, seconds = measure_baseline(scenario, args.tasks)
        bare = steps / seconds
        steps, seconds = measure_engine(cell, args.tasks)
        engine = steps / seconds
        plain_rates.append(plain)
        bare_rates.append(bare)
        engine_rates.append(engine)
        plain_ratios.append(engine / plain)
        bare_ratios.append(engine / bare)
    median = statistics.median
    print(f"scenario {args.scenario}, {args.tasks} tasks x {args.rounds} rounds")
    print(f"plain loop     {median(plain_rates):>12,.0f} steps/s")
    print(f"bare loop      {median(bare_rates):>12,.0f} steps/s")
    print(f"direct engine  {median(engine_rates):>12,.0f} steps/s")
    print(f"ratio to plain 1/{1 / median(plain_ratios):.2f} (median of per-round ratios)")
    print(f"ratio to bare  1/{1 / median(bare_ratios):.2f} "
          f"(median of per-round ratios; target: no less than 1/8)")
    if speedups:
        print(f"speed-up over {args.baseline}: {median(speedups):.3f}x (median of per-round "
              f"ratios {', '.join(f'{r:.3f}' for r in speedups)}); load average "
              f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
