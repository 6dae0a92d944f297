"""Calibration recovers a known world from its own simulated traces.

A conversational world with known parameters runs through ``sim run
--traces``; ``calibrate`` fits one class to the recorded runs. Each fitted
parameter must lie within its sampling interval around the truth (``Z``
standard errors, derived from the number of runs or calls it was estimated
from), and a fresh simulation of the fitted scenario must not be
distinguishable from a fresh simulation of the known world (every KS distance
under its 5% critical value).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from sim.calibration.pipeline import calibrate
from sim.calibration.simulate import simulate
from sim.calibration.verdict import compare
from sim.cli import main
from sim.world.distributions import Lognormal

ALPHA = 1e-4  # per assertion; about twenty of them
Z = float(stats.norm.ppf(1 - ALPHA / 2))
TASKS = 400

KNOWN = {
    "name": "known", "tasks": TASKS, "seed": 3,
    "harness": {"model": "claude-sonnet-4-20250514",
                "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
                "max_output_tokens": 4096, "budgets": {"steps": 60},
                "detector": {"enabled": False}, "retry": {"retry_tool_errors": False},
                "conversation": {"enabled": True}},
    "world": {
        "difficulty": {"distribution": "lognormal", "mu": 1.8, "sigma": 0.45, "min": 1},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.05, "premature": 0.0,
                   "talk": 0.3, "self_end": 0.3},
        "tools": [
            {"name": "lookup", "weight": 3, "definition_tokens": 0,
             "result_tokens": {"distribution": "lognormal", "median": 120, "sigma": 0.5},
             "duration": {"median_s": 0.2, "sigma": 0.3}},
            {"name": "update", "weight": 1, "definition_tokens": 0,
             "result_tokens": {"distribution": "lognormal", "median": 40, "sigma": 0.3},
             "duration": {"median_s": 0.5, "sigma": 0.3}}],
        "tokens": {"prefix": 4000, "task": 200,
                   "output": {"distribution": "lognormal", "median": 30, "sigma": 0.4},
                   "answer_output": {"distribution": "lognormal", "median": 90, "sigma": 0.6},
                   "run_scale": {"distribution": "lognormal", "median": 1.0, "sigma": 0.3}},
        "user": {"reply": {"distribution": "lognormal", "median": 35, "sigma": 0.5}},
        "latency": {"ttft_s": 0.4, "decode_tps": 80.0}},
}
TAU = 0.3
pytestmark = pytest.mark.slow  # a calibration of 400 runs and its repetition: minutes


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The known world's traces (``sim run --traces``) and the calibration of them."""
    folder = tmp_path_factory.mktemp("recovery")
    scenario = folder / "known.yaml"
    scenario.write_text(yaml.safe_dump(KNOWN), encoding="utf-8")
    runs = folder / "runs"
    assert main(["run", str(scenario), "--traces", "--out", str(runs), "--quiet",
                 "--workers", "1"]) == 0
    result = calibrate(runs, classes=1, search_runs=600, final_runs=2000, evaluations=25,
                       progress=False)
    return result


def _lognormal_within(fit, median: float, sigma: float, n: int, sigma_se: float | None = None):
    """A fitted lognormal's log median within Z sigma/sqrt(n) of the truth and
    its sigma within Z standard errors (sigma/sqrt(2n) unless given)."""
    assert isinstance(fit, Lognormal), fit
    assert abs(math.log(fit.median) - math.log(median)) <= Z * sigma / math.sqrt(n), fit
    se = sigma / math.sqrt(2 * n) if sigma_se is None else sigma_se
    assert abs(fit.sigma - sigma) <= Z * se, (fit, se)


def _sigma_se(sigma: float, n: int, runs: int, per_run: float) -> float:
    """Standard error of a call-level sigma estimated as sqrt(s^2 - tau^2):
    var(s^2) = 2 s^4 / n, var(tau^2) = 2 (tau^2 + sigma^2 / m)^2 / (R - 1) for
    R runs of m calls; delta method to sigma."""
    s2 = sigma ** 2 + TAU ** 2
    var = 2 * s2 ** 2 / n + 2 * (TAU ** 2 + sigma ** 2 / per_run) ** 2 / (runs - 1)
    return math.sqrt(var) / (2 * sigma)


def test_the_fit_is_accepted_on_held_out_runs(fitted):
    """Every KS distance on the held-out runs is under its critical value."""
    assert fitted.status == 0, [m.why() for m in fitted.rejected]
    assert fitted.exits.tv < 0.1


def test_rates_are_recovered_within_binomial_intervals(fitted):
    """Messages to the task-giver (talk) and tool errors per decision, and the
    share of finished conversations the model ends itself (self_end)."""
    c = fitted.estimates.classes[0]
    calls = len(fitted.fit.calls)
    for estimate, truth, n in ((c.talk, 0.3, calls), (c.validation, 0.05, calls)):
        assert abs(estimate - truth) <= Z * math.sqrt(truth * (1 - truth) / n), (estimate, truth)
    natural = int(fitted.fit.runs["category"].isin(["agent", "task_giver"]).sum())
    assert abs(c.self_end - 0.3) <= Z * math.sqrt(0.21 / natural)
    assert c.loop == 0 and c.persistent == 0 and c.unsolvable == 0


def test_sizes_are_recovered_within_their_sampling_intervals(fitted):
    """Output of tool calls and of answers, the task-giver's replies and each
    tool's results: lognormal medians and sigmas at call level, and the run
    multiplier's tau (method of moments: se tau^2 sqrt(2 / (R - 1)) roughly)."""
    c = fitted.estimates.classes[0]
    calls = fitted.fit.calls
    runs = fitted.fit.n
    per_run = len(calls) / runs
    text = calls["text"].to_numpy()
    n_tool, n_text = int((~text).sum()), int(text.sum())
    _lognormal_within(c.output_tool, 30, 0.4, n_tool, _sigma_se(0.4, n_tool, runs, per_run))
    _lognormal_within(c.output_text, 90, 0.6, n_text, _sigma_se(0.6, n_text, runs, per_run))
    replies = int((text & ~calls["last"].to_numpy() & (calls["observation"].to_numpy() > 0))
                  .sum())
    _lognormal_within(c.reply, 35, 0.5, replies, _sigma_se(0.5, replies, runs, per_run))
    se_tau2 = math.sqrt(2 / (runs - 1)) * (TAU ** 2 + 0.5 ** 2 / per_run)
    assert abs(c.run_sigma ** 2 - TAU ** 2) <= Z * se_tau2
    tools = {t.name: t for t in fitted.estimates.tools}
    assert set(tools) == {"lookup", "update"}
    for name, median, sigma in (("lookup", 120, 0.5), ("update", 40, 0.3)):
        n = tools[name].calls
        _lognormal_within(tools[name].result, median, sigma, n,
                          _sigma_se(sigma, n, runs, per_run))
    share = tools["lookup"].calls / (tools["lookup"].calls + tools["update"].calls)
    assert abs(share - 0.75) <= Z * math.sqrt(0.75 * 0.25 / (n_tool * 0.95))


def test_need_latency_prices_and_limits_are_recovered(fitted):
    """The need's lognormal after the search (within the sampling error of the
    fitted runs and of the search's simulations), the latency model and the
    prices exactly (the simulated world has no noise in them), the step limit."""
    difficulty = fitted.doc["world"]["difficulty"]
    n, m = fitted.fit.n, 600
    se_mu = 0.45 * math.sqrt(1 / n + 1 / m)
    assert abs(difficulty["mu"] - 1.8) <= Z * se_mu, difficulty
    assert abs(difficulty["sigma"] - 0.45) <= Z * 0.45 * math.sqrt(1 / (2 * n) + 1 / (2 * m))
    c = fitted.estimates.classes[0]
    assert c.ttft_s == pytest.approx(0.4, abs=1e-6)
    assert c.decode_tps == pytest.approx(80.0, rel=1e-6)
    prices = fitted.estimates.prices["claude-sonnet-4-20250514"]
    assert (prices.input, prices.output) == (pytest.approx(3.0, rel=1e-4),
                                             pytest.approx(15.0, rel=1e-4))
    harness = fitted.doc["harness"]
    assert harness["budgets"]["steps"] == 60 and harness["conversation"]["enabled"]


def test_a_fresh_simulation_is_not_distinguishable_from_the_known_world(fitted):
    """The fitted scenario simulated afresh against the known world simulated
    afresh (new seeds both): every KS distance under its 1e-4 critical value
    for the fitted runs against the fresh truth. The fitted world carries the
    sampling error of the runs it was fitted to (its endings are a hazard per
    step bin, estimated from them), so the fitted runs' count, not the
    simulation's, sets the critical value (per call as per run, runs being
    the independent units)."""
    truth = simulate(KNOWN, 1500, seed=11)
    metrics, exits = compare(truth, fitted.sim, seed=5)
    n = fitted.fit.n
    critical = float(np.sqrt(-0.5 * np.log(ALPHA / 2)) * np.sqrt(1 / n + 1 / truth.n))
    rejected = [m.why() for m in metrics if m.ks >= critical]
    assert not rejected, (critical, rejected)
    assert exits.tv < 0.06


def test_the_scenario_file_is_valid_commented_and_deterministic(fitted, tmp_path):
    """The written YAML loads as the fitted scenario, says what was fitted from
    what, and a second calibration of the same traces gives the same bytes."""
    from sim.api.calibration_report import write_report, write_scenario
    from sim.scenario.model import load_scenario

    text = fitted.yaml_text()
    path = write_scenario(tmp_path / "fitted.yaml", text)
    assert yaml.safe_load(text)["world"] == fitted.doc["world"]
    scenario = load_scenario(path)
    assert scenario.harness.conversation.enabled
    assert "# lognormal (or two-lognormal mixture" in text and "least squares" in text
    files = write_report(tmp_path / "report", fitted)
    assert [f.name for f in files] == ["calibration.json", "calibration.md", "calibration.html"]
    again = calibrate(fitted.folder, classes=1, search_runs=600, final_runs=2000,
                      evaluations=25, progress=False)
    assert again.yaml_text() == text
    assert again.summary() == fitted.summary()
    html = (tmp_path / "report" / "calibration.html").read_text()
    assert html.count("data:image/png;base64,") == len(fitted.metrics) + 1
    assert Path(files[1]).read_text().count("| ok |") == len(fitted.metrics)
    assert np.isfinite(fitted.summary()["metrics"]["steps"]["ks"])
