"""The verdict's size and power, bigger than the suite's check.

    python -m benchmarks.calibrate_verdict_size [--trials 200] [--runs 150] [--folds 5]
        [--evaluations 6] [--search-runs 300]

Simulates ``trials x runs`` runs of a known world (one class, a structure the
calibration can express) with ``sim run --traces``, slices them into
``trials`` independent trace sets, and for each: deals ``--folds`` folds, fits
one class on the other folds (direct estimates and a reduced search of
``--evaluations`` simulations), and takes the cross-validated verdict
(:func:`sim.calibration.verdict.judge`). Prints the rejection rate with its
standard error against the 5% +/- 2 points the suite asks, and which tests rejected. With
``--wrong``, the world has two kinds of task (terse and verbose answers,
:data:`WRONG_CLASSES`) that one class cannot express: the rate is then the
verdict's power.

Measured 2026-12-06 (session 21), the defaults with ``--trials 600`` (the
first 200 trials are the default run's): 18/600 = 3.0% (standard error 0.7
points; Clopper-Pearson 95% interval 1.8-4.7%; steps 12, prompt 11, cost 8,
output 5; 1,162 s): the 200 trials alone gave 4/200 = 2.0% (session 20),
the 400 after them 14/400 = 3.5%. On the conservative side of 5%, inside the
suite's 5 +/- 2 points. Tried and not kept: the fit's error drawn in the fit's own
directions (each replicate's CDF moved by a normal combination of the K fold
worlds' deviations, scaled to the fit's variance, one draw shared by every
statistic) instead of widening the distances. Against an oracle (each fold's
held-out runs referred to fresh held-out-sized samples of the known world
itself, the exact conditional null) its replicates were 1-3% wider in mean
distance (the widening's about as wide), and the fold worlds' ``K / (K - 1)
v_fit`` was 0.92-1.11 of their real error against the known world; on a
clean null (a lognormal fitted by maximum likelihood, 3,000 folds) the fold
p-values averaged 0.516 (widened: 0.534; the oracle with its ties counted as
at least as far: 0.522; the fit's error drawn from its true law: 0.008 above
the oracle's mid-p, the jackknife's directions 0.025, the widening 0.038).
But the size did not move, 4/200 at the defaults and 13/200 in the suite,
and the suite's power fell from 58/200 to 48/200 (tau2's power against a
10% shift: prompt 57% to 44%, cost 13% to 9%; a shift of scale is a move
along the fit's own parameters, where the error is now drawn), and the
conservatism at 5 folds is not in the widening's shape.

Measured 2026-12-06 (session 17) with the fit's error and the folds'
dependence read from how closely the fold worlds follow their runs
(:func:`sim.calibration.verdict.fit_response`, ``beta``; :func:`fit_error`:
``beta / N_k`` plus the jackknife's excess counted once): the suite's 60 runs
and 3 folds 13/200 with power 58/200 on cost +30% (46 before); 150 runs and 5
folds without the search 4/150, with it (the defaults) 3/150 (2/150 and 1/100
before). On this known world ``beta`` averages 0.95 (steps), 0.83 (prompt),
0.63 (output), 0.82 (cost), sd 0.15-0.19 per data set, the same with and
without the search, and close to the fold worlds' true variances over ``1 /
N_k`` (1.02, 0.93, 0.62, 0.92 with the search) where the jackknife read 1.13,
0.96, 0.87, 0.98. The folds' distances correlate 0.04-0.06 (300 data sets,
with and without the search), as :func:`fold_dependence` says, but with the
jackknife's ``v_fit`` their normal scores did not (0.004 with the search, 0.02
without): that ``v_fit`` studentizes them. Variants measured on the way:
``beta`` in the dependence only, 4/150 and 2/150 (suite 13/200, power 57);
the dependence counted only where the cap set ``v_fit``, 4/150, 2/150 (13,
58); that and :func:`fit_error`, 4/150 and 5/150 but the suite 14/200 (its
edge) and 12/150 at 60 runs and 3 folds (with :func:`fit_error` the folds'
scores correlate again, 0.02-0.04 at 5 folds with the search, so the
dependence is counted everywhere, as shipped). What is left at 5
folds is per fold: per-fold p-values under 0.05 3.0% (output) to 4.4%, the
combined output tokens' mean p 0.60.

Measured 2026-12-06 (session 16) with the folds' dependence in Stouffer's sum
and the fit's variance capped at the sampling floor
(:func:`sim.calibration.verdict.fold_dependence`, ``FIT_CAP`` 1): 150 runs, 5
folds, no search: 4/150 (per-fold p-values average 0.50-0.54, output tokens
the most conservative: its fit's true variance is 0.6 of the floor's); with
the search (the defaults, 100 trials): 1/100, 2/100 with the cap at ``1 / n``
alone; the suite's 60 runs and 3 folds: 13/200 with power 46/200 on cost
+30%. The variance of Stouffer's sum over the five folds, measured, is 1.12
(1.16 predicted). Tried: the fit's variance always at the floor (the
jackknife ignored): 4/150 at 150/5 but the suite's power falls to 25/200 (the
jackknife below the floor is what narrows a stable fit's test). Tried: each
fold's ``v_fit`` from the other folds' worlds alone (their spread holds none of
the fold's own runs, so it is nearly independent of the fold's residual): the
folds' normal scores then have variance 0.99 (0.91-0.94 with the whole
jackknife, whose spread grows with the fold's own residual), but the sizes do
not move (the suite 13/200 with power 50/200, 150/5 4/150, with the search
1/100). With the search the per-fold p-values average 0.52-0.55 and the folds'
scores do not correlate (0.005): the conservatism left is per fold, most in
output tokens, whose fit's true variance (0.6 of the floor's, measured over 60
independent fits with the search) is furthest below the jackknife's (0.87).

Before that, measured 2026-12-06 on main (the defaults: 200 trials of 150 runs, 5 folds, 6
search evaluations of 300 runs): size 0/200 = 0.000 (standard error 0.015;
605 s). At these settings the verdict is too conservative: it misses the 5%
+/- 2 points issue 38 asks. Without the search (``--evaluations 0``, 100
trials each, standard error 2.2 points): 1/100 at 150 runs and 5 folds, 2/100
at 150 runs and 3 folds, 1/100 at 60 runs and 5 folds; the suite's own size
check (``tests/test_calibrate_verdict.py``: no search, 60 runs, 3 folds, 200
jackknife runs, 100 simulated runs per fold at least) measures 4.5%. So the
search alone does not make it conservative, and neither the fold count nor
the run count alone does. The cap on the fit's variance decides it
(``sim.calibration.verdict.FIT_CAP``; the jackknife's ``v_fit`` reaches the
cap, so the cap sets the null's widening): at 150 runs, 5 folds, no search,
100 trials each, a cap of 0 rejects 11/100, 1 rejects 5/100 and today's 2
rejects 1/100, while at the suite's 60 runs and 3 folds a cap of 1 rejected
10% (the module docstring). One constant cannot hold the size at both; the
world sample's size (``Settings.jackknife_runs``, 200 in the suite, 1,000 by
default) moves it little (3/100 and 6/100 at 60 runs and 3 folds, 1/100 and
1/100 at 150 and 5). Power (``--wrong``, 40 trials at the defaults): 40/40, the output
tokens per run in every trial (459 s).

Measured 2026-12-06 (session 15, no search, 1,000 jackknife runs), toward the
fix; nothing shipped. The jackknife is not far off: over 100 independent fits
per setting, a fold world's true CDF variance is 0.6-0.9 times an empirical
distribution's of its training runs (1 / n_train), the jackknife's mean 0.8-1.1
(standard deviation 0.45-0.65), below the cap at both settings. Per-fold
p-values are near uniform (mean 0.52, 3-4% under 0.05 at 150 runs and 5 folds)
and Stouffer's sum over K folds compounds the small excess. With the measured
true variance in place of the jackknife, the folds' z-scores correlate (0.16
to 0.24 at 3 folds, 0.04 to 0.08 at 5: each fold's world was fitted on the
others' runs), which independent replicates ignore (12% rejected at 60 runs,
3 folds); with the jackknife they do not (0.00 to 0.06): its ``v_fit`` is large
exactly when the folds differ, a studentization that cancels the dependence
and keeps the power. Tried: a smooth fit error (Gaussian weights on the
jackknife's fold deviations; 3/100 at 60/3, 0/100 at 150/5); one fold's
deviation drawn whole (9/150, 0/100); fit errors made of the other folds'
replicate samples (so replicate ``b`` carries the folds' dependence) at an
empirical distribution's variance (6/150, 3/150; the suite's power on cost
+30% fell from 50 to 17 of 200); the same studentized by each replicate's own
jackknife (suite 10/200 with power 49/200, 150/5 1/150); mid-p values alone
(no change). The fit's error is narrower than an empirical distribution's and
smooth, and no variant so far gets the per-fold p-values uniform at 5 folds.

Measured 2026-12-06 (session 16, no search), toward the fix; nothing shipped.
(1) The jackknife's simulations share random numbers, but a changed parameter
moves some runs onto other random paths (an ending one step earlier shifts
every later draw), and that noise, independent across the fold worlds, is read
as the fit's: the jackknife scales a fold world's deviation by ``K - 1`` and the
verdict by ``K / (K - 1)`` again, so an independent error counts ``K - 1`` times
(4 at 5 folds, 2 at 3). Simulating every fold world on a second seed and taking
the cross-product of the two seeds' deviations (which keeps what the worlds
share, their parameters) gives ``v_fit`` 0.83-0.95 of ``1 / n_train`` where
either seed alone gives 0.82-1.16 at 150 runs and 5 folds (30 data sets), and
0.74-0.94 against 0.74-1.02 at 60 and 3 (40): 12% less at 5 folds, 5% at 3.
Still above the true 0.6-0.9 above, and small against the excess: not shipped.
(2) The studentized fit error of session 15 with the observed ``v_fit`` taken
at 0.8 times the jackknife's (its measured excess): the suite 13/200 with power
62/200, 150/5 3/150; per-fold p-values still average 0.51-0.55 at 5 folds. A
fit's error is smoother than a replicate's (an empirical distribution's), and
a smooth error widens the KS distance's supremum less than a rough one of the
same variance (Slepian's inequality): replicates stay wider than the held-out
distance, and Stouffer's sum over five folds compounds it.

Measured 2026-12-06 (session 18), toward the fix; nothing shipped. (1) Where
the per-fold shift comes from, on a clean null (the truth a
lognormal, each fold world its maximum-likelihood fit on 120 runs, 30 held
out, 200 simulated, 1,000 in the world sample, the widening at the fit's true
variance 0.656 / 120; 3,000 folds): the verdict's p-values have mean 0.522,
5.0% under 0.05 (the tail is right) but their normal scores average -0.10
(-0.07 with mid-p values; the rest is the held-out distance below every
replicate, p = 1, a score of -7.9 at the clip); with the fit's error added in
its own two directions (the normal location and scale scores) instead of the
replicate's widening, -0.01; with the bridge's first two Karhunen-Loeve terms
(a smooth error of the same variance, any model), -0.03. With nothing fitted
(held out, simulated and world sample all of the truth; for the known world's
steps 5.7% of the replicates tie the held-out distance) the scores average
-0.11 to -0.17, mid-p -0.01 to -0.05. So a scaled bridge costs each fold about -0.07 of a score and
five folds' sum -0.16 (5% becomes about 3.9%). (2) In the verdict: the smooth
error as the first ``d`` Karhunen-Loeve terms keeping ``beta`` of the bridge's
variance (:func:`sim.calibration.verdict.fit_response`; 2 terms at 0.63, 3 at
0.83, 11 at 0.95), drawn independently per metric: per-fold p-value means
0.50-0.52 (were 0.52-0.55), combined 0.50-0.55 (0.53-0.60), but 0/100 and
1/100 rejected at 150/5 (the metrics' replicates lose their correlation, so
the min-P family is more extreme); drawn once per fold for every metric: the
suite 14/200 (its edge) with power 54/200, 150/5 with the search 1/100 (family
adjusted p under 0.25 in 20% of data sets, was 19%). Mid-p values in the
Stouffer sums (the replicates' too): the suite 12/200 with power 48/200 (was
58), 150/5 2/100 (no change). (3) The known world's runs are independent: block
means of 30, 150 and 1,000 consecutive runs vary 0.88-1.06 times as
independent runs' would (150,000 runs; standard errors 0.02-0.12).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

KNOWN = {
    "name": "known", "seed": 17,
    "harness": {"model": "m", "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3,
                                         "cache_write": 3.75},
                "max_output_tokens": 2048, "budgets": {"steps": 200},
                "detector": {"enabled": False}, "retry": {"retry_tool_errors": False}},
    "world": {
        "difficulty": {"distribution": "lognormal", "mu": 1.6, "sigma": 0.5, "min": 1},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.05, "premature": 0.0},
        "tools": [{"name": "lookup", "weight": 1, "definition_tokens": 0,
                   "result_tokens": {"distribution": "lognormal", "median": 150,
                                     "sigma": 0.5}}],
        "tokens": {"prefix": 1500, "task": 100,
                   "output": {"distribution": "lognormal", "median": 40, "sigma": 0.4},
                   "answer_output": {"distribution": "lognormal", "median": 80,
                                     "sigma": 0.4}}},
}
WRONG_CLASSES = [
    {"name": name, "weight": 1,
     "tokens": {"output": {"distribution": "lognormal", "median": median, "sigma": 0.1},
                "answer_output": {"distribution": "lognormal", "median": median, "sigma": 0.1}}}
    for name, median in (("terse", 10), ("verbose", 2000))]
"""The world one class cannot express (the suite's power test's): half the
tasks answer in about 10 output tokens a call, half in about 2,000; one class
(a per-call size distribution times a lognormal per-run scale) cannot be both.
Short and long runs are no such world any more: endings fitted per step with a
frailty express a mixture of run lengths (the earlier ``--wrong`` world, 2%
rejected at the defaults, measured the verdict on a world it can fit)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=6)
    parser.add_argument("--search-runs", type=int, default=300)
    parser.add_argument("--wrong", action="store_true", help="a world one class cannot fit")
    args = parser.parse_args(argv)

    from sim.calibration import folds as fl
    from sim.calibration import structure as st
    from sim.calibration.data import load
    from sim.calibration.pipeline import Settings, cross_validate
    from sim.calibration.verdict import judge
    from sim.cli import main as sim_main

    world = dict(KNOWN)
    if args.wrong:
        world = {**KNOWN, "world": {**KNOWN["world"], "classes": WRONG_CLASSES}}
    folder = Path(tempfile.mkdtemp(prefix="verdict_size_"))
    (folder / "world.yaml").write_text(yaml.safe_dump({**world,
                                                       "tasks": args.trials * args.runs}))
    if sim_main(["run", str(folder / "world.yaml"), "--traces", "--out", str(folder / "runs"),
                 "--quiet"]) != 0:
        return 1
    traces = load(folder / "runs")
    ids = traces.runs["run_id"].to_numpy()
    settings = Settings(evaluations=args.evaluations, search_runs=args.search_runs)
    began = time.monotonic()
    rejected, which = 0, Counter[str]()
    for t in range(args.trials):
        sub = traces.subset(ids[t * args.runs:(t + 1) * args.runs])
        fits = cross_validate(sub, fl.assign(sub, args.folds, t), st.ONE, t, settings)
        j = judge([f.real for f in fits], [f.sim for f in fits], t,
                  jackknife=[f.jackknife for f in fits],
                  search_runs=args.search_runs if args.evaluations > 0 else None,
                  intervals=False)
        rejected += j.status
        which.update(m.key for m in j.rejected)
        which.update(["exits"] if j.exits.rejected else [])
        print(f"\rtrial {t + 1}/{args.trials}: {rejected} rejected", end="", file=sys.stderr)
    print(file=sys.stderr)
    rate = rejected / args.trials
    se = math.sqrt(0.05 * 0.95 / args.trials)
    print(f"{'power' if args.wrong else 'size'}: {rejected}/{args.trials} = {rate:.3f} "
          f"(the suite asks 0.05 +/- 0.02; standard error {se:.3f}); rejected tests: "
          f"{dict(which)}; {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
