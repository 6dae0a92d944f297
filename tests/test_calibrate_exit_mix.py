"""The exit mix's verdict: the total-variation distance between the held-out
and simulated exit mixes has a 5% critical value (the distance between two
multinomial samples of the pooled mix), so a calibration whose exits differ
beyond sampling noise is rejected like a KS distance is."""

from __future__ import annotations

import math

import numpy as np

from sim.calibration.exits import total_variation
from sim.calibration.verdict import ExitMix, tv_critical

MIX = {"agent": 0.55, "task_giver": 0.25, "steps": 0.12, "errors": 0.05, "model_error": 0.03}
N, M = 170, 3400  # held-out and simulated runs, as in the tau2 calibration


def _sample(rng: np.random.Generator, p: dict[str, float], n: int) -> dict[str, float]:
    counts = rng.multinomial(n, list(p.values()))
    return {c: k / n for c, k in zip(p, counts, strict=True)}


def _rejection_rate(truth_real: dict[str, float], truth_sim: dict[str, float],
                    trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    rejected = 0
    for _ in range(trials):
        real, sim = _sample(rng, truth_real, N), _sample(rng, truth_sim, M)
        tv = total_variation(real, sim)
        critical = tv_critical(real, sim, N, M, rng)
        rejected += ExitMix(real, sim, tv, (0.0, 0.0), critical, N, M).rejected
    return rejected / trials


def test_samples_of_one_mix_are_rejected_at_most_about_five_percent_of_the_time():
    """Under the null (held-out and simulated runs exit alike) the rejection
    rate is at most 5% plus three standard errors of the trial count (the
    distance is discrete, so the test may be conservative, never liberal)."""
    trials = 300
    rate = _rejection_rate(MIX, MIX, trials, seed=1)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials), rate


def test_a_mix_off_by_eighteen_points_is_rejected_almost_always():
    """Eighteen points of the held-out runs' 'agent' exits moved to 'steps'
    (a budget that binds more often in reality) is found nearly every time
    with 170 held-out runs (twelve points: about nine times in ten)."""
    shifted = {**MIX, "agent": MIX["agent"] - 0.18, "steps": MIX["steps"] + 0.18}
    assert _rejection_rate(shifted, MIX, 100, seed=2) >= 0.95


def test_a_rejected_mix_says_where_it_differs_most():
    """The sentence names the distance, the critical value and the category
    with the largest gap; identical mixes are never rejected."""
    real = {"agent": 0.40, "steps": 0.50, "errors": 0.10}
    sim = {"agent": 0.70, "steps": 0.30, "errors": 0.0}
    mix = ExitMix(real, sim, total_variation(real, sim), (0.2, 0.4), 0.1, N, M)
    assert mix.rejected
    assert mix.why() == ("exit mix: total variation 0.300 >= critical 0.100; agent 40.0% "
                         "held out vs 70.0% simulated")
    assert not ExitMix(real, real, 0.0, (0.0, 0.0), 0.0, N, M).rejected
