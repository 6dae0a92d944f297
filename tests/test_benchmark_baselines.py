"""The benchmarks' baselines simulate the same random process as the engine,
so a steps-per-second ratio compares like with like."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

from benchmarks.plain_loop import plain_task
from sim.engines.direct import run_tasks
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

BOUNDED = Path(__file__).parents[1] / "scenarios" / "bounded.yaml"


def test_the_plain_loop_has_the_engines_steps_and_outcomes_within_sampling_error() -> None:
    """On bounded.yaml, mean steps per task of the plain loop and of the
    direct engine agree within 4 standard errors of their difference, and so
    does the share of succeeded runs."""
    scenario = load_scenario(BOUNDED)
    h = scenario.harness
    n = 3000
    plain = [plain_task(scenario.world, scenario.seed, i, max_steps=h.budgets.steps or 10**9,
                        max_tokens=h.budgets.tokens or 10**15, detector=h.detector.enabled,
                        retry=h.retry.retry_tool_errors, verify=h.verifier.name != "none",
                        window=h.context_window) for i in range(n)]
    records = run_tasks(build_cell(cells_of(scenario)[0]), range(n))
    a = [steps for _, steps, _ in plain]
    b = [r.steps for r in records]
    se = math.sqrt(statistics.variance(a) / n + statistics.variance(b) / n)
    assert abs(statistics.mean(a) - statistics.mean(b)) < 4 * se
    pa = Counter(state for state, _, _ in plain)["succeeded"] / n
    pb = sum(r.outcome == "succeeded" for r in records) / n
    se = math.sqrt(pa * (1 - pa) / n + pb * (1 - pb) / n)
    assert abs(pa - pb) < 4 * se
