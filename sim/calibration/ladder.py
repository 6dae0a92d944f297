"""The question users ask, on held-out runs: what will this budget do?

For a ladder of budgets (:func:`budgets`: the 50th, 75th, 90th and 95th
percentiles of the recorded prompt tokens, steps and cost per run, and fixed
prompt-token budgets of 50k, 100k and 200k), each fold answers twice:

- **replay**: the fold's held-out runs replayed through the real harness under
  the fitted harness with the budget added (:func:`sim.drivers.replay.replay_runs`);
- **forecast**: the world fitted on the other folds simulated with the budget
  added, on the same random streams as its simulation without it (common
  random numbers: run ``i`` is the same task in both, so a difference is the
  budget's doing).

On each side, against the same harness without the budget: the **share of runs
stopped**, the **successes lost** (runs that succeeded without the budget and
are stopped by it, as a share of the runs whose outcome is known) and the
**dollars saved** (as a share of the cost without the budget; USD per run
too). The folds are pooled (every run is held out once). Intervals (95%):
Wilson's for the two shares (runs are independent), a percentile bootstrap
over runs (:data:`BOOTSTRAP` resamples) for the dollars saved.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.analysis.stats import percentile
from sim.calibration.data import Traces
from sim.calibration.reach import replay_touched, touched, unscreened
from sim.calibration.simulate import Sample, simulate

PERCENTILES: tuple[float, ...] = (0.5, 0.75, 0.9, 0.95)
FIXED_TOKENS: tuple[int, ...] = (50_000, 100_000, 200_000)
BOOTSTRAP = 400
KINDS = {"tokens": ("prompt tokens", "prompt"), "steps": ("steps", "steps"),
         "money_usd": ("cost", "cost")}
"""Budget kind (the scenario's ``harness.budgets`` key) -> (what, per-run column)."""
FIGURES = ("stopped", "lost", "saved")


@dataclass(frozen=True)
class Budget:
    """One rung: ``kind`` (``tokens``, ``steps`` or ``money_usd``: prompt
    tokens, steps or USD per run) at ``value``; ``label`` says where it comes
    from (``p75 steps``, ``100k prompt tokens``)."""

    kind: str
    value: float
    label: str

    def apply(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A copy of the scenario mapping ``doc`` with this budget (the
        tighter of it and a limit the harness already has)."""
        out = copy.deepcopy(doc)
        limits = out["harness"].setdefault("budgets", {})
        value: float = int(self.value) if self.kind != "money_usd" else float(self.value)
        if limits.get(self.kind) is not None:
            value = min(value, limits[self.kind])
        limits[self.kind] = value
        return out


def budgets(traces: Traces) -> list[Budget]:
    """The ladder for ``traces`` (see the module docstring); percentiles by
    the project's definition; cost only where recorded; repeated budgets
    once."""
    out: list[Budget] = []
    seen: set[tuple[str, float]] = set()
    for kind, (what, column) in KINDS.items():
        values = traces.runs[column].to_numpy(float)
        values = values[np.isfinite(values)]
        if not values.size:
            continue
        for q in PERCENTILES:
            v = float(percentile(values, q))
            v = float(max(1, math.floor(v))) if kind != "money_usd" else v
            if v > 0 and (kind, v) not in seen:
                seen.add((kind, v))
                out.append(Budget(kind, v, f"p{round(q * 100)} {what}"))
    for tokens in FIXED_TOKENS:
        if ("tokens", float(tokens)) not in seen:
            seen.add(("tokens", float(tokens)))
            out.append(Budget("tokens", float(tokens), f"{tokens // 1000}k prompt tokens"))
    return out


@dataclass
class Side:
    """Per run, pooled over folds: ``stopped`` by the budget, a success
    ``lost``, whether the outcome is ``known``, USD ``saved`` and the ``cost``
    without the budget; ``fold`` of each run."""

    stopped: np.ndarray
    lost: np.ndarray
    known: np.ndarray
    saved: np.ndarray
    cost: np.ndarray
    fold: np.ndarray

    def figures(self, mask: np.ndarray | None = None) -> dict[str, float]:
        """Share stopped, successes lost, share of dollars saved, USD saved per run."""
        m = np.ones(self.stopped.size, bool) if mask is None else mask
        known = self.known & m
        cost = float(self.cost[m].sum())
        return {"stopped": float(self.stopped[m].mean()) if m.any() else math.nan,
                "lost": float(self.lost[known].mean()) if known.any() else math.nan,
                "saved": float(self.saved[m].sum()) / cost if cost > 0 else math.nan,
                "saved_usd": float(self.saved[m].mean()) if m.any() else math.nan}

    def intervals(self, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
        """95% intervals of :meth:`figures` (see the module docstring)."""
        n = self.stopped.size
        known = self.known
        out = {"stopped": _wilson(int(self.stopped.sum()), n),
               "lost": _wilson(int(self.lost[known].sum()), int(known.sum()))}
        if n and self.cost.sum() > 0:
            draws = rng.integers(0, n, (BOOTSTRAP, n))
            totals = self.cost[draws].sum(axis=1)
            ratio = np.where(totals > 0, self.saved[draws].sum(axis=1)
                             / np.where(totals > 0, totals, 1.0), np.nan)
            lo, hi = np.nanpercentile(ratio, [2.5, 97.5])
            out["saved"] = (float(lo), float(hi))
        else:
            out["saved"] = (math.nan, math.nan)
        return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return (float(ci.low), float(ci.high))


@dataclass
class Rung:
    """One budget's forecast and replay, pooled (``forecast``, ``replay``:
    :meth:`Side.figures`; ``*_interval``: :meth:`Side.intervals`) and per fold
    (``folds[k]``: ``forecast``, ``replay`` and ``floor``, the replay of the
    other folds' held-out runs taken as the forecast of fold ``k``'s: what a
    perfect model fitted on those runs would miss by, the sampling floor)."""

    budget: Budget
    forecast: dict[str, float]
    replay: dict[str, float]
    forecast_interval: dict[str, tuple[float, float]]
    replay_interval: dict[str, tuple[float, float]]
    folds: list[dict[str, dict[str, float]]] = field(default_factory=list)

    def gap(self, figure: str) -> float:
        """Forecast minus replay of ``figure`` (``stopped``, ``lost``, ``saved``)."""
        return self.forecast[figure] - self.replay[figure]

    def mean_over_folds(self, side: str, figure: str) -> float:
        """The mean over folds of one side's figure."""
        values = [f[side][figure] for f in self.folds if math.isfinite(f[side][figure])]
        return float(np.mean(values)) if values else math.nan


@dataclass
class FoldWorld:
    """What the ladder needs of one fold: its fitted scenario mapping, its
    held-out run ids, and its simulation without a budget (``base``, made by
    :func:`sim.calibration.simulate.simulate` with ``runs`` runs at ``seed``)."""

    doc: dict[str, Any]
    held_out: list[str]
    base: Sample
    runs: int
    seed: int


def forecast_side(world: FoldWorld, budget: Budget, fold: int) -> Side:
    """The fold world's runs under ``budget`` against its runs without it:
    only the runs the budget can touch are simulated again
    (:func:`sim.calibration.reach.touched`; the others are the same runs on
    common random numbers), without the call log."""
    base = world.base
    steps, category = base.steps.copy(), base.category.copy()
    resolved, cost = base.resolved.copy(), base.cost.copy()
    again = np.flatnonzero(touched(budget.kind, budget.value, base.steps, base.reach_tokens,
                                   base.reach_money))  # the others are the same runs
    if again.size:
        cut = simulate(budget.apply(world.doc), world.runs, world.seed, calls=False, only=again)
        steps[again], category[again] = cut.steps, cut.category
        resolved[again], cost[again] = cut.resolved, cut.cost
    stopped = (steps < base.steps) | (category != base.category)
    base_cost = np.nan_to_num(base.cost.astype(float))
    return Side(stopped=stopped, lost=(base.resolved == 1) & (resolved != 1),
                known=np.ones(base.n, bool),
                saved=base_cost - np.nan_to_num(cost.astype(float)), cost=base_cost,
                fold=np.full(base.n, fold))


def replay_side(world: FoldWorld, budget: Budget | None, recorded: dict[str, Any],
                fold: int, baseline: list[Any] | None = None) -> tuple[Side, list[Any]]:
    """The fold's held-out runs replayed under the fitted harness with
    ``budget`` (None: without one) against the same harness without it
    (``baseline``, the replays of ``budget=None``); also the replays. Given
    the baseline, only the runs the budget can touch are replayed again
    (:func:`sim.calibration.reach.replay_touched`; the others are their
    baseline replay: the recording answers them alike)."""
    from sim.drivers.replay import replay_runs
    from sim.drivers.replay.pricing import price_models

    runs = [recorded[r] for r in world.held_out if r in recorded]
    doc = world.doc if budget is None else budget.apply(world.doc)
    template, prices_for = _template(doc)
    pricing = price_models(runs, template, prices_for)  # of all the runs, as before
    again = list(range(len(runs)))
    if budget is not None and baseline is not None and not unscreened(template):
        again = [i for i, b in enumerate(baseline)
                 if replay_touched(budget, b.chosen, template)]
    redone = replay_runs([runs[i] for i in again], template, pricing=pricing)
    replays: list[Any] = list(baseline) if baseline is not None else [None] * len(runs)
    for i, r in zip(again, redone, strict=True):
        replays[i] = r
    base = baseline if baseline is not None else replays
    stopped = np.array([r.chosen.stopped and not b.chosen.stopped
                        for r, b in zip(replays, base, strict=True)], bool)
    resolved = [r.chosen.run.resolved for r in replays]
    known = np.array([v is not None for v in resolved], bool)
    lost = stopped & np.array([bool(v) for v in resolved], bool)
    saved = np.array([r.chosen.saved_usd - b.chosen.saved_usd
                      for r, b in zip(replays, base, strict=True)], float)
    cost = np.array([b.chosen.cost_usd for b in base], float)
    return Side(stopped, lost, known, saved, cost, np.full(len(runs), fold)), replays


def _template(doc: dict[str, Any]) -> tuple[Any, Any]:
    """The replay's harness parameters from a scenario mapping's harness (its
    conversation off: replay answers text turns itself) and the run's prices
    by model (the fitted ones; None: the harness's)."""
    from sim.harness.params import Prices
    from sim.scenario.model import harness_params, validate
    from sim.world.params import WorldParams

    harness = copy.deepcopy(doc["harness"])
    harness["conversation"] = {"enabled": False}
    scenario = validate({"name": doc.get("name") or "ladder", "harness": harness}, "ladder")
    template = harness_params(scenario.harness, WorldParams())
    def priced(p: dict[str, Any]) -> Prices:
        return Prices(input=float(p.get("input", 0.0)), output=float(p.get("output", 0.0)),
                      cache_read=float(p.get("cache_read", 0.0)),
                      cache_write=float(p.get("cache_write", 0.0)))

    table = {m: priced(p) for m, p in (doc["harness"].get("model_prices") or {}).items()}
    main = doc["harness"].get("prices")
    if isinstance(main, dict) and doc["harness"].get("model"):
        table[doc["harness"]["model"]] = priced(main)

    def prices_for(model: str | None) -> Prices | None:
        return table.get(model or "")

    return template, prices_for


def _pool(sides: list[Side]) -> Side:
    return Side(*(np.concatenate([getattr(s, f) for s in sides])
                  for f in ("stopped", "lost", "known", "saved", "cost", "fold")))


def fold_sides(world: FoldWorld, recorded: dict[str, Any], rungs: list[Budget],
               fold: int) -> list[tuple[Side, Side]]:
    """One fold's ``(forecast, replay)`` sides for every budget of ``rungs``."""
    baseline = replay_side(world, None, recorded, fold)[1]
    return [(forecast_side(world, budget, fold),
             replay_side(world, budget, recorded, fold, baseline)[0]) for budget in rungs]


def pool_rungs(per_fold: list[list[tuple[Side, Side]]], rungs: list[Budget],
               seed: int) -> list[Rung]:
    """The rungs from every fold's sides (:func:`fold_sides`, folds in order):
    pooled figures, intervals drawn in budget order, per-fold figures (the
    forecast, the replay and the sampling floor: see :class:`Rung`)."""
    rng = np.random.default_rng(seed)
    out = []
    for i, budget in enumerate(rungs):
        fc = [sides[i][0] for sides in per_fold]
        rp = [sides[i][1] for sides in per_fold]
        f, r = _pool(fc), _pool(rp)
        folds = [{"forecast": a.figures(), "replay": b.figures(),
                  "floor": _pool([o for j, o in enumerate(rp) if j != k]).figures()
                  if len(rp) > 1 else {}}
                 for k, (a, b) in enumerate(zip(fc, rp, strict=True))]
        out.append(Rung(budget, f.figures(), r.figures(), f.intervals(rng), r.intervals(rng),
                        folds))
    return out


def ladder(worlds: list[FoldWorld], recorded: dict[str, Any], rungs: list[Budget],
           seed: int, progress: Any = None) -> list[Rung]:
    """Forecast against replay for every budget of ``rungs``, pooled over the
    folds ``worlds`` (``recorded``: the recorded runs by run id), in this
    process; ``progress(done, total)`` after each fold."""
    per_fold = []
    for k, w in enumerate(worlds):
        per_fold.append(fold_sides(w, recorded, rungs, k))
        if progress is not None:
            progress(k + 1, len(worlds))
    return pool_rungs(per_fold, rungs, seed)
