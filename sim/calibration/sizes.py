"""Sizes, durations and latencies from calls: the per-value fits the direct
estimates (:mod:`sim.calibration.estimate`) are made of.

Units: tokens for sizes, seconds for durations and latencies.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.world.distributions import BaseDistribution, Fixed, Lognormal, Mixture


def _lognormal(values, floor: float = 1.0) -> BaseDistribution:
    """Lognormal MLE of ``values`` (each at least ``floor``); fixed when they
    are all equal; fixed at ``floor`` when there are none."""
    x = np.maximum(np.asarray(values, dtype=float), floor)
    if x.size == 0:
        return Fixed(value=floor)
    if np.ptp(x) == 0:
        return Fixed(value=float(x[0]))
    return Lognormal.fit(x)


MIXTURE_MIN = 40
"""Fewest values for which a size may be a two-lognormal mixture."""
MIXTURE_POINTS = 20_000
"""More values than this: the two-lognormal mixture is fitted to this many
evenly spaced quantiles of them (the empirical distribution compressed, so a
fit's time does not grow with the traces); its BIC is still on every value."""


def _size(values, floor: float = 1.0) -> BaseDistribution:
    """A size distribution of ``values``: a lognormal, or a mixture of two
    lognormals when it has the lower BIC (at least :data:`MIXTURE_MIN` values;
    both by maximum likelihood on the logarithms)."""
    single = _lognormal(values, floor)
    x = np.log(np.maximum(np.asarray(values, dtype=float), floor))
    if x.size < MIXTURE_MIN or not isinstance(single, Lognormal) or single.sigma == 0:
        return single
    points = x if x.size <= MIXTURE_POINTS else np.quantile(
        x, (np.arange(MIXTURE_POINTS) + 0.5) / MIXTURE_POINTS)
    mixed = Mixture.fit(np.exp(points), k=2)
    if len(mixed.components) < 2:
        return single

    def loglik(d) -> float:
        parts = d.components if isinstance(d, Mixture) else (d,)
        weights = d.probabilities if isinstance(d, Mixture) else (1.0,)
        dens = sum(w * np.exp(-0.5 * ((x - math.log(c.median)) / max(c.sigma, 1e-9)) ** 2)
                   / (max(c.sigma, 1e-9) * math.sqrt(2 * math.pi))
                   for w, c in zip(weights, parts, strict=True))
        return float(np.log(np.maximum(dens, 1e-300)).sum())

    bic1 = -2 * loglik(single) + 2 * math.log(x.size)
    bic2 = -2 * loglik(mixed) + 5 * math.log(x.size)
    return mixed if bic2 < bic1 else single


def _duration(values) -> tuple[float, float]:
    """``(median seconds, log-sd)`` of positive durations, robustly: the median
    and the interquartile range of the logs / 1.349 (gaps between calls mix
    tool time with the harness's own, so their tails are not the tool's)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size < 2:
        return (float(x[0]) if x.size else 0.001, 0.0)
    logs = np.log(x)
    q25, q50, q75 = np.percentile(logs, [25, 50, 75])
    return float(np.exp(q50)), float(min((q75 - q25) / 1.349, 3.0))


def _run_effects(calls: pd.DataFrame) -> tuple[pd.Series, float]:
    """Each run's shrunken log size effect (indexed by run_id) and tau, from
    the logs of its outputs less the class's mean for the call's kind."""
    y = np.log(np.maximum(calls["output"].to_numpy(float), 1.0))
    kind = calls["text"].to_numpy(bool)
    for k in (True, False):
        if (kind == k).any():
            y[kind == k] -= y[kind == k].mean()
    frame = pd.DataFrame({"run": calls["run_id"].to_numpy(), "y": y})
    g = frame.groupby("run", sort=False)["y"]
    n, mean = g.size(), g.mean()
    dev = frame["y"] - g.transform("mean")
    dof = max(1, len(frame) - len(n))
    within = float((dev ** 2).sum() / dof)
    tau2 = max(0.0, float(mean.var(ddof=1)) - float((within / n).mean())) if len(n) > 1 else 0.0
    shrink = tau2 / (tau2 + within / n) if tau2 > 0 else n * 0.0
    return shrink * mean, math.sqrt(tau2)


def call_level(values: np.ndarray, scale: np.ndarray, tau: float, floor: float = 1.0
               ) -> np.ndarray:
    """Sizes as one call of a run with multiplier 1 would have them: each value
    divided by its run's (shrunken) multiplier ``scale``, its log deviation
    from the mean then rescaled so that the log variance is the observed one
    less ``tau^2`` (method of moments for ``log size = run effect + call
    effect``; dividing by a shrunken estimate alone would also remove part of
    the call's own variation)."""
    x = np.maximum(np.asarray(values, dtype=float), floor)
    if x.size < 2:
        return x
    logs = np.log(x)
    target = max(float(logs.var()) - tau ** 2, 0.01 * float(logs.var()))
    z = logs - np.log(scale)
    dev = z - z.mean()
    current = float(dev.var())
    if current <= 0:
        return np.exp(z)
    return np.exp(z.mean() + dev * math.sqrt(target / current))


def _nnls_latency(calls: pd.DataFrame) -> tuple[float, float, float | None]:
    from scipy.optimize import nnls

    c = calls[np.isfinite(calls["latency_s"])]
    if len(c) < 3:
        return 0.5, 75.0, None
    a = np.column_stack([np.ones(len(c)), (c["output"] + c["reasoning"]).to_numpy(float),
                         c["prompt"].to_numpy(float)])
    coef, _ = nnls(a, c["latency_s"].to_numpy(float))
    ttft, per_out, per_in = (float(v) for v in coef)
    decode = 1.0 / per_out if per_out > 1e-9 else 1e9
    prefill = 1.0 / per_in if per_in > 1e-12 else None
    return ttft, decode, prefill


def _gaps(calls: pd.DataFrame) -> pd.Series:
    """Seconds between the end of each call and the start of the next call of
    its run (NaN for a run's last call or without timestamps)."""
    nxt = calls.groupby("run_id", sort=False)["started_s"].shift(-1)
    return nxt - calls["started_s"] - calls["latency_s"]
