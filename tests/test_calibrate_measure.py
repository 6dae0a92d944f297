"""The pieces of calibration on their own: critical values that hold their
level (per run, and per call when calls of one run are alike), exit
categories, task classes, call-level sizes and the commented YAML."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from sim.calibration.build import render_yaml
from sim.calibration.classes import assign
from sim.calibration.data import Traces
from sim.calibration.estimate import call_level, class_order
from sim.calibration.exits import category, mix, total_variation
from sim.calibration.simulate import Sample
from sim.calibration.verdict import _ks_sorted, _permutation_critical, critical_value

ALPHA = 1e-3
Z = float(stats.norm.ppf(1 - ALPHA / 2))


def _rate_ok(rejections: int, n: int, level: float = 0.05) -> bool:
    return abs(rejections / n - level) <= Z * math.sqrt(level * (1 - level) / n) + 0.01


def test_per_run_critical_value_rejects_five_percent_of_equal_samples():
    """Two samples of one distribution (60 held-out runs, 400 simulated):
    the asymptotic 5% critical value rejects about 5% of them (it is
    conservative at this size: at most 5% within binomial error)."""
    rng = np.random.default_rng(1)
    reps, rejected = 400, 0
    crit = critical_value(60, 400)
    for _ in range(reps):
        a, b = rng.lognormal(3, 1, 60), np.sort(rng.lognormal(3, 1, 400))
        rejected += _ks_sorted(a, b) >= crit
    assert rejected / reps <= 0.05 + Z * math.sqrt(0.05 * 0.95 / reps)
    assert rejected > 0


def _clustered(rng, runs: int, calls: int) -> Sample:
    """Runs whose calls share a strong run effect (log-sd 1 between runs,
    0.3 within)."""
    effect = rng.normal(0, 1.0, runs)
    values = np.exp(3 + np.repeat(effect, calls) + rng.normal(0, 0.3, runs * calls))
    zeros = np.zeros(runs)
    return Sample(zeros, zeros, zeros, zeros, np.array(["agent"] * runs, dtype=object), zeros,
                  np.round(values).astype(np.int64), np.repeat(np.arange(runs), calls))


def test_per_call_critical_value_keeps_its_level_when_calls_cluster():
    """With calls clustered by run, the iid critical value rejects equal worlds
    far more often than 5%; the run-level permutation one about 5%."""
    rng = np.random.default_rng(2)
    reps = 60
    naive = permuted = 0
    for _ in range(reps):
        real, sim = _clustered(rng, 30, 8), _clustered(rng, 120, 8)
        d = _ks_sorted(real.call_output.astype(float), np.sort(sim.call_output.astype(float)))
        naive += d >= critical_value(real.call_output.size, sim.call_output.size)
        permuted += d >= _permutation_critical(real, sim, rng)
    assert naive / reps > 0.3
    assert _rate_ok(permuted, reps)


@pytest.mark.parametrize(("label", "expected"), [
    ("user_stop", "task_giver"), ("agent_stop", "agent"), ("max_steps", "steps"),
    ("too_many_errors", "errors"), ("Submitted", "agent"), ("LimitsExceeded", "steps"),
    ("InternalServerError", "model_error"), ("Timeout", "model_error"),
    ("succeeded:model_complete", "agent"), ("succeeded:user_stop", "task_giver"),
    ("budget_exhausted:errors", "errors"), ("failed:model_error", "model_error"),
    ("needs_human:no_progress", "no_progress"), ("cancelled:external_signal", "cancelled"),
    ("something_new", "other"), (None, "other"),
])
def test_exit_labels_map_to_one_category(label, expected):
    """Sources' labels and sim's outcomes share categories."""
    assert category(label) == expected


def test_exit_mix_distance():
    """Shares over all categories; total variation is half the L1 distance."""
    p = mix(["user_stop", "user_stop", "agent_stop", "max_steps"])
    q = mix(["succeeded:user_stop", "succeeded:model_complete"])
    assert p["task_giver"] == 0.5 and q["agent"] == 0.5
    assert total_variation(p, q) == pytest.approx(0.25)


def _traces(first_prompts, models, h) -> Traces:
    n = len(first_prompts)
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "model": models,
                         "steps": 6, "prompt": 1, "output": 1, "cost": np.nan,
                         "first_prompt": first_prompts, "h": h})
    calls = pd.DataFrame({"run_id": np.repeat(runs["run_id"], 6), "output": 50,
                          "text": np.tile([False] * 5 + [True], n)})
    return Traces("x", runs, calls)


def test_auto_classes_find_two_prefix_groups_and_by_model_merges_rare_models():
    """Runs with first prompts near 3,400 or 6,300 (tau2's two groups) form
    two clusters; by model, each model is a class and models with fewer than
    three runs share one."""
    rng = np.random.default_rng(4)
    group = np.arange(120) % 3 == 0
    first = np.where(group, 3400, 6300) + rng.integers(-50, 50, 120)
    h = np.exp(rng.normal(5.5, 0.3, 120))
    labels = assign(_traces(first, ["a"] * 120, h), classes="auto", seed=0)
    assert len(set(labels)) == 2
    assert len({(lab, g) for lab, g in zip(labels, group, strict=True)}) == 2
    models = ["a"] * 100 + ["b"] * 18 + ["c", "d"]
    by = assign(_traces(first, models, h), by="model")
    assert sorted(set(by)) == ["a", "b", "other"]
    assert list(by[-2:]) == ["other", "other"]


def test_by_model_gives_a_models_uncached_runs_a_class_when_both_kinds_have_eight():
    """By model, a model with 10 runs that read the cache (at their second
    call) and 9 that never do is two classes, ``a`` and ``a uncached``; a
    model with 10 cached and 7 uncached runs (under 8) stays one class, and
    so does a model none of whose runs reads."""
    kinds = [("a", True)] * 10 + [("a", False)] * 9 + [("b", True)] * 10 + [("b", False)] * 7 \
        + [("c", False)] * 12
    n = len(kinds)
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(n)],
                         "model": [m for m, _ in kinds], "steps": 2})
    reads = np.ravel([[0, 500 if cached else 0] for _, cached in kinds])
    calls = pd.DataFrame({"run_id": np.repeat(runs["run_id"], 2), "cache_read_tokens": reads})
    labels = assign(Traces("x", runs, calls), by="model")
    assert list(labels) == (["a"] * 10 + ["a uncached"] * 9 + ["b"] * 17 + ["c"] * 12)


def test_the_main_class_is_the_largest_of_the_model_most_runs_used():
    """Model a: 100 runs in classes ``a`` (60) and ``a uncached`` (40);
    model b: 70 runs, class ``b``: the order is a, a uncached (a's 100 runs,
    the larger class first), b (70): the main class stays a's although b's
    class is larger than either of a's. One model: by class size, then by
    name."""
    models = np.array(["a"] * 100 + ["b"] * 70, dtype=object)
    labels = np.array(["a"] * 60 + ["a uncached"] * 40 + ["b"] * 70, dtype=object)
    assert class_order(models, labels) == ["a", "a uncached", "b"]
    one = np.array(["m"] * 9, dtype=object)
    assert class_order(one, np.array(["c2"] * 3 + ["c1"] * 3 + ["c3"] * 3, dtype=object)) == [
        "c1", "c2", "c3"]
    assert class_order(one, np.array(["c2"] * 5 + ["c1"] * 4, dtype=object)) == ["c2", "c1"]
    assert class_order(one, np.zeros(9, dtype=int)) == [0]  # labels kept as given


def test_call_level_sizes_remove_the_run_effect_variance():
    """Sizes with a run effect (tau 0.5) and a call effect (sigma 0.3): after
    dividing by shrunken run effects and restoring the method-of-moments
    variance, the log-sd is sigma within Z standard errors."""
    rng = np.random.default_rng(5)
    runs, per = 400, 8
    effect = rng.normal(0, 0.5, runs)
    logs = np.log(60) + np.repeat(effect, per) + rng.normal(0, 0.3, runs * per)
    shrink = 0.5 ** 2 / (0.5 ** 2 + 0.3 ** 2 / per)
    means = logs.reshape(runs, per).mean(axis=1) - np.log(60)
    scale = np.exp(np.repeat(shrink * means, per))
    x = np.log(call_level(np.exp(logs), scale, tau=0.5))
    se = math.sqrt(0.3 ** 4 * 2 / x.size + 2 * (0.25 + 0.09 / per) ** 2 / (runs - 1)) / (2 * 0.3)
    assert abs(x.std() - 0.3) <= Z * se
    assert abs(np.median(x) - np.log(60)) <= Z * 0.55 / math.sqrt(runs)


def test_the_yaml_round_trips_with_comments_before_their_keys():
    """Commented paths get a comment line above them; loading the text gives
    the document back, distributions and lists of sections included."""
    doc = {"name": "x", "harness": {"prices": {"input": 1.0, "output": 2.0}},
           "world": {"tools": [{"name": "t", "weight": 1.0,
                                "result_tokens": {"distribution": "lognormal", "median": 5.0,
                                                  "sigma": 0.5}}],
                     "classes": [{"name": "c1", "weight": 0.5, "policy": {"talk": 0.1}},
                                 {"name": "c2", "weight": 0.5, "policy": {"talk": 0.2}}]}}
    comments = {"harness.prices": "fitted", "world.classes[c2].policy": "rates of c2"}
    text = render_yaml(doc, comments, ["header line"])
    assert yaml.safe_load(text) == doc
    lines = text.splitlines()
    assert lines[0] == "# header line"
    assert lines[lines.index("  prices:") - 1] == "  # fitted"
    assert "      # rates of c2" in lines
