"""Calibration fits a run's own class on its parent's calls only: the calls
of its subagents (a non-null ``calls.agent``) are kept apart for the fan-out
fit, so a parent's steps, prompt line and cost are not its children's work
counted twice (issue 40: simulated parent steps p50 22 vs 5-15 real)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from test_fanout_fit import generate

from sim.calibration.data import load
from sim.calibration.estimate import estimate_class
from sim.calibration.fanout import fit_fanout
from sim.harness.messages import Usage
from sim.traces.model import CallRecord, RunRecord
from sim.traces.writer import write_runs

RUNS = 300


@pytest.fixture(scope="module")
def fanned(tmp_path_factory):
    """300 runs whose parents make 5-15 productive calls and a final answer,
    spawning 1-3 children (of about 3 calls each) after 30% of them."""
    folder = tmp_path_factory.mktemp("fanned")
    counts = generate(folder, RUNS, lambda s: 0.3, seed=5)
    return load(folder), counts


def test_the_runs_calls_are_the_parents_and_the_subagents_are_apart(fanned) -> None:
    """Every productive parent call plus each run's final answer is a run's
    own call; the generated children's calls are the subagent calls; all
    calls together keep the fan-out fit's counts."""
    traces, counts = fanned
    assert len(traces.calls) == counts["productive"] + RUNS
    assert traces.calls["agent"].isna().all()
    assert len(traces.subagent_calls) == sum(counts["child_calls"])
    assert int(traces.runs["steps"].sum()) == counts["productive"] + RUNS
    assert traces.runs["steps"].between(6, 16).all()
    fit = fit_fanout(traces, seed=1, with_child=False)
    assert fit is not None and (fit.spawns, fit.kids) == (counts["spawns"], counts["kids"])


def test_the_parents_prompt_line_is_their_own(fanned) -> None:
    """The parent's prompts are 1000 + 100 n on its n-th own call: every
    run's fitted line is exactly that (children's prompts interleaved would
    bend it)."""
    traces, _ = fanned
    assert np.allclose(traces.runs["P"], 1000.0) and np.allclose(traces.runs["h"], 100.0)


def test_the_fitted_parent_steps_are_the_parents_not_parents_plus_children(fanned) -> None:
    """The class's need (log-mean of steps) is within 3 standard errors of
    E[log steps] of the generator's parents (uniform on 6..16 calls), and far
    below the log of the parents' steps with their children's added."""
    traces, counts = fanned
    est = estimate_class("lead", traces, ["bash"])
    expected = float(np.mean(np.log(np.arange(6, 17))))
    sd = float(np.std(np.log(np.arange(6, 17))))
    assert abs(est.need_mu - expected) < 3 * sd / math.sqrt(RUNS)
    with_children = (counts["productive"] + RUNS + sum(counts["child_calls"])) / RUNS
    assert math.exp(est.need_mu) < 0.6 * with_children


def test_a_runs_cost_is_its_recorded_cost_less_its_subagents(tmp_path: Path) -> None:
    """A run recording $1.00 whose child calls cost $0.10 and $0.15 costs
    $0.75 as the parent's; a run one of whose child calls has no recorded
    cost has an unknown own cost (NaN, priced later from its usage)."""
    def run(i: int, child_costs: list[float | None]) -> RunRecord:
        calls = [CallRecord(usage=Usage(input_tokens=100, output_tokens=10), model="m",
                            cost_usd=0.25)]
        calls += [CallRecord(usage=Usage(input_tokens=50, output_tokens=5), model="m",
                             cost_usd=c, agent=f"a{j}") for j, c in enumerate(child_costs)]
        return RunRecord(run_id=f"r{i:02d}", source="sim", file="gen", calls=calls, model="m",
                         exit="succeeded", resolved=True, cost_usd=1.0)

    write_runs(tmp_path, [run(0, [0.10, 0.15]), run(1, [0.10, None])]
               + [run(i, []) for i in range(2, 12)])
    traces = load(tmp_path)
    cost = dict(zip(traces.runs["run_id"], traces.runs["cost"], strict=True))
    assert cost["r00"] == pytest.approx(0.75) and math.isnan(cost["r01"])
    assert cost["r02"] == 1.0
    assert traces.runs.set_index("run_id").loc["r00", "steps"] == 1


def test_the_fitted_world_spawns_and_its_parents_run_as_long_as_the_recorded(fanned) -> None:
    """fit_world (no search) carries the fan-out in its scenario; simulated,
    its runs start children (about the recorded 0.3 x 10 spawns x 1.7
    children = 5.1 per run) and their own steps' log-mean is within 0.15 of
    the recorded parents' (not the 28 calls of parents with children)."""
    from sim.calibration.fitting import Settings, fit_world
    from sim.calibration.simulate import from_traces, simulate
    from sim.calibration.structure import ONE

    traces, counts = fanned
    *_, doc, _, fan = fit_world(traces, ONE, 3, Settings(evaluations=0))
    assert fan is not None and "fanout" in doc["world"] and "subagents" in doc["harness"]
    sim = simulate(doc, 300, 11)
    real = from_traces(traces)
    assert real.children is not None and int(real.children.sum()) == counts["kids"]
    assert sim.children is not None and 3.0 < sim.children.mean() < 7.5
    gap = abs(np.log(sim.steps).mean() - np.log(real.steps).mean())
    assert gap < 0.15
