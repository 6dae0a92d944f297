"""DES engine (unlimited capacity) vs the direct engine, on scenarios/bounded.yaml.

    python -m benchmarks.bench_des [--tasks N] [--rounds R] [--scenario PATH] [--rate R]

Runs the same tasks through the direct engine and through the DES engine
(the scenario with ``engine: des``, Poisson arrivals at ``--rate`` tasks per
hour, no capacity limits, so both give every task the same outcome, steps,
tokens and cost), alternating, ``rounds`` times in one process, and prints
simulated steps per CPU second of each (``time.process_time``: time other
processes take from this one does not count; median over rounds) and their
ratio. The ratio, not the absolute speed, is the measure: this machine is
shared and noisy. The DES engine pays for SimPy's event queue, one process
per task and the time series it keeps.
Target (issue "Time and capacity"): the DES engine at no less than 1/4 of the
direct engine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of


def measure_direct(cell, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the direct engine on ``tasks`` tasks."""
    start = time.process_time()
    records = run_tasks(cell, range(tasks))
    return sum(r.steps for r in records), time.process_time() - start


def measure_des(cell, des, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the DES engine on ``tasks`` tasks,
    arrivals included."""
    start = time.process_time()
    arrivals = arrival_schedule(des, tasks, cell.seed)
    result = DesEngine(cell, des, arrivals).run()
    return sum(r.steps for r in result.records), time.process_time() - start


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=600.0,
                        help="Poisson arrivals, tasks per hour (default 600: about 20 "
                             "tasks in the system at once)")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario, [
        "engine=des", "des.arrivals.kind=poisson", "des.capacity={}", "des.operations=[]",
        f"des.tenants=[{{name: bench, rate_per_hour: {args.rate}}}]"])
    cell = build_cell(cells_of(scenario)[0])
    direct_rates, des_rates, ratios = [], [], []
    for _ in range(args.rounds):
        steps, seconds = measure_direct(cell, args.tasks)
        direct = steps / seconds
        steps_des, seconds = measure_des(cell, scenario.des, args.tasks)
        if steps_des != steps:
            raise SystemExit(f"the engines disagree: {steps} steps direct, {steps_des} DES")
        des = steps_des / seconds
        direct_rates.append(direct)
        des_rates.append(des)
        ratios.append(des / direct)
    print(f"scenario {args.scenario}, {args.tasks} tasks x {args.rounds} rounds, "
          f"DES arrivals {args.rate:g}/h, unlimited capacity")
    print(f"direct engine  {statistics.median(direct_rates):>12,.0f} steps/s")
    print(f"DES engine     {statistics.median(des_rates):>12,.0f} steps/s")
    print(f"ratio          1/{1 / statistics.median(ratios):.2f} "
          f"(median of per-round ratios; target: no less than 1/4)")


if __name__ == "__main__":
    main()
