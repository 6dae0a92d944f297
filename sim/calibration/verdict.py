"""One verdict on a cross-validated calibration.

Every run is held out once (:mod:`sim.calibration.folds`): fold ``k``'s runs are
compared with a simulation of the world fitted on the other folds, on each
per-run metric (steps, prompt tokens, output tokens, cost where recorded:
two-sample KS distance) and on the exit mix (total-variation distance). Each
fold's test is out of sample: its held-out runs played no part in its world.

**Why not pool the folds for the test.** The folds' worlds taken together are
close to a fit of all the runs (for a mean, the average of the K leave-one-fold
means *is* the mean of all runs), so all held-out runs against all fold
simulations is nearly an in-sample comparison: its distances are smaller than
two independent samples' and a test of it rejects almost never, wrong or not.
The pooled distances are shown (the report's first table), the verdict tests
the folds.

**A fitted world is not the truth.** Even a perfect model class, fitted on
finite data, differs from the world that made the runs, so the held-out runs
differ from the fold's simulation by held-out sampling, simulation sampling
*and* the fit's own error. The fitting error is measured by cross-fitting: the
K fold worlds are a delete-a-group jackknife of the fit, so at each point
``x`` of a metric's range

    V_fit(x) = (K - 1) / K * sum_k (G_k(x) - mean G(x))^2

(``G_k`` the CDF of fold ``k``'s world, read from its simulation on random
numbers all folds share, so that differences are the worlds') estimates the
variance of a fit on all runs. Expressed per unit of a sample's CDF variance
``G (1 - G)``, its mean over the central range (``0.1 <= G <= 0.9``) is
``v_fit``: the world behaves like an extra sample of ``1 / v_fit`` runs (the
mean, not the largest value: the largest of some eighty noisy points is
biased upward, and made the verdict's size 1%). The jackknife reads more
than the fit's error: what varies from fold world to fold world on its own
(the search's simulations; a world's simulation shares its random numbers
with the other folds', but a changed parameter moves some runs onto other
random paths) counts ``K - 1`` times. So ``v_fit`` is the part that follows
the runs (their sampling variance times the fold worlds' response to them,
:func:`fit_response`) plus the jackknife's excess over it counted once
(:func:`fit_error`; on a known world at 150 runs and 5 folds with the
search the verdict's size went from 1/100 to 3/150, and the suite's power up
by a quarter at the same size). ``v_fit`` is capped
at :data:`FIT_CAP` times ``1 / n + 1 / s`` (``n`` runs, ``s`` simulated runs
per search evaluation): the variance of the runs' own empirical distribution
plus the search's simulations, the sampling floor (the runs a world was
fitted on, replayed as the forecast, are an estimate every fit should
match); the cap keeps a world the jackknife makes unstable (K worlds that
disagree because none fits) from buying arbitrarily wide critical values. A
world fitted on K - 1 folds has ``K / (K - 1)`` times that variance.

**Critical values by parametric bootstrap** (:func:`fold_null`). Asymptotic
critical values (the Kolmogorov distribution) are conservative for discrete
and tied metrics and small samples, and a correction for several correlated
metrics (steps, tokens and cost move together) as if they were independent
is conservative again: together they made an earlier verdict's size about
0.5% where 5% was meant. So each fold's null distribution is simulated from
its own fitted world: :data:`REPLICATES` samples of the held-out size are
drawn with replacement from a simulation of the fold's world independent of
the one compared (the jackknife simulation, ``J`` runs), and each is compared
with the fold's simulation exactly as the held-out runs are (every per-run
KS distance and the exit mix's total-variation distance, from the *same*
drawn runs, so the metrics' correlation is kept). A replicate carries the
variance ``1 / n_k + 1 / m_k + 1 / J`` (held out, simulated, the world
sample), the held-out distance ``1 / n_k + 1 / m_k + K / (K - 1) v_fit``: each
replicate distance is widened by the square root of their ratio (never
narrowed: a discrete statistic's ties stay ties). The drawn samples are
reused by every metric and by the power (:mod:`sim.calibration.power`); no
world is simulated for them. A fold's p-value for a statistic is the share of
its replicates at least as far (counting the held-out distance itself), its
critical value their 95th percentile.

**One verdict.** A statistic's folds are combined by Stouffer's method (the
sum of the folds' normal scores ``Phi^-1(1 - p_k)`` over ``sqrt(K)``): a
misfit that shows in every fold adds up, where testing each fold alone would
need it to be large in one. The folds are not independent: each fold's world
was fitted on the other folds' runs, so one fold's held-out sampling error is
in every other fold's world, and two folds' residuals correlate (``-1 / (K -
1)`` for a world that is its runs' empirical distribution); their distances,
the residuals' sizes, correlate positively (about 0.2 at 3 folds, 0.05 at 5),
and a sum over ``sqrt(K)`` has a variance above 1: with the cap at the floor
and the folds taken as independent, an earlier verdict rejected 10% of right
worlds at 3 folds, and a cap at twice the floor that hid it made the verdict
reject 1% at 5. The sum is divided by its standard deviation instead
(:func:`fold_dependence`; Strube 1985). How much of its runs a world carries
is read from the folds themselves (:func:`fit_response`: the slope of the
fold worlds' CDFs on their training runs' across the folds): a model keeps a
share ``beta`` of its runs' sampling error (on a known world 0.95 for steps,
0.83 for prompt tokens, 0.63 for output tokens, 0.82 for cost), and taking
the fit's whole variance as the runs' (the rule before) overstated the
dependence. Where the folds were dealt balanced on a statistic (the exit
mix: folds are stratified by exit category) their training runs hardly
differ and the slope cannot be read; the response is then inferred from the
fit's variance (``beta = v_fit n``, so ``v_fit`` is the jackknife's reading).
(With ``v_fit`` the jackknife's reading alone, the dependence
hardly showed: that reading grows with the folds' held-out differences, which
studentizes the folds' scores; measured on a known world, their correlation
was 0.00-0.06. With :func:`fit_error` it shows again, 0.02-0.04 at 5 folds
with the search, about what :func:`fold_dependence` gives.)
The per-run metrics and the exit mix are then one
family, adjusted by single-step min-P (Westfall and Young): replicate ``b`` of
every fold (the folds are independent) is itself combined per statistic, each
replicate ranked among the others, and the smallest combined p-value over the
family is one draw of its null distribution; a test's adjusted p-value is the
share of those draws at most its combined p-value. The fit is rejected when an
adjusted p-value is at most :data:`ALPHA`. Since the held-out runs and a
replicate are judged alike, the size is 5% up to the bootstrap's own
approximations (the world sample for the world, the widening for the fit's
error); it is measured on known worlds (``tests/test_calibrate_verdict.py``:
5% +/- 2 points over 200 trials).

Output tokens per call are shown with their own 5% permutation critical
value (runs kept whole, :func:`_permutation_critical`)
but are not part of the verdict (a run's calls are not independent and the run
metrics hold them).

Intervals (95%, percentile bootstrap over the pooled held-out runs, the
simulated runs fixed) are those of the measures below.

**Measures.** How well simulated runs match held-out recorded runs.

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import kolmogi, kolmogorov, ndtr, ndtri

from sim.analysis.stats import percentile
from sim.calibration.exits import CATEGORIES, category, mix, total_variation
from sim.calibration.simulate import Sample, pooled

# ------------------------------------------------------------------ measures

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
    "children": ("subagents per run", "children"),
    "child_tokens": ("subagents' tokens per run", "tokens"),
}
"""Metric key -> (what it is, unit). ``children`` (the subagents a run
started) and ``child_tokens`` (the tokens they used: their count times
their length) only when both sides record them (traces with ``calls.agent``, a
world with a fitted fan-out)."""


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


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample KS distance of ``a`` and ``b`` (finite values)."""
    return _ks_sorted(np.asarray(a, float), np.sort(np.asarray(b, float)))


def critical_value(n: int, m: int) -> float:
    """The asymptotic 5% critical value of the two-sample KS distance."""
    return C_ALPHA * math.sqrt((n + m) / (n * m))


def _values(sample: Sample, key: str) -> np.ndarray:
    raw = sample.call_output if key == "call_output" else getattr(sample, key)
    if raw is None:  # children of runs that record none
        return np.zeros(0)
    v = np.asarray(raw, dtype=float)
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


# ------------------------------------------------------------------ the verdict

TESTED: tuple[str, ...] = ("steps", "prompt", "output", "cost")
"""The per-run metrics of the verdict (with the exit mix)."""
FANOUT_TESTED: tuple[str, ...] = ("children", "child_tokens")
"""The fan-out's per-run metric, in the verdict's family (same replicates,
Stouffer combination and min-P adjustment as :data:`TESTED`) when both the
held-out runs and the fold simulations record subagents: a world whose
fan-out misfits the runs' is rejected like one whose steps do."""
GRID = 99
"""Points (quantiles of the simulated runs) at which the fit's variance is read."""
CENTRAL = (0.1, 0.9)
FIT_CAP = 1.0
"""The fit's variance is capped at this many times the empirical
distribution's (``1 / n + 1 / s``; see the module docstring)."""
REPLICATES = 400
"""Null replicates per fold: held-out-sized samples of the fold's own world."""
EXITS = "exits"
"""The exit mix's key among the tested statistics."""


@dataclass
class FoldCheck:
    """One fold: its held-out runs against its own world's simulation. Per
    tested metric: the KS distance ``ks``, ``critical`` (the 95th percentile of
    the distance a perfect model class fitted on the other folds would show,
    from the fold's null replicates: held-out sampling, simulation sampling and
    the fit's own error), its p-value ``p`` (the share of replicates at least as
    far) and the medians (held out, simulated); the same for the exit mix
    (``tv``, ``tv_critical``, ``tv_p``, ``gap``: its widest category gap)."""

    fold: int
    n_real: int
    n_sim: int
    ks: dict[str, float]
    critical: dict[str, float]
    tv: float
    tv_critical: float
    p: dict[str, float] = field(default_factory=dict)
    medians: dict[str, tuple[float, float]] = field(default_factory=dict)
    tv_p: float = 1.0
    gap: str = ""

    def within(self, key: str) -> bool:
        """Whether the metric's distance is under its 95th percentile."""
        return self.ks[key] < self.critical[key]


@dataclass
class FoldNull:
    """The null replicates of one fold (see the module docstring): per tested
    statistic (metric key or :data:`EXITS`), the observed distance
    ``observed``, the replicate distances ``replicates`` (already scaled by
    ``scale``, the fit's error) and, to recompute a statistic on shifted
    replicates (:mod:`sim.calibration.power`), the world's per-run values
    ``world`` (runs drawn from), the replicates' ``draws`` (replicates x
    held-out runs, positions into ``world``), the sorted simulated values
    ``sim`` and the held-out count ``n`` of each metric; per statistic, the
    variance of the fold world's fit ``fit`` (``K / (K - 1) v_fit``, per unit
    of a CDF's variance), the ``simulated`` runs compared and the fold
    worlds' ``response`` to their runs (shared by the folds; for
    :func:`fold_dependence`)."""

    observed: dict[str, float]
    replicates: dict[str, np.ndarray]
    scale: dict[str, float]
    world: dict[str, np.ndarray]
    draws: np.ndarray
    sim: dict[str, np.ndarray]
    n: dict[str, int]
    fit: dict[str, float] = field(default_factory=dict)
    simulated: dict[str, int] = field(default_factory=dict)
    response: dict[str, float] = field(default_factory=dict)

    def p_values(self, key: str, distances: np.ndarray) -> np.ndarray:
        """The share of this fold's replicates of ``key`` at least as far as
        each of ``distances`` (counting the distance itself: never 0)."""
        null = np.sort(self.replicates[key])
        at_least = null.size - np.searchsorted(null, np.asarray(distances) - 1e-12, side="left")
        return (1 + at_least) / (null.size + 1)

    def replicate_p(self, key: str) -> np.ndarray:
        """Each replicate's p-value among the others (its rank from the top
        over the replicates, itself included, over their count)."""
        null = self.replicates[key]
        ordered = np.sort(null)
        at_least = ordered.size - np.searchsorted(ordered, null - 1e-12, side="left")
        return at_least / ordered.size


@dataclass
class Judgement:
    """The cross-validated comparison (see the module docstring): per metric
    and for the exit mix, the pooled distances with the folds' combined
    p-value and its family-wise adjusted value (``metrics``, ``exits``), the
    per-fold tests ``folds``, ``fit_variance`` (``v_fit`` per tested metric and
    ``exits``), the folds' null replicates ``nulls``, the replicates'
    family minimum p-values ``family`` (the null distribution of the
    smallest combined p-value) and ``fit_response`` (per tested metric and
    ``exits``: how closely the fold worlds follow their runs,
    :func:`fit_response`)."""

    metrics: list[Metric]
    exits: ExitMix
    folds: list[FoldCheck]
    fit_variance: dict[str, float]
    alpha: float = ALPHA
    nulls: list[FoldNull] = field(default_factory=list)
    family: np.ndarray = field(default_factory=lambda: np.zeros(0))
    fit_response: dict[str, float] = field(default_factory=dict)

    @property
    def rejected(self) -> list[Metric]:
        """The tested metrics the verdict rejects."""
        return [m for m in self.metrics if m.rejected]

    @property
    def reasons(self) -> list[str]:
        """A sentence per rejected test: each fold's distance against its 95th
        percentile, the medians, the combined and adjusted p-values."""
        out = []
        for m in self.rejected:
            folds = ", ".join(f"{f.ks[m.key]:.3f} ({f.critical[m.key]:.3f})"
                              for f in self.folds if m.key in f.ks)
            out.append(f"{m.label}: KS per fold {folds} (95th percentile of a perfect model in "
                       f"brackets); median {_num(m.real_median)} held out vs "
                       f"{_num(m.sim_median)} simulated (combined p = {m.p_value:.2g}, "
                       f"family-wise adjusted {m.p_adjusted:.2g})")
        e = self.exits
        if e.rejected:
            folds = ", ".join(f"{f.tv:.3f} ({f.tv_critical:.3f})" for f in self.folds)
            widest = max(self.folds, key=lambda f: f.tv)
            out.append(f"exit mix: total variation per fold {folds}; fold {widest.fold + 1}: "
                       f"{widest.gap} (combined p = {e.p_value:.2g}, family-wise adjusted "
                       f"{e.p_adjusted:.2g})")
        return out

    @property
    def status(self) -> int:
        """1 when the fit is rejected, else 0."""
        return 1 if self.reasons else 0


def fit_variance(samples: list[np.ndarray], independent: bool = True) -> float:
    """``v_fit`` of a metric from the simulations of the K fold worlds (the
    jackknife of the module docstring). ``independent``: the simulations drew
    independent random numbers, and the part of the spread their sampling
    noise explains is taken off (0 when the worlds agree within it); False:
    they share their random numbers (common random numbers: their differences
    are the worlds'), and nothing is taken off."""
    sorted_ = [np.sort(s) for s in samples if s.size]
    k = len(sorted_)
    if k < 2:
        return 0.0
    grid = np.unique(np.quantile(np.concatenate(sorted_), np.linspace(0.02, 0.98, GRID)))
    cdfs = np.array([np.searchsorted(s, grid, side="right") / s.size for s in sorted_])
    g = cdfs.mean(axis=0)
    spread = (k - 1) / k * ((cdfs - g) ** 2).sum(axis=0)
    noise = (k - 1) / k * (1 - 1 / k) * g * (1 - g) * sum(1.0 / s.size for s in sorted_)
    excess = np.maximum(spread - noise, 0.0) if independent else spread
    central = (g >= CENTRAL[0]) & (g <= CENTRAL[1])
    if not central.any():
        return 0.0
    return float(np.mean(excess[central] / (g[central] * (1 - g[central]))))


def mix_fit_variance(mixes: list[np.ndarray], sizes: list[int], independent: bool = True
                     ) -> float:
    """``v_fit`` of the exit mix from the K fold worlds' simulated mixes
    (vectors over :data:`~sim.calibration.exits.CATEGORIES`) of ``sizes`` runs
    (``independent`` as for :func:`fit_variance`)."""
    k = len(mixes)
    if k < 2:
        return 0.0
    p = np.array(mixes)
    g = p.mean(axis=0)
    spread = (k - 1) / k * ((p - g) ** 2).sum(axis=0)
    noise = (k - 1) / k * (1 - 1 / k) * g * (1 - g) * sum(1.0 / max(m, 1) for m in sizes)
    base = float((g * (1 - g)).sum())
    excess = np.maximum(spread - noise, 0.0) if independent else spread
    return float(excess.sum() / base) if base > 0 else 0.0


def ks_p_value(ks: float, n: int, m: int, v_fit: float) -> float:
    """The asymptotic p-value of a KS distance between ``n`` held-out and
    ``m`` simulated runs when the world carries a fitting variance ``v_fit``
    (the Kolmogorov distribution at the effective size; the verdict's own
    p-values come from its null replicates)."""
    return float(kolmogorov(ks * math.sqrt(_effective(n, m, v_fit))))


def ks_critical(level: float, n: int, m: int, v_fit: float) -> float:
    """The distance with asymptotic p-value ``level`` (see :func:`ks_p_value`)."""
    return float(kolmogi(level) / math.sqrt(_effective(n, m, v_fit)))


def _effective(n: int, m: int, v_fit: float) -> float:
    return 1.0 / (1.0 / n + 1.0 / m + v_fit)


def tv_null(pooled_mix: np.ndarray, n: int, m: int, v_fit: float,
            rng: np.random.Generator, draws: int = TV_DRAWS) -> np.ndarray:
    """Draws of the total-variation distance between a held-out mix of ``n``
    runs and a simulated one of ``m`` runs of a world fitted with variance
    ``v_fit``, both of ``pooled_mix`` (multinomial draws; the world a
    multinomial sample of ``1 / v_fit`` runs)."""
    p = pooled_mix / pooled_mix.sum()
    a = rng.multinomial(n, p, size=draws) / n
    if v_fit > 1e-9:
        size = max(1, round(1.0 / v_fit))
        world = rng.multinomial(size, p, size=draws) / size
    else:
        world = np.broadcast_to(p, (draws, p.size))
    b = rng.multinomial(m, world) / m
    return 0.5 * np.abs(a - b).sum(axis=1)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given
    (:func:`sim.analysis.compare.holm`, rounded to 12 digits).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    from sim.analysis.compare import holm as adjust

    return [round(v, 12) for v in adjust(p_values)]


def stouffer(p_values: list[float]) -> float:
    """The one-sided p-values of the folds combined by Stouffer's method
    (equal weights: the folds are of equal size within one run)."""
    return float(stouffer_rows(np.asarray(p_values, float)[None, :])[0])


def stouffer_rows(p: np.ndarray, spread: float = 1.0) -> np.ndarray:
    """:func:`stouffer` of each row of ``p`` (rows x folds); ``spread``: the
    standard deviation of the folds' summed normal scores over ``sqrt(K)``
    when the folds are not independent (:func:`fold_dependence`; Strube 1985:
    the sum over the square root of the sum of their correlation matrix)."""
    p = np.clip(np.asarray(p, float), 1e-15, 1 - 1e-15)
    return np.asarray(ndtr(ndtri(p).sum(axis=1) / (math.sqrt(p.shape[1]) * spread)), float)


def absolute_correlation(rho: float) -> float:
    """The correlation of ``|X|`` and ``|Y|`` for standard normal ``X`` and
    ``Y`` of correlation ``rho``: ``E|X||Y| = (2 / pi) (sqrt(1 - rho^2) + rho
    arcsin rho)`` and ``Var|X| = 1 - 2 / pi``, so ``(sqrt(1 - rho^2) + rho
    arcsin rho - 1) / (pi / 2 - 1)`` (0 at 0, 1 at +/- 1, about
    ``rho^2 / (pi - 2)`` when small).

    >>> round(absolute_correlation(-0.5), 3), absolute_correlation(0.0)
    (0.224, 0.0)
    """
    rho = min(1.0, max(-1.0, rho))
    return (math.sqrt(1.0 - rho * rho) + rho * math.asin(rho) - 1.0) / (math.pi / 2 - 1.0)


def fit_response(held_out: list[np.ndarray], worlds: list[np.ndarray]) -> float:
    """How closely the fold worlds follow the runs they were fitted on:
    ``beta`` in ``[0, 1]``, 1 for a world that is the empirical distribution
    of its runs, 0 for one that ignores them.

    Fold ``k``'s world ``G_k`` was fitted on the other folds' runs, whose
    empirical CDF is ``U_k``. A fit that is a projection of its runs'
    empirical distribution onto the model (maximum likelihood, a fitted
    hazard, a quantile match: ``beta`` the share of a sample's CDF variance the
    model keeps) moves with them: ``G_k - mean G = beta (U_k - mean U)`` plus
    whatever varies independently from fold to fold (the search's own
    simulations, the simulations' sampling). ``beta`` is that regression's
    slope through the origin over the folds, at every value the held-out runs
    take in the central range of their pooled CDF (``CENTRAL``); ``worlds``
    are simulations of the fold worlds (on common random numbers, so that
    their differences are the worlds'; independent ones only add noise). 1
    when there is nothing to read (every held-out run alike: then no distance
    depends on it); NaN when the folds were balanced on the statistic (their
    training runs hardly differ, :data:`BALANCED`: the judge then infers it
    from the fit's variance)."""
    held = [np.sort(np.asarray(h, float)) for h in held_out]
    if len(held) < 2 or any(h.size == 0 for h in held) or any(np.size(w) == 0 for w in worlds):
        return 1.0
    pooled = np.sort(np.concatenate(held))
    grid = np.unique(pooled)
    cdf = np.searchsorted(pooled, grid, side="right") / pooled.size
    grid = grid[(cdf >= CENTRAL[0]) & (cdf <= CENTRAL[1])]
    if grid.size == 0:
        return 1.0
    own = np.array([np.searchsorted(h, grid, side="right") / h.size for h in held])
    fitted = np.array([np.searchsorted(np.sort(np.asarray(w, float)), grid, side="right")
                       / np.size(w) for w in worlds])
    return _response(own, np.array([h.size for h in held], float), fitted)


def mix_response(counts: list[np.ndarray], worlds: list[np.ndarray]) -> float:
    """:func:`fit_response` of the exit mix: ``counts`` each fold's held-out
    runs per category, ``worlds`` each fold world's simulated shares (vectors
    over :data:`~sim.calibration.exits.CATEGORIES`); the categories are the
    points."""
    held = np.asarray(counts, float)
    sizes = held.sum(axis=1)
    if held.shape[0] < 2 or (sizes <= 0).any():
        return 1.0
    return _response(held / sizes[:, None], sizes, np.asarray(worlds, float))


BALANCED = 0.1
"""The folds' training runs differ on a statistic less than this share of what
independently dealt folds would show: the folds were balanced on it (dealt
stratified by exit, say) and :func:`fit_response` cannot read the response."""


def _response(own: np.ndarray, sizes: np.ndarray, fitted: np.ndarray) -> float:
    """The slope of the fold worlds' values ``fitted`` (folds x points) on
    their training runs' (the other folds' ``own``, weighted by ``sizes``),
    both centred over the folds; clipped to ``[0, 1]``. NaN when the
    training runs' spread is under :data:`BALANCED` of its expectation for
    independently dealt folds (``sum_x p (1 - p) sum_k sum_i a_ki^2 / n_i``,
    ``a_ki`` fold ``i``'s weight in fold ``k``'s centred training share), 1
    when there is none to expect (every run alike)."""
    folds = sizes.size
    runs = sizes.sum()
    total = (sizes[:, None] * own).sum(axis=0)
    training = (total[None, :] - sizes[:, None] * own) / (runs - sizes)[:, None]
    u = training - training.mean(axis=0)
    g = fitted - fitted.mean(axis=0)
    weights = (sizes[None, :] / (runs - sizes)[:, None]) * (1.0 - np.eye(folds))
    weights = weights - weights.mean(axis=0)[None, :]
    pooled = total / runs
    expected = float((pooled * (1.0 - pooled)).sum() * (weights ** 2 / sizes[None, :]).sum())
    if expected <= 1e-15:
        return 1.0
    spread = float((u * u).sum())
    if spread < BALANCED * expected:
        return math.nan
    return min(1.0, max(0.0, float((u * g).sum()) / spread))


def fit_error(read: float, response: float, folds: int, runs: int) -> float:
    """``v_fit``, the variance of a fit on all ``runs`` runs per unit of a
    CDF's, from the jackknife's reading ``read`` (:func:`fit_variance`) of
    ``folds`` fold worlds and their ``response`` (:func:`fit_response`).

    A fold world's error is the projection of its training runs' sampling
    error, variance ``beta / N_k`` (``N_k = runs (K - 1) / K`` runs), plus
    errors of its own, independent from fold to fold, variance ``s`` (the
    search's simulations; in the jackknife's common-random-number simulation,
    the runs a changed parameter moves onto other random paths). The jackknife
    reads the first right and the second ``K - 1`` times: ``K / (K - 1) read =
    beta / N_k + (K - 1) s``. So ``s`` is the excess over ``beta / N_k``
    over ``K - 1`` (never below 0), and a fold world's variance is ``beta /
    N_k + s``, returned as a fit on all runs' (``(K - 1) / K`` of it, as the
    jackknife's reading is). On a known world (150 runs, 5 folds, with the
    search) the jackknife read 0.87 of ``1 / N_k`` for output tokens where
    the fold worlds' true variance was 0.62 and ``beta`` 0.63.

    >>> round(fit_error(0.01, 1.0, 5, 100), 6)  # all of it the runs': as read
    0.01
    >>> round(fit_error(0.02, 1.0, 5, 100), 6)  # the excess counted once
    0.0125
    """
    if folds < 2:
        return read
    data = response * folds / ((folds - 1) * runs)
    fold_world = data + max(0.0, folds / (folds - 1) * read - data) / (folds - 1)
    return (folds - 1) / folds * fold_world


def fold_dependence(held_out: list[int], simulated: list[int], fit: list[float],
                    response: float = 1.0) -> float:
    """The standard deviation, over ``sqrt(K)``, of the sum of K folds' normal
    scores of a distance when the folds' worlds were fitted on each other's
    runs (see the module docstring): 1 for independent folds.

    Fold ``k`` holds out ``held_out[k]`` runs, compares them with
    ``simulated[k]`` simulated runs of its world, whose fit has variance
    ``fit[k]`` per unit of a CDF's variance. At a point of the metric's range,
    fold ``k``'s residual (held-out CDF less its world's) is its held-out
    runs' sampling error ``e_k`` (variance ``1 / n_k``), less its simulation's,
    less its world's fit error. The world follows the runs it was fitted on
    by ``response`` (:func:`fit_response`: a projection ``P`` of their
    empirical error ``sum_{i != k} (n_i / N_k) e_i``, ``N_k`` the other
    folds' runs, keeping ``beta`` of its variance, so ``cov(P e, e) = var(P
    e) = beta var(e)``), plus errors of its own independent of the other
    folds'. Two folds' residuals then have covariance ``beta (-1 / N_j - 1 /
    N_k + (N - n_j - n_k) / (N_j N_k))`` and variances ``1 / n_k + 1 / m_k +
    fit[k]`` (``fit[k]`` at least ``beta / N_k``, the part that follows the
    runs): a correlation of ``-1 / (K - 1)`` for an empirical world (``beta``
    1: each fold's runs are in the others' worlds), 0 for a world that
    ignores its runs. A distance is the residual's size, and the sizes of two
    normal residuals correlate as :func:`absolute_correlation` says (0.22 at 3
    folds, 0.05 at 5 for ``beta`` 1); the folds' normal scores are taken to
    correlate alike (measured on a known world with the fit's true variance:
    0.16-0.24 at 3 folds, 0.04-0.08 at 5). Stouffer's sum then has variance
    ``K + sum_{j != k} r_jk``."""
    k = len(held_out)
    if k < 2 or response <= 0:
        return 1.0
    total = float(sum(held_out))
    others = [total - n for n in held_out]  # at least one fold's runs each
    variance = [1.0 / n + 1.0 / m + max(f, response / o)
                for n, m, f, o in zip(held_out, simulated, fit, others, strict=True)]
    pairs = 0.0
    for a in range(k):
        for b in range(a + 1, k):
            cov = response * (-1.0 / others[b] - 1.0 / others[a]
                              + (total - held_out[a] - held_out[b]) / (others[a] * others[b]))
            pairs += 2 * absolute_correlation(cov / math.sqrt(variance[a] * variance[b]))
    return math.sqrt((k + pairs) / k)


def ks_rows(world: np.ndarray, draws: np.ndarray, sim_sorted: np.ndarray) -> np.ndarray:
    """The KS distance of each row of ``world[draws]`` (replicates x runs)
    against the sorted sample ``sim_sorted``: both empirical CDFs evaluated at
    every value either takes (exact, vectorised over the replicates)."""
    grid, inverse = np.unique(np.concatenate([world, sim_sorted]), return_inverse=True)
    rank = inverse[:world.size]
    rows, n = draws.shape
    flat = (np.arange(rows)[:, None] * grid.size + rank[draws]).ravel()
    counts = np.bincount(flat, minlength=rows * grid.size).reshape(rows, grid.size)
    fx = np.cumsum(counts, axis=1) / n
    fy = np.searchsorted(sim_sorted, grid, side="right") / sim_sorted.size
    return np.asarray(np.abs(fx - fy).max(axis=1), float)


def tv_rows(world: np.ndarray, draws: np.ndarray, sim_mix: np.ndarray) -> np.ndarray:
    """The exit mixes' total-variation distance of each row of
    ``world[draws]`` (category indices into :data:`CATEGORIES`) against the
    shares ``sim_mix``."""
    rows, n = draws.shape
    flat = (np.arange(rows)[:, None] * len(CATEGORIES) + world[draws]).ravel()
    shares = np.bincount(flat, minlength=rows * len(CATEGORIES)).reshape(rows, -1) / n
    return np.asarray(0.5 * np.abs(shares - sim_mix).sum(axis=1), float)


def _codes(categories: np.ndarray) -> np.ndarray:
    """Each run's exit category as its index in :data:`CATEGORIES` (an exit
    label read into its category, as :func:`sim.calibration.exits.mix` reads it)."""
    index = {c: i for i, c in enumerate(CATEGORIES)}
    return np.array([index[c if c in index else category(c)] for c in map(str, categories)],
                    np.int64)


def _counts(categories: np.ndarray) -> np.ndarray:
    """Runs per exit category (their ``category``), in :data:`CATEGORIES` order."""
    return np.bincount(_codes(categories), minlength=len(CATEGORIES))


def _shares(categories: np.ndarray) -> np.ndarray:
    """The exit mix of runs (their ``category``), in :data:`CATEGORIES` order:
    :func:`sim.calibration.exits.mix` as an array (all 0 for no run)."""
    return _counts(categories) / max(len(categories), 1)


def _widening(own: float, fit: float, world_runs: int) -> float:
    """The factor on a replicate distance that turns the variance it has
    (``own``: held-out and simulated sampling; ``1 / world_runs``: the world
    sample it is drawn from) into the held-out distance's (``own`` and the
    fit's ``fit``); never below 1 (a discrete statistic's ties stay ties)."""
    return max(1.0, math.sqrt((own + fit) / (own + 1.0 / world_runs)))


def fold_null(real: Sample, sim: Sample, world: Sample, v_fit: dict[str, float], k: int,
              keys: list[str], rng: np.random.Generator, replicates: int = REPLICATES,
              response: dict[str, float] | None = None) -> FoldNull:
    """One fold's null replicates (see the module docstring): ``replicates``
    samples of the held-out size drawn with replacement from ``world`` (a
    simulation of the fold's world independent of ``sim``), each compared
    with ``sim`` as the held-out runs are, the distances scaled by the fit's
    error (``v_fit``, a world fitted on ``k - 1`` of ``k`` folds);
    ``response``: the fold worlds' response to their runs, kept for
    :func:`fold_dependence` (None: none read, every statistic's 1)."""
    usable = np.ones(world.n, bool)
    values = {}
    for key in keys:
        raw = getattr(world, key)
        v = np.full(world.n, np.nan) if raw is None else np.asarray(raw, float)
        usable &= np.isfinite(v)
        values[key] = v
    positions = np.flatnonzero(usable)
    j = positions.size
    draws = positions[rng.integers(0, j, (replicates, real.n))]
    scale = k / (k - 1)
    observed: dict[str, float] = {}
    reps: dict[str, np.ndarray] = {}
    factor: dict[str, float] = {}
    sims: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    fit: dict[str, float] = {}
    simulated: dict[str, int] = {}
    for key in keys:
        a, b = _values(real, key), np.sort(_values(sim, key))
        if not a.size or not b.size:
            continue
        own = 1.0 / a.size + 1.0 / b.size
        factor[key] = _widening(own, scale * v_fit[key], j)
        observed[key] = _ks_sorted(a, b)
        reps[key] = factor[key] * ks_rows(values[key], draws[:, :a.size], b)
        sims[key], counts[key] = b, a.size
        fit[key], simulated[key] = scale * v_fit[key], b.size
    world_codes = _codes(world.category)
    sim_mix, real_mix = _shares(sim.category), _shares(real.category)
    own = 1.0 / real.n + 1.0 / sim.n
    factor[EXITS] = _widening(own, scale * v_fit[EXITS], j)
    observed[EXITS] = float(0.5 * np.abs(real_mix - sim_mix).sum())
    reps[EXITS] = factor[EXITS] * tv_rows(world_codes, draws, sim_mix)
    values[EXITS], sims[EXITS], counts[EXITS] = world_codes, sim_mix, real.n
    fit[EXITS], simulated[EXITS] = scale * v_fit[EXITS], sim.n
    return FoldNull(observed, reps, factor, values, draws, sims, counts, fit, simulated,
                    dict(response or {}))


def family_p(nulls: list[FoldNull], keys: list[str],
             observed: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Per statistic of ``keys``, its folds' p-values combined by Stouffer:
    of the observed distances (arrays of one), or with ``observed`` (per key,
    replicates x folds distances: shifted replicates, say) of those, and the
    replicates' own otherwise (each replicate ranked among the others). The
    replicates' folds are independent (a replicate of each, drawn apart);
    observed distances' folds are not (:func:`fold_dependence`), and their sum
    is divided by its standard deviation."""
    out = {}
    for key in keys:
        folds = [n for n in nulls if key in n.replicates]
        if observed is not None and key in observed:
            p = np.column_stack([f.p_values(key, observed[key][:, i])
                                 for i, f in enumerate(folds)])
        elif observed is not None:
            p = np.column_stack([f.replicate_p(key) for f in folds])
        else:
            p = np.array([[f.p_values(key, np.array([f.observed[key]]))[0] for f in folds]])
        independent = observed is not None and key not in observed  # replicates
        out[key] = stouffer_rows(p, 1.0 if independent else fold_dependence(
            [f.n[key] for f in folds], [f.simulated.get(key, 0) or 1 for f in folds],
            [f.fit.get(key, 0.0) for f in folds], folds[0].response.get(key, 1.0)))
    return out


def family_null(nulls: list[FoldNull], keys: list[str]) -> np.ndarray:
    """The null distribution of the smallest combined p-value over ``keys``:
    one value per replicate (replicate ``b`` of every fold together; the folds
    are independent)."""
    combined = family_p(nulls, keys, observed={})
    return np.asarray(np.min(np.column_stack([combined[k] for k in keys]), axis=1), float)


def adjusted(p: float, family: np.ndarray) -> float:
    """The family-wise adjusted p-value of a combined p-value ``p``: the share
    of null replicates whose smallest combined p-value is at most ``p``
    (single-step min-P)."""
    return float((1 + int((family <= p + 1e-12).sum())) / (family.size + 1))


def judge(real_folds: list[Sample], sim_folds: list[Sample], seed: int, *,
          jackknife: list[Sample] | None = None, search_runs: int | None = None,
          intervals: bool = True, replicates: int = REPLICATES) -> Judgement:
    """The verdict on held-out runs ``real_folds[k]`` against their fold's
    simulation ``sim_folds[k]`` (see the module docstring). ``jackknife``:
    simulations of the fold worlds on common random numbers, for the fit's
    variance and the null replicates (None: the fold simulations, their
    sampling noise taken off); ``search_runs``: simulated runs per search
    evaluation (None: no search), for the cap on the fit's variance.
    ``intervals``: bootstrap intervals and the per-call metric (off: the
    verdict alone, faster); ``replicates``: null replicates per fold."""
    rng = np.random.default_rng(seed)
    k = len(real_folds)
    real, sim = pooled(real_folds), pooled(sim_folds)
    keys = _keys(real, sim, intervals)
    tested = [key for key in keys if key in TESTED or key in FANOUT_TESTED]
    cap = FIT_CAP * (1.0 / real.n + (1.0 / search_runs if search_runs else 0.0))
    worlds = jackknife if jackknife is not None else sim_folds
    read = _fit_variances(worlds, jackknife is None, tested)
    response = {key: b if math.isfinite(b) else min(1.0, read[key] * real.n)
                for key, b in _responses(real_folds, worlds, tested).items()}
    v_fit = {key: min(cap, fit_error(v, response[key], k, real.n)) for key, v in read.items()}
    nulls = [fold_null(r, s, w, v_fit, k, tested, rng, replicates, response)
             for r, s, w in zip(real_folds, sim_folds, worlds, strict=True)]
    names = [key for key in tested if all(key in n.replicates for n in nulls)] + [EXITS]
    family = family_null(nulls, names)
    combined = {key: float(v[0]) for key, v in family_p(nulls, names).items()}
    folds = [_fold_check(i, r, s, n) for i, (r, s, n)
             in enumerate(zip(real_folds, sim_folds, nulls, strict=True))]
    boot = bootstrap(real, sim, keys, rng) if intervals else {}
    metrics = [_pooled_metric(key, real, sim, boot, rng,
                              (combined[key], adjusted(combined[key], family))
                              if key in names else None)
               for key in keys]
    exits = _pooled_exits(real, sim, boot, rng,
                          (combined[EXITS], adjusted(combined[EXITS], family)))
    return Judgement(metrics, exits, folds, v_fit, nulls=nulls, family=family,
                     fit_response=response)


def _keys(real: Sample, sim: Sample, intervals: bool) -> list[str]:
    """The metrics both sides have values of (the per-call one with ``intervals`` only)."""
    wanted = [key for key in METRICS if key != "call_output" or intervals]
    return [key for key in wanted if _values(real, key).size and _values(sim, key).size]


def _fit_variances(worlds: list[Sample], independent: bool, keys: list[str]
                   ) -> dict[str, float]:
    """``v_fit`` per tested metric and ``exits`` from the fold worlds'
    simulations, before the cap (see the module docstring)."""
    v_fit = {key: fit_variance([_values(s, key) for s in worlds], independent) for key in keys}
    v_fit[EXITS] = mix_fit_variance([_shares(s.category) for s in worlds],
                                    [s.n for s in worlds], independent)
    return v_fit


def _responses(real_folds: list[Sample], worlds: list[Sample], keys: list[str]
               ) -> dict[str, float]:
    """:func:`fit_response` per tested metric and ``exits`` (:func:`mix_response`)."""
    out = {key: fit_response([_values(r, key) for r in real_folds],
                             [_values(w, key) for w in worlds]) for key in keys}
    out[EXITS] = mix_response([_counts(r.category) for r in real_folds],
                              [_shares(w.category) for w in worlds])
    return out


def _pooled_exits(real: Sample, sim: Sample, boot: dict[str, Any], rng: np.random.Generator,
                  p: tuple[float, float]) -> ExitMix:
    """The exit mix of all held-out runs against all fold simulations (``p``:
    the folds' combined p-value and its family-wise adjusted value)."""
    real_mix, sim_mix = mix(list(real.category)), mix(list(sim.category))
    both = np.array([(real.n * real_mix[c] + sim.n * sim_mix[c]) / (real.n + sim.n)
                     for c in CATEGORIES])
    null = tv_null(both, real.n, sim.n, 0.0, rng)
    return ExitMix(real_mix, sim_mix, total_variation(real_mix, sim_mix),
                   _interval(boot.get("exits", ([], [], []))[0]),
                   float(np.quantile(null, 1 - ALPHA)), real.n, sim.n,
                   p_value=p[0], p_adjusted=p[1])


def _fold_check(index: int, real: Sample, sim: Sample, null: FoldNull) -> FoldCheck:
    """One fold's distances against its null replicates' 95th percentiles."""
    check = FoldCheck(index, real.n, sim.n, {}, {}, 0.0, 0.0)
    for key, reps in null.replicates.items():
        if key == EXITS:
            continue
        a, b = _values(real, key), _values(sim, key)
        check.ks[key] = null.observed[key]
        check.critical[key] = float(np.quantile(reps, 1 - ALPHA))
        check.p[key] = float(null.p_values(key, np.array([null.observed[key]]))[0])
        check.medians[key] = (float(percentile(a, 0.5)), float(percentile(b, 0.5)))
    check.tv = null.observed[EXITS]
    check.tv_critical = float(np.quantile(null.replicates[EXITS], 1 - ALPHA))
    check.tv_p = float(null.p_values(EXITS, np.array([check.tv]))[0])
    real_mix, sim_mix = mix(list(real.category)), mix(list(sim.category))
    cats = sorted(real_mix.keys() | sim_mix.keys())
    gap = max(cats, key=lambda c: abs(real_mix.get(c, 0.0) - sim_mix.get(c, 0.0)))
    check.gap = (f"{gap} {real_mix.get(gap, 0.0):.1%} held out vs "
                 f"{sim_mix.get(gap, 0.0):.1%} simulated")
    return check


def _pooled_metric(key: str, real: Sample, sim: Sample, boot: dict[str, Any],
                   rng: np.random.Generator, p: tuple[float, float] | None) -> Metric:
    """One metric of all held-out runs against all fold simulations: tested
    (``p``: the folds' combined p-value and its family-wise adjusted value)
    with the two-sample critical value for scale, or shown with a permutation
    one."""
    label, unit = METRICS[key]
    a, b = _values(real, key), np.sort(_values(sim, key))
    if p is not None:
        critical = ks_critical(ALPHA, a.size, b.size, 0.0)
        method = ("pooled distance shown, not tested (the folds' worlds together are close "
                  "to a fit of all runs; critical: two-sample 5%, for scale); p: the "
                  "folds' p-values from their null replicates combined (Stouffer), adjusted "
                  "over the metrics and exit mix by the replicates' smallest combined p")
    else:
        critical = _permutation_critical(real, sim, rng)
        method = (f"not in the verdict: run-level permutation ({PERMUTATIONS} draws), "
                  f"5% unadjusted")
    ks_b, med_b, p95_b = boot.get(key, ([], [], []))
    return Metric(
        key=key, label=label, unit=unit, n_real=int(a.size), n_sim=int(b.size),
        ks=_ks_sorted(a, b), critical=critical,
        ks_interval=_interval(ks_b), real_median=float(percentile(a, 0.5)),
        sim_median=float(percentile(b, 0.5)), real_median_interval=_interval(med_b),
        real_p95=float(percentile(a, 0.95)), sim_p95=float(percentile(b, 0.95)),
        real_p95_interval=_interval(p95_b), critical_method=method,
        p_value=None if p is None else p[0], p_adjusted=None if p is None else p[1],
        tested=p is not None)
