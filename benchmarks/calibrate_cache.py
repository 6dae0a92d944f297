"""How well a calibrated world forecasts what caching does to cost, per model,
on runs it did not see (issue 38): ``python benchmarks/calibrate_cache.py TRACES``.

The trace folder's runs are dealt into k folds as ``python -m sim calibrate``
deals them (one class per model); each fold's world is fitted on the other
folds and simulated (the direct engine, 5 simulated runs per held-out run),
and per model it prints, for the held-out runs and their forecast:

- the token-weighted cache-read share (cache-read tokens / prompt tokens);
- dollars per million prompt tokens (the runs' cost / their prompt tokens);
- by call index bin, the token-weighted read share (calls 1, 2-5, 6-10,
  11-20, 21+), pooled over the folds;

and over all models the per-run cost KS distance (pooled held-out runs
against the pooled forecasts) with the two-sample 5% critical value, and the
p95 and p99 cost with their bootstrap 95% intervals over held-out runs.
Recorded $0 costs are priced as calibration prices them
(:mod:`sim.calibration.costs`).

Measured on the shipped tau2 runs (``python -m sim traces import
/work/shared/data/traces/tau2/raw``: 700 runs), 5 folds, seed 0, before
(i.i.d. per-call read shares) and after (``cache.hits`` with ``run_share``,
``tokens.by_step``); read share and dollars per million prompt tokens of the
forecast against the held-out runs:

- claude-opus-4-6 (223 runs): -0.5% / +1.6% before, -1.6% / +1.5% after;
- deepseek-chat (35 runs): -0.2% / -1.4% before, +0.1% / -0.2% after;
- claude-sonnet-4-6 (10 runs, 3 of them cached): -100% / +38.1% before (fitted
  as uncached), -25.8% / +8.4% after;
- per-run cost KS 0.048 before, 0.023 after (critical 0.056); p95 cost 0.412
  before, outside the held-out interval [0.425, 0.522], 0.480 after, inside;
  p99 0.692 and 0.870, both inside [0.617, 0.939].
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict

import numpy as np
from scipy import stats

from sim.calibration import folds as fl
from sim.calibration.costs import price_unrecorded
from sim.calibration.data import load
from sim.calibration.fitting import Settings, fit_world
from sim.calibration.structure import PER_MODEL
from sim.engines.direct import run_task_with_world
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of
from sim.world.call_log import RecordingTask
from sim.world.streams import StreamPool

BINS = ((1, 1), (2, 5), (6, 10), (11, 20), (21, 10**9))


def simulate(doc: dict, tasks: int, seed: int) -> list[tuple[str, float, float, float, list]]:
    """``(model, prompt, cache read, cost, [(call n, prompt, read)])`` per simulated run."""
    scenario = validate({**doc, "tasks": tasks, "seed": seed}, "fold")
    cell = build_cell(cells_of(scenario)[0])
    pool = StreamPool()
    out = []
    for i in range(tasks):
        record, task = run_task_with_world(cell, i, pool, task_type=RecordingTask)
        model = task.world.model or doc["harness"]["model"]
        calls = [(n + 1, c.prompt_tokens, c.cache_read_tokens) for n, c in enumerate(task.log)]
        out.append((model, float(record.prompt_tokens), float(record.cache_read_tokens),
                    float(record.cost_usd), calls))
    return out


def real_runs(traces, ids) -> list[tuple[str, float, float, float, list]]:
    """The same tuples for the recorded runs ``ids``."""
    sub = traces.subset(ids)
    calls = sub.calls
    by_run: dict[str, list] = defaultdict(list)
    for run, n, prompt, read in zip(calls["run_id"], calls.groupby("run_id").cumcount() + 1,
                                    calls["prompt"], calls["cache_read_tokens"], strict=True):
        by_run[run].append((int(n), float(prompt), float(read)))
    out = []
    for run, model, cost in zip(sub.runs["run_id"], sub.runs["model"], sub.runs["cost"],
                                strict=True):
        c = by_run.get(run, [])
        out.append((str(model), sum(p for _, p, _ in c), sum(r for _, _, r in c), float(cost),
                    c))
    return out


def per_model(rows) -> dict[str, tuple[float, float, float]]:
    """model -> (prompt tokens, read share, USD per million prompt tokens)."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for model, prompt, read, cost, _ in rows:
        a = acc[model]
        a[0] += prompt
        a[1] += read
        a[2] += 0.0 if math.isnan(cost) else cost
    return {m: (a[0], a[1] / max(a[0], 1.0), a[2] / max(a[0], 1.0) * 1e6)
            for m, a in acc.items()}


def by_bin(rows) -> dict[str, list[float]]:
    """model -> token-weighted read share per call bin."""
    acc: dict[str, np.ndarray] = defaultdict(lambda: np.zeros((len(BINS), 2)))
    for model, _, _, _, calls in rows:
        for n, prompt, read in calls:
            for b, (lo, hi) in enumerate(BINS):
                if lo <= n <= hi:
                    acc[model][b] += (prompt, read)
    return {m: [a[b, 1] / a[b, 0] if a[b, 0] else float("nan") for b in range(len(BINS))]
            for m, a in acc.items()}


def interval(x: np.ndarray, q: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """``(quantile, low, high)``: the ``q`` quantile of ``x`` and its bootstrap 95% interval."""
    boot = [np.quantile(rng.choice(x, x.size), q) for _ in range(2000)]
    return float(np.quantile(x, q)), float(np.quantile(boot, 0.025)), float(
        np.quantile(boot, 0.975))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ratio", type=float, default=5.0)
    parser.add_argument("--evaluations", type=int, default=45)
    args = parser.parse_args()
    traces = price_unrecorded(load(args.traces))
    fold_of = fl.assign(traces, args.folds, args.seed)
    ids = traces.runs["run_id"].to_numpy()
    real_all, sim_all = [], []
    for fold in range(args.folds):
        train = traces.subset(ids[fold_of != fold])
        seed = fl.seed_for(args.seed, "fold", fold)
        _, _, _, doc, _ = fit_world(train, PER_MODEL, seed, Settings(
            evaluations=args.evaluations))
        held = real_runs(traces, ids[fold_of == fold])
        real_all += held
        sim_all += simulate(doc, max(200, math.ceil(args.ratio * len(held))),
                            fl.seed_for(seed, "simulation"))
    real_m, sim_m = per_model(real_all), per_model(sim_all)
    real_b, sim_b = by_bin(real_all), by_bin(sim_all)
    print(f"{'model':<52} {'runs':>5} {'read share':>21} {'$/M prompt':>23}")
    for model in sorted(real_m, key=lambda m: -real_m[m][0]):
        r, s = real_m[model], sim_m.get(model, (0.0, float("nan"), float("nan")))
        runs = sum(1 for row in real_all if row[0] == model)
        print(f"{model[:52]:<52} {runs:>5} {r[1]:>6.3f} {s[1]:>6.3f} "
              f"{s[1] / r[1] - 1 if r[1] else float('nan'):>+7.1%} "
              f"{r[2]:>6.3f} {s[2]:>6.3f} {s[2] / r[2] - 1 if r[2] else float('nan'):>+7.1%}")
        if r[1] > 0:
            print("    by call bin (real / forecast): " + "  ".join(
                f"{lo}-{hi if hi < 10**9 else ''}: {a:.2f}/{b:.2f}" for (lo, hi), a, b in
                zip(BINS, real_b[model], sim_b.get(model, [float("nan")] * len(BINS)),
                    strict=True)))
    real_cost = np.array([row[3] for row in real_all])
    real_cost = real_cost[np.isfinite(real_cost)]
    sim_cost = np.array([row[3] for row in sim_all])
    ks = stats.ks_2samp(real_cost, sim_cost).statistic
    n, m = real_cost.size, sim_cost.size
    critical = 1.358 * math.sqrt((n + m) / (n * m))
    print(f"per-run cost KS {ks:.4f} (critical 5% {critical:.4f}; {n} held-out, {m} forecast)")
    rng = np.random.default_rng(args.seed)
    for q in (0.95, 0.99):
        v, lo, hi = interval(real_cost, q, rng)
        f = float(np.quantile(sim_cost, q))
        print(f"p{round(q * 100)} cost: held-out {v:.4f} [{lo:.4f}, {hi:.4f}], forecast "
              f"{f:.4f} ({'within' if lo <= f <= hi else 'outside'})")


if __name__ == "__main__":
    main()
