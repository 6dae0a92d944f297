"""A tenant-level money budget in the DES: checked before each model call
against the spend committed so far (calls in flight included), with the
overshoot that concurrency lets through, against cases computed by hand."""

from __future__ import annotations

import math

import pytest

from sim.bad_input import InputError
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.tenant_budget import TenantLedger
from sim.scenario.model import validate
from sim.sweeps.cells import build_cell, cells_of

# seed 001's prices: $3 per million input tokens, $15 per million output tokens
INPUT, OUTPUT = 3.0 / 1e6, 15.0 / 1e6


def test_ledger_admits_on_committed_spend_and_overshoots_by_the_calls_in_flight():
    """By hand: budget $1.00; four runs ask at once with prompts costing $0.30.
    Three are admitted (committed $0.30, $0.60, $0.90), the fourth is refused
    ($1.20 > $1.00). Each admitted call then costs $0.45 ($0.30 of prompt,
    $0.15 of output): the tenant spends $1.35, $0.35 over its budget (the
    three outputs in flight), and every later call is refused."""
    ledger = TenantLedger(1.00)
    assert [ledger.admit(run, 0.30) for run in range(4)] == [True, True, True, False]
    assert ledger.committed_usd == pytest.approx(0.90)
    assert ledger.peak_in_flight == 3
    for run in range(3):
        ledger.settle(run, 0.45)
    assert ledger.spent_usd == pytest.approx(1.35)
    assert ledger.overshoot_usd == pytest.approx(0.35)
    assert not ledger.admit(0, 0.01)
    assert ledger.summary()["refused_calls"] == 2


def test_ledger_settle_counts_only_the_increase_of_a_runs_spend():
    """Settling twice with the same run spend adds nothing; a failed call
    (no spend) releases its in-flight prompt cost."""
    ledger = TenantLedger(1.0)
    assert ledger.admit(7, 0.2)
    ledger.settle(7, 0.25)
    ledger.settle(7, 0.25)
    assert ledger.spent_usd == pytest.approx(0.25)
    assert ledger.admit(7, 0.2)
    ledger.settle(7, 0.25)  # the call failed: nothing spent
    assert ledger.in_flight == {} and ledger.spent_usd == pytest.approx(0.25)


def _scenario(tasks: int, tenant: dict, arrivals: str = "batch", seed: int = 1) -> dict:
    return {"name": "tenant", "tasks": tasks, "seed": seed, "engine": "des",
            "harness": {"prices": "seed001", "max_output_tokens": 600,
                        "verifier": {"name": "none"}},
            "world": {}, "des": {"arrivals": {"kind": arrivals},
                                 "tenants": [{"name": "a", **tenant}]}}


def _run(doc: dict):
    scenario = validate(doc, "tenant")
    cell = build_cell(cells_of(scenario)[0])
    return DesEngine(cell, scenario.des,
                     arrival_schedule(scenario.des, scenario.tasks, scenario.seed)).run()


def test_des_tenant_budget_overshoot_matches_the_case_computed_by_hand():
    """Five runs arrive at once; every first call has seed 001's 12,000-token
    prompt and 600 tokens of output: $0.036 of prompt, $0.045 in all. With a
    $0.08 tenant budget the first two calls are admitted ($0.072 committed),
    the next three refused ($0.108 > $0.08), and every second call too (at
    least $0.045 spent + $0.036 in flight + a larger prompt > $0.08). So the
    tenant spends 2 x $0.045 = $0.09: $0.01 over its budget, which is the
    output of the two calls that were in flight together."""
    prompt = 12_000 * INPUT
    call = prompt + 600 * OUTPUT
    budget = 0.08
    admitted = math.floor(budget / prompt)
    result = _run(_scenario(5, {"money_usd": budget}))
    ledger = result.tenant_budgets["a"]
    assert admitted == 2 and ledger["admitted_calls"] == admitted
    assert ledger["spent_usd"] == pytest.approx(admitted * call)
    assert ledger["overshoot_usd"] == pytest.approx(admitted * call - budget)
    assert ledger["peak_in_flight"] == admitted
    charged = sorted(r.cost_usd for r in result.records)
    assert charged == pytest.approx([0.0, 0.0, 0.0, call, call])
    assert {r.outcome for r in result.records} == {"failed:model_error"}


def test_a_budget_that_never_binds_changes_nothing():
    """With a tenant budget no run can reach, every record is the one
    without a tenant budget (same outcome, steps, tokens and cost)."""
    loose = _run(_scenario(40, {"money_usd": 1e9}, "poisson"))
    none = _run(_scenario(40, {}, "poisson"))
    assert none.tenant_budgets == {}
    assert loose.tenant_budgets["a"]["refused_calls"] == 0
    assert [(r.outcome, r.steps, r.input_tokens, r.cost_usd) for r in loose.records] == [
        (r.outcome, r.steps, r.input_tokens, r.cost_usd) for r in none.records]


@pytest.mark.parametrize("budget", [0.5, 2.0, 8.0])
def test_overshoot_is_at_most_the_outputs_of_the_calls_in_flight(budget):
    """Whatever the budget, the tenant's total ends at most ``peak calls in
    flight x the largest part of a call that is not its prompt`` above it
    (here every call's output is 600 tokens at $15/M and there is no cache),
    and never above it by more; a budget that binds refuses calls."""
    result = _run(_scenario(60, {"money_usd": budget}, "batch", seed=3))
    ledger = result.tenant_budgets["a"]
    assert ledger["refused_calls"] > 0
    assert ledger["spent_usd"] <= budget + ledger["peak_in_flight"] * 600 * OUTPUT + 1e-12
    assert ledger["spent_usd"] == pytest.approx(sum(r.cost_usd for r in result.records))


def test_the_tenant_budget_must_be_positive():
    """A zero or negative tenant budget is a clear input error naming the field."""
    with pytest.raises(InputError) as error:
        validate(_scenario(5, {"money_usd": -1}), "tenant.yaml")
    assert "des.tenants[0].money_usd" in str(error.value)
