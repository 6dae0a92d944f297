"""How well simulated runs match held-out recorded runs.

For each metric (steps, prompt tokens, output tokens and cost per run, output
tokens per call): the two-sample Kolmogorov-Smirnov distance between the
held-out runs and the simulated ones, its 5% critical value, the medians and
95th percentiles side by side (the project's percentile definition,
:func:`sim.analysis.stats.percentile`) and bootstrap intervals. For the exit
mix, the total-variation distance of the category shares.

**Critical values.** Runs are independent, so a per-run metric's critical
value is the asymptotic one, ``c(alpha) sqrt((n + m) / (n m))`` with
``c(0.05) = sqrt(-ln(0.025) / 2) = 1.358`` (conservative for discrete
metrics such as steps). Calls are not independent (the calls of one run share
its model, its task and its size multiplier), so the per-call critical value
comes from a permutation test that keeps runs whole: the held-out and
simulated runs are pooled, ``n`` of them are drawn as "held out" at random,
and the 95th percentile of the per-call distance over
:data:`PERMUTATIONS` draws is the critical value.

**Intervals** (95%, percentile bootstrap over :data:`BOOTSTRAP` resamples of
the held-out runs, the simulated runs fixed: they are many): of each KS
distance, of the held-out median and 95th percentile, and of the exit-mix
distance. Random draws come from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.analysis.stats import percentile
from sim.calibration.exits import mix, total_variation
from sim.calibration.simulate import Sample

ALPHA = 0.05
C_ALPHA = math.sqrt(-math.log(ALPHA / 2) / 2)
BOOTSTRAP = 500
PERMUTATIONS = 200

METRICS: dict[str, tuple[str, str]] = {
    "steps": ("steps per run", "steps"),
    "prompt": ("prompt tokens per run", "tokens"),
    "output": ("output tokens per run", "tokens"),
    "cost": ("cost per run", "USD"),
    "call_output": ("output tokens per call", "tokens"),
}
"""Metric key -> (what it is, unit)."""


@dataclass
class Metric:
    """One metric's comparison (see the module docstring)."""

    key: str
    label: str
    unit: str
    n_real: int
    n_sim: int
    ks: float
    critical: float
    ks_interval: tuple[float, float]
    real_median: float
    sim_median: float
    real_median_interval: tuple[float, float]
    real_p95: float
    sim_p95: float
    real_p95_interval: tuple[float, float]
    critical_method: str
    p_value: float | None = None
    p_adjusted: float | None = None
    tested: bool = True

    @property
    def rejected(self) -> bool:
        """Whether the fit is rejected on this metric: its multiplicity-adjusted
        p-value is at most :data:`ALPHA` when it has one (the cross-validated
        verdict, :mod:`sim.calibration.verdict`), else the distance reaches its
        critical value; identical samples (distance 0) and metrics that are
        shown but not tested (``tested`` False) never are."""
        if not self.tested or self.ks <= 0:
            return False
        if self.p_adjusted is not None:
            return self.p_adjusted <= ALPHA
        return self.ks >= self.critical

    def why(self) -> str:
        """A sentence on a rejection: distance, critical value, where it differs."""
        return (f"{self.label}: KS {self.ks:.3f} >= critical {self.critical:.3f}; median "
                f"{_num(self.real_median)} held out vs {_num(self.sim_median)} simulated, p95 "
                f"{_num(self.real_p95)} vs {_num(self.sim_p95)}")


@dataclass
class ExitMix:
    """Exit-category shares, held out (``n_real`` runs) and simulated
    (``n_sim``), their total-variation distance with its bootstrap interval,
    and the distance's 5% critical value (:func:`tv_critical`)."""

    real: dict[str, float]
    sim: dict[str, float]
    tv: float
    interval: tuple[float, float]
    critical: float
    n_real: int
    n_sim: int
    p_value: float | None = None
    p_adjusted: float | None = None

    @property
    def rejected(self) -> bool:
        """Whether the exit mixes differ beyond sampling noise: the adjusted
        p-value is at most :data:`ALPHA` when there is one, else the distance
        reaches its critical value; identical mixes never are."""
        if self.tv <= 0:
            return False
        if self.p_adjusted is not None:
            return self.p_adjusted <= ALPHA
        return self.tv >= self.critical

    def why(self) -> str:
        """A sentence on a rejection: distance, critical value, the largest gap."""
        cats = sorted(self.real.keys() | self.sim.keys())  # ties: the first in name order
        gap = max(cats, key=lambda c: abs(self.real.get(c, 0.0) - self.sim.get(c, 0.0)))
        return (f"exit mix: total variation {self.tv:.3f} >= critical {self.critical:.3f}; "
                f"{gap} {self.real.get(gap, 0.0):.1%} held out vs "
                f"{self.sim.get(gap, 0.0):.1%} simulated")


TV_DRAWS = 4000
"""Draws of the null distribution behind :func:`tv_critical`."""


def tv_critical(real: dict[str, float], sim: dict[str, float], n: int, m: int,
                rng: np.random.Generator) -> float:
    """The 5% critical value of the total-variation distance between the exit
    mixes of ``n`` held-out and ``m`` simulated runs when both are samples of
    one mix (the pooled one): the 95th percentile of the distance between two
    multinomial samples of those sizes, over :data:`TV_DRAWS` draws."""
    cats = sorted(real.keys() | sim.keys())
    pooled = np.array([(n * real.get(c, 0.0) + m * sim.get(c, 0.0)) / (n + m) for c in cats])
    pooled = pooled / pooled.sum()
    a = rng.multinomial(n, pooled, size=TV_DRAWS) / n
    b = rng.multinomial(m, pooled, size=TV_DRAWS) / m
    return float(np.quantile(0.5 * np.abs(a - b).sum(axis=1), 0.95))


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:,.4f}" if abs(x) < 10 else f"{x:,.0f}"


def _ks_sorted(a: np.ndarray, b_sorted: np.ndarray) -> float:
    """KS distance of ``a`` against the sorted sample ``b_sorted``."""
    a = np.sort(a)
    grid = np.concatenate([a, b_sorted])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b_sorted, grid, side="right") / b_sorted.size
    return float(np.max(np.abs(fa - fb)))


def critical_value(n: int, m: int) -> float:
    """The asymptotic 5% critical value of the two-sample KS distance."""
    return C_ALPHA * math.sqrt((n + m) / (n * m))


def _values(sample: Sample, key: str) -> np.ndarray:
    v = np.asarray(sample.call_output if key == "call_output" else getattr(sample, key),
                   dtype=float)
    return v[np.isfinite(v)]


def compare(real: Sample, sim: Sample, seed: int = 0) -> tuple[list[Metric], ExitMix]:
    """Every metric and the exit mix of ``real`` (held-out runs) against ``sim``."""
    rng = np.random.default_rng(seed)
    keys = [k for k in METRICS if _values(real, k).size and _values(sim, k).size]
    sims = {k: np.sort(_values(sim, k)) for k in keys}
    boot: dict[str, tuple[list[float], list[float], list[float]]] = {k: ([], [], []) for k in keys}
    sim_mix = mix(list(sim.category))
    tv_boot = []
    for _ in range(BOOTSTRAP):
        sample = real.take(rng.integers(0, real.n, real.n))
        tv_boot.append(total_variation(mix(list(sample.category)), sim_mix))
        for k in keys:
            x = _values(sample, k)
            if x.size:
                ks_b, med_b, p95_b = boot[k]
                ks_b.append(_ks_sorted(x, sims[k]))
                med_b.append(float(percentile(x, 0.5)))
                p95_b.append(float(percentile(x, 0.95)))
    metrics = []
    for k in keys:
        label, unit = METRICS[k]
        a, b = _values(real, k), sims[k]
        if k == "call_output":
            crit = _permutation_critical(real, sim, rng)
            method = f"run-level permutation ({PERMUTATIONS} draws)"
        else:
            crit = critical_value(a.size, b.size)
            method = "asymptotic, c(0.05) = 1.358"
        ks_b, med_b, p95_b = boot[k]
        metrics.append(Metric(
            key=k, label=label, unit=unit, n_real=int(a.size), n_sim=int(b.size),
            ks=_ks_sorted(a, b), critical=crit, ks_interval=_interval(ks_b),
            real_median=float(percentile(a, 0.5)), sim_median=float(percentile(b, 0.5)),
            real_median_interval=_interval(med_b), real_p95=float(percentile(a, 0.95)),
            sim_p95=float(percentile(b, 0.95)), real_p95_interval=_interval(p95_b),
            critical_method=method))
    real_mix = mix(list(real.category))
    return metrics, ExitMix(real_mix, sim_mix, total_variation(real_mix, sim_mix),
                            _interval(tv_boot),
                            tv_critical(real_mix, sim_mix, real.n, sim.n, rng), real.n, sim.n)


def _interval(values: list[float]) -> tuple[float, float]:
    if not values:
        return (math.nan, math.nan)
    lo, hi = np.percentile(values, [2.5, 97.5])
    return (float(lo), float(hi))


def _permutation_critical(real: Sample, sim: Sample, rng: np.random.Generator) -> float:
    """The 95th percentile of the per-call KS distance when held-out and
    simulated runs are exchangeable (runs kept whole)."""
    n, m = real.n, sim.n
    outputs = np.concatenate([real.call_output, sim.call_output]).astype(float)
    runs = np.concatenate([real.call_run, sim.call_run + n])
    stats = []
    for _ in range(PERMUTATIONS):
        chosen = np.zeros(n + m, dtype=bool)
        chosen[rng.choice(n + m, n, replace=False)] = True
        mask = chosen[runs]
        a, b = outputs[mask], outputs[~mask]
        if a.size == 0 or b.size == 0:
            continue
        stats.append(_ks_sorted(a, np.sort(b)))
    return float(np.percentile(stats, 95))


def bootstrap(real: Sample, sim: Sample, keys: list[str], rng: np.random.Generator
               ) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Bootstrap draws (KS, median, p95 per metric; TV under ``exits``) over
    the held-out runs, the simulated ones fixed."""
    sims = {key: np.sort(_values(sim, key)) for key in keys}
    out: dict[str, tuple[list[float], list[float], list[float]]] = {
        key: ([], [], []) for key in [*keys, "exits"]}
    sim_mix = mix(list(sim.category))
    for _ in range(BOOTSTRAP):
        draw = rng.integers(0, real.n, real.n)
        sample = real.take(draw) if "call_output" in keys else None
        out["exits"][0].append(total_variation(mix(list(real.category[draw])), sim_mix))
        for key in keys:
            if key == "call_output":
                assert sample is not None
                x = _values(sample, key)
            else:
                x = np.asarray(getattr(real, key), dtype=float)[draw]
                x = x[np.isfinite(x)]
            if x.size:
                ks_b, med_b, p95_b = out[key]
                ks_b.append(_ks_sorted(x, sims[key]))
                med_b.append(float(percentile(x, 0.5)))
                p95_b.append(float(percentile(x, 0.95)))
    return out
