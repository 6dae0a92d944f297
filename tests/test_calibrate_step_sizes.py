"""Calibration fits observations that differ by step (``tokens.by_step``):
a known world whose first tool result is five times the others runs through
``sim run --traces``; the scenario calibration writes from its traces grows
the history by the known amounts after the first call and after later ones
(means within ``Z`` standard errors, ``Z`` at a false-alarm rate of 1e-4)."""

from __future__ import annotations

import math

import numpy as np
import yaml
from scipy import stats
from worldkit import QUIET, simulate

from sim.calibration.build import scenario_document
from sim.calibration.data import load
from sim.calibration.estimate import estimate
from sim.cli import main

Z = float(stats.norm.ppf(1 - 1e-4 / 2))
TASKS = 200
STEPS = 8
MEDIAN, SIGMA, FIRST = 200.0, 0.3, 5.0

KNOWN = {
    "name": "known-steps", "tasks": TASKS, "seed": 9,
    "harness": {"model": "claude-sonnet-4-20250514",
                "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
                "max_output_tokens": 4096, "budgets": {"steps": 60},
                "detector": {"enabled": False}, "verifier": {"name": "none"}},
    "world": {
        "difficulty": {"distribution": "fixed", "steps": STEPS},
        "policy": dict(QUIET),
        "tools": [{"name": "ls", "weight": 1, "definition_tokens": 0, "timeout_s": 100,
                   "result_tokens": {"distribution": "lognormal", "median": MEDIAN,
                                     "sigma": SIGMA},
                   "duration": {"median_s": 0.5, "sigma": 0.2}}],
        "tokens": {"prefix": 3000, "task": 200, "output": 80,
                   "by_step": {"edges": [1, 2], "observation": [FIRST, 1.0]}},
        "latency": {"ttft_s": 0.3, "decode_tps": 100.0}},
}


def entered(tasks) -> tuple[np.ndarray, np.ndarray]:
    """Tokens entering the history after call 1 and after later calls (the
    next prompt less this one and its output), per call."""
    first, later = [], []
    for task in tasks:
        log = task.log
        for i in range(len(log) - 1):
            x = log[i + 1].prompt_tokens - log[i].prompt_tokens - log[i].output_tokens
            (first if i == 0 else later).append(x)
    return np.array(first, float), np.array(later, float)


def test_calibrated_world_grows_by_the_known_amounts_per_step(tmp_path):
    """The fitted scenario has step bins; simulated, its mean observation
    after call 1 is 5 x the tool's mean and after later calls the tool's mean
    (lognormal mean: median exp(sigma^2 / 2)), each within Z standard errors
    of the simulated mean plus 5% for the fitted sizes' own error."""
    scenario = tmp_path / "known.yaml"
    scenario.write_text(yaml.safe_dump(KNOWN), encoding="utf-8")
    runs = tmp_path / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    traces = load(runs)
    est = estimate(traces, np.zeros(traces.n, dtype=int))
    by_step = est.classes[0].by_step
    assert by_step is not None and by_step["edges"][:2] == [1, 2]
    doc, _ = scenario_document(est, name="fit", description="", tasks=TASKS, seed=2)
    doc["harness"]["prices"] = KNOWN["harness"]["prices"]
    _, tasks = simulate(doc, 400, seed=4)
    first, later = entered(tasks)
    mean = MEDIAN * math.exp(SIGMA ** 2 / 2)
    for got, truth in ((first, FIRST * mean), (later, mean)):
        se = float(got.std(ddof=1)) / math.sqrt(got.size)
        assert abs(got.mean() - truth) <= Z * se + 0.05 * truth, (got.mean(), truth)
    assert first.mean() > 3 * later.mean()
