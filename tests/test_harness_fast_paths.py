"""The harness's per-step fast paths give what its general paths give.

A step's model request is built field by field (:func:`step_request`) and
the common answers (a well-formed reply, a tool's result) are accepted on
quick tests. Each must agree with the path it shortens. (Budget and price
rules have no fast paths: each has one home, see test_harness_rule_homes.py.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from sim.harness.budgets import Limits
from sim.harness.effects import ModelRequest, ModelResponse
from sim.harness.guards import Run, Stop, account
from sim.harness.messages import TextBlock, ThinkingBlock, ToolUseBlock, Usage
from sim.harness.model_calls import model_request, step_request
from sim.harness.params import Budgets, HarnessParams, ThinkingConfig
from sim.harness.prices import Prices
from sim.harness.protocol import content_problem, usable_reply, well_formed_response
from sim.harness.state import new_state


def _run(params: HarnessParams) -> Run:
    state = new_state(params.prefix_tokens, params.model, "Do it.", 12)
    state.turns = 3
    return Run(params, state, None, None, {}, Limits(params),  # type: ignore[arg-type]
               params.cache_ttl_s,
               params.thinking.budget_tokens if params.thinking.enabled else 0)


@pytest.mark.parametrize("params", [
    HarnessParams(),
    HarnessParams(system_prompt="Be brief.", temperature=0.5, top_p=0.9, tool_choice="any",
                  prompt_cache="1h", provider="openai", max_output_tokens=4000),
    HarnessParams(prompt_cache="5m", thinking=ThinkingConfig(enabled=True, budget_tokens=1024)),
])
def test_step_request_is_the_general_request(params: HarnessParams) -> None:
    run = _run(params)
    state = run.state
    fast = step_request(run)
    assert fast is not None
    general = model_request(run, state.messages, state.context_tokens,
                            params.max_output_tokens, "step")
    assert type(fast) is ModelRequest
    # every field is set (an unset slot would raise here) and equal
    for f in dataclasses.fields(ModelRequest):
        assert getattr(fast, f.name) == getattr(general, f.name), f.name
    assert fast == general
    assert fast.messages is state.messages


@pytest.mark.parametrize("budgets", [Budgets(tokens=5000), Budgets(tokens=5000, steps=9,
                                                                  money_usd=100.0)])
def test_step_request_checks_budgets_then_the_window(budgets: Budgets) -> None:
    params = HarnessParams(budgets=budgets, context_window=3000, max_output_tokens=500,
                           system_prompt_tokens=100)
    run = _run(params)
    run.state.context_tokens = 2999
    assert step_request(run) is not None
    run.state.context_tokens = 3001  # past the window, within the budget: compact
    assert step_request(run) is None
    run.state.input_tokens = 2000  # 2000 + 3001 > 5000: the budget ends the run first
    with pytest.raises(Stop) as end:
        step_request(run)
    assert (end.value.status, end.value.reason) == ("budget_exhausted", "tokens")


def _reply(content: object, usage: object = None, latency: object = 1.5) -> ModelResponse:
    return ModelResponse(content, usage if usage is not None else Usage(10, 5),  # type: ignore[arg-type]
                         "end_turn", latency)  # type: ignore[arg-type]


@pytest.mark.parametrize("reply", [
    _reply([TextBlock("done", 5)]),
    _reply([ToolUseBlock("t1", "read", {"a": 1}, 5)]),
    _reply([ThinkingBlock("hm", 2, "sig"), TextBlock("done", 3)]),
    _reply([ToolUseBlock("t1", "read", {}, 5), ToolUseBlock("t1", "read", {}, 5)]),
    _reply([ToolUseBlock("", "read", {}, 5)]),
    _reply([ToolUseBlock("t1", None, {}, 5)]),  # type: ignore[arg-type]
    _reply([TextBlock(None, 5)]),  # type: ignore[arg-type]
    _reply([TextBlock("x", -1)]),
    _reply([TextBlock("x", True)]),
    _reply(["not a block"]),
    _reply([]),
    _reply(None),
    _reply("text"),
    _reply([TextBlock("x", 1)], Usage(1.0, 2)),  # type: ignore[arg-type]
    _reply([TextBlock("x", 1)], Usage(-1, 2)),
    _reply([TextBlock("x", 1)], Usage(True, 2)),
    _reply([TextBlock("x", 1)], latency=math.nan),
    _reply([TextBlock("x", 1)], latency=-0.5),
    _reply([TextBlock("x", 1)], latency=2e9),
    _reply([TextBlock("x", 1)], latency=3),
])
def test_usable_reply_accepts_only_what_both_checks_accept(reply: ModelResponse) -> None:
    both = well_formed_response(reply) and content_problem(reply.content) is None
    assert usable_reply(reply) == both


@pytest.mark.parametrize("prices", [
    Prices(), Prices(input=0.1, output=0.7, cache_read=0.0, cache_write=1.3, thinking=2.9),
    Prices(tiers=((20_000, Prices(input=6.0, output=22.5, cache_read=0.6, cache_write=7.5)),))])
def test_account_prices_a_call_as_prices_call_cost(prices: Prices) -> None:
    """A call's price is exactly ``prices.call_cost`` of its usage (``cost``
    at the tier its prompt reaches), and the counters add its tokens."""
    rng = np.random.default_rng(3)
    params = HarnessParams(prices=prices)
    for _ in range(300):
        run = _run(params)
        start = float(rng.uniform(0.0, 5.0))
        run.state.money_usd = start
        counts = [int(c) for c in rng.integers(0, 40_000, 5) * (rng.random(5) < 0.6)]
        before = (run.state.input_tokens, run.state.output_tokens, run.state.cache_read_tokens,
                  run.state.cache_write_tokens, run.state.thinking_tokens)
        account(run, params.model, Usage(*counts))
        tier = prices.at(counts[0] + counts[2] + counts[3])
        assert run.state.money_usd == start + tier.cost(*counts)
        after = (run.state.input_tokens, run.state.output_tokens, run.state.cache_read_tokens,
                 run.state.cache_write_tokens, run.state.thinking_tokens)
        assert [a - b for a, b in zip(after, before, strict=True)] == counts


def test_objects_built_field_by_field_equal_constructed_ones() -> None:
    """Every message, tool-result block and tool request the fast paths build
    has all its fields set and equals the one its constructor builds."""
    from sim.engines.direct import run_task
    from sim.harness.effects import ToolRequest
    from sim.harness.messages import Message, ToolResultBlock
    from sim.scenario.model import load_scenario
    from sim.sweeps.cells import build_cell, cells_of

    cell = build_cell(cells_of(load_scenario("scenarios/bounded.yaml"))[0])
    requests: list[ToolRequest] = []
    states: list[Any] = []

    class Requests:  # an observer of the pump: keeps the tool requests
        def effect(self, effect: Any) -> None:
            if type(effect) is ToolRequest:
                requests.append(effect)

        def result(self, effect: Any, result: Any) -> None:
            pass

        def end(self, state: Any) -> None:
            pass

    def tracer(index: int, state: Any, clock: Any) -> Any:
        states.append(state)
        return Requests()

    for i in range(3):
        assert run_task(cell, i, tracer=tracer).steps > 0
    assert requests
    for r in requests:
        assert r == ToolRequest(r.call, r.timeout_s, r.attempt, r.turn)
    for state in states:
        for message in state.messages:
            assert message == Message(message.role, message.content, message.tokens)
            for block in message.content:
                if type(block) is ToolResultBlock:
                    assert block == ToolResultBlock(block.tool_use_id, block.content,
                                                    block.is_error, block.tokens)
