"""scenarios/tau2.yaml, the world fitted to tau2-bench's real runs, and its
committed calibration report (reports/examples/tau2_calibration/)."""

from __future__ import annotations

import json
from pathlib import Path

from sim.calibration.exits import CATEGORIES, category
from sim.calibration.simulate import simulate
from sim.scenario.model import load_scenario, read_yaml

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "tau2.yaml"
REPORT = REPO / "reports" / "examples" / "tau2_calibration"


def test_the_scenario_loads_as_a_pooled_conversational_world():
    """One class per model, each priced, in a conversation with the task-giver."""
    scenario = load_scenario(SCENARIO)
    classes = scenario.world.classes
    assert len(classes) >= 5 and scenario.harness.conversation.enabled
    models = {c.model for c in classes} - {scenario.harness.model}
    assert models <= set(scenario.harness.model_prices)
    assert abs(sum(c.weight for c in classes) - 1) < 1e-3


def test_it_simulates_runs_that_end_as_tau2_runs_do():
    """Simulated runs end by the task-giver or the agent, and sometimes at a
    limit or by a model error (tau2's runs include two ``infrastructure_error``
    exits: the fitted persistent fault, about 0.4% of runs, so one of 200 runs
    or none); nothing else."""
    doc = read_yaml(str(SCENARIO))
    sample = simulate(doc, 200, seed=1)
    assert set(sample.category) <= {"task_giver", "agent", "steps", "errors", "model_error"}
    assert (sample.category == "task_giver").mean() > 0.5


def test_the_committed_report_is_the_fit_the_header_states():
    """calibration.json accepts the fit, and the scenario's header repeats its
    KS distances."""
    summary = json.loads((REPORT / "calibration.json").read_text())
    assert summary["verdict"]["status"] == 0
    header = SCENARIO.read_text().split("\nname:")[0]
    for metric in summary["metrics"].values():
        assert f"KS {metric['ks']:.3f}" in header
    assert set(summary["exit_mix"]["held_out"]) <= set(CATEGORIES)
    assert category("user_stop") in summary["exit_mix"]["held_out"]
