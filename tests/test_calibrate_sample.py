"""Calibration in time that does not grow with the traces: the searches and
the held-out comparisons use a stratified sample of at most N runs per model
(every run of smaller traces, drawn without any random number), the search
reports its own sampling error, and the result does not depend on the number
of worker processes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from test_calibrate_cli import two_models

from sim.calibration.sample import draw, loss_error
from sim.cli import main


def test_traces_within_the_cap_are_every_run():
    """No model over the cap: every run is in the sample (and no cap at all too)."""
    models = np.array(["a"] * 30 + ["b"] * 10, dtype=object)
    cats = np.array(["agent", "steps"] * 20, dtype=object)
    assert draw(models, cats, 30, seed=1).all()
    assert draw(models, cats, None, seed=1).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sample_holds_the_cap_per_model_and_keeps_the_exit_mix(seed):
    """A model over the cap contributes exactly the cap, each of its exit
    strata its share to within one run (largest remainders); a model under the
    cap keeps all its runs; the same seed draws the same sample."""
    rng = np.random.default_rng(seed)
    models = np.array(["a"] * 5000 + ["b"] * 300, dtype=object)
    cats = rng.choice(np.array(["agent", "steps", "model_error"], dtype=object), 5300,
                      p=[0.7, 0.25, 0.05])
    keep = draw(models, cats, 400, seed=seed)
    assert int(keep[models == "a"].sum()) == 400
    assert keep[models == "b"].all()
    for cat in ("agent", "steps", "model_error"):
        stratum = (models == "a") & (cats == cat)
        assert abs(int(keep[stratum].sum()) - stratum.sum() * 400 / 5000) < 1.0
    assert (draw(models, cats, 400, seed=seed) == keep).all()
    assert not (draw(models, cats, 400, seed=seed + 10) == keep).all()


def test_the_search_error_from_runs_is_zero_when_every_run_is_searched():
    """The finite-population correction: a sample that is the population has
    no sampling error of its own; a 1-in-10 sample of a mean's loss has the
    standard error of a mean (sd / sqrt(n) within sampling error of the
    bootstrap)."""
    x = np.random.default_rng(3).normal(size=400)

    def mean_loss(r, s):
        return float(x[r].mean())

    full = loss_error(mean_loss, 400, 50, 400, seed=1)
    assert full["runs"] == 0.0
    tenth = loss_error(mean_loss, 400, 50, 4000, seed=1, draws=400)
    expected = x.std(ddof=1) / math.sqrt(400) * math.sqrt(1 - 0.1)
    # the bootstrap sd of 400 draws is within ~3.6 sd / sqrt(2 * 400) of the truth
    assert abs(tenth["runs"] - expected) < 3.6 * expected / math.sqrt(800)
    assert tenth["simulation"] == 0.0  # the loss does not read the simulated runs


def test_one_and_two_workers_give_identical_calibrations_with_a_sample(tmp_path, capsys):
    """1 and 2 worker processes write the same scenario and calibration.json;
    a cap below the traces' runs per model samples them (the summary and the
    scenario's header say how many, per fold, and the search's sampling
    error). (Traces within the cap: test_calibrate_cli's summary test.)"""
    folder = two_models(tmp_path)
    texts = {}
    for name, flags in (("w1", ["--workers", "1"]), ("w2", ["--workers", "2"])):
        assert main(["calibrate", folder, "--out", str(tmp_path / f"{name}.yaml"), "--quiet",
                     "--by", "model", "--folds", "2", "--evaluations", "2", "--search-runs",
                     "40", "--no-ladder", "--name", "fit", "--sample",
                     "20", *flags]) in (0, 1)
        texts[name] = ((tmp_path / f"{name}.yaml").read_text(),
                       (tmp_path / f"{name}_calibration" / "calibration.json").read_text())
    capsys.readouterr()
    assert texts["w1"] == texts["w2"]
    sampled = json.loads(texts["w1"][1])
    assert sampled["sample"]["runs"] == 40 and not sampled["sample"]["all"]  # 2 models x 20
    assert sum(sampled["sample"]["held_out"]) == 40
    assert sampled["search"]["sampled_runs"] == 40
    error = sampled["search"]["sampling_error"]
    assert error["runs"] > 0 and error["total"] >= error["simulation"]
    header = " ".join(texts["w1"][0].replace("#", " ").split())
    assert "stratified sample of 40" in header and "--sample 20" in header


def test_the_folds_are_dealt_over_the_sample_and_the_scenario_over_every_run(tmp_path,
                                                                             capsys):
    """With a cap below the traces' runs, the folds (their fits, simulations
    and held-out comparisons) use the sample alone: the folds' fitted and
    held-out runs add up to the sample, each fold fits on the other folds of
    the sample; the scenario's direct estimates read every run (its classes
    count all 60 runs) and calibration.json says what was fitted on what,
    with the verdict's power at the sample's size; a local pool of 2 workers
    and a Dask cluster of 2 give the same calibration.json (searches, their
    noise-floor stopping and the final search's warm start included)."""
    pytest.importorskip("distributed")
    folder = two_models(tmp_path)
    texts = {}
    for name, flags in (("local", ["--workers", "2"]),
                        ("dask", ["--workers", "2", "--scheduler", "dask"])):
        assert main(["calibrate", folder, "--out", str(tmp_path / f"{name}.yaml"), "--quiet",
                     "--by", "model", "--folds", "2", "--evaluations", "6", "--search-runs",
                     "40", "--no-ladder", "--name", "fit", "--sample", "15", *flags]) in (0, 1)
        texts[name] = (tmp_path / f"{name}_calibration" / "calibration.json").read_text()
    capsys.readouterr()
    assert texts["local"] == texts["dask"]
    summary = json.loads(texts["local"])
    stopping = summary["search"]["stopping"]
    assert len(stopping["fold_simulations"]) == 2 and stopping["runs_per_simulation"] in (None, 40)
    on = summary["fitted_on"]
    assert on["scenario"]["direct_estimates"] == 60 and on["folds"]["runs"] == 30
    assert summary["runs"]["fitted"] == 60 and summary["runs"]["held_out"] == 30
    assert on["folds"]["held_out"] == summary["sample"]["held_out"]
    assert sum(on["folds"]["held_out"]) == 30
    assert all(f + h == 30 for f, h in zip(on["folds"]["fitted"], on["folds"]["held_out"],
                                           strict=True))
    assert sum(c["runs"] for c in summary["classes"]) == 60
    power = summary["verdict"]["power"]
    assert power["held_out"] == 30 and power["tests"] >= 2
    assert all(0 < v < 1 for v in power["detectable_ks"].values() if v is not None)


def test_clusters_fitted_on_a_sample_label_every_run():
    """Clusters fitted to a sample give every run the component of highest
    posterior; fitted to every run they are the clusters of every run. Two
    well-separated groups are found either way, and a sample that is every
    run gives the same labels as no sample."""
    from sim.calibration import classes as cl
    from sim.calibration.data import Traces

    rng = np.random.default_rng(4)
    n = 400
    group = np.arange(n) % 2
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(n)],
                         "first_prompt": np.where(group, 20000, 1000) * rng.lognormal(0, .1, n),
                         "h": np.where(group, 5000, 100) * rng.lognormal(0, .1, n),
                         "cost": np.full(n, np.nan), "prompt": np.full(n, 1e5),
                         "steps": np.where(group, 40, 5)})
    calls = pd.DataFrame({"run_id": np.repeat(runs["run_id"], 2).to_numpy(),
                          "output": np.tile([100, 200], n), "text": np.tile([False, True], n)})
    traces = Traces("x", runs, calls)
    every = cl.assign(traces, classes=2, seed=1)
    assert (cl.assign(traces, classes=2, seed=1, fit_on=np.ones(n, bool)) == every).all()
    half = np.zeros(n, bool)
    half[rng.choice(n, 100, replace=False)] = True
    sampled = cl.assign(traces, classes=2, seed=1, fit_on=half)
    for labels in (every, sampled):
        assert len(set(labels[group == 0])) == 1 and len(set(labels[group == 1])) == 1
        assert labels[0] != labels[1]


def test_the_verdicts_power_grows_with_the_sample():
    """The distance detected with 80% probability shrinks as 1 / sqrt(n) for
    folds of effective size n (within the bisection's and the draws' error),
    and a larger family of tests needs a larger distance."""
    from sim.calibration.power import detectable

    small = detectable([400.0] * 5, 0.05, 5)
    large = detectable([1600.0] * 5, 0.05, 5)
    assert 0 < large < small < 1
    assert abs(small / large - 2.0) < 0.1
    assert detectable([400.0] * 5, 0.05, 10) > small


def test_a_negative_sample_or_bad_workers_are_exit_2(tmp_path, capsys):
    """--sample below 0 and --workers out of range: exit 2 naming the option."""
    folder = two_models(tmp_path)
    for flags, message in ((["--sample", "-1"], "--sample"), (["--workers", "0"], "--workers"),
                           (["--scheduler", "nowhere"], "scheduler")):
        assert main(["calibrate", folder, "--out", str(tmp_path / "o.yaml"), "--quiet",
                     *flags]) == 2
        assert message in capsys.readouterr().err
