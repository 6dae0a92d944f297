"""A candidate at least as loose as one answered before is answered from it
(:meth:`sim.tuning.shards.Shard.changed`): a budget check refuses under a
looser budget no more than under a tighter one, so only the runs the tighter
candidate could stop are checked, each from the step call where it stopped
there. The answers are those of checking every run from its first step call.

Traces are simulated from the known world (``benchmarks.tune_world``: a
60-step backstop in force, no other budget), 120 runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.tune_world import simulated_traces
from sim.drivers.replay.reading import TraceTables
from sim.tuning import shards
from sim.tuning.inforce import harness_in_force
from sim.tuning.knobs import setting
from sim.tuning.replayed import ReplayEvaluator, apply

SETTINGS = [setting({"tokens": t, "money": m, "steps": s}) for t, m, s in (
    (20_000, None, 60), (150_000, None, 60), (400_000, None, 60), (None, 0.05, 60),
    (None, 0.3, 60), (None, None, 8), (None, None, 20), (20_000, 0.05, 8),
    (150_000, 0.3, 20), (400_000, 0.3, 20), (150_000, 0.3, 8))]
"""Knob by knob tight to loose, then joint settings each looser than the one before."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list:
    traces: Path = simulated_traces(tmp_path_factory.mktemp("tune_tighter"), 120, seed=5)
    tables = TraceTables.load(traces)
    return [tables.recorded(0, len(tables)), harness_in_force(None, traces)]


def _fresh(runs, s):
    """The readings under ``s`` of an evaluator that answered nothing before."""
    return ReplayEvaluator(*runs).replays(s)


@pytest.mark.parametrize("order", ["tight first", "loose first", "mixed"])
def test_answers_in_any_order_are_each_candidates_own(runs, order):
    """One evaluator answering every setting in turn (so each looser one from
    a tighter one answered before, when the order allows) reads every run as
    an evaluator that answers that setting alone, field by field."""
    settings = {"tight first": SETTINGS, "loose first": SETTINGS[::-1],
                "mixed": SETTINGS[1::2] + SETTINGS[::2]}[order]
    evaluator = ReplayEvaluator(*runs)
    for s in settings:
        assert evaluator.replays(s) == _fresh(runs, s), s


def test_a_looser_candidate_checks_only_the_runs_the_tighter_could_stop(runs, monkeypatch):
    """After tokens=150,000 (steps 60 in force), tokens=400,000 checks exactly
    the runs tokens=150,000 could stop, each from the step call where
    tokens=150,000 stopped it (none from call 0: no first prompt is that
    large); the tighter candidate itself was checked on all 120 runs from
    call 0."""
    checked: list[int | None] = []
    starts: list[int] = []
    could_stop, first_stop = shards.Shard.could_stop, shards.first_stop

    def counted(self, h, among=None):
        checked.append(None if among is None else len(among))
        return could_stop(self, h, among)

    def started(limits, marks, probe, start=0):
        starts.append(start)
        return first_stop(limits, marks, probe, start)

    monkeypatch.setattr(shards.Shard, "could_stop", counted)
    monkeypatch.setattr(shards, "first_stop", started)
    evaluator = ReplayEvaluator(*runs)
    tight, loose = setting({"tokens": 150_000, "steps": 60}), setting({"tokens": 400_000,
                                                                       "steps": 60})
    stoppable = evaluator.could_stop(apply(evaluator.harness, tight))
    checked.clear()
    evaluator.replays(tight)
    assert checked == [None] and set(starts) == {0}
    checked.clear()
    starts.clear()
    evaluator.replays(loose)
    assert checked == [len(stoppable)] and 0 < len(stoppable) < 120
    assert starts and min(starts) > 0
