"""Configured against actual: how far one run's spend can pass its budgets.

Harnesses are configured with a money and a token budget per run, yet runs
pass them. The usual check compares the spend *so far* with the limit before
a call and adds the call's cost after it, so the last call admitted lands
wholly past the line. :func:`worst_overshoot` gives, for a harness's
parameters, the worst case one run can reach past each budget, term by term:

- ``last_call``: the last model call admitted just under the limit, at the
  worst case of its output: its prompt (the history before the step's tool
  results; at most the context window less the tool results below) and
  ``max_output_tokens`` of output (plus the thinking budget when thinking is
  on), priced at the highest input-side and output-side prices
  (:func:`sim.harness.budgets.worst_case_cost`);
- ``parallel_tool_calls``: the results of one step's parallel tool calls
  (``parallel_tool_calls`` results of ``tool_result_tokens`` each), which
  enter that last prompt after the check was made;
- ``verifier``: a model grader's check of a claimed success, when the harness
  does not check it against the budget (its stated worst case: prompt and
  output caps);
- ``compaction``: a summary call made when the history is compacted (a prompt
  up to the context window, ``summary_max_tokens`` of output), when
  compaction can happen (a threshold is set or emergency compaction is on).

Units: USD for ``money_usd``, prompt tokens for ``tokens`` (the token budget
counts prompt tokens over all calls).

``checked="worst_case"`` is sim's own harness (:mod:`sim.harness.budgets`):
every model call, verifier and compaction call included, is refused before it
is made when its worst case would pass a budget, so every term is zero; the
tests hold the harness to that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sim.harness.budgets import worst_case_cost
from sim.harness.params import HarnessParams

CHECKS: tuple[str, ...] = ("spent", "worst_case")
"""``spent``: spend so far against the limit before a call, cost added after
(the usual harness); ``worst_case``: the call's worst case against the limit
before it is made (sim's harness)."""
TERMS: tuple[str, ...] = ("last_call", "parallel_tool_calls", "verifier", "compaction")


@dataclass(frozen=True)
class Overshoot:
    """The worst case past one budget: ``budget`` (``money_usd`` or
    ``tokens``), the configured ``limit`` (None: no such budget), each term of
    the module docstring and their ``total`` (USD or tokens)."""

    budget: str
    limit: float | None
    terms: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """The sum of the terms (USD or tokens)."""
        return math.fsum(self.terms.values())

    @property
    def worst_actual(self) -> float | None:
        """The most one run can reach: the limit plus the total (None: no budget)."""
        return None if self.limit is None else self.limit + self.total


def worst_overshoot(params: HarnessParams, *, parallel_tool_calls: int = 1,
                    tool_result_tokens: int = 0, checked: str = "spent"
                    ) -> dict[str, Overshoot]:
    """``{"money_usd": Overshoot, "tokens": Overshoot}`` for one run of a
    harness with ``params`` (see the module docstring); ``parallel_tool_calls``
    tool calls per step at most, each result at most ``tool_result_tokens``."""
    if checked not in CHECKS:
        raise ValueError(f"checked must be one of {CHECKS}, got {checked!r}")
    if parallel_tool_calls < 0 or tool_result_tokens < 0:
        raise ValueError("parallel_tool_calls and tool_result_tokens must be >= 0")
    budgets = params.budgets
    if checked == "worst_case":
        zero = dict.fromkeys(TERMS, 0.0)
        return {"money_usd": Overshoot("money_usd", budgets.money_usd, dict(zero)),
                "tokens": Overshoot("tokens", _limit(budgets.tokens), dict(zero))}
    window = params.context_window
    results = min(window, parallel_tool_calls * tool_result_tokens)
    history = window - results
    output = params.max_output_tokens + (params.thinking.budget_tokens
                                         if params.thinking.enabled else 0)
    prices = params.prices
    verifier = params.verifier
    grader = verifier.enabled and (verifier.max_prompt_tokens or verifier.max_output_tokens)
    compacts = (params.context.compact_at_tokens is not None
                or params.context.emergency_compaction)
    summary = params.context.summary_max_tokens
    per_in = max(prices.at(window).input, prices.at(window).cache_read,
                 prices.at(window).cache_write)
    money = {
        "last_call": worst_case_cost(prices, window, output) - results * per_in / 1e6,
        "parallel_tool_calls": results * per_in / 1e6,
        "verifier": worst_case_cost(prices, verifier.max_prompt_tokens,
                                    verifier.max_output_tokens) if grader else 0.0,
        "compaction": worst_case_cost(prices, window, summary) if compacts else 0.0,
    }
    tokens = {"last_call": float(history), "parallel_tool_calls": float(results),
              "verifier": float(verifier.max_prompt_tokens) if grader else 0.0,
              "compaction": float(window) if compacts else 0.0}
    return {"money_usd": Overshoot("money_usd", budgets.money_usd, money),
            "tokens": Overshoot("tokens", _limit(budgets.tokens), tokens)}


def _limit(value: int | None) -> float | None:
    return None if value is None else float(value)


def overshoot_lines(found: dict[str, Overshoot]) -> list[str]:
    """The worst cases as sentences (USD to the cent, tokens as counts)."""
    lines = []
    for key, o in found.items():
        money = key == "money_usd"

        def show(x: float, money: bool = money) -> str:
            return f"${x:,.2f}" if money else f"{x:,.0f} tokens"

        limit = "no budget" if o.limit is None else f"budget {show(o.limit)}"
        terms = ", ".join(f"{t.replace('_', ' ')} {show(v)}" for t, v in o.terms.items() if v)
        lines.append(f"{key}: {limit}; worst case past it {show(o.total)}"
                     + (f" ({terms})" if terms else ""))
    return lines
