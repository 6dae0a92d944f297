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
shared and noisy. The DES engine pays for SimPy's event queue, a process
resumed at each wake-up of each task and the time series it keeps.
Target (issue "Time and capacity"): the DES engine at no less than 1/4 of the
direct engine.

``--shared`` runs the scenario's own DES set-up instead (default
``scenarios/capacity.yaml``: tenants, slots, sandboxes, rate limits, resumes)
and prints DES tasks per CPU second against the direct engine's on the same
tasks (which ignores capacity, so their results differ): the measure of
issue 26 item 3. ``--baseline DIR`` (a source tree of an earlier commit)
also measures that tree's DES against this tree's, in rounds that alternate
which tree goes first, each run in a fresh process, and prints the speed-up
in CPU time: the median and the range of the per-round ratios, the ratio of
each tree's best (least) CPU time, and the load average before and after.
A child's CPU time is counted from after its imports and the scenario's
load until its results are read (the arrivals drawn, the run, every series
folded), so start-up is not in it; ``--end-to-end`` also times
``python -m sim run SCENARIO --tasks N --workers 1`` of each tree (CPU time
of the whole command, start-up and result files included). The default
size, 20,000 tasks, is large enough that memory the run fills shows in the
figure. ``python -m benchmarks.instructions --engine des`` counts
instructions per task instead, which the load does not move.

Measured 2026-12-02 (session 7, 5 rounds of 20,000 tasks, load 1.9 before
and 3.1 after): DES 3,187 tasks/s in one process, direct 7,615 (1/2.26);
speed-up over d1ffa1d in CPU time 1.743x median (per round 1.708, 1.622,
1.826, 1.743, 1.769; best 6.23 s vs 10.94 s, 1.755x); ``sim run --tasks
20000 --workers 1`` 1.653x median (best 8.61 s vs 14.36 s): the command's
fixed costs (imports, report.html, the results files, about 2.5 CPU-s) are
the same in both trees. Instructions per task 1,738,987 vs 3,291,712
(1.893x), so CPU time still gains less than the count; cachegrind at 1,500
tasks finds no cache behind it (D1 miss rate 2.7% vs 2.9%, I1 1.47% vs
1.59%, last-level misses near zero in both). After the prompt-cached reply
was built field by field (1,721,222 instructions per task, 1.912x), 5 more
rounds at load 1.6 before and 3.7 after: 1.900x median (per round 1.900,
1.942, 2.016, 1.814, 1.782; best 7.83 s vs 14.21 s, 1.814x), ``sim run``
1.609x: at that load each round moves by 10%, so compare medians of 5 or
more rounds.

Measured 2026-12-02 (session 8: the DES clock's run loop, the series folded
with numpy; 1,598,182 instructions per task), 5 rounds at load 1.1 before
and 1.0 after: DES 3,379 tasks/s in one process (202,744 per CPU minute),
direct 1/2.09; speed-up over d1ffa1d in CPU time 2.105x median (per round
2.153, 2.152, 2.029, 2.105, 2.080; best 5.67 s vs 12.21 s, 2.153x). ``sim run
scenarios/capacity.yaml --tasks 200000 --workers 1``, one round each at load
1.0: 156.2 CPU-s (d1ffa1d) against 70.6 (2.21x; wall 155 s against 70 s;
peak RSS 1,353 MB against 576 MB).

Measured 2026-12-04 (session 9, issue 39 item 4: a SimPy process per task,
SimPy's public API only, against 7a0749a's callbacks on a rewritten run
loop): ``sim capacity capacity --tasks 20000 --workers 1``, 8 alternating
rounds at load 7-9, CPU time 1.048x 7a0749a's (median of the per-round
ratios 0.944 to 1.202); ``--tasks 50000`` 3 rounds at load 3-14, 1.19x
median (1.19, 1.32, 1.115); instructions per task (``benchmarks.instructions
--engine des``) 1,751,360 against 1,599,546 (1.095x), and with ``--tasks
1000,3000`` 1,712,363 against 1,559,148 (1.098x): Process._resume and
Environment.step at each wake-up, a new Timeout per wait, and each task's
start and end events (29.87 events scheduled per task against 27.87).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sim.engines.cell import Cell
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.des_params import DesParams
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of


def measure_direct(cell: Cell, tasks: int) -> tuple[int, float]:
    """(steps simulated, seconds) for the direct engine on ``tasks`` tasks."""
    start = time.process_time()
    records = run_tasks(cell, range(tasks))
    return sum(r.steps for r in records), time.process_time() - start


def measure_des(cell: Cell, des: DesParams, tasks: int) -> tuple[int, float]:
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
result = DesEngine(cell, scenario.des, arrival_schedule(scenario.des, tasks, cell.seed)).run()
for series in result.series.values():
    series.times, series.values, series.peak
print(time.process_time() - start)
"""


def des_tree(tree: Path, scenario: str, tasks: int) -> float:
    """CPU seconds of source tree ``tree``'s DES on ``tasks`` tasks of
    ``scenario``, in a fresh process, from after its imports and the
    scenario's load until every series is read."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(scenario).resolve()),
                          str(tasks)], cwd=tree, env=env, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.split()[-1])


def sim_run_tree(tree: Path, scenario: str, tasks: int) -> float:
    """CPU seconds (user + system, of the command and every process it
    started) of ``python -m sim run scenario --tasks tasks --workers 1`` with
    source tree ``tree``, results written to a temporary folder."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "sim", "run", str(Path(scenario).resolve()),
                        "--tasks", str(tasks), "--workers", "1", "--quiet",
                        "--out", str(Path(tmp) / "out")],
                       cwd=tree, env=env, capture_output=True, text=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def interleaved(measure: Callable[[Path], float], here: Path, base: Path,
                rounds: int) -> tuple[list[float], list[float]]:
    """CPU seconds of ``measure`` on each tree, ``rounds`` times, the tree
    that goes first alternating from round to round (so a change of load
    falls on both alike): (this tree's, the baseline's)."""
    mine: list[float] = []
    theirs: list[float] = []
    for k in range(rounds):
        if k % 2:
            theirs.append(measure(base))
            mine.append(measure(here))
        else:
            mine.append(measure(here))
            theirs.append(measure(base))
    return mine, theirs


def speedup_line(what: str, mine: list[float], theirs: list[float]) -> str:
    """The speed-up of this tree over the baseline: median and range of the
    per-round ratios, and the ratio of each tree's least CPU time."""
    ratios = [b / a for a, b in zip(mine, theirs, strict=True)]
    return (f"{what}: {statistics.median(ratios):.3f}x median of {len(ratios)} rounds "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}; per round "
            f"{', '.join(f'{r:.3f}' for r in ratios)}); best CPU {min(mine):.2f} s vs "
            f"{min(theirs):.2f} s = {min(theirs) / min(mine):.3f}x")


def shared(args: argparse.Namespace) -> None:
    """DES tasks/s on the scenario's shared capacity against the direct engine
    (and against a baseline tree's DES, if given)."""
    scenario = load_scenario(args.scenario)
    cell = build_cell(cells_of(scenario)[0])
    des_rates, direct_rates, ratios = [], [], []
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
    median = statistics.median
    print(f"scenario {args.scenario}, {args.tasks} tasks x {args.rounds} rounds, shared capacity")
    print(f"direct engine  {median(direct_rates):>10,.0f} tasks/s (no capacity)")
    print(f"DES engine     {median(des_rates):>10,.0f} tasks/s "
          f"({60 * median(des_rates):,.0f} tasks per CPU minute)")
    print(f"ratio          1/{1 / median(ratios):.2f} (median of per-round ratios)")
    if args.baseline is None:
        return
    here = Path(__file__).resolve().parent.parent
    base = args.baseline.resolve()
    load = os.getloadavg()[0]
    mine, theirs = interleaved(lambda tree: des_tree(tree, args.scenario, args.tasks),
                               here, base, args.rounds)
    print(f"DES in fresh processes: this tree {args.tasks / median(mine):,.0f} tasks/s, "
          f"{base} {args.tasks / median(theirs):,.0f} tasks/s (medians)")
    print(speedup_line(f"speed-up over {base}, CPU time", mine, theirs))
    if args.end_to_end:
        mine, theirs = interleaved(lambda tree: sim_run_tree(tree, args.scenario, args.tasks),
                                   here, base, args.rounds)
        print(speedup_line(f"sim run --tasks {args.tasks} --workers 1, CPU time", mine,
                           theirs))
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/bounded.yaml")
    parser.add_argument("--tasks", type=int, default=None,
                        help="default 2,000 (20,000 with --shared)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=600.0,
                        help="Poisson arrivals, tasks per hour (default 600: about 20 "
                             "tasks in the system at once)")
    parser.add_argument("--shared", action="store_true",
                        help="the scenario's own DES set-up (default scenarios/capacity.yaml)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="with --shared: a source tree to compare this tree's DES with")
    parser.add_argument("--end-to-end", action="store_true",
                        help="with --baseline: also time each tree's 'sim run' of the scenario")
    args = parser.parse_args()
    if args.tasks is None:
        args.tasks = 20000 if args.shared else 2000
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
