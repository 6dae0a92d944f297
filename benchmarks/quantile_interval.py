"""How often the done-when table's tail check misses on a known world:
``python -m benchmarks.quantile_interval [--scenario scenarios/tau2.yaml]``.

:mod:`benchmarks.calibrate_cache` asks whether a forecast's p95 (and p99)
per-run cost is "within its sampling interval" of the held-out runs'. Here
both samples come from one known world (``--pool`` runs of ``--scenario``,
simulated with the direct engine: the population), so a right check misses
in about 5% of trials. Each trial draws ``--held`` held-out runs and
``--forecast`` forecast runs (the sampling floor's sizes by default: 140 and
560, one fold of tau2's 697 and the four others), and counts a miss under:

- **one-sample** (the table's check until session 12): the forecast's
  quantile outside the 95% percentile-bootstrap interval of the held-out
  quantile (the held-out runs resampled, the forecast taken as exact);
- **two-sample** (:func:`benchmarks.calibrate_cache.quantile_check`): 0
  outside the 95% percentile-bootstrap interval of the difference of the two
  quantiles, both samples resampled.

It also prints the one-sample interval's coverage of the population's own
quantile (what that interval is built to cover). The standard error of a
miss rate over ``t`` trials is ``sqrt(0.05 * 0.95 / t)`` (1.0 point at 500).

With ``--traces FOLDER``, the same three checks on real runs: ``--deals``
deals of ``--folds`` folds (:func:`sim.calibration.folds.assign`, seeds
0, 1, ...), each fold's runs against the other folds' (the sampling floor of
:mod:`benchmarks.calibrate_cache`): a random deal makes the two exchangeable,
so a right check misses there in about 5% of folds too.

Measured (seed 0): on 20,000 runs of scenarios/tau2.yaml, p95: one-sample
misses 11.4% (covers the population's p95 in 91.0%), two-sample 5.2%, tail
count 2.8%; p99: 23.4% (covers 74.2%), 13.0%, 1.0%. On the shipped tau2
runs (697 with a cost), 40 deals of 5 folds, p95: one-sample 11.0%,
two-sample 7.0%, tail count 7.0% of 200 folds (standard error 1.5 points).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import yaml

from benchmarks.calibrate_cache import quantile_check, simulate, tail_count
from sim.calibration import folds as fl
from sim.calibration.costs import price_unrecorded
from sim.calibration.data import load
from sim.calibration.jobs import prices_date
from sim.cost.prices import prices_day


def one_sample(real: np.ndarray, q: float, rng: np.random.Generator, boots: int = 2000
               ) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of ``real``'s ``q`` quantile."""
    boot = np.quantile(real[rng.integers(0, real.size, (boots, real.size))], q, axis=1)
    return float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def deals(args: argparse.Namespace) -> None:
    """The three checks' miss rates at p95 over ``args.deals`` deals of the
    real runs of ``args.traces`` (see the module docstring)."""
    # priced on the traces' day, as calibrate prices them
    traces = price_unrecorded(load(args.traces), prices_day(prices_date(args.traces)))
    cost = traces.runs["cost"].to_numpy(float)
    rng = np.random.default_rng(args.seed)
    miss = [0, 0, 0]
    n = 0
    for seed in range(args.deals):
        fold_of = fl.assign(traces, args.folds, seed)
        for k in range(args.folds):
            real = cost[(fold_of == k) & np.isfinite(cost)]
            rest = cost[(fold_of != k) & np.isfinite(cost)]
            lo, hi = one_sample(real, 0.95, rng)
            miss[0] += not lo <= float(np.quantile(rest, 0.95)) <= hi
            miss[1] += not quantile_check(real, rest, 0.95, rng)[4]
            miss[2] += tail_count(real, rest, 0.95)[3] < 0.05
            n += 1
    print(f"{args.traces}: {args.deals} deals of {args.folds} folds, p95 of each fold against "
          f"the others': one-sample misses {miss[0] / n:.1%}, two-sample {miss[1] / n:.1%}, "
          f"tail count {miss[2] / n:.1%} of {n} folds (standard error at 5%: "
          f"{math.sqrt(0.05 * 0.95 / n):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scenarios/tau2.yaml")
    parser.add_argument("--pool", type=int, default=20_000)
    parser.add_argument("--held", type=int, default=140)
    parser.add_argument("--forecast", type=int, default=560)
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--traces", default=None)
    parser.add_argument("--deals", type=int, default=40)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    if args.traces:
        deals(args)
    doc = yaml.safe_load(Path(args.scenario).read_text())
    cost = np.array([r[3] for r in simulate(doc, args.pool, args.seed)])
    cost = cost[np.isfinite(cost)]
    rng = np.random.default_rng(args.seed)
    se = math.sqrt(0.05 * 0.95 / args.trials)
    print(f"{args.scenario}: {cost.size} runs; {args.trials} trials of {args.held} held-out "
          f"and {args.forecast} forecast runs (a miss rate's standard error at 5%: "
          f"{se:.1%})")
    for q in (0.95, 0.99):
        truth = float(np.quantile(cost, q))
        miss1 = miss2 = miss3 = covered = 0
        for _ in range(args.trials):
            real = rng.choice(cost, args.held)
            fore = rng.choice(cost, args.forecast)
            lo, hi = one_sample(real, q, rng)
            f = float(np.quantile(fore, q))
            miss1 += not lo <= f <= hi
            covered += lo <= truth <= hi
            miss2 += not quantile_check(real, fore, q, rng)[4]
            miss3 += tail_count(real, fore, q)[3] < 0.05
        t = args.trials
        print(f"p{round(q * 100)}: one-sample misses {miss1 / t:.1%}, covers the population's "
              f"own quantile in {covered / t:.1%}; two-sample misses {miss2 / t:.1%}; tail count "
              f"misses {miss3 / t:.1%}")


if __name__ == "__main__":
    main()
