"""Fan-out in the verdict (sim/calibration/verdict.py): with traces that
record subagents, the subagents a run started are a per-run metric of the
verdict's family (the same parametric-bootstrap replicates, Stouffer
combination and min-P adjustment as steps and tokens). Traces written with a
known fan-out (the generator of tests/test_fanout_fit.py) against the worlds
fitted on the other folds are accepted; the same worlds with the children
per spawn deliberately wrong (always 3 instead of 1-3, mean 1.7) are
rejected on the subagents per run; with children twice as long (the worker
class's need doubled) on the subagents' tokens per run, not on their count."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_fanout_fit import generate

from sim.calibration.data import load
from sim.calibration.fitting import Settings, fit_world
from sim.calibration.folds import assign, seed_for
from sim.calibration.simulate import from_traces, simulate
from sim.calibration.structure import ONE
from sim.calibration.verdict import FANOUT_TESTED, judge

RUNS, FOLDS = 240, 3


@pytest.fixture(scope="module")
def folds(tmp_path_factory):
    """Held-out runs of each of 3 folds and the fan-out world fitted on the others."""
    folder = tmp_path_factory.mktemp("fanout-verdict")
    generate(folder, RUNS, lambda s: 0.3, seed=21)
    traces = load(folder)
    fold_of = assign(traces, FOLDS, 4)
    ids = traces.runs["run_id"].to_numpy()
    out = []
    for k in range(FOLDS):
        train, held = traces.subset(ids[fold_of != k]), traces.subset(ids[fold_of == k])
        *_, doc, _, fan = fit_world(train, ONE, seed_for(9, k), Settings(evaluations=0))
        assert fan is not None
        out.append((from_traces(held), doc))
    return out


def _judge(folds, docs):
    reals, sims, jacks = [], [], []
    for k, ((real, _), doc) in enumerate(zip(folds, docs, strict=True)):
        reals.append(real)
        sims.append(simulate(doc, max(200, 5 * real.n), seed_for(5, "sim", k), calls=False))
        jacks.append(simulate(doc, 600, seed_for(5, "jackknife"), calls=False))
    return judge(reals, sims, 17, jackknife=jacks, intervals=False)


def test_the_fanout_metrics_are_in_the_family():
    """The metrics the fan-out adds are the ones the verdict tests."""
    assert FANOUT_TESTED == ("children", "child_tokens")


def test_the_known_fanout_is_accepted(folds):
    """The fitted worlds spawn like the generator: the verdict accepts, and
    subagents per run is tested (it has a combined and an adjusted p-value)."""
    judgement = _judge(folds, [doc for _, doc in folds])
    tested = {m.key: m for m in judgement.metrics}
    assert tested["children"].p_adjusted is not None
    assert tested["child_tokens"].p_adjusted is not None
    assert not judgement.rejected, judgement.reasons


def test_a_wrong_children_pmf_is_rejected_on_subagents_per_run(folds):
    """Every spawn given 3 children (the data's mean is 1.7 per spawn): the
    subagents per run are far off and the verdict rejects on them."""
    wrong = []
    for _, doc in folds:
        bad = copy.deepcopy(doc)
        bad["world"]["fanout"]["children"] = [0.0, 0.0, 0.0, 1.0]
        wrong.append(bad)
    judgement = _judge(folds, wrong)
    assert "children" in {m.key for m in judgement.rejected}
    sims = [float(np.mean(simulate(d, 200, 3, calls=False).kids)) for d in wrong[:1]]
    assert sims[0] > 1.5 * float(np.mean(folds[0][0].kids))


def test_children_twice_as_long_are_rejected_on_their_tokens(folds):
    """The worker class's lognormal need moved up by log 2 (children of
    twice the calls): the count of subagents still fits, their tokens per
    run do not."""
    import math

    wrong = []
    for _, doc in folds:
        bad = copy.deepcopy(doc)
        worker = next(c for c in bad["world"]["classes"] if c["name"] == "worker")
        worker["difficulty"]["mu"] += math.log(2.0)
        wrong.append(bad)
    rejected = {m.key for m in _judge(folds, wrong).rejected}
    assert "child_tokens" in rejected and "children" not in rejected
