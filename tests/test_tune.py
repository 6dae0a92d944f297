"""``sim tune``: limits recommended from recorded runs, with the evidence.

Traces are simulated from a known world (``benchmarks.tune_world``): replay of the
recommended setting loses what the frontier says and saves what it says;
the recommendation lands within one grid step of the brute-force optimum on
that world; too few runs give exit 3 with the runs that would decide; looser
settings and detector changes are forecasts carrying the calibration's
fidelity; bad input is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from tally import run_folder, tally

import sim
from benchmarks.tune_world import STEP_GRID, WORLD_DOC, brute_force_step_cap, simulated_traces
from sim.bad_input import InputError
from sim.cli import main
from sim.scenario.model import load_scenario
from sim.tuning.knobs import InForce, budget_grid, nice_up, setting
from sim.tuning.search import tune
from sim.tuning.world import CalibratedWorld

KEEP = 0.9


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """200 runs of the known world."""
    return simulated_traces(tmp_path_factory.mktemp("tune"), 200, seed=11)


@pytest.fixture(scope="module")
def tuned(traces):
    """The two-knob search with its default grid. Its forecasts (step caps above
    the 60 in force) use the known world itself: by default tune calibrates a
    world to the traces (a calibration of 200 runs, about a sixth of the
    suite's time), which the tests below do not look at; that tune asks for
    that calibration, and only when a forecast needs it, is tested by
    test_without_a_world_forecasts_use_a_calibration_made_on_first_need."""
    known = CalibratedWorld({**WORLD_DOC}, accepted=True)
    return tune(traces, knobs="steps,tokens", keep_successes=KEEP, world=known)


class TestRecommendation:
    """The tests of the two-knob recommendation (its search, the module's
    costliest set-up), a class so that pytest-xdist can run it beside the rest."""

    pytestmark = pytest.mark.slow

    def test_recommendation_keeps_successes_by_its_upper_bound(self, tuned):
        """The recommended setting's 95% upper bound of successes lost is within
        1 - keep, and the next-cheaper setting was refused for losing more."""
        row = tuned.recommendation.row
        assert tuned.status == 0
        assert row["lost_high"] <= 1 - KEEP
        assert row["method"] == "replayed"
        assert row["objective_ratio"] <= 1.0
        assert tuned.refusal is not None and "loses" in tuned.refusal
        cheaper = tuned.frontier[tuned.frontier["objective_ratio"] < row["objective_ratio"]]
        assert not cheaper["keeps_successes"].any()

    def test_replay_of_the_recommended_yaml_matches_the_frontier(self, tuned, traces, tmp_path):
        """recommended.yaml, replayed by 'sim replay', loses exactly the successes
        and costs exactly the mean the frontier stated."""
        from sim.tuning.report import write_outputs

        out = write_outputs(tmp_path / "tuned", tuned)
        doc = yaml.safe_load((out / "recommended.yaml").read_text())
        scenario = load_scenario(out / "recommended.yaml")
        for knob, value in tuned.recommendation.setting:
            field = {"tokens": "tokens", "steps": "steps"}[knob]
            assert getattr(scenario.harness.budgets, field) == value
            assert doc["harness"]["budgets"].get(field) == value
        status = main(["replay", str(traces), str(out / "recommended.yaml"), "--out",
                       str(tmp_path / "replayed"), "--quiet", "--format", "json"])
        assert status == 0
        summary = json.loads((tmp_path / "replayed" / "summary.json").read_text())
        cell = summary["cells"][0]
        row = tuned.recommendation.row
        runs = row["runs"]
        assert round(cell["outcomes"].get("succeeded", 0) * runs) == row["successes"]
        assert cell["cost"]["mean"] == pytest.approx(row["cost_mean"], rel=1e-9)
        html = (out / "report.html").read_text()
        assert html.index("Recommendation") < html.index("Frontier")
        assert "data:image/png;base64" in html


# the optimum test's ten seeds in two halves; at least 9 within one grid step
HALVES = {"first": range(0, 5), "last": range(5, 10)}
MAX_MISSES = 1


class _OptimumHalf:
    """Half of the optimum test (the seeds of ``HALVES[half]``), a class so that the
    halves can run on two pytest-xdist workers; the half that ends last checks
    the total (:mod:`tally`)."""

    half = ""

    @pytest.mark.slow
    def test_within_one_grid_step_of_the_brute_force_optimum(self, tmp_path, tmp_path_factory,
                                                             request):
        """On traces simulated from a known world (10 seeds, 200 runs each), the
        recommended step cap is within one grid step of the cheapest cap that
        loses at most 10% of the world's successes (brute force on 1,500 tasks
        per cap, common random numbers) in at least 9 of 10 seeds.

        Detectable effect: the same 10 seeds and the same bound on their total
        as before the split (at most one miss): a method that hits with
        probability 0.75 per seed still passes with probability 0.24, one that
        hits with 0.95 fails with probability 0.086. Run alone, a half checks
        only its own misses against the bound."""
        optimum = STEP_GRID.index(brute_force_step_cap(1500, 999, KEEP))
        misses = 0
        for seed in HALVES[self.half]:
            found = tune(simulated_traces(tmp_path, 200, seed), knobs="steps",
                         keep_successes=KEEP, grid={"steps": list(STEP_GRID)})
            cap = dict(found.recommendation.setting)["steps"]
            misses += not (cap in STEP_GRID and abs(STEP_GRID.index(cap) - optimum) <= 1)
        assert misses <= MAX_MISSES, (misses, self.half)
        counts = tally(run_folder(tmp_path_factory, request.config), "tune-optimum",
                       self.half, misses, set(HALVES))
        if counts is not None:
            assert sum(counts.values()) <= MAX_MISSES, counts


class TestOptimumFirstSeeds(_OptimumHalf):
    half = "first"


class TestOptimumLastSeeds(_OptimumHalf):
    half = "last"


def test_thin_evidence_exits_3_with_the_runs_that_would_decide(tmp_path, capsys):
    """Twenty runs cannot show that a limit keeps 99% of successes: exit 3,
    and the number of runs that would decide (more than twenty)."""
    few = simulated_traces(tmp_path, 20, seed=5)
    in_force = tmp_path / "in_force.yaml"  # no step budget: every candidate is replayed
    in_force.write_text(yaml.safe_dump({"harness": {**WORLD_DOC["harness"], "budgets": {}}}))
    result = tune(few, scenario=in_force, knobs="steps", keep_successes=0.99)
    assert result.status == 3
    assert result.runs_to_decide is not None and result.runs_to_decide > 20
    assert set(result.frontier["method"]) == {"replayed"}
    capsys.readouterr()
    assert main(["tune", str(few), "--scenario", str(in_force), "--knobs", "steps", "--out",
                 str(tmp_path / "o"), "--quiet"]) == 3
    out = capsys.readouterr().out
    assert "INCONCLUSIVE" in out and f"{result.runs_to_decide:,} runs" in out


def test_looser_settings_and_the_detector_are_forecasts_with_fidelity(traces):
    """A step cap above the one in force (60) and any detector change are
    evaluated on the calibrated world, labelled forecast, with its verdict;
    tightening ones are replayed."""
    world = CalibratedWorld({**WORLD_DOC}, accepted=False, reasons=("cost per run: KS 0.2",))
    result = tune(traces, knobs="steps,detector", keep_successes=KEEP, world=world,
                  forecast_runs=200, grid={"steps": [30, 60, 90], "detector": [0, 3]})
    frame = result.frontier.set_index("setting")
    assert frame.loc["steps=30 detector=off", "method"] == "replayed"
    assert frame.loc["steps=90 detector=off", "method"] == "forecast"
    assert frame.loc["steps=60 detector=repeat 3", "method"] == "forecast"
    assert "REJECTED" in frame.loc["steps=90 detector=off", "fidelity"]
    forecast = result.frontier[result.frontier["method"] == "forecast"]
    assert (forecast["runs"] == 200).all()


def test_without_a_world_forecasts_use_a_calibration_made_on_first_need(traces, monkeypatch):
    """With no world given, tune calibrates one to the trace folder (with its
    seed and calibration_evaluations) once, when the first forecast needs it,
    and labels forecasts with that calibration's verdict; a search that only
    tightens (everything replayed) calibrates nothing."""
    calls = []

    def calibrated(folder, *, seed, evaluations):
        calls.append((Path(folder), seed, evaluations))
        return CalibratedWorld({**WORLD_DOC}, accepted=False, reasons=("steps: KS 0.3",))

    monkeypatch.setattr("sim.tuning.search.calibrated_world", calibrated)
    tightening = tune(traces, knobs="steps", keep_successes=KEEP, grid={"steps": [20, 30]})
    assert set(tightening.frontier["method"]) == {"replayed"} and not calls
    result = tune(traces, knobs="steps", keep_successes=KEEP, grid={"steps": [30, 90, 120]},
                  forecast_runs=100, seed=4, calibration_evaluations=7)
    assert calls == [(traces, 4, 7)]
    forecast = result.frontier[result.frontier["method"] == "forecast"]
    assert len(forecast) >= 2 and forecast["fidelity"].str.contains("REJECTED").all()
    assert result.world_fidelity is not None and "REJECTED" in result.world_fidelity


def test_grid_and_tightening_rules():
    """Candidates come from the needs' quantiles rounded up; a value tightens
    only when finite and at or below the one in force; the detector never does."""
    needs = np.array([5.0, 9.0, 12.0, 40.0])
    grid = budget_grid("steps", needs, np.array([True, True, True, False]), None)
    assert grid[-1] is None and 12 in grid and 40 in grid
    assert nice_up(12_345) == 13_000
    force = InForce({"steps": 30, "detector": 0})
    assert force.tightens(setting({"steps": 20, "detector": 0}))
    assert not force.tightens(setting({"steps": 40, "detector": 0}))
    assert not force.tightens(setting({"steps": None, "detector": 0}))
    assert not force.tightens(setting({"steps": 20, "detector": 3}))


def test_bad_input_exits_2(tmp_path, traces, capsys):
    """A missing folder, a share outside (0, 1) or an unknown knob: one clear
    message and exit 2, never a traceback."""
    assert main(["tune", str(tmp_path / "nowhere")]) == 2
    assert main(["tune", str(traces), "--keep-successes", "1.5", "--out",
                 str(tmp_path / "a")]) == 2
    assert main(["tune", str(traces), "--knobs", "tokens,budget_of_joy", "--out",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--knobs" in err and "--keep-successes" in err
    with pytest.raises(InputError):
        tune(traces, objective="fastest")


def test_api_returns_frontier_and_recommendation(traces, tmp_path):
    """sim.tune unpacks as (frontier DataFrame, recommendation)."""
    frontier, recommendation = sim.tune(traces, knobs="steps", keep_successes=KEEP,
                                        grid={"steps": [20, 30]}, out=tmp_path / "tuned")
    assert {"setting", "method", "lost_share", "lost_high", "cost_mean", "cost_p95",
            "stopped"} <= set(frontier.columns)
    assert recommendation.label.startswith("steps=")


def test_same_traces_and_options_give_identical_frontiers(traces):
    """Replay, bootstrap and forecasts are seeded: two runs agree exactly."""
    first = tune(traces, knobs="steps", keep_successes=KEEP, grid={"steps": [12, 25, 40]})
    second = tune(traces, knobs="steps", keep_successes=KEEP, grid={"steps": [12, 25, 40]})
    columns = [c for c in first.frontier.columns if c != "stopped"]
    assert first.frontier[columns].equals(second.frontier[columns])
    assert list(first.frontier["stopped"]) == list(second.frontier["stopped"])


def test_a_scenario_without_a_harness_is_refused(traces, tmp_path, capsys):
    """--scenario must hold the harness in force: exit 2 naming the field."""
    world_only = tmp_path / "world.yaml"
    world_only.write_text("world: {}\n")
    assert main(["tune", str(traces), "--scenario", str(world_only), "--out",
                 str(tmp_path / "o")]) == 2
    assert "harness" in capsys.readouterr().err
