"""A calibrated world ends its runs the way the known world that wrote its traces does.

Where budgets and the no-progress detector act is where a forecast matters
(which runs they stop), so a world fitted to its own simulated traces must
stop the same share of runs for the same reasons. For known worlds whose
harness acts (``bounded``: a prompt-token budget, a step backstop, the
repetition detector at 3 with one nudge; ``bounded_stop_first``: the detector
stopping at the first detection, with a tool-error budget added), traces are
simulated, calibrated back (direct estimates, one class: what every fold of
``sim calibrate`` fits) and the calibrated scenario simulated afresh with
another seed:

- each terminal-state category's share (:mod:`sim.calibration.exits`) matches
  the known world's within a two-proportion bound:
  ``|p_sim - p_real| <= Z sqrt(p (1 - p) (2 / N + 1 / M))``, ``p`` pooled,
  ``N`` recorded and ``M`` simulated runs; the ``2 / N`` counts the fit's own
  error (the calibrated world's shares are estimated from the same ``N``
  runs, an error of about one more ``N``-run sample) and ``Z = 3.29`` (0.1%
  two-sided per comparison; at most 8 comparisons, a family-wise false alarm
  under 1%);
- the recorded detector and budgets are read back as set;
- the cross-validated verdict (3 folds, adjusted family-wise over the per-run metrics and the
  exit mix) on a slice of the traces does not reject.

Power (``N`` = 2,000, ``M`` = 4,000): at ``p`` = 0.10 the bound is 3.5
points, so the bug this guards (no_progress 0% simulated against 10%
recorded: the detector off) fails by 10 points, and a world whose fitted
endings end runs inside their loops (5% against 10%) fails with probability
about 0.9.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from sim.calibration import folds as fl
from sim.calibration import structure as st
from sim.calibration.build import scenario_document
from sim.calibration.data import load
from sim.calibration.estimate import estimate
from sim.calibration.pipeline import Settings, cross_validate
from sim.calibration.simulate import simulate
from sim.calibration.verdict import judge
from sim.cli import main

REPO = Path(__file__).resolve().parents[1]
N = 2000  # recorded runs of each known world
M = 4000  # runs of the calibrated world's fresh simulation
Z = 3.29
VERDICT_RUNS = 450  # the slice the verdict judges (3 folds of 150)
SETTINGS = Settings(evaluations=0, search_runs=20, sim_ratio=5.0, jackknife_runs=200,
                    min_fold_sim=100)


def _known(name: str, changes: dict | None = None) -> dict:
    doc = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8"))
    for dotted, value in (changes or {}).items():
        *path, key = dotted.split(".")
        node = doc
        for part in path:
            node = node.setdefault(part, {})
        node[key] = value
    return doc


WORLDS = {
    "bounded": (_known("bounded"), {"repeat_threshold": 3, "nudges": 1},
                {"tokens": 2_000_000}),
    "stop_first": (_known("bounded_stop_first", {"harness.budgets.tool_errors": 3}),
                   {"repeat_threshold": 3, "nudges": 0}, {"tool_errors": 3}),
}


@pytest.fixture(scope="module", params=sorted(WORLDS))
def fitted(request, tmp_path_factory):
    """``(name, traces, estimates, calibrated scenario mapping)`` of one known world."""
    name = request.param
    world = WORLDS[name][0]
    folder = tmp_path_factory.mktemp(name)
    scenario = folder / "world.yaml"
    scenario.write_text(yaml.safe_dump({**world, "tasks": N, "seed": 5}), encoding="utf-8")
    assert main(["run", str(scenario), "--traces", "--out", str(folder / "runs"), "--quiet",
                 "--workers", "1"]) == 0
    traces = load(folder / "runs", keep_empty=True)
    est = estimate(traces, np.array(["all"] * traces.n))
    doc, _ = scenario_document(est, name=f"{name}-calibrated", description="", tasks=M,
                               seed=11)
    return name, traces, est, doc


def _bound(p_real: float, p_sim: float, n: int, m: int) -> float:
    p = (p_real * n + p_sim * m) / (n + m)
    return Z * math.sqrt(max(p * (1 - p), 1.0 / (n + m)) * (2.0 / n + 1.0 / m))


def test_each_terminal_state_share_matches_the_known_world(fitted):
    """Every category recorded or simulated (agent, no_progress, tokens,
    errors, ...) has a simulated share within the two-proportion bound of the
    recorded one; the detector's stops are among them in both worlds."""
    name, traces, _, doc = fitted
    real = Counter(traces.runs["category"])
    sim = Counter(simulate(doc, M, 23).category)
    assert real["no_progress"] > 0.05 * N  # the detector acts in the known world
    failures = []
    for cat in sorted(set(real) | set(sim)):
        p_real, p_sim = real[cat] / traces.n, sim[cat] / M
        bound = _bound(p_real, p_sim, traces.n, M)
        if abs(p_sim - p_real) > bound:
            failures.append(f"{cat}: recorded {p_real:.4f}, simulated {p_sim:.4f}, "
                            f"bound {bound:.4f}")
    assert not failures, (name, failures)


def test_the_recorded_detector_and_budgets_are_read_back(fitted):
    """The detector's setting is the known world's (replayed over every run
    with a recurring call, all end as recorded); the budget that stopped runs
    is read back: a prompt-token budget within 5% of the true one (it lies
    between the largest total seen and a stopped run's total plus the call
    refused), a tool-error budget exactly."""
    name, _, est, doc = fitted
    detector, budgets = WORLDS[name][1], WORLDS[name][2]
    assert est.detector is not None
    assert est.detector.section() == {"enabled": True, **detector}
    assert est.detector.consistent == est.detector.checked
    assert doc["harness"]["detector"] == {"enabled": True, **detector}
    assert doc["world"]["policy"]["ends_in_loop"] is False
    for key, value in budgets.items():
        got = doc["harness"]["budgets"][key]
        assert abs(got - value) <= 0.05 * value, (key, got, value)


def test_the_cross_validated_verdict_does_not_reject(fitted):
    """3-fold cross-validation on the first runs of the traces (one class, no
    search): the verdict accepts (status 0)."""
    _, traces, _, _ = fitted
    part = traces.subset(traces.runs["run_id"].to_numpy()[:VERDICT_RUNS])
    fold_of = fl.assign(part, 3, 4)
    fits = cross_validate(part, fold_of, st.ONE, 4, SETTINGS)
    verdict = judge([f.real for f in fits], [f.sim for f in fits], 4,
                    jackknife=[f.jackknife for f in fits], search_runs=None, intervals=False)
    assert verdict.status == 0, verdict
