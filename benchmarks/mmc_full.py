"""The M/M/c check at full size: scenarios/mmc.yaml as shipped (1,000,000
tasks, M/M/4 at utilisation 0.8) through ``python -m sim capacity``'s
measurements, against Erlang C.

    python -m benchmarks.mmc_full

The capacity table's mean sandbox wait must be within 5% of Erlang C's
Wq = 44.73 s (its relative standard error over the steady window is about
1.4%: the mean of N strongly autocorrelated waits has a relative variance of
about 125 / N to 240 / N), and Little's law must hold over the steady window
with a tolerance under 2%. About 90 s of CPU and 2 GB. The test suite checks
the same engine exactly on 20,000 tasks (tests/test_capacity.py: every wait
equals the first-come-first-served recursion on the same inputs) and the
queue's inputs at 1,000,000 values; this is the end-to-end figure
for the scenario's header. Exit status 0 when both hold, 1 otherwise.
"""

from __future__ import annotations

import sys
import time

from sim.analysis.capacity import check_drained, measurements
from sim.engines.des import DesEngine, arrival_schedule
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of


def erlang_c_wait(c: int, lam: float, mu: float) -> float:
    """Mean wait in queue of M/M/c (seconds)."""
    a = lam / mu
    term, total = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        total += term
    top = term * a / c * c / (c - a)
    return top / (total + top) / (c * mu - lam)


def main() -> int:
    """Run, measure, compare; print the figures."""
    started = time.process_time()
    scenario = load_scenario("scenarios/mmc.yaml")
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, scenario.tasks, cell.seed)
    result = DesEngine(cell, scenario.des, arrivals).run()
    problems = check_drained(result, scenario.des, arrivals)
    capacity = measurements(result, scenario.des.capacity.model_dump())
    wq = erlang_c_wait(4, 192 / 3600, 1 / 60)
    mean = capacity["sandbox_wait_s"]["mean"]
    law = capacity["littles_law"]
    ok = (not problems and abs(mean - wq) / wq <= 0.05 and law["holds"]
          and law["queue_holds"] and law["tolerance"] < 0.02)
    print(f"{scenario.tasks:,} tasks: mean sandbox wait {mean:.2f} s vs Erlang C {wq:.2f} s "
          f"({(mean - wq) / wq:+.1%}); Little's law tolerance {law['tolerance']:.2%}, "
          f"holds {law['holds']}; {time.process_time() - started:.0f} s CPU: "
          f"{'pass' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
