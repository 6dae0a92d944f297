"""The money budget (``harness.budgets.money_usd``) binds, and is never overshot.

Seed 001 / DESIGN.md: budget in tokens or money first; a call that would
overshoot a budget is refused before it is made. The harness checks each
model call against its worst case: the known prompt at the highest of the
input, cache-read and cache-write prices plus ``max_output_tokens`` at the
higher of the output and thinking prices. So no run's cost may ever exceed
its money budget, whatever the prices, caching, recoveries or verifier.

Deterministic runs (the world of ``test_cost_simulated``) check *where* the
budget binds against a step-by-step prediction; stochastic runs (seed 001's
process) check that it binds often and is never overshot. The last tests
pin down overshoots that were found and fixed: a model grader's call checked
against the budgets before it runs, and output plus thinking capped at
``max_output_tokens``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import cost
from sim.engines.cell import Cell
from sim.engines.direct import run_task
from sim.harness.params import Prices
from sim.scenario.model import validate
from sim.sweeps.cells import CellRun, build_cell
from sim.task_record import TaskRecord

SEED001 = cost.NAMED_PRICES["seed001"]
FLAT = {"input": 3.0, "output": 15.0, "cache_read": 3.0, "cache_write": 3.0}  # no cache rates
FAST = settings(max_examples=40, deadline=None)


def deterministic(steps: int, prefix: int, output: int, tool_result: int, *,
                  world: dict | None = None, **harness: object) -> dict:
    """A scenario mapping for the deterministic world: fixed difficulty,
    every policy probability 0, one 1-second tool, seed001 prices, no
    detector, no verifier (``harness`` and ``world`` entries override)."""
    raw_world = {
        "difficulty": {"distribution": "fixed", "steps": steps},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0},
        "tools": [{"name": "run_shell", "timeout_s": 1e6, "definition_tokens": 0,
                   "duration": {"median_s": 1.0, "sigma": 0.0}}],
        "tokens": {"prefix": prefix, "task": 1, "output": output, "tool_result": tool_result},
        **(world or {}),
    }
    raw_harness = {"prices": "seed001", "max_output_tokens": output,
                   "detector": {"enabled": False}, "verifier": {"name": "none"}, **harness}
    return {"name": "test", "seed": 5, "harness": raw_harness, "world": raw_world}


def make_cell(raw: dict) -> Cell:
    return build_cell(CellRun("test", validate(raw, "test"), ()))


def worst_case(prices: Prices, prompt: int, max_output: int) -> float:
    """The harness's documented worst case of one call (USD)."""
    think = prices.output if prices.thinking is None else prices.thinking
    return (prompt * max(prices.input, prices.cache_read, prices.cache_write)
            + max_output * max(prices.output, think)) / 1e6


def step_cost(prices: Prices, n: int, prefix: int, per_step: int, output: int,
              cached: bool) -> float:
    """USD of step n of a deterministic run, as the provider bills it."""
    prompt = prefix + per_step * n
    if not cached:
        return prices.cost(prompt, output)
    if n == 0:
        return prices.cost(0, output, 0, prompt)
    return prices.cost(0, output, prompt - per_step, per_step)


def predicted(steps: int, prefix: int, per_step: int, output: int, prices: Prices,
              budget: float, max_output: int, cached: bool) -> int:
    """Steps a deterministic run takes under a money budget: each step is
    made only if the money spent so far plus its worst case fits the budget."""
    spent = 0.0
    for n in range(steps):
        if spent + worst_case(prices, prefix + per_step * n, max_output) > budget:
            return n
        spent += step_cost(prices, n, prefix, per_step, output, cached)
    return steps


def run_all(cell: Cell, tasks: int) -> list[TaskRecord]:
    return [run_task(cell, i) for i in range(tasks)]


# ------------------------------------------------------------- where it binds
@FAST
@given(st.integers(1, 15), st.integers(1, 6_000), st.integers(1, 1_500), st.integers(0, 2_000),
       st.integers(0, 1_000), st.floats(0.05, 1.2), st.booleans())
def test_money_budget_refuses_exactly_the_first_call_whose_worst_case_overshoots(
        steps, prefix, output, result, spare_output, share, cached):
    """A deterministic run with a money budget of ``share`` of its full
    cost makes exactly the steps whose worst case fits what is left, then
    ends as budget_exhausted:money (or succeeds if all fit); it never spends
    more than the budget."""
    h = output + result
    max_output = output + spare_output
    full = (cost.cached_run_cost if cached else cost.run_cost)(steps, prefix, h, output, SEED001)
    budget = share * full
    cell = make_cell(deterministic(steps, prefix, output, result, max_output_tokens=max_output,
                                   prompt_cache="5m" if cached else None,
                                   budgets={"money_usd": budget}))
    record = run_task(cell, 0)
    want = predicted(steps, prefix, h, output, SEED001, budget, max_output, cached)
    assert record.steps == want
    assert record.outcome == ("succeeded" if want == steps else "budget_exhausted:money")
    assert record.cost_usd <= budget


# ------------------------------------------------------- never overshot (stochastic)
CASES = {  # name: (harness entries, world entries)
    "seed001": ({}, {}),
    "cached": ({"prompt_cache": "5m"}, {}),
    "cached-1h-catalogue": ({"prompt_cache": "1h", "prices": None}, {}),
    "truncations-compaction": ({"max_output_tokens": 1_500, "prompt_cache": "5m"},
                               {"faults": {"max_tokens": 0.1, "rate_limit": 0.05,
                                           "server_error": 0.02}}),
    "thinking": ({"thinking": {"enabled": True, "budget_tokens": 800},
                  "max_output_tokens": 1_400, "prices": {"thinking": 5.0}},
                 {"tokens": {"thinking": 1_000}}),
    "oracle-verifier": ({"verifier": {"name": "oracle"}}, {}),
    "openai-catalogue": ({"model": "gpt-4o", "prices": None, "prompt_cache": "5m"}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_small_money_budget_binds_and_is_never_overshot(case):
    """Seed 001's process under a $0.40 budget per task: many runs end as
    budget_exhausted:money, and no task's cost exceeds $0.40, with prompt
    caching, catalogue prices, truncations and compaction calls, retries,
    thinking and a verifier."""
    harness, world = CASES[case]
    raw = {"name": case, "seed": 21, "world": world,
           "harness": {"prices": "seed001", "max_output_tokens": 600,
                       "prices_date": "2026-01-15", "budgets": {"money_usd": 0.40},
                       **harness}}
    records = run_all(make_cell(raw), 300)
    outcomes = Counter(r.outcome for r in records)
    assert outcomes["budget_exhausted:money"] >= 30, outcomes
    assert max(r.cost_usd for r in records) <= 0.40


@settings(max_examples=25, deadline=None)
@given(st.floats(0.005, 3.0), st.integers(0, 2**32 - 1), st.sampled_from([None, "5m"]),
       st.sampled_from([0.0, 0.2]))
def test_money_budget_is_never_overshot(budget, seed, cache, truncation):
    """For any budget, seed, caching and truncation rate, no task of seed
    001's process costs more than its money budget."""
    raw = {"seed": seed, "world": {"faults": {"max_tokens": truncation}},
           "harness": {"prices": "seed001", "max_output_tokens": 900, "prompt_cache": cache,
                       "budgets": {"money_usd": budget}}}
    for record in run_all(make_cell(raw), 12):
        assert record.cost_usd <= budget, record


# --------------------------------------------------------- overshoots, fixed
def grader_repro(cached: bool, budget_kind: str) -> tuple[TaskRecord, float]:
    """A 5-step deterministic run (P 1,000, O 100, R 100) graded by a model
    grader reading 2,000 + 100 tokens and writing 150; the budget is the
    smallest that lets the final (claiming) step be made."""
    steps, prefix, output, result = 5, 1_000, 100, 100
    h = output + result
    last = prefix + h * (steps - 1)
    if budget_kind == "money":
        spent = sum(step_cost(SEED001, n, prefix, h, output, cached) for n in range(steps - 1))
        budget = spent + worst_case(SEED001, last, output)
        budgets = {"money_usd": budget}
    else:
        budget = cost.input_tokens(steps, prefix, h)
        budgets = {"tokens": budget}
    raw = deterministic(steps, prefix, output, result, prompt_cache="5m" if cached else None,
                        budgets=budgets, world={"grader": {"prompt": 2_000, "output": 150}},
                        verifier={"name": "model_grader",
                                  "options": {"false_accept": 0.0, "false_reject": 0.0}})
    return run_task(make_cell(raw), 0), budget


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "cached"])
def test_grader_call_never_overshoots_the_money_budget(cached):
    """A model grader's call is a model call: it must fit the money budget
    like any other (refused, ending budget_exhausted:money, if it would not)."""
    record, budget = grader_repro(cached, "money")
    assert record.steps == 5
    assert record.cost_usd <= budget, (record.outcome, record.cost_usd, budget)


def test_grader_call_never_overshoots_the_token_budget():
    """Likewise for the prompt-token budget: the grader's prompt counts."""
    record, budget = grader_repro(False, "tokens")
    assert record.steps == 5
    assert record.prompt_tokens <= budget, (record.outcome, record.prompt_tokens, budget)


def test_thinking_never_overshoots_the_money_budget():
    """With thinking enabled, a run whose model thinks up to its budget still
    stays within the money budget (flat prices: the worst case of the first
    step, $0.0045, fits the $0.005 budget; the step bills $0.006)."""
    raw = deterministic(5, 1_000, 100, 100, world={"tokens": {"prefix": 1_000, "task": 1,
                                                              "output": 100, "tool_result": 100,
                                                              "thinking": 100}},
                        thinking={"enabled": True, "budget_tokens": 100},
                        prices=FLAT, budgets={"money_usd": 0.005})
    record = run_task(make_cell(raw), 0)
    assert record.cost_usd <= 0.005, (record.outcome, record.cost_usd)
