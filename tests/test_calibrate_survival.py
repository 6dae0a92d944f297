"""The competing-risks fit (sim/calibration/survival.py) on runs of known
worlds: a gamma frailty's variance is recovered (the truth inside the
profile-likelihood interval), none is found where there is none, and the
harness's stops are censoring."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats
from scipy.optimize import minimize_scalar

from sim.calibration.simulate import simulate
from sim.calibration.survival import _frailty_loglik, fit_endings, observations

ALPHA = 1e-4
CHI2 = float(stats.chi2.ppf(1 - ALPHA, 1))
HARNESS = {"model": "claude-sonnet-4-20250514", "budgets": {"steps": 60},
           "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
           "verifier": {"name": "none"}}


def _runs(lam: float, theta: float, n: int, seed: int) -> pd.DataFrame:
    doc = {"name": "f", "harness": HARNESS,
           "world": {"policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0,
                                "premature": 0.0},
                     "endings": {"edges": [1], "resolve": [lam], "give_up": [lam / 3],
                                 "error": [0.0], "frailty": theta}}}
    s = simulate(doc, n, seed)
    return pd.DataFrame({"steps": s.steps, "category": s.category,
                         "resolved": [bool(v) for v in s.resolved]})


def _profile(runs: pd.DataFrame, theta: float) -> float:
    """Log-likelihood of one constant hazard with frailty ``theta``,
    maximised over the hazard."""
    times, causes, weights = observations(runs)
    horizon = int(times.max())
    step_bin = np.zeros(horizon + 1, dtype=np.int64)
    res = minimize_scalar(lambda x: -_frailty_loglik(theta, np.array([np.exp(x)]), step_bin,
                                                     times, causes >= 0, weights),
                          bounds=(-8, 3), method="bounded")
    return -float(res.fun)


def _interval_holds(runs: pd.DataFrame, truth: float) -> bool:
    best = max(_profile(runs, th) for th in np.linspace(0.0, 4.0, 81))
    return 2 * (best - _profile(runs, truth)) <= CHI2


def test_a_gamma_frailty_is_recovered():
    """Frailty variance 1: found (likelihood ratio against none above 3.84),
    and the truth within the 1e-4 profile-likelihood interval; the bins carry
    the hazards' 3:1 cause split within binomial error."""
    runs = _runs(0.2, 1.0, 1500, 3)
    fit = fit_endings(runs)
    assert fit is not None and fit.frailty > 0
    assert _interval_holds(runs, 1.0)
    r, g = sum(fit.events[c] for c in ("resolve",)), fit.events["give_up"]
    n = r + g
    assert abs(r / n - 0.75) <= stats.norm.ppf(1 - ALPHA / 2) * np.sqrt(0.75 * 0.25 / n)


def test_no_frailty_where_there_is_none():
    """A constant hazard without frailty: 0 is inside the interval, and the
    fitted variance is small."""
    runs = _runs(0.2, 0.0, 1500, 4)
    fit = fit_endings(runs)
    assert fit is not None
    assert _interval_holds(runs, 0.0)
    assert fit.frailty < 0.5


def test_runs_stopped_by_the_harness_are_censored():
    """A hazard so low that many runs reach the 60-step budget: those runs are
    censored (not endings), and the fitted per-step hazard stays within Z
    standard errors of the truth (events / run-steps at risk)."""
    runs = _runs(0.02, 0.0, 800, 5)
    stopped = int((runs["category"] == "steps").sum())
    assert stopped > 100
    fit = fit_endings(runs)
    assert fit.censored == stopped
    truth = 0.02 * 4 / 3
    q = -np.expm1(-truth)  # the chance of ending at a step
    z = stats.norm.ppf(1 - ALPHA / 2)
    for b, exposure in enumerate(fit.bin_exposure):
        if fit.bin_events[b] == 0:
            continue
        total = sum(fit.hazards[c][b] for c in ("resolve", "give_up", "error"))
        assert abs(-np.expm1(-total) - q) <= z * np.sqrt(q * (1 - q) / exposure), (b, total)


def test_the_last_bin_always_holds_events():
    """Ties at the latest event time never leave an open last bin without
    events (a zero hazard there would let simulated runs go on to the cap)."""
    runs = pd.DataFrame({"steps": [5] * 30 + [3] * 10 + [40] * 3,
                         "category": ["agent"] * 40 + ["steps"] * 3,
                         "resolved": [True] * 20 + [False] * 20 + [None] * 3})
    fit = fit_endings(runs)
    assert fit is not None and fit.bin_events[-1] > 0
    assert fit.censored == 3
    assert all(fit.bin_events[b] > 0 for b in range(1, len(fit.edges)))
