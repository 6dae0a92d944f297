"""Candidates that only tighten the harness in force, evaluated by replay.

Every recorded run is replayed once (:func:`sim.drivers.replay.replay_runs`,
the real harness loop fed the recorded responses) under the harness in force
(the baseline: a run that succeeded there is a recorded success), noting
where each tighter budget would stop it (:mod:`sim.tuning.stops`); a run is
replayed again under a candidate only where those notes cannot answer. A
candidate that only tightens budgets stops some runs earlier and changes
nothing else, so its row is exact on these runs (a run it cannot stop keeps
its replay in force; :class:`ReplayEvaluator`): the successes it
loses, the recorded dollars it saves (``cost_usd``: each call's recorded cost,
or its price at the run's prices when unrecorded), the active seconds.

Each call is priced at its own model's catalogue prices on the scenario's
``prices_date`` (what a money budget checks; a ``provider/model`` name tried
as the model too, :class:`~sim.drivers.catalogue_prices.CataloguePrices`); a
model the catalogue lacks is priced from its calls' recorded costs, else at
the scenario's prices, and named in the notes (as ``sim replay`` does).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from sim.bad_input import InputError
from sim.drivers.catalogue_prices import CataloguePrices
from sim.drivers.replay import Replay, RunReplay, price_models
from sim.drivers.replay.reading import FolderIndex, TraceTables
from sim.scenario.model import HarnessConfig, harness_params
from sim.traces.model import RunRecord
from sim.tuning import evidence
from sim.tuning.knobs import FIELDS, Setting, label
from sim.tuning.shards import Answer, Setup, Shards
from sim.tuning.stops import RunMarks, Stopped
from sim.world.params import WorldParams

REPLAYED = "replayed"
STOPPED_COLUMNS: tuple[str, ...] = (
    "run_id", "task_id", "model", "exit", "resolved", "outcome_in_force", "outcome",
    "lost_success", "stopped_at_call", "calls_recorded", "prompt_tokens_at_stop",
    "cost_in_force_usd", "cost_usd", "saved_usd")
"""The columns of ``stopped_runs.csv`` (:meth:`ReplayEvaluator.stopped_runs`)."""


MIN_PARALLEL = 2000
"""Runs below which they are not spread over worker processes."""


def default_workers() -> int:
    """Worker processes a tune replays with by default: the CPUs this
    process may use (at most 4; 1 where processes cannot be forked, or in a
    daemonic worker process, which may not start its own)."""
    if ("fork" not in multiprocessing.get_all_start_methods()
            or multiprocessing.current_process().daemon):
        return 1
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def fidelity(replays: Sequence[Replay | Stopped]) -> str:
    """How exact a replayed row is (:func:`fidelity_of` the replays)."""
    return fidelity_of(len(replays), sum(r.diverged for r in replays))


def fidelity_of(runs: int, diverged: int) -> str:
    """How exact a replayed row of ``runs`` runs is: exact when the candidate
    only stopped runs; runs where it intervened in a way the recording cannot
    answer (a nudge, a retry, a rejected claim: ``diverged``) were followed as
    recorded, an upper bound on their cost, and are counted."""
    if not diverged:
        return f"exact on {runs:,} recorded runs"
    return (f"{runs:,} recorded runs; {diverged:,} diverged where the harness "
            "intervened and were followed as recorded (an upper bound on their cost)")


def apply(h: HarnessConfig, s: Setting) -> HarnessConfig:
    """``h`` with the setting's budgets and detector (validated: a value the
    harness refuses, one of ``--candidates`` out of its range, is an
    InputError naming the setting)."""
    from pydantic import ValidationError

    doc = h.model_dump(mode="json")
    for knob, value in s:
        if knob == "detector":
            doc["detector"]["enabled"] = bool(value)
            if value:
                doc["detector"]["repeat_threshold"] = int(value)
        else:
            doc["budgets"][FIELDS[knob]] = value
    try:
        return HarnessConfig.model_validate(doc)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in error.errors())
        raise InputError(f"the setting {label(s)} is not a harness sim runs ({problems})",
                         path="--candidates") from None


class ReplayEvaluator:
    """Replays the recorded runs under the harness in force ``h`` (once)
    and answers candidates from those replays (:meth:`evaluate`).

    A candidate that only tightens budgets changes a run only where one of the
    harness's budget checks refuses (:class:`~sim.harness.budgets.Limits`, the
    one home of those rules: nothing else in the harness reads a budget), and
    the run is the same as in force up to there. So a candidate's replays are
    the baseline's, except for the runs it could stop (:meth:`could_stop`),
    which the replay in force answers where it can (:mod:`sim.tuning.stops`:
    the candidate's Limits called on the counters noted before each step call
    in force, one pass for every candidate) and the real harness loop replays
    again where it cannot: the replays, and every row made of them, are those
    of a replay of every run.

    ``runs``: the recorded runs (held here, with their replays in force:
    ``runs``, ``baseline``, ``marks``), or a trace folder opened by
    :func:`~sim.drivers.replay.reading.open_folder`, whose runs are read by
    :class:`~sim.tuning.shards.Shard` s, ``workers`` forked processes each
    reading its own rows once when there are :data:`MIN_PARALLEL` runs or
    more; this process then holds none of them, only one value per run per
    question (:class:`~sim.tuning.shards.Answer`)."""

    def __init__(self, runs: Sequence[RunRecord] | TraceTables | FolderIndex,
                 h: HarnessConfig, workers: int = 1) -> None:
        self.harness_in_force = h
        if not len(runs):
            raise InputError("the trace folder holds no runs")
        if h.conversation.enabled:  # replay answers text turns itself (reply_to_user)
            h = h.model_copy(update={"conversation": h.conversation.model_copy(
                update={"enabled": False})})
        self.harness = h
        self.prices_for = CataloguePrices(h)
        template = harness_params(h, WorldParams())
        held = not isinstance(runs, TraceTables | FolderIndex)
        self.runs: list[RunRecord] | None = (
            None if isinstance(runs, TraceTables | FolderIndex) else list(runs))
        """The recorded runs, when given as a list (else None: read by the shards)."""
        self.pricing = (price_models(self.runs, template, self.prices_for) if self.runs is not None
                        else runs.pricing(template, self.prices_for))  # type: ignore[union-attr]
        """Each call's prices: a setting's budgets do not change them, so
        they are found once, over every run (as a replay of them all does)."""
        self.count = len(runs)
        self.workers = workers if workers > 1 and self.count >= MIN_PARALLEL else 1
        setup = (Setup(h, self.prices_for, self.pricing, held=self.runs) if self.runs is not None
                 else Setup(h, self.prices_for, self.pricing, folder=runs.source,  # type: ignore
                            streamed=isinstance(runs, FolderIndex)))
        self.shards = Shards(setup, self.count, self.workers, keep=held)
        try:
            base = Answer.joined(self.shards.call("answer", None))
        except BaseException:
            self.close()
            raise
        self.base_success = base.success
        self.base_cost = base.cost
        self.base_tokens = base.tokens
        self.price_basis: Counter[str] = Counter()
        """Runs per basis of their one price (:mod:`sim.cost.recorded`)."""
        for summary in self.shards.summaries:
            self.price_basis.update(summary.basis)
        self.extremes = tuple(max(s.extremes[k] for s in self.shards.summaries)
                              for k in range(3))
        """The most tool calls one call made, the largest tool result and the
        largest recorded prompt (tokens), over every run."""
        self.judged = sum(s.judged for s in self.shards.summaries)
        """Runs whose source says whether they were resolved: with none, no
        run can count as a success, whatever the harness."""

    @property
    def baseline(self) -> list[RunReplay]:
        """Each run's replays in force (runs held here only)."""
        assert self.shards.local is not None
        return self.shards.local.baseline

    @property
    def marks(self) -> list[RunMarks | None]:
        """Each run's marks in force (one process only)."""
        assert self.shards.local is not None
        return self.shards.local.marks

    @property
    def redriven(self) -> int:
        """Runs replayed again for candidates (all candidates so far)."""
        return sum(c[0] for c in self.shards.call("counts"))

    @property
    def marked(self) -> int:
        """Runs a candidate could stop answered by the marks (all candidates so far)."""
        return sum(c[1] for c in self.shards.call("counts"))

    def close(self) -> None:
        """Stop the worker processes (if any were started)."""
        self.shards.close()

    def could_stop(self, h: HarnessConfig) -> list[int]:
        """The runs (indices, ascending) that the harness ``h`` (the harness in
        force with tighter budgets) could end differently
        (:meth:`~sim.tuning.shards.Shard.could_stop`)."""
        return self.shards.gathered("could_stop", h, offset=lambda start, i: start + i)

    def replays(self, s: Setting) -> list[Stopped]:
        """What tune reads of each run's replay under the setting ``s``
        (:class:`~sim.tuning.stops.Stopped`): the replay in force's where
        ``s`` cannot change the run (:meth:`could_stop`), else where the
        marks say it stops (:func:`~sim.tuning.stops.first_stop`), else
        replayed again."""
        return self.shards.gathered("readings", apply(self.harness, s))

    def needs(self) -> dict[str, np.ndarray]:
        """What each run needed for the harness in force to admit every call
        it made (see :mod:`sim.tuning.knobs`): steps (model calls), prompt
        tokens, and USD (the largest spend before a call plus that call's
        worst case, each call at the prices its replay charges it:
        :func:`~sim.drivers.replay.pricing.priced_calls`)."""
        return {k: np.concatenate([s.needs[k] for s in self.shards.summaries])
                for k in ("steps", "tokens", "money")}

    def stopped_runs(self, s: Setting) -> pd.DataFrame:
        """The runs the candidate ``s`` stops earlier than the harness in
        force, one row each (:data:`STOPPED_COLUMNS`): the run (``run_id``,
        ``task_id``, ``model``), its recorded ``exit`` and ``resolved``, its
        outcome in force (``outcome_in_force``) and under ``s``
        (``outcome``), where ``s`` stops it (``stopped_at_call``: the index of
        the recorded call it does not make, of ``calls_recorded``;
        ``prompt_tokens_at_stop``: prompt tokens over the calls it made), its
        cost in force and under ``s`` (USD) and the saving. Successes lost
        first, then the largest saving."""
        rows = self.shards.gathered("stopped_rows", apply(self.harness, s))
        frame = pd.DataFrame(rows, columns=list(STOPPED_COLUMNS))
        return frame.sort_values(["lost_success", "saved_usd"], ascending=[False, False],
                                 kind="stable").reset_index(drop=True)

    def evaluate(self, s: Setting, intervals: bool = True) -> dict[str, Any]:
        """The frontier row of the candidate ``s`` (exact on these runs);
        ``intervals``: False leaves its bootstrap intervals to
        :func:`~sim.tuning.evidence.fill_intervals` (the row holds what they
        need)."""
        chosen = Answer.joined(self.shards.call("answer", apply(self.harness, s)))
        row = evidence.row(
            base_success=self.base_success, success=chosen.success, cost=chosen.cost,
            base_cost=self.base_cost, time_s=chosen.active_s, outcomes=chosen.outcomes,
            method=REPLAYED, fidelity=fidelity_of(self.count, chosen.diverged),
            intervals=intervals)
        row["saved_tokens_mean"] = float(np.mean(self.base_tokens - chosen.tokens))
        return row
