"""A model's runs that never message the task-giver as a class of their own
(``model solo``, sim/calibration/classes.py): kept when more runs are
silent than one message rate leaves silent by chance."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from sim.calibration.classes import SOLO, assign, silent_beyond_chance
from sim.calibration.data import Traces


def _traces(kinds: list[tuple[str, int, int]]) -> Traces:
    """One run per ``(model, calls, messages)``: its first ``messages`` calls
    are messages (no tool call), the rest tool calls, then a final answer."""
    runs, calls = [], []
    for i, (model, n, m) in enumerate(kinds):
        run = f"r{i}"
        runs.append({"run_id": run, "model": model, "steps": n + 1})
        for j in range(n):
            calls.append({"run_id": run, "cache_read_tokens": 0, "text": j < m,
                          "last": False})
        calls.append({"run_id": run, "cache_read_tokens": 0, "text": True, "last": True})
    return Traces("x", pd.DataFrame(runs), pd.DataFrame(calls))


def test_silent_runs_beyond_chance_are_a_class_of_their_own():
    """Model a: 10 runs of 10 calls with 4 messages each and 9 runs of 10 tool
    calls and no message. At the pooled rate 40 / 190 a run of 10 is silent
    with probability 0.79^10 = 0.095, 1.8 expected of 19; 9 silent is far
    beyond (Poisson tail under 1e-3): ``a solo``. Model b: the same but 7
    silent runs (under the 8 a class needs): one class."""
    kinds = [("a", 10, 4)] * 10 + [("a", 10, 0)] * 9 + [("b", 10, 4)] * 10 + [("b", 10, 0)] * 7
    labels = assign(_traces(kinds), by="model")
    assert list(labels) == ["a"] * 10 + [SOLO.format("a")] * 9 + ["b"] * 17


def test_silent_runs_a_constant_rate_explains_stay_in_the_class():
    """Rate 0.1 per call, 60 runs of 5 calls, messages drawn binomially: the
    silent runs (about 0.9^5 = 59%) are what chance gives; the test's
    rejection rate over 400 such samples is at most 5% plus ``Z`` binomial
    standard errors (the Poisson bound makes it conservative)."""
    rng = np.random.default_rng(3)
    trials, rejected = 400, 0
    for _ in range(trials):
        n = np.full(60, 5)
        m = rng.binomial(n, 0.1)
        rejected += silent_beyond_chance(n, m)
    z = float(stats.norm.ppf(1 - 1e-4 / 2))
    assert rejected / trials <= 0.05 + z * (0.05 * 0.95 / trials) ** 0.5, rejected


def test_the_silent_count_is_tested_against_the_pooled_rate():
    """Hand-computed case: 2 runs of 4 calls with 2 messages each and 2 silent
    runs of 4: p = 4 / 16, expected silent 2 x 0.75^4 x 2 = 1.27; P(Poisson
    >= 2) = 0.36: not beyond chance. 20 silent runs against 2 talking ones
    (p = 4 / 88, expected 22 x 0.955^4 = 18.3): P(>= 20) = 0.38: not beyond."""
    assert not silent_beyond_chance(np.array([4, 4, 4, 4]), np.array([2, 2, 0, 0]))
    assert not silent_beyond_chance(np.full(22, 4), np.array([2, 2] + [0] * 20))
    expected = 4 * 0.75 ** 4
    assert abs(float(stats.poisson.sf(1, expected)) - 0.36) < 0.01


def test_the_poisson_tail_bounds_the_silent_count_where_the_test_uses_it():
    """The bound the test relies on, checked exactly: for 2,000 random sets of
    run silence probabilities, the Poisson-binomial upper tail (by
    convolution) at every count ``k >= lambda + 1`` is at most the Poisson
    tail of the same mean. Below ``lambda + 1`` it can fail (two runs silent
    with probability 1/2: P(k >= 1) = 0.75 against the Poisson's 0.63), so
    the test does not reject there: one silent run among 30 of 100 calls
    that message at a rate of 0.19 (lambda and its Poisson tail about 1e-8) is
    not called beyond chance."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        p = rng.uniform(0, 1, rng.integers(1, 40)) ** rng.uniform(0.2, 3)
        pmf = np.array([1.0])
        for q in p:
            pmf = np.convolve(pmf, [1 - q, q])
        mean = float(p.sum())
        for k in range(int(np.ceil(mean + 1)), p.size + 1):
            assert pmf[k:].sum() <= stats.poisson.sf(k - 1, mean) + 1e-12, (p, k)
    two = np.array([0.5, 0.5])
    assert np.convolve([1 - two[0], two[0]], [1 - two[1], two[1]])[1:].sum() == 0.75
    assert not silent_beyond_chance(np.full(30, 100), np.array([0] + [20] * 29))
