"""Configured against actual: the worst case one run can reach past its money
and token budgets, term by term, and the harness's own budgets, which never
overshoot."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.analysis.overshoot import overshoot_lines, worst_overshoot
from sim.engines.direct import run_tasks
from sim.harness.params import Budgets, ContextParams, HarnessParams, Prices, VerifierParams
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of

PRICES = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def _params(**changes) -> HarnessParams:
    base = {"budgets": Budgets(money_usd=1.0, tokens=100_000), "prices": PRICES,
            "context_window": 200_000, "max_output_tokens": 16_000}
    return HarnessParams(**{**base, **changes})


def test_spent_check_worst_case_computed_by_hand():
    """By hand, a check of spend so far before each call, $3.75/M at most on
    the input side and $15/M out, a 200,000-token window, 16,000 tokens of
    output, 4 parallel tool results of 2,000 tokens, a grader of 3,000 + 500
    tokens, emergency compaction on with 2,000-token summaries:
    last call (192,000 x 3.75 + 16,000 x 15) / 1e6 = $0.96, tool results
    8,000 x 3.75 / 1e6 = $0.03, verifier (3,000 x 3.75 + 500 x 15) / 1e6 =
    $0.01875, compaction (200,000 x 3.75 + 2,000 x 15) / 1e6 = $0.78."""
    params = _params(verifier=VerifierParams(True, "model_grader", 3_000, 500, 0.0))
    found = worst_overshoot(params, parallel_tool_calls=4, tool_result_tokens=2_000)
    money = found["money_usd"].terms
    assert money["last_call"] == pytest.approx(0.96)
    assert money["parallel_tool_calls"] == pytest.approx(0.03)
    assert money["verifier"] == pytest.approx(0.01875)
    assert money["compaction"] == pytest.approx(0.78)
    assert found["money_usd"].worst_actual == pytest.approx(1.0 + 0.96 + 0.03 + 0.01875 + 0.78)
    tokens = found["tokens"].terms
    assert tokens == {"last_call": 192_000.0, "parallel_tool_calls": 8_000.0,
                      "verifier": 3_000.0, "compaction": 200_000.0}
    assert any("worst case past it" in line for line in overshoot_lines(found))


def test_terms_vanish_where_the_harness_cannot_make_the_call():
    """No grader, no compaction: only the last call and the tool results remain."""
    params = _params(context=ContextParams(emergency_compaction=False))
    found = worst_overshoot(params, parallel_tool_calls=0)
    assert found["money_usd"].terms["verifier"] == 0.0
    assert found["money_usd"].terms["compaction"] == 0.0
    assert found["tokens"].total == 200_000.0


def test_sims_harness_checks_the_worst_case_so_nothing_passes():
    """Sim's harness refuses a call whose worst case would overshoot: zero past each budget."""
    found = worst_overshoot(_params(), parallel_tool_calls=8, tool_result_tokens=5_000,
                            checked="worst_case")
    assert found["money_usd"].total == 0.0 and found["tokens"].total == 0.0
    with pytest.raises(ValueError):
        worst_overshoot(_params(), checked="later")


def _scenario(money: float | None, tokens: int | None, seed: int) -> dict:
    return {"name": "tight", "tasks": 30, "seed": seed,
            "harness": {"prices": "seed001", "max_output_tokens": 600,
                        "verifier": {"name": "oracle"},
                        "context": {"compact_at_tokens": 30_000},
                        "budgets": {"money_usd": money, "tokens": tokens}},
            "world": {"tools": [{"name": "a", "result_tokens": {"distribution": "lognormal",
                                                                  "median": 900, "sigma": 1.0}}]}}


@settings(max_examples=8, deadline=None)
@given(money=st.one_of(st.none(), st.floats(0.05, 3.0)),
       tokens=st.one_of(st.none(), st.integers(20_000, 600_000)),
       seed=st.integers(0, 10_000))
def test_the_harness_own_per_run_budgets_never_overshoot(money, tokens, seed):
    """Whatever the budgets, with heavy-tailed tool results and compaction
    calls, no run spends more than its money budget or more prompt tokens
    than its token budget."""
    scenario = validate(_scenario(money, tokens, seed), "tight")
    cell = build_cell(cells_of(scenario)[0])
    for record in run_tasks(cell, range(scenario.tasks)):
        if money is not None:
            assert record.cost_usd <= money * (1 + 1e-9)
        if tokens is not None:
            assert record.input_tokens + record.cache_read_tokens + record.cache_write_tokens \
                <= tokens
