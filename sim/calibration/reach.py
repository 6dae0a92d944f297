"""How far a simulated run came towards each budget: which runs a budget can touch.

A prompt-token, step or money budget (:class:`sim.calibration.ladder.Budget`)
only ends a run: the harness checks it before each model call (the prompt
tokens so far plus the call's prompt; the steps so far; the USD so far plus
the call's worst case, :func:`sim.harness.budgets.worst_case_cost`) and after
each accounted usage, and nothing else reads it; the world never sees it. So
on common random numbers a run whose every check passes under the budget is
the same run with it as without it, and only the others need simulating
again under the budget (:func:`touched`; the ladder's forecast,
:func:`sim.calibration.ladder.forecast_side`).

:class:`WatchedTask` records, per run of the unbudgeted simulation, its
**reach**: the largest ``prompt tokens so far + the request's prompt`` over its
model requests (every purpose: steps, retries, summaries), and the largest
request prompt and output cap, from which :func:`reach_usd` bounds the money
check's largest left-hand side from above (the run's final cost plus the
worst case of its largest request at the highest prices the harness knows).
A run is taken as untouched only when its reach is at most the budget
(steps: fewer steps than the budget). A run whose accounted prompt tokens are
not the ones its requests were answered with (usage the world's model did not
report: a paid grader), and a run that compacted or overflowed its context
window (a budget check passed before a prompt too long to send: no request
shows it), has no reach (NaN) and is always simulated again, as
is every run when the harness checks a paid grader against the budgets or
prices by prompt tiers. The test (``tests/test_calibrate_ladder.py``) holds
the forecast made this way to the forecast of a full re-simulation.

The replay of held-out runs is screened alike from each run's replay without
the budget (:func:`replay_touched`): the harness's own budget checks
(:class:`sim.harness.budgets.Limits`) asked of its final counters and its
largest counted prompt; runs that compacted, and money budgets, are replayed
again.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from sim.harness import effects as fx
from sim.harness.budgets import LimitExceeded, Limits
from sim.harness.effects import ModelResponse
from sim.harness.params import Budgets, HarnessParams
from sim.world.call_log import RecordingTask
from sim.world.streams import Draws
from sim.world.world import World


class WatchedTask(RecordingTask):
    """A :class:`RecordingTask` that also keeps its run's reach (see the module
    docstring): ``spent`` prompt tokens answered so far, ``reach`` the largest
    ``spent + request prompt`` (or ``spent`` after an answer), ``top_prompt``
    and ``top_output`` the largest request prompt and output cap."""

    __slots__ = ("reach", "spent", "top_output", "top_prompt")

    def __init__(self, world: World, streams: tuple[Draws, ...]) -> None:
        super().__init__(world, streams)
        self.spent = 0
        self.reach = 0
        self.top_prompt = 0
        self.top_output = 0

    def respond(self, request: fx.ModelRequest, now: float = 0.0) -> ModelResponse | fx.ModelError:
        """The model's answer (logged as :class:`RecordingTask` logs it), with
        the run's reach updated."""
        prompt = request.prompt_tokens
        self.reach = max(self.reach, self.spent + prompt)
        self.top_prompt = max(self.top_prompt, prompt)
        self.top_output = max(self.top_output, request.max_output_tokens)
        result = super().respond(request, now)
        if isinstance(result, ModelResponse):
            u = result.usage
            self.spent += u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
            self.reach = max(self.reach, self.spent)
        return result


def unscreened(params: Any) -> bool:
    """Whether the harness ``params`` check something the reach does not see
    (a paid grader's worst case against the budgets)."""
    check = params.verifier
    return bool(check.enabled and (check.max_prompt_tokens or check.max_output_tokens))


def reach_usd(params: Any, cost: float, top_prompt: int, top_output: int) -> float:
    """An upper bound of the money check's left-hand side over a run of final
    ``cost`` USD whose largest request had ``top_prompt`` tokens of prompt and
    an output cap of ``top_output`` (NaN when prompt tiers make prices depend
    on the prompt)."""
    from sim.harness.budgets import worst_case_cost

    table = [params.prices, *(p for _, p in params.model_prices)]
    if params.retry.fallback_prices is not None:
        table.append(params.retry.fallback_prices)
    if any(p.tiers for p in table) or not math.isfinite(cost):
        return math.nan
    return cost + max(worst_case_cost(p, top_prompt, top_output) for p in table)


def touched(kind: str, value: float, steps: np.ndarray, reach_tokens: np.ndarray | None,
            reach_money: np.ndarray | None) -> np.ndarray:
    """Per run, whether a ``kind`` budget (``tokens``, ``steps``, ``money_usd``)
    of ``value`` may end it (True also when its reach is unknown)."""
    if kind == "steps":
        return steps >= value
    reach = reach_tokens if kind == "tokens" else reach_money if kind == "money_usd" else None
    if reach is None:
        return np.ones(steps.size, dtype=bool)
    return ~(reach <= value)  # NaN: unknown, touched


def replay_touched(budget: Any, replay: Any, params: HarnessParams) -> bool:
    """Whether ``budget`` (a :class:`sim.calibration.ladder.Budget`) may end a
    replay that ran without it as ``replay`` (a
    :class:`sim.drivers.replay.replayed.Replay`) did, asked of the harness's
    own checks (:class:`sim.harness.budgets.Limits`, of ``params``: the
    replay's harness with the budget, only the budget's kind kept, so a
    check of another budget the run already met is not taken for this one):
    a step or prompt-token budget may end it when a check refuses on the
    replay's final state with the largest prompt the harness counted for a
    request (its steps' prompts, and the context it ended with, a request the
    recording may not have answered) and the output cap (each check's
    quantities only grow along a run, so a check that refuses anywhere in it
    refuses there too; a finalize reserve, ``on_limit: finalize``, counts as
    the harness counts it). Prompt tokens also when it compacted (a summary's
    prompt is not counted there); money: always (prices differ by run)."""
    state = replay.state
    kind = budget.kind
    if kind not in ("steps", "tokens") or (kind == "tokens" and state.compactions):
        return True
    only = Budgets(**{kind: getattr(params.budgets, kind)})
    limits = Limits(replace(params, budgets=only, shared_budgets=()))
    try:
        limits.check_before_step(state)
        limits.check_usage(state)
        limits.check_before_model_call(state, max([state.context_tokens, *replay.prompt_counts]),
                                       params.max_output_tokens)
    except LimitExceeded:
        return True
    return False
