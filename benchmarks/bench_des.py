"""DES engine (unlimited capacity) vs the direct engine, on scenarios/bounded.yaml.

    python -m benchmarks.bench_des [--tasks N] [--rounds R] [--scenario PATH] [--rate R]
    python -m benchmarks.bench_des --shared [--scenario scenarios/capacity.yaml]
                                   [--baseline DIR]

Runs the same tasks through the direct engine and through the DES engine
(the scenario with ``engine: des``, Poisson arrivals at ``--rate`` tasks per
hour, no capacity limits, so both give every task the same outcome, steps,
tokens and cost), alternating, ``rounds`` times in one process, and prints
simulated steps per CPU second of each (``time.process_time``: time other
processes take from this one does not count; median over rounds) and their
ratio. The ratio, not the absolute speed, is the measure: this machine is
shared and noisy. The DES engine pays for SimPy's event queue, a callback
per wake-up of each task and the time series it keeps.
Target (issue "Time and capacity"): the DES engine at no less than 1/4 of the
direct engine.

``--shared`` runs the scenario's own DES set-up instead (default
``scenarios/capacity.yaml``: tenants, slots, sandboxes, rate limits, resumes)
and prints DES tasks per CPU second against the direct engine's on the same
tasks (which ignores capacity, so their results differ): the measure of
issue 26 item 3. ``--baseline DIR`` (a source tree of an earlier commit)
also runs that tree's DES on the same scenario and this tree's, each in a
fresh subprocess, alternating, and prints the speed-up (target 2x against
d1ffa1d) with the load average. ``python -m benchmarks.instructions --engine
des`` counts instructions per task instead, which the load does not move.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


_CHILD = """
import sys, time
from sim.engines.des import DesEngine, arrival_schedule
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
scenario = load_scenario(sys.argv[1])
cell = build_cell(cells_of(scenario)[0])
tasks = int(sys.argv[2])
start = time.process_time()
DesEngine(cell, scenario.des, arrival_schedule(scenario.des, tasks, cell.seed)).run()
print(tasks / (time.process_time() - start))
"""


def des_tree(tree: Path, scenario: str, tasks: int) -> float:
    """DES tasks per CPU second of source tree ``tree`` on ``scenario``, in a
    fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(scenario).resolve()),
                          str(tasks)], cwd=tree, env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.split()[-1])


def shared(args: argparse.Namespace) -> None:
    """DES tasks/s on the scenario's shared capacity against the direct engine
    (and against a baseline tree's DES, if given)."""
    scenario = load_scenario(args.scenario)
    cell = build_cell(cells_of(scenario)[0])
    des_rates, direct_rates, ratios, speedups = [], [], [], []
    here = Path(__file__).resolve().parent.parent
    for _ in range(args.rounds):
        start = time.process_time()
        run_tasks(cell, range(args.tasks))
        direct = args.tasks / (time.process_time() - start)
        start = time.process_time()
        DesEngine(cell, scenario.des, arrival_schedule(scenario.des, args.tasks,
                                                      cell.seed)).run()
        des = args.tasks / (time.process_time() - start)
        direct_rates.append(direct)
        des_rates.append(des)
        ratios.append(des / direct)
        if args.baseline is not None:
            base = des_tree(args.baseline, args.scenario, args.tasks)
            speedups.append(des_tree(here, args.scenario, args.tasks) / base)
    median = statistics.median
    print(f"scenario {args.scenario}, {args.tasks} tasks x {args.rounds} rounds, shared capacity")
    print(f"direct engine  {median(direct_rates):>10,.0f} tasks/s (no capacity)")
    print(f"DES engine     {median(des_rates):>10,.0f} tasks/s "
          f"({60 * median(des_rates):,.0f} tasks per CPU minute)")
    print(f"ratio          1/{1 / median(ratios):.2f} (median of per-round ratios)")
    if speedups:
        print(f"speed-up over {args.baseline}: {median(speedups):.3f}x (median of per-round "
              f"ratios {', '.join(f'{r:.3f}' for r in speedups)}); load average "
              f"{os.getloadavg()[0]:.2f}")


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=600.0,
                        help="Poisson arrivals, tasks per hour (default 600: about 20 "
                             "tasks in the system at once)")
    parser.add_argument("--shared", action="store_true",
                        help="the scenario's own DES set-up (default scenarios/capacity.yaml)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="with --shared: a source tree to compare this tree's DES with")
    args = parser.parse_args()
    if args.shared:
        if args.scenario == "scenarios/bounded.yaml":
            args.scenario = "scenarios/capacity.yaml"
        shared(args)
        return
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
