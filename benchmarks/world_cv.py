"""Five-fold cross-validation of the calibrated world's direct estimates (no search).

    python benchmarks/world_cv.py TRACES [--by model] [--folds 5] [--seed 0]

Each fold's runs are held out once; the world is fitted to the others
(classes, direct estimates with competing-risks endings, the scenario they
make: :mod:`sim.calibration`; without the simulate-and-compare search, which
for this world only scales a frailty) and simulated afresh (2,000 runs). Per
fold it prints the KS distances of steps, prompt, output and cost per run
with their 5% critical values (:func:`sim.calibration.verdict.compare`), the
resolved share by step tercile and successes lost at 50k/100k/200k
prompt-token budgets, forecast against replay (see ``world_tau2.py``: the
share of all runs resolved and over the budget), then the means over folds.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.world_tau2 import BUDGETS, lost, terciles


def main() -> None:
    """Fit and measure each fold; print JSON lines and the means."""
    parser = argparse.ArgumentParser()
    parser.add_argument("traces")
    parser.add_argument("--by", choices=["model"], default=None)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    from sim.calibration import classes as cl
    from sim.calibration.build import scenario_document
    from sim.calibration.data import load
    from sim.calibration.estimate import estimate
    from sim.calibration.simulate import from_traces, simulate
    from sim.calibration.verdict import compare

    traces = load(args.traces)
    ids = traces.runs["run_id"].to_numpy()
    order = np.random.default_rng(args.seed).permutation(traces.n)
    rows = []
    for k in range(args.folds):
        held_ids = set(ids[order[k::args.folds]])
        fit = traces.subset([r for r in ids if r not in held_ids])
        held = traces.subset([r for r in ids if r in held_ids])
        labels = cl.assign(fit, classes="auto", by=args.by, seed=args.seed)
        est = estimate(fit, labels)
        doc, _ = scenario_document(est, name="cv", description="cv", tasks=args.runs,
                                   seed=args.seed)
        sim = simulate(doc, args.runs, args.seed + 2 + k)
        real = from_traces(held)
        metrics, exits = compare(real, sim, args.seed + 3)
        cuts = np.quantile(real.steps, [1 / 3, 2 / 3])
        row = {"fold": k, "held_out": real.n,
               "ks": {m.key: [round(m.ks, 3), round(m.critical, 3)] for m in metrics},
               "exit_tv": [round(exits.tv, 3), round(exits.critical, 3)],
               "terciles_real": [round(v, 3) for v in terciles(real.steps, real.resolved, cuts)],
               "terciles_sim": [round(v, 3) for v in terciles(sim.steps, sim.resolved, cuts)],
               "lost_replay": {b: round(lost(real.prompt, real.resolved, b), 3) for b in BUDGETS},
               "lost_forecast": {b: round(lost(sim.prompt, sim.resolved, b), 3)
                                 for b in BUDGETS}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {
        "within_critical": {key: sum(r["ks"][key][0] < r["ks"][key][1] for r in rows)
                            for key in rows[0]["ks"]},
        "lost_gap_mean_points": {b: round(100 * float(np.mean(
            [r["lost_forecast"][b] - r["lost_replay"][b] for r in rows])), 1) for b in BUDGETS},
        "terciles_real_mean": [round(float(np.mean([r["terciles_real"][j] for r in rows])), 3)
                               for j in range(3)],
        "terciles_sim_mean": [round(float(np.mean([r["terciles_sim"][j] for r in rows])), 3)
                              for j in range(3)],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
