"""The run-level link between a run's length and its growth per step
(``world.endings.size_link``): the world multiplies a run's hazards by its
size multiplier to that power, and calibration recovers the exponent from
runs of a known world (sim/calibration/survival.py, fed each run's size
effect by sim/calibration/estimate.py)."""

from __future__ import annotations

import math

import numpy as np
import yaml
from scipy import stats

from sim.calibration.data import load
from sim.calibration.estimate import estimate
from sim.calibration.simulate import simulate
from sim.cli import main

ALPHA = 1e-4
Z = float(stats.norm.ppf(1 - ALPHA / 2))
HARNESS = {"model": "deepseek-chat",
           "prices": {"input": 0.28, "output": 0.42, "cache_read": 0.028, "cache_write": 0.35},
           "max_output_tokens": 4096, "budgets": {"steps": 400},
           "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
           "verifier": {"name": "none"}}
POLICY = {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0}


def _world(scale: dict | None, link: float, hazard: float, sigma: float = 0.3) -> dict:
    tokens: dict = {"prefix": 2000, "task": 100,
                    "output": {"distribution": "lognormal", "median": 80, "sigma": sigma}}
    if scale is not None:
        tokens["run_scale"] = scale
    return {"policy": POLICY,
            "tools": [{"name": "lookup", "weight": 1, "definition_tokens": 0,
                       "result_tokens": {"distribution": "lognormal", "median": 200,
                                         "sigma": 0.3},
                       "duration": {"median_s": 0.1, "sigma": 0.1}}],
            "tokens": tokens,
            "endings": {"edges": [1], "resolve": [hazard], "give_up": [0.0], "error": [0.0],
                        "frailty": 0.0, "size_link": link}}


def test_a_runs_hazards_scale_by_its_size_multiplier_to_the_link():
    """Every run's size multiplier fixed at 2 and ``size_link`` -1: each step
    ends the run with ``1 - exp(-0.2 / 2)``, so runs are geometric with mean
    ``1 / (1 - exp(-0.1))`` (10.5 steps), where the same world with link 0
    has mean ``1 / (1 - exp(-0.2))`` (5.5); each within ``Z`` standard errors
    of a geometric mean of 3,000 runs."""
    n = 3000
    for link, rate in ((-1.0, 0.1), (0.0, 0.2)):
        doc = {"name": "link", "harness": HARNESS,
               "world": _world({"distribution": "fixed", "value": 2.0}, link, 0.2)}
        steps = simulate(doc, n, seed=7, calls=False).steps.astype(float)
        p = -math.expm1(-rate)
        mean, sd = 1.0 / p, math.sqrt(1.0 - p) / p
        assert abs(steps.mean() - mean) <= Z * sd / math.sqrt(n), (link, steps.mean(), mean)


def _fitted_link(tmp_path, link: float, seed: int) -> tuple[float, float]:
    """``(fitted size_link, its standard error)`` of one class fitted to 1,500
    runs of a known world (run multiplier log-sd 0.5, ``size_link``
    ``link``); the standard error from the Fisher information of a
    proportional-hazards coefficient, ``1 / sqrt(events x var(x))``, with
    ``x`` the true log multipliers' variance."""
    doc = {"name": "known-link", "tasks": 1500, "seed": seed, "harness": HARNESS,
           "world": _world({"distribution": "lognormal", "median": 1.0, "sigma": 0.5}, link,
                           0.12, sigma=0.2)}
    scenario = tmp_path / "known.yaml"
    scenario.write_text(yaml.safe_dump(doc), encoding="utf-8")
    out = tmp_path / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(out), "--quiet",
                 "--workers", "1"]) == 0
    traces = load(out)
    est = estimate(traces, np.array(["all"] * traces.n, dtype=object))
    endings = est.classes[0].endings
    assert endings is not None
    events = sum(endings.events.values())
    return endings.size_link, 1.0 / math.sqrt(events * 0.5 ** 2)


def test_calibration_recovers_the_size_link_of_a_known_world(tmp_path):
    """``size_link`` -1 (runs that grow faster last longer): the exponent
    fitted from the runs' own output sizes (their estimated multipliers, not
    the true ones) is within ``Z`` standard errors of -1."""
    fitted, se = _fitted_link(tmp_path, -1.0, 3)
    assert abs(fitted + 1.0) <= Z * se, (fitted, se)


def test_no_size_link_is_fitted_where_length_and_size_are_independent(tmp_path):
    """``size_link`` 0: the fitted exponent is 0 (the likelihood-ratio test
    does not reject) or within ``Z`` standard errors of it."""
    fitted, se = _fitted_link(tmp_path, 0.0, 4)
    assert abs(fitted) <= Z * se, (fitted, se)
