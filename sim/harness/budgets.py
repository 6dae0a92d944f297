"""Budgets: the one home of every budget and limit rule of a run.

:class:`Limits` is a run's budgets (:class:`~sim.harness.params.Budgets`
and the model timeout), read once when the run starts, with the checks that
hold its usage to them. The usage is the run's counters in
:class:`~sim.harness.state.HarnessState` (tokens, USD, seconds, retries,
tool errors), which a call's usage adds itself to
(:meth:`~sim.harness.state.HarnessState.add_usage`); a call is priced by
:meth:`~sim.harness.prices.Prices.call_cost`. Every check that refuses
raises one exception, :class:`LimitExceeded`, naming the budget (the
reason recorded as ``budget_exhausted:<limit>``). Like pydantic-ai's
``UsageLimits.check_before_request``, the checks run before a call, against
its worst case:

- before a step (:meth:`Limits.check_before_step`): the step budget;
- before a model call (:meth:`Limits.check_before_model_call`): the tool
  errors shown to the model, prompt tokens, output tokens, USD and time,
  in that order. The worst case of a call is its known prompt plus
  ``max_output_tokens`` of output, priced at the highest of the input,
  cache-read and cache-write prices and of the output and thinking prices
  (:func:`worst_case_cost`), taking ``model_timeout_s`` seconds;
- before a tool call or a wait (:meth:`Limits.check_duration`): the time
  budgets, against the effect's longest duration;
- before a harness retry (:meth:`Limits.may_retry`): the retry budget.

Budgets shared with other runs (a session's, a tenant's window) are
:class:`~sim.harness.scopes.Ledger` objects given to the run: a
``before_call`` ledger reserves the call's worst case in
:meth:`Limits.check_before_model_call`, a ``between_turns`` ledger is
checked in :meth:`Limits.check_before_step`, and every accounted usage is
charged to all of them (:meth:`Limits.charge`); a hard one that refuses
ends the run as ``budget_exhausted:session`` or ``budget_exhausted:tenant``.

With ``visibility.on_limit: finalize`` (:mod:`sim.harness.on_limit`) every
check before a step's call also reserves room for the one tool-free call
that ends the run: the step budget keeps its last step for it, and the
tokens, output tokens, money and time budgets must hold both this call's
worst case and a finalize call's (its prompt this one's plus its output cap
plus :data:`FINALIZE_NOTE`, its output ``finalize_output_tokens``). Tool
results the model has not yet asked for cannot be reserved: a finalize call
they leave no room for is refused like any other call, so a budget is still
never passed. :meth:`Limits.budget_note` is the text a model that is shown
its budget reads (``visibility.show_budget``).

A provider may still report more than the worst case (a prompt it counted
larger, more output than the cap): :meth:`Limits.check_usage` is checked
after every accounted usage, so such a run ends at once, having spent no
more than what was reported.

Units: tokens are counts, money is USD, time is seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sim.harness.messages import Usage, estimate_tokens
from sim.harness.params import HarnessParams, Prices
from sim.harness.scopes import Ledger
from sim.harness.state import BUDGET_EXHAUSTED, HarnessState, Stop

MONEY_TOLERANCE = 1e-9
"""Relative slack of the money check after a call: the worst-case estimate and
the priced usage round differently in the last bits of a float."""


FINALIZE_NOTE = ("[harness] A limit has been reached: give your final answer now, "
                 "without calling any tool.")
"""The message before the finalize call (``visibility.on_limit: finalize``)."""

FINALIZE_NOTE_TOKENS = estimate_tokens(FINALIZE_NOTE)
"""Its size in tokens, reserved with the finalize call's prompt."""

FINALIZABLE = frozenset({"steps", "tokens", "output_tokens", "money"})
"""The budgets a finalize call or a human's extension answers (``on_limit``
finalize or ask); the others always stop the run."""


class LimitExceeded(Stop):
    """The one exception of a budget that refuses: ``limit`` names it (one of
    the ``budget_exhausted`` reasons of :data:`~sim.harness.state.OUTCOMES`).
    A :class:`~sim.harness.state.Stop`, so the loop ends the run as
    ``budget_exhausted:<limit>``."""

    def __init__(self, limit: str, **detail: Any) -> None:
        # no message: it is never shown (caught in agent_loop), and cheap to raise
        self.status = BUDGET_EXHAUSTED
        self.reason = limit
        self.detail = detail

    @property
    def limit(self) -> str:
        """The budget that refused (the outcome's reason)."""
        return self.reason


def worst_case_cost(prices: Prices, prompt_tokens: int, max_output_tokens: int) -> float:
    """Upper bound in USD of one call with the given prompt and output cap:
    every prompt token at the dearest prompt price (uncached, cache read or
    cache write), every output token at the dearest of output and thinking,
    at the tier the prompt reaches."""
    if prices.tiers:
        prices = prices.at(prompt_tokens)
    think = prices.output if prices.thinking is None else prices.thinking
    per_in = max(prices.input, prices.cache_read, prices.cache_write)
    per_out = max(prices.output, think)
    return (prompt_tokens * per_in + max_output_tokens * per_out) / 1e6


def _scope_spent(ledger: Ledger, rule: str) -> LimitExceeded:
    """The refusal of a hard shared budget: ``budget_exhausted:tenant`` for a
    tenant's, ``budget_exhausted:session`` for a session's, with the rule."""
    if ledger.budget.scope == "tenant":
        return LimitExceeded("tenant", rule=rule)
    return LimitExceeded("session", rule=rule)


class Limits:
    """A run's budgets, read once from its parameters, and the checks that
    hold the run's usage (the counters of a
    :class:`~sim.harness.state.HarnessState`) to them. An unset count or
    time budget is held as ``math.inf``, which nothing exceeds; the money
    budget stays None when unset (it needs the call's prices).

    ``timed`` says whether a time budget (active or wall) is set, so a check
    of durations that no budget limits can be skipped by the caller.

    ``ledgers``: the shared budgets' ledgers this run charges (given by the
    driver; None: one private ledger per ``params.shared_budgets``);
    ``started_s``: the driver's clock when the run started, so the run's
    ``now`` is ``started_s`` plus its wall seconds (a tenant window's
    clock)."""

    __slots__ = ("params", "steps", "tokens", "output_tokens", "money_usd", "active_s",
                 "wall_s", "retries", "tool_errors", "timed", "model_timeout_s", "ledgers",
                 "before_call", "between_turns", "started_s", "reserve_out", "extended")

    def __init__(self, params: HarnessParams, ledgers: Sequence[Ledger] | None = None,
                 started_s: float = 0.0) -> None:
        b = params.budgets
        inf = math.inf
        self.params = params
        self.steps: float = inf if b.steps is None else b.steps
        self.tokens: float = inf if b.tokens is None else b.tokens
        self.output_tokens: float = inf if b.output_tokens is None else b.output_tokens
        self.money_usd: float | None = b.money_usd
        self.active_s: float = inf if b.active_s is None else b.active_s
        self.wall_s: float = inf if b.wall_s is None else b.wall_s
        self.retries: float = inf if b.retries is None else b.retries
        self.tool_errors: float = inf if b.tool_errors is None else b.tool_errors
        self.timed: bool = b.active_s is not None or b.wall_s is not None
        self.model_timeout_s: float = params.model_timeout_s
        self.ledgers: tuple[Ledger, ...] = (
            tuple(Ledger(b) for b in params.shared_budgets) if ledgers is None
            else tuple(ledgers))
        self.before_call = tuple(g for g in self.ledgers if g.budget.check == "before_call")
        self.between_turns = tuple(g for g in self.ledgers
                                   if g.budget.check == "between_turns")
        self.started_s = started_s
        finalize = params.visibility.on_limit == "finalize"
        self.reserve_out = (min(params.visibility.finalize_output_tokens,
                                params.max_output_tokens) if finalize else 0)
        """Output cap of the finalize call the checks leave room for (0: none)."""
        if finalize:
            self.steps -= 1  # the last step is the finalize call's
        self.extended = False
        """Whether a human has extended the budgets (once per run)."""

    def now(self, state: HarnessState) -> float:
        """The driver's clock for this run: ``started_s`` plus its wall seconds."""
        return self.started_s + state.active_s + state.parked_s

    # ------------------------------------------------------------ before
    def check_before_step(self, state: HarnessState) -> None:
        """Raise LimitExceeded("steps") when the run has made its budget of
        model steps (turns)."""
        if state.turns >= self.steps:
            raise LimitExceeded("steps")
        if self.between_turns:
            now = self.now(state)
            for ledger in self.between_turns:
                if ledger.spent(now):
                    raise _scope_spent(ledger, "between_turns")

    def check_before_model_call(self, state: HarnessState, prompt_tokens: int,
                                max_output_tokens: int) -> None:
        """Raise LimitExceeded naming the first budget that a model call of
        ``prompt_tokens`` and at most ``max_output_tokens`` could overshoot:
        ``"errors"`` once the model has been shown its limit of tool errors,
        then ``"tokens"`` (prompt tokens so far plus this prompt),
        ``"output_tokens"``, ``"money"`` (spend plus the call's
        :func:`worst_case_cost` at the prices of ``state.model``), and the
        time budgets for ``model_timeout_s`` more seconds. With a finalize
        reserve (``reserve_out``) each of those must also hold the finalize
        call after this one: a prompt of this one's plus its output cap plus
        :data:`FINALIZE_NOTE`, ``reserve_out`` output tokens, their worst-case
        price and ``model_timeout_s`` more seconds."""
        s = state
        if s.tool_errors >= self.tool_errors:
            raise LimitExceeded("errors")
        reserve = self.reserve_out  # room for a finalize call after this one (0: none)
        final_prompt = prompt_tokens + max_output_tokens + FINALIZE_NOTE_TOKENS if reserve else 0
        if s.input_tokens + s.cache_read_tokens + s.cache_write_tokens + prompt_tokens \
                + final_prompt > self.tokens:
            raise LimitExceeded("tokens")
        if s.output_tokens + s.thinking_tokens + max_output_tokens + reserve \
                > self.output_tokens:
            raise LimitExceeded("output_tokens")
        money = self.money_usd
        if money is not None:
            prices = self.params.prices_for(s.model)
            worst = worst_case_cost(prices, prompt_tokens, max_output_tokens)
            if reserve:
                worst += worst_case_cost(prices, final_prompt, reserve)
            if s.money_usd + worst > money:
                raise LimitExceeded("money")
        if self.timed:
            self.check_duration(s, self.model_timeout_s * (2 if reserve else 1))
        if self.before_call:
            self._reserve(s, prompt_tokens, max_output_tokens)

    def finalizing(self) -> None:
        """Drop the finalize reserve: the call it was kept for is being made."""
        self.reserve_out = 0

    def extend(self, share: float) -> None:
        """Add ``share`` of each set budget to it (a human's yes to
        ``on_limit: ask``; an integer budget rounded down); once per run."""
        b = self.params.budgets
        for name, value in (("steps", b.steps), ("tokens", b.tokens),
                            ("output_tokens", b.output_tokens),
                            ("money_usd", b.money_usd), ("active_s", b.active_s),
                            ("wall_s", b.wall_s)):
            if value is not None:
                added = value * share
                setattr(self, name, getattr(self, name)
                        + (int(added) if isinstance(value, int) else added))
        self.extended = True

    def budget_note(self, state: HarnessState) -> str:
        """What the set budgets leave, as the model is told it
        (``visibility.show_budget``): ``"Budget: 12,000 of 50,000 prompt
        tokens left; 3 of 30 steps left"``, each budget as ``<left> of
        <total>`` (never below 0; the step total is the steps the model may
        take, the money in USD); empty when no such budget is set."""
        s = state
        parts = []
        for used, total, what in (
                (s.input_tokens + s.cache_read_tokens + s.cache_write_tokens, self.tokens,
                 "prompt tokens"),
                (s.output_tokens + s.thinking_tokens, self.output_tokens, "output tokens"),
                (s.turns, self.steps + (1 if self.reserve_out else 0), "steps")):
            if total != math.inf:
                parts.append(f"{max(0, int(total - used)):,} of {int(total):,} {what} left")
        if self.money_usd is not None:
            parts.append(f"${max(0.0, self.money_usd - s.money_usd):,.2f} of "
                         f"${self.money_usd:,.2f} left")
        if self.active_s != math.inf:
            parts.append(f"{max(0.0, self.active_s - s.active_s):,.0f} of "
                         f"{self.active_s:,.0f} seconds left")
        return "Budget: " + "; ".join(parts) if parts else ""

    def _reserve(self, state: HarnessState, prompt_tokens: int, max_output_tokens: int
                 ) -> None:
        """Reserve the call's worst case (tokens, USD) in every ``before_call``
        ledger; raise LimitExceeded naming the scope of the first that refuses."""
        now = self.now(state)
        usd = worst_case_cost(self.params.prices_for(state.model), prompt_tokens,
                              max_output_tokens)
        for ledger in self.before_call:
            if not ledger.reserve(id(state), prompt_tokens + max_output_tokens, usd, now):
                raise _scope_spent(ledger, "before_call")

    def charge(self, state: HarnessState, usage: Usage, usd: float) -> int:
        """Charge a call's ``usage`` and price (``usd``) to every shared
        ledger, releasing its reservation; return the alerts this raised."""
        now = self.now(state)
        tokens = usage.prompt_tokens + usage.output_tokens + usage.thinking_tokens
        return sum(ledger.charge(id(state), tokens, usd, now) for ledger in self.ledgers)

    def release(self, state: HarnessState) -> None:
        """Drop the run's reservations in every shared ledger (it ended)."""
        for ledger in self.ledgers:
            ledger.release(id(state))

    def check_duration(self, state: HarnessState, seconds: float) -> None:
        """Raise LimitExceeded("active_time" or "wall_time") when ``seconds``
        more of active time could overshoot a time budget."""
        if state.active_s + seconds > self.active_s:
            raise LimitExceeded("active_time")
        if state.active_s + state.parked_s + seconds > self.wall_s:
            raise LimitExceeded("wall_time")

    def may_retry(self, state: HarnessState) -> bool:
        """Whether the run's retry budget allows one more harness retry."""
        return state.retries < self.retries

    # ------------------------------------------------------------- after
    def check_usage(self, state: HarnessState) -> None:
        """Raise LimitExceeded naming the budget that the usage counted so far
        already exceeds (tokens, output_tokens or money, in that order). Time
        budgets are not checked here: a call's time is spent once it returns,
        and the next check before any call or tool refuses to go on."""
        s = state
        if s.input_tokens + s.cache_read_tokens + s.cache_write_tokens > self.tokens:
            raise LimitExceeded("tokens")
        if s.output_tokens + s.thinking_tokens > self.output_tokens:
            raise LimitExceeded("output_tokens")
        money = self.money_usd
        if money is not None and s.money_usd > money * (1.0 + MONEY_TOLERANCE):
            raise LimitExceeded("money")

    # -------------------------------------------------------- time left
    def time_left(self, state: HarnessState) -> float:
        """Seconds of active time the time budgets leave (math.inf when
        none is set; may be negative once one is overshot)."""
        return min(self.active_s - state.active_s, self.wall_s - state.wall_s)

    def wall_left(self, state: HarnessState) -> float | None:
        """Seconds the wall-time budget leaves (at least 0), or None when it
        is unset: the longest a run may stay parked for an approval."""
        if self.params.budgets.wall_s is None:
            return None
        return max(0.0, self.wall_s - state.wall_s)
