"""Direct engine vs two baselines, on scenarios/bounded.yaml.

    python -m benchmarks.bench_direct [--tasks N] [--rounds R] [--scenario PATH]

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
"""

from __future__ import annotations

import argparse
import statistics
import time

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


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    cell = build_cell(cells_of(scenario)[0])
    plain_rates, bare_rates, engine_rates = [], [], []
    plain_ratios, bare_ratios = [], []
    for _ in range(args.rounds):
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


if __name__ == "__main__":
    main()
