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
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from sim.bad_input import InputError
from sim.drivers.catalogue_prices import CataloguePrices
from sim.drivers.recorded_runs import RecordedRun
from sim.drivers.replay import Replay, RunReplay, price_models, replay_runs, run_params
from sim.drivers.replay.driver import RunDriver
from sim.drivers.replay.pricing import priced_calls
from sim.harness.budgets import LimitExceeded, Limits, worst_case_cost
from sim.harness.state import SUCCEEDED, DetectorMemory
from sim.scenario.model import HarnessConfig, harness_params, resolve_detector
from sim.tuning import evidence
from sim.tuning.knobs import FIELDS, Setting
from sim.tuning.stops import (
    SAME,
    UNSURE,
    RunMarks,
    StopMarks,
    Stopped,
    answerable,
    as_stopped,
    first_stop,
    probe_state,
    stopped,
)
from sim.world.params import WorldParams

REPLAYED = "replayed"
STOPPED_COLUMNS: tuple[str, ...] = (
    "run_id", "task_id", "model", "exit", "resolved", "outcome_in_force", "outcome",
    "lost_success", "stopped_at_call", "calls_recorded", "prompt_tokens_at_stop",
    "cost_in_force_usd", "cost_usd", "saved_usd")
"""The columns of ``stopped_runs.csv`` (:meth:`ReplayEvaluator.stopped_runs`)."""


MIN_PARALLEL = 2000
"""Runs to replay below which a replay is not spread over worker processes."""
_EVALUATOR: ReplayEvaluator | None = None
"""The evaluator whose runs a forked worker replays (set before the fork)."""


def default_workers() -> int:
    """Worker processes a tune replays with by default: the CPUs this
    process may use (at most 4; 1 where processes cannot be forked, or in a
    daemonic worker process, which may not start its own)."""
    if ("fork" not in multiprocessing.get_all_start_methods()
            or multiprocessing.current_process().daemon):
        return 1
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def slim(replay: Replay) -> Replay:
    """``replay`` without what tune does not read (the final history's
    messages and the detector's memory), so that every run's replay can be
    held at once; returns it."""
    replay.state.messages = []
    replay.state.detector = DetectorMemory()
    return replay


def _replay_here(evaluator: ReplayEvaluator, h: HarnessConfig, indices: list[int],
                 marked: bool = False) -> tuple[list[RunReplay], list[RunMarks | None]]:
    """The runs ``indices`` replayed under ``h``, each :func:`slim`, and, when
    ``marked``, each run's :class:`~sim.tuning.stops.RunMarks` of its replay
    (None for a session: not marked)."""
    template = harness_params(h, WorldParams())
    runs = [evaluator.runs[i] for i in indices]
    watching: dict[int, StopMarks] = {}

    def observe(driver: RunDriver) -> list[StopMarks]:
        watching[id(driver.run)] = StopMarks(driver)
        return [watching[id(driver.run)]]

    done = replay_runs(runs, template, prices_for=evaluator.prices_for,
                       make_detector=resolve_detector(h.detector.name),
                       pricing=evaluator.pricing, observe=observe if marked else None)
    marks: list[RunMarks | None] = []
    if marked:
        cap = template.max_output_tokens
        for run, r in zip(runs, done, strict=True):
            seen = watching.get(id(run))
            marks.append(seen.marks(r.chosen, cap) if seen is not None else None)
    return [RunReplay(slim(r.chosen), slim(r.lower), slim(r.upper)) for r in done], marks


def _replay_chunk(h: HarnessConfig, indices: list[int], marked: bool
                  ) -> tuple[list[tuple[Replay, Replay, Replay]], list[RunMarks | None]]:
    """In a worker: :func:`_replay_here` of the forked evaluator's runs,
    each replay without its run (the parent has it)."""
    assert _EVALUATOR is not None
    done, marks = _replay_here(_EVALUATOR, h, indices, marked)
    return [tuple(replace(x, run=None) for x in (r.chosen, r.lower, r.upper))  # type: ignore
            for r in done], marks


def fidelity(replays: Sequence[Replay | Stopped]) -> str:
    """How exact a replayed row is: exact when the candidate only stopped
    runs; runs where it intervened in a way the recording cannot answer (a
    nudge, a retry, a rejected claim) were followed as recorded, an upper
    bound on their cost, and are counted."""
    diverged = sum(r.diverged for r in replays)
    if not diverged:
        return f"exact on {len(replays):,} recorded runs"
    return (f"{len(replays):,} recorded runs; {diverged:,} diverged where the harness "
            "intervened and were followed as recorded (an upper bound on their cost)")


def apply(h: HarnessConfig, s: Setting) -> HarnessConfig:
    """``h`` with the setting's budgets and detector (validated)."""
    doc = h.model_dump(mode="json")
    for knob, value in s:
        if knob == "detector":
            doc["detector"]["enabled"] = bool(value)
            if value:
                doc["detector"]["repeat_threshold"] = int(value)
        else:
            doc["budgets"][FIELDS[knob]] = value
    return HarnessConfig.model_validate(doc)


class ReplayEvaluator:
    """Replays the recorded ``runs`` under the harness in force ``h`` (once)
    and under candidates (:meth:`evaluate`).

    A candidate that only tightens budgets changes a run only where one of the
    harness's budget checks refuses (:class:`~sim.harness.budgets.Limits`, the
    one home of those rules: nothing else in the harness reads a budget), and
    the run is the same as in force up to there. So a candidate's replays are
    the baseline's, except for the runs it could stop (:meth:`could_stop`),
    which the replay in force answers where it can (:mod:`sim.tuning.stops`:
    the candidate's Limits called on the counters noted before each step call
    in force, one pass for every candidate) and the real harness loop replays
    again where it cannot: the replays, and every row made of them, are those
    of a replay of every run."""

    def __init__(self, runs: list[RecordedRun], h: HarnessConfig, workers: int = 1) -> None:
        self.harness_in_force = h
        if not runs:
            raise InputError("the trace folder holds no runs")
        if h.conversation.enabled:  # replay answers text turns itself (reply_to_user)
            h = h.model_copy(update={"conversation": h.conversation.model_copy(
                update={"enabled": False})})
        self.runs = runs
        self.harness = h
        self.prices_for = CataloguePrices(h)
        template = harness_params(h, WorldParams())
        self.pricing = price_models(runs, template, self.prices_for)
        """Each call's prices: a setting's budgets do not change them, so
        they are found once, over every run (as a replay of them all does)."""
        self.workers = workers if workers > 1 and len(runs) >= MIN_PARALLEL else 1
        self._pool: Any = None
        try:
            self.baseline, self.marks = self._replay(h, list(range(len(runs))), marked=True)
        except BaseException:
            self.close()
            raise
        self.base_success = np.array([r.chosen.outcome == SUCCEEDED for r in self.baseline])
        self.base_cost = np.array([r.chosen.cost_usd for r in self.baseline])
        self.base_tokens = _tokens([as_stopped(r.chosen) for r in self.baseline])
        self.price_basis = Counter(r.chosen.basis for r in self.baseline)
        """Runs per basis of their one price (:mod:`sim.cost.recorded`)."""
        self._groups: dict[tuple[Any, ...], list[int]] = {}
        self._largest_prompt: list[int] = []
        self._group_of: list[tuple[Any, ...]] = []
        for i, (run, item) in enumerate(zip(runs, self.baseline, strict=True)):
            params = run_params(template, run, None, None, self.pricing)
            key = (params.model, params.prices, params.model_prices)
            self._groups.setdefault(key, []).append(i)
            self._group_of.append(key)
            state = item.chosen.state
            self._largest_prompt.append(max(max(item.chosen.prompt_counts, default=0),
                                            state.context_tokens))
        self.base_read = [as_stopped(r.chosen) for r in self.baseline]
        """What tune reads of each run's replay in force."""
        self.redriven = 0
        """Runs replayed again for candidates (all candidates so far)."""
        self.marked = 0
        """Runs a candidate could stop answered by the marks (all candidates so far)."""

    def _replay(self, h: HarnessConfig, indices: list[int], marked: bool = False
                ) -> tuple[list[RunReplay], list[RunMarks | None]]:
        """The runs ``indices`` replayed under ``h`` (:func:`replay_runs`),
        each :func:`slim`, with their marks when ``marked``; in ``workers``
        forked processes, contiguous chunks each, when there are enough runs
        (the same replays either way)."""
        if self.workers == 1 or len(indices) < MIN_PARALLEL:
            return _replay_here(self, h, indices, marked)
        if self._pool is None:
            global _EVALUATOR
            _EVALUATOR = self  # the workers' copy of the runs, shared by the fork
            self._pool = multiprocessing.get_context("fork").Pool(self.workers)
        size = -(-len(indices) // (4 * self.workers))
        chunks = [indices[k:k + size] for k in range(0, len(indices), size)]
        out: list[RunReplay] = []
        marks: list[RunMarks | None] = []
        for part, (done, seen) in zip(chunks, self._pool.starmap(_replay_chunk, [
                (h, c, marked) for c in chunks]), strict=True):
            for i, r in zip(part, done, strict=True):  # the runs, attached again
                out.append(RunReplay(*(replace(x, run=self.runs[i]) for x in r)))
            marks.extend(seen)
        return out, marks

    def close(self) -> None:
        """Stop the worker processes (if any were started)."""
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None

    def could_stop(self, h: HarnessConfig) -> list[int]:
        """The runs (indices, ascending) that the harness ``h`` (the harness in
        force with tighter budgets) could end differently: those where a
        check of ``h``'s :class:`~sim.harness.budgets.Limits` refuses on the
        run's final state in force with its largest prompt and the output cap
        (each budget check's quantities only grow along a run, so a check that
        refuses anywhere in the run refuses there too), and those that
        compacted (a compaction's prompt is not among the steps')."""
        template = harness_params(h, WorldParams())
        out: list[int] = []
        for indices in self._groups.values():
            first = self.runs[indices[0]]
            limits = Limits(run_params(template, first, None, None, self.pricing))
            cap = template.max_output_tokens
            for i in indices:
                state = self.baseline[i].chosen.state
                if state.compactions:
                    out.append(i)
                    continue
                try:
                    limits.check_before_step(state)
                    limits.check_usage(state)
                    limits.check_before_model_call(state, self._largest_prompt[i], cap)
                except LimitExceeded:
                    out.append(i)
        return sorted(out)

    def replays(self, s: Setting) -> list[Stopped]:
        """What tune reads of each run's replay under the setting ``s``
        (:class:`~sim.tuning.stops.Stopped`): the replay in force's where
        ``s`` cannot change the run (:meth:`could_stop`), else where the
        marks say it stops (:func:`~sim.tuning.stops.first_stop`), else
        replayed again."""
        h = apply(self.harness, s)
        out = list(self.base_read)
        again = self.could_stop(h)
        if again and answerable(self.harness, h):
            again = self._marked(h, again, out)
        if again:
            self.redriven += len(again)
            for i, item in zip(again, self._replay(h, again)[0], strict=True):
                out[i] = as_stopped(item.chosen)
        return out

    def _marked(self, h: HarnessConfig, indices: list[int], out: list[Stopped]) -> list[int]:
        """Answer the runs ``indices`` under ``h`` from their marks, in
        ``out``; return those the marks cannot answer."""
        template = harness_params(h, WorldParams())
        left: list[int] = []
        limits_of: dict[tuple[Any, ...], Limits] = {}
        for i in indices:
            marks = self.marks[i]
            if marks is None or not marks.exact:
                left.append(i)
                continue
            run = self.runs[i]
            key = self._group_of[i]
            limits = limits_of.get(key)
            if limits is None:
                limits = limits_of[key] = Limits(
                    run_params(template, run, None, None, self.pricing))
            j, limit = first_stop(limits, marks, probe_state(marks.model))
            if j == UNSURE:
                left.append(i)
            elif j != SAME:
                out[i] = stopped(run, marks, j, limit)
            self.marked += j != UNSURE
        return left

    def needs(self) -> dict[str, np.ndarray]:
        """What each run needed for the harness in force to admit every call
        it made (see :mod:`sim.tuning.knobs`): steps (model calls), prompt
        tokens, and USD (the largest spend before a call plus that call's
        worst case, each call at the prices its replay charges it:
        :func:`~sim.drivers.replay.pricing.priced_calls`)."""
        template = harness_params(self.harness, WorldParams())
        steps, tokens, money = [], [], []
        for item in self.baseline:
            r = item.chosen
            steps.append(r.state.turns)
            tokens.append(r.state.prompt_tokens)
            params = run_params(template, r.run, None, None, self.pricing)
            spent, need = 0.0, 0.0
            for call, usd in zip(r.run.calls, priced_calls(params, r.run), strict=True):
                prices = params.prices_for(call.model or params.model)
                need = max(need, spent + worst_case_cost(prices, call.usage.prompt_tokens,
                                                         params.max_output_tokens))
                spent += usd
            money.append(need)
        return {"steps": np.array(steps, dtype=float), "tokens": np.array(tokens, dtype=float),
                "money": np.array(money, dtype=float)}

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
        rows = []
        for base, c, run in zip(self.base_read, self.replays(s), self.runs, strict=True):
            b = base
            if c.stopped_at is None or (b.stopped_at is not None
                                        and b.stopped_at <= c.stopped_at):
                continue
            rows.append({
                "run_id": run.run_id, "task_id": run.task_id, "model": run.model,
                "exit": run.exit, "resolved": run.resolved, "outcome_in_force": b.outcome,
                "outcome": c.outcome, "lost_success": b.outcome == SUCCEEDED != c.outcome,
                "stopped_at_call": c.stopped_at, "calls_recorded": len(run.calls),
                "prompt_tokens_at_stop": c.prompt_tokens, "cost_in_force_usd": b.cost_usd,
                "cost_usd": c.cost_usd, "saved_usd": b.cost_usd - c.cost_usd})
        frame = pd.DataFrame(rows, columns=list(STOPPED_COLUMNS))
        return frame.sort_values(["lost_success", "saved_usd"], ascending=[False, False],
                                 kind="stable").reset_index(drop=True)

    def evaluate(self, s: Setting) -> dict[str, Any]:
        """The frontier row of the candidate ``s`` (exact on these runs)."""
        chosen = self.replays(s)
        row = evidence.row(
            base_success=self.base_success,
            success=np.array([r.outcome == SUCCEEDED for r in chosen]),
            cost=np.array([r.cost_usd for r in chosen]), base_cost=self.base_cost,
            time_s=np.array([r.active_s for r in chosen]),
            outcomes=[r.outcome for r in chosen], method=REPLAYED,
            fidelity=fidelity(chosen))
        row["saved_tokens_mean"] = float(np.mean(self.base_tokens - _tokens(chosen)))
        return row


def _tokens(replays: list[Stopped]) -> np.ndarray:
    """Tokens (prompt, output and thinking) each replay's calls spent."""
    return np.array([r.tokens for r in replays], dtype=float)
