"""Where a tighter budget stops a run, from one replay of it in force.

A candidate that only tightens the budgets of the harness in force (``tokens``,
``money_usd``, ``steps``) runs the same loop on the same recorded answers, so
its replay of a run is the in-force replay's up to the first check of its
:class:`~sim.harness.budgets.Limits` that refuses, and ends there. The replay
in force is watched once (:class:`StopMarks`, a pump observer): before each
step's model call it notes the counters the checks read (the run's
:class:`~sim.harness.state.HarnessState` usage) and the driver's (calls
answered, tool calls due and run, interventions). :func:`first_stop` then
calls the candidate's own checks (``check_usage``, ``check_before_step``,
``check_before_model_call``: the rules' one home) on those counters, mark by
mark, and :func:`stopped` reads the run as the replay driver would have ended
it there (:func:`~sim.drivers.replay.driver.ending`).

**When the one pass is exact.** The marks answer a candidate exactly when its
first refusal is one of the checks made before a step's model call, and no
usage counted before it was already past a budget (then ``check_usage`` would
have ended the run after that call). They do not answer, and the run is
replayed again by the real harness loop (:func:`first_stop` returns
:data:`UNSURE`), when:

- ``check_usage`` refuses at a mark or on the final counters (a provider
  reported more than a call's worst case: the run ends after that call);
- no mark refuses but a budget stopped the run in force before its
  recording ended (the candidate may name another budget), or it ended at
  the top of a loop iteration (its last effect a checkpoint) where the
  candidate's step checks refuse. (A budget that refused only once the
  recording had ended leaves the run read as recorded whatever the budget:
  the candidate's reading is the one in force.)
- the run is not :attr:`RunMarks.exact`: it compacted (a compaction's call
  is checked too, and the prompt after it is no recorded one), a step's call
  was tried again, its model changed, or it has children (a session, whose
  budgets are shared);
- the harness is not one the marks describe (:func:`answerable`): a finalize
  or ask ``on_limit`` (a refusal leads to a call the recording lacks), a
  budget shown to the model (the note's text depends on the budget), shared
  budgets, or a candidate that changes more than those three budgets.

Everything else about the run (what it spent, its outcome) is then the
driver's own, read at the mark: the calls answered and their recorded
prices (:attr:`~sim.drivers.replay.driver.RunDriver.costs`), the state's
counters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.drivers.replay import Replay
from sim.drivers.replay.driver import RunDriver, ending, step_calls
from sim.harness import effects as fx
from sim.harness.budgets import LimitExceeded, Limits
from sim.harness.state import BUDGET_EXHAUSTED, HarnessState
from sim.scenario.model import HarnessConfig
from sim.traces.model import RunRecord

SAME = -1
""":func:`first_stop`: the candidate ends the run as the harness in force does."""
UNSURE = -2
""":func:`first_stop`: the marks cannot answer; replay the run again."""

_FIELDS = ("turns", "tool_errors", "input_tokens", "cache_read_tokens", "cache_write_tokens",
           "output_tokens", "thinking_tokens", "money_usd", "active_s", "parked_s")
"""The state's counters a mark holds (those the budget checks read), in order;
then the step call's prompt and output cap, and the driver's calls answered,
tool calls of the last answered response run and due, and interventions."""
_WIDTH = len(_FIELDS) + 6
_BUDGETS = ("tokens", "money_usd", "steps")
"""The budgets a candidate the marks answer may change."""


def answerable(in_force: HarnessConfig, candidate: HarnessConfig) -> bool:
    """Whether the marks of replays under ``in_force`` answer ``candidate``:
    stop-on-limit, no budget shown, no shared budgets, and the two differ in
    no field but ``budgets.tokens``, ``budgets.money_usd`` and ``budgets.steps``."""
    if (in_force.visibility.on_limit != "stop" or in_force.visibility.show_budget
            or in_force.shared_budgets):
        return False
    a, b = in_force.model_dump(mode="json"), candidate.model_dump(mode="json")
    for doc in (a, b):
        for name in _BUDGETS:
            doc["budgets"].pop(name, None)
    return bool(a == b)


@dataclass
class RunMarks:
    """One run's marks from its replay in force: ``rows`` (one per step's
    model call, in order: the counters of ``_FIELDS``, the call's prompt and
    output cap, then the driver's calls answered, tool calls run and due, and
    interventions), ``end`` (the final counters, the final context as the
    prompt), ``top_end`` (its last effect was a checkpoint: the loop ended at
    the top of an iteration, not by a budget once the recording had ended),
    ``budget_end`` (a budget stopped it before its recording ended),
    ``exact`` (see the module docstring), ``model`` (the state's), each
    answered call's cost (``costs``, USD, one price) and price at the run's
    prices (``priced``), the indices of the run's recorded step calls
    (``steps``: :func:`~sim.drivers.replay.driver.step_calls`) and the
    number of its recorded calls (``calls_recorded``): what
    :func:`stopped` reads of the run besides its recorded ``exit`` and
    ``resolved``."""

    rows: np.ndarray
    end: tuple[float, ...]
    top_end: bool
    budget_end: bool
    exact: bool
    model: str
    costs: np.ndarray
    priced: np.ndarray
    steps: np.ndarray
    calls_recorded: int


class StopMarks:
    """A pump observer (:class:`~sim.harness.pump.Observer`) of one replay in
    force: notes a mark before each step's model call (see :class:`RunMarks`);
    :meth:`marks` reads them once the replay has ended."""

    __slots__ = ("driver", "rows", "top", "exact", "model")

    def __init__(self, driver: RunDriver) -> None:
        self.driver = driver
        self.rows: list[tuple[float, ...]] = []
        self.top = False
        self.exact = True
        self.model = driver.state.model

    def effect(self, effect: Any) -> None:
        """Before each step's first try, note the counters the checks saw."""
        kind = type(effect)
        self.top = kind is fx.Checkpoint
        if kind is not fx.ModelRequest:
            return
        if effect.purpose != "step" or effect.attempt or effect.model != self.model:
            self.exact = False
            return
        d = self.driver
        self.rows.append((*counters(d.state), effect.prompt_tokens, effect.max_output_tokens,
                          len(d.costs), d.step_run, d.step_due, len(d.interventions)))

    def result(self, effect: Any, result: Any) -> None:
        """Nothing: the counters are read before the next call."""

    def end(self, state: HarnessState) -> None:
        """Nothing: :meth:`marks` reads the end from the replay."""

    def marks(self, replay: Replay, cap: int) -> RunMarks:
        """The run's marks, given its replay in force and the output cap."""
        d, state = self.driver, replay.state
        by_budget = state.status == BUDGET_EXHAUSTED
        return RunMarks(
            np.array(self.rows, dtype=float).reshape(-1, _WIDTH),
            (*counters(state), state.context_tokens, cap, 0, 0, 0, 0),
            self.top and not (by_budget and replay.stopped_at is None),
            by_budget and replay.stopped_at is not None,
            self.exact and not state.compactions and state.model == self.model,
            self.model, np.array(d.costs, dtype=float), np.array(d.priced, dtype=float),
            np.array(step_calls(replay.run), dtype=np.int64), len(replay.run.calls))


def counters(s: HarnessState) -> tuple[float, ...]:
    """The state's counters the budget checks read (``_FIELDS``, in order)."""
    return (s.turns, s.tool_errors, s.input_tokens, s.cache_read_tokens, s.cache_write_tokens,
            s.output_tokens, s.thinking_tokens, s.money_usd, s.active_s, s.parked_s)


def load_counters(probe: HarnessState, row: list[float]) -> None:
    """Set ``probe``'s counters to a mark's."""
    (probe.turns, probe.tool_errors, probe.input_tokens, probe.cache_read_tokens,
     probe.cache_write_tokens, probe.output_tokens, probe.thinking_tokens) = map(int, row[:7])
    probe.money_usd, probe.active_s, probe.parked_s = row[7], row[8], row[9]


def pack(marks: list[RunMarks]) -> None:
    """Hold the arrays of ``marks`` (one chunk's runs) in one array per field,
    each run's a view of it: fewer, larger blocks of memory for the many runs
    a tune keeps."""
    for name in ("rows", "costs", "priced", "steps"):
        parts = [getattr(m, name) for m in marks]
        if not parts:
            return
        whole = np.concatenate(parts)
        at = 0
        for m, part in zip(marks, parts, strict=True):
            setattr(m, name, whole[at:at + len(part)])
            at += len(part)


def probe_state(model: str) -> HarnessState:
    """A state for the checks to read a mark from (its counters set by :func:`first_stop`)."""
    return HarnessState(model=model)


def first_stop(limits: Limits, marks: RunMarks, probe: HarnessState, start: int = 0
               ) -> tuple[int, str]:
    """Where the run's replay under ``limits`` ends: ``(j, limit)`` when the
    checks before step call ``j`` refuse, naming the budget; ``(SAME, "")``
    when it ends as in force; ``(UNSURE, "")`` when the marks cannot say
    (module docstring). ``probe``: a state whose model is the run's;
    ``start``: the marks before step call ``start`` are known to pass these
    checks (a tighter candidate's passed them) and are not checked again."""
    for j, row in enumerate(marks.rows[start:].tolist(), start):
        load_counters(probe, row)
        try:
            limits.check_usage(probe)
        except LimitExceeded:
            return UNSURE, ""
        try:
            limits.check_before_step(probe)
            limits.check_before_model_call(probe, int(row[10]), int(row[11]))
        except LimitExceeded as refused:
            return j, refused.limit
    if marks.budget_end:
        return UNSURE, ""
    end = list(marks.end)
    load_counters(probe, end)
    try:
        limits.check_usage(probe)
        if marks.top_end:
            limits.check_before_step(probe)
            limits.check_before_model_call(probe, int(end[10]), int(end[11]))
    except LimitExceeded:
        return UNSURE, ""
    return SAME, ""


@dataclass
class Stopped:
    """A run's replay ended by a budget at a mark (:func:`stopped`): what tune
    reads of a :class:`~sim.drivers.replay.Replay`, with the same meanings."""

    outcome: str
    status: str
    reason: str
    stopped_at: int | None
    cost_usd: float
    priced_usd: float
    calls: int
    active_s: float
    prompt_tokens: int
    tokens: int
    turns: int
    diverged: bool


def stopped(run: RunRecord, marks: RunMarks, j: int, limit: str) -> Stopped:
    """The run's replay ended by the budget ``limit`` before step call ``j``
    (a mark): its outcome as the driver reads it
    (:func:`~sim.drivers.replay.driver.ending`) and its counters there.
    ``run``: the recorded run or its fields alone (its calls are not read:
    the marks hold its step calls)."""
    row = marks.rows[j].tolist()
    turns, calls = int(row[0]), int(row[_WIDTH - 4])
    interventions = int(row[_WIDTH - 1])
    stopped_at, status, reason, outcome = ending(
        run, marks.steps.tolist(), (), "harness", BUDGET_EXHAUSTED, limit, turns,
        row[_WIDTH - 3] < row[_WIDTH - 2])
    prompt = int(row[2]) + int(row[3]) + int(row[4])
    return Stopped(outcome, status, reason, stopped_at,
                   math.fsum(marks.costs[:calls].tolist()),
                   math.fsum(marks.priced[:calls].tolist()), calls, row[8], prompt,
                   prompt + int(row[5]) + int(row[6]), turns, interventions > 0)


def as_stopped(r: Replay) -> Stopped:
    """The same reading of a whole replay."""
    s = r.state
    return Stopped(r.outcome, r.status, r.reason, r.stopped_at, r.cost_usd, r.priced_usd,
                   r.calls, s.active_s, s.prompt_tokens,
                   s.prompt_tokens + s.output_tokens + s.thinking_tokens, s.turns, r.diverged)


__all__ = ["SAME", "UNSURE", "RunMarks", "StopMarks", "Stopped", "answerable", "as_stopped",
           "counters", "first_stop", "load_counters", "pack", "probe_state", "stopped"]
