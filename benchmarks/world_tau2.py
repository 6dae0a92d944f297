"""How well a calibrated world expresses what real runs show (issue 20, items 2 and 4).

    python benchmarks/world_tau2.py TRACES [--seeds 0 1 2] [--by model] [--old]

Calibrates ``TRACES`` (a trace folder, e.g. ``sim traces import`` of tau2's
raw files) once per seed with the pipeline's defaults (``--by model`` for one
class per model; ``--old`` for the world without competing-risks endings) and
prints, on the held-out runs against the fresh simulation of the fitted
scenario:

- the resolved share by step tercile (terciles of the held-out runs' steps),
  real and simulated;
- P(steps > p90 of the held-out runs), real and simulated;
- the KS distances (steps, prompt, output, cost per run) and their critical
  values;
- successes lost at prompt-token budgets of 50k, 100k and 200k: the share of
  all runs that are resolved without the budget and stopped by it. A run is
  stopped by a total-prompt-token budget exactly when its prompt tokens summed
  over its calls exceed it (the harness refuses the call that would overshoot,
  and every earlier call fits), so the replay figure is computed from the
  held-out runs' recorded prompts and the forecast from the simulated runs'.
  Checked once on tau2's 567 runs: ``python -m sim replay`` with
  ``harness.budgets.tokens=100000`` stops exactly the runs whose prompt sum
  exceeds 100,000 (0 of 567 differ), and a simulation of the calibrated
  scenario with that budget (same seed) loses exactly the successes the
  unbudgeted simulation's prompt sums say, at 50k, 100k and 200k.
"""

from __future__ import annotations

import argparse
import functools
import json

import numpy as np

BUDGETS = (50_000, 100_000, 200_000)


def terciles(steps: np.ndarray, resolved: np.ndarray, cuts: np.ndarray) -> list[float]:
    """Resolved share in each step tercile (``cuts``: the two tercile bounds)."""
    t = np.digitize(steps, cuts, right=True)
    return [float(np.nanmean(resolved[t == k])) if (t == k).any() else float("nan")
            for k in range(3)]


def lost(prompt: np.ndarray, resolved: np.ndarray, budget: int) -> float:
    """Share of all runs resolved and stopped by a prompt-token budget."""
    ok = np.isfinite(resolved)
    return float(((resolved[ok] == 1) & (prompt[ok] > budget)).mean())


def measure(result) -> dict:
    """The figures of one calibration (see the module docstring)."""
    real, sim = result.real, result.sim
    cuts = np.quantile(real.steps, [1 / 3, 2 / 3])
    p90 = float(np.quantile(real.steps, 0.9))
    metrics = {m.key: (round(m.ks, 3), round(m.critical, 3)) for m in result.metrics}
    return {
        "terciles_real": [round(v, 3) for v in terciles(real.steps, real.resolved, cuts)],
        "terciles_sim": [round(v, 3) for v in terciles(sim.steps, sim.resolved, cuts)],
        "p_over_p90_real": round(float((real.steps > p90).mean()), 3),
        "p_over_p90_sim": round(float((sim.steps > p90).mean()), 3),
        "max_steps_real": int(real.steps.max()), "max_steps_sim": int(sim.steps.max()),
        "ks": metrics, "exit_tv": (round(result.exits.tv, 3), round(result.exits.critical, 3)),
        "resolved_real": round(float(np.nanmean(real.resolved)), 3),
        "resolved_sim": round(float(np.nanmean(sim.resolved)), 3),
        "lost_replay": {b: round(lost(real.prompt, real.resolved, b), 3) for b in BUDGETS},
        "lost_forecast": {b: round(lost(sim.prompt, sim.resolved, b), 3) for b in BUDGETS},
        "status": result.status,
    }


def main() -> None:
    """Calibrate per seed and print the figures as JSON lines, then their means."""
    parser = argparse.ArgumentParser()
    parser.add_argument("traces")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--by", choices=["model"], default=None)
    parser.add_argument("--old", action="store_true",
                        help="the world without competing-risks endings")
    args = parser.parse_args()
    from sim.calibration import pipeline
    from sim.calibration.estimate import estimate

    if args.old:
        pipeline.estimate = functools.partial(estimate, endings=False)  # type: ignore[assignment]
    rows = []
    for seed in args.seeds:
        result = pipeline.calibrate(args.traces, seed=seed, by=args.by, progress=False)
        row = {"seed": seed, **measure(result)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    gaps = {b: float(np.mean([abs(r["lost_forecast"][b] - r["lost_replay"][b]) for r in rows]))
            for b in BUDGETS}
    print(json.dumps({"mean_abs_lost_gap_points": {b: round(100 * g, 1)
                                                   for b, g in gaps.items()}}))


if __name__ == "__main__":
    main()
