"""Budget checks: refuse a call whose worst case would overshoot a budget.

Called before every model call and every tool call against the counters in
:class:`~sim.harness.state.HarnessState`. The worst case of a model call is
its known prompt plus ``max_output_tokens`` of output, priced at the highest of
the input, cache-read and cache-write prices and of the output and thinking prices, taking
``model_timeout_s`` seconds; the worst case of a tool call is its timeout.
Each check returns the name of the budget that would be overshot (the reason
recorded in ``budget_exhausted:<reason>``), or None.

A provider may still report more than the worst case (a prompt it counted
larger, more output than the cap): :func:`overshot` is checked after every
accounted usage, so such a run ends at once, having spent no more than what
was reported.
"""

from __future__ import annotations

from sim.harness.params import HarnessParams, Prices
from sim.harness.state import HarnessState


def worst_case_cost(prices: Prices, prompt_tokens: int, max_output_tokens: int) -> float:
    """Upper bound in USD of one call with the given prompt and output cap."""
    if prices.tiers:
        prices = prices.at(prompt_tokens)
    think = prices.output if prices.thinking is None else prices.thinking
    per_in = max(prices.input, prices.cache_read, prices.cache_write)
    per_out = max(prices.output, think)
    return (prompt_tokens * per_in + max_output_tokens * per_out) / 1e6


def refuse_model_call(params: HarnessParams, state: HarnessState, prompt_tokens: int,
                      max_output_tokens: int, prices: Prices) -> str | None:
    """The budget the next model call could overshoot, or None if all allow
    it; ``"errors"`` when the run has already shown the model its limit of tool
    errors."""
    b = params.budgets
    if b.tool_errors is not None and state.tool_errors >= b.tool_errors:
        return "errors"
    if (b.tokens is not None and state.input_tokens + state.cache_read_tokens
            + state.cache_write_tokens + prompt_tokens > b.tokens):  # prompt tokens so far
        return "tokens"
    if (b.output_tokens is not None
            and state.output_tokens + state.thinking_tokens + max_output_tokens > b.output_tokens):
        return "output_tokens"
    if (b.money_usd is not None and state.money_usd
            + worst_case_cost(prices, prompt_tokens, max_output_tokens) > b.money_usd):
        return "money"
    if b.active_s is None and b.wall_s is None:  # no time budget
        return None
    return refuse_duration(params, state, params.model_timeout_s)


def refuse_duration(params: HarnessParams, state: HarnessState, seconds: float) -> str | None:
    """The time budget that ``seconds`` more of active time could overshoot, or None."""
    b = params.budgets
    if b.active_s is not None and state.active_s + seconds > b.active_s:
        return "active_time"
    if b.wall_s is not None and state.active_s + state.parked_s + seconds > b.wall_s:
        return "wall_time"
    return None


def refuse_retry(params: HarnessParams, state: HarnessState) -> str | None:
    """``"retries"`` when the run's retry budget is spent, else None."""
    limit = params.budgets.retries
    return "retries" if limit is not None and state.retries >= limit else None


MONEY_TOLERANCE = 1e-9
"""Relative slack of the money check after a call: the worst-case estimate and
the priced usage round differently in the last bits of a float."""


def overshot(params: HarnessParams, state: HarnessState) -> str | None:
    """The budget that the usage reported so far already exceeds (tokens,
    output_tokens or money, in that order), or None. Time budgets are not
    checked here: a call's time is spent once it returns, and the next check
    before any call or tool refuses to go on."""
    b = params.budgets
    if (b.tokens is not None and state.input_tokens + state.cache_read_tokens
            + state.cache_write_tokens > b.tokens):
        return "tokens"
    if (b.output_tokens is not None
            and state.output_tokens + state.thinking_tokens > b.output_tokens):
        return "output_tokens"
    if b.money_usd is not None and state.money_usd > b.money_usd * (1.0 + MONEY_TOLERANCE):
        return "money"
    return None
