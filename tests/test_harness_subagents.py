"""Subagents in the harness: a call of the subagent tool starts child runs
(the same loop), whose outcomes come back as the call's result; caps and
depth are refused to the model as tool errors it sees; a child's failure is
the parent's tool error naming the child's state and reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sim.harness import (
    Budgets,
    HarnessParams,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    agent_loop,
    new_state,
)
from sim.harness.classifier import NEEDS_PLAN, classify_tool_error
from sim.harness.effects import Checkpoint, ChildResult, ChildResults, SpawnRequest, ToolError
from sim.harness.params import ParameterError, SubagentParams
from sim.harness.state import OUTCOMES, HarnessState
from sim.harness.subagents import child_result, child_state, child_tasks

Brain = Callable[[HarnessState, ModelRequest], ModelResponse]


def reply(request: ModelRequest, *content: Any, output: int = 20) -> ModelResponse:
    """A reply whose prompt usage is the counted prompt, ``output`` tokens out."""
    blocks = list(content)
    stop = "tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn"
    return ModelResponse(blocks, Usage(request.prompt_tokens, output), stop, 1.0)


def spawner(tasks: list[str], then_final: bool = True) -> Brain:
    """A root that spawns ``tasks`` in its first step and answers in its
    second; children (depth >= 1) answer at once."""
    def brain(state: HarnessState, request: ModelRequest) -> ModelResponse:
        if state.depth == 0 and state.turns == 0:
            return reply(request, ToolUseBlock("t0", "agent", {"tasks": tasks}, 10))
        return reply(request, TextBlock("done", 7))
    return brain


def drive(params: HarnessParams, state: HarnessState, brain: Brain,
          answer: Callable[[SpawnRequest], ChildResults] | None = None,
          spawns: list[SpawnRequest] | None = None) -> HarnessState:
    """Drive ``agent_loop`` with ``brain`` for the model; a spawn is answered
    by ``answer``, or by running every child with the same loop in turn
    (duration: the longest child's)."""
    loop = agent_loop(params, state)
    result: Any = None
    try:
        while True:
            effect = loop.send(result)
            if isinstance(effect, ModelRequest):
                result = brain(state, effect)
            elif isinstance(effect, Checkpoint):
                result = None
            elif isinstance(effect, SpawnRequest):
                if spawns is not None:
                    spawns.append(effect)
                if answer is not None:
                    result = answer(effect)
                    continue
                results = []
                for child in effect.children:
                    cs = child_state(params.prefix_tokens, params.model, child)
                    final = drive(params, cs, brain, spawns=spawns)
                    results.append(child_result(final, 7, final.wall_s))
                result = ChildResults(results, max(r.duration_s for r in results))
            else:  # pragma: no cover - the tests' models call no other tool
                raise AssertionError(effect)
    except StopIteration as end:
        final_state: HarnessState = end.value
        return final_state


def params(**sub: Any) -> HarnessParams:
    return HarnessParams(system_prompt_tokens=100, max_output_tokens=1_000,
                         context_window=50_000, subagents=SubagentParams(**sub))


def observation(state: HarnessState) -> ToolResultBlock:
    """The first tool result of the run (the spawn call's)."""
    for message in state.messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                return block
    raise AssertionError("no tool result")


def test_children_run_and_their_answers_are_the_tool_result() -> None:
    """Three children run the same loop, each succeeds in one step; the
    parent's tool result holds their answers' tokens (3 x 7) and the parent
    counts 3 children, 0 failed, 3 descendants, and their usage."""
    p = params()
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    spawns: list[SpawnRequest] = []
    final = drive(p, state, spawner(["a", "b", "c"]), spawns=spawns)
    assert (final.status, final.reason) == ("succeeded", "model_complete")
    assert [c.depth for c in spawns[0].children] == [1, 1, 1]
    assert spawns[0].max_concurrent == 20
    block = observation(final)
    assert not block.is_error and block.tokens == 21
    assert (final.children, final.children_failed, final.descendants) == (3, 0, 3)
    # each child: one call, prompt = prefix + 2 + its task ("a": 1 token) ... counted by hand
    child = child_state(p.prefix_tokens, p.model, spawns[0].children[0])
    per_child = child.context_tokens + 20
    assert final.children_tokens == 3 * per_child
    assert final.tool_calls == 1 and final.tool_errors == 0


def test_child_failure_is_the_parents_tool_error_naming_state_and_reason() -> None:
    """A child that ended as budget_exhausted:steps makes the spawn a tool
    error of kind subagent (needs a new plan, not retried, not fatal) whose
    text names 'budget_exhausted:steps'; the successful child's answer tokens
    still come back; the parent goes on and succeeds."""
    p = params()
    state = new_state(p.prefix_tokens, p.model, "go", 10)

    def answer(effect: SpawnRequest) -> ChildResults:
        return ChildResults([ChildResult("succeeded", "verified", 30, 500, 0.01, 4.0),
                             ChildResult("budget_exhausted", "steps", 0, 900, 0.02, 9.0)], 9.0)

    final = drive(p, state, spawner(["a", "b"]), answer)
    block = observation(final)
    assert block.is_error
    assert "subagent 2 ended as budget_exhausted:steps" in block.content
    assert "1 of 2 failed" in block.content
    assert classify_tool_error(ToolError("subagent", "x", 0)) == NEEDS_PLAN
    assert (final.children, final.children_failed, final.tool_errors) == (2, 1, 1)
    assert final.children_tokens == 1_400
    assert final.children_cost_usd == pytest.approx(0.03)
    assert final.active_s == pytest.approx(1.0 + 9.0 + 1.0)  # two model calls + the wait
    assert final.status == "succeeded"


def test_max_total_refuses_the_whole_call_as_a_visible_tool_error() -> None:
    """With max_total 2, a call for 3 children starts none: the model sees a
    permission error naming the cap; no SpawnRequest is yielded."""
    p = params(max_total=2)
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    spawns: list[SpawnRequest] = []
    final = drive(p, state, spawner(["a", "b", "c"]), spawns=spawns)
    block = observation(final)
    assert block.is_error and "cap of 2 per run" in block.content
    assert "permission denied" in block.content
    assert spawns == [] and final.children == 0 and final.tool_errors == 1


def test_max_total_counts_children_across_calls() -> None:
    """max_total 3: a first call of 2 runs, a second call of 2 is refused
    (2 + 2 > 3)."""
    p = params(max_total=3)
    state = new_state(p.prefix_tokens, p.model, "go", 10)

    def brain(s: HarnessState, request: ModelRequest) -> ModelResponse:
        if s.depth == 0 and s.turns < 2:
            return reply(request, ToolUseBlock(f"t{s.turns}", "agent", {"tasks": ["x", "y"]}))
        return reply(request, TextBlock("done", 7))

    final = drive(p, state, brain)
    assert (final.children, final.tool_errors) == (2, 1)


def test_depth_one_children_cannot_spawn() -> None:
    """max_depth 1 (the default): a child that calls the subagent tool gets a
    permission error; its own run goes on and it starts no child."""
    p = params()
    state = new_state(p.prefix_tokens, p.model, "go", 10)

    def brain(s: HarnessState, request: ModelRequest) -> ModelResponse:
        if s.turns == 0:  # root and child alike try to spawn once
            return reply(request, ToolUseBlock("t0", "agent", {"task": "deeper"}))
        return reply(request, TextBlock("done", 7))

    spawns: list[SpawnRequest] = []
    final = drive(p, state, brain, spawns=spawns)
    assert len(spawns) == 1  # only the root's spawn reached the driver
    assert (final.children, final.descendants, final.children_failed) == (1, 1, 0)


def test_depth_two_lets_children_spawn_and_descendants_add_up() -> None:
    """max_depth 2: root -> 1 child -> 1 grandchild; the root counts 1 child
    and 2 descendants."""
    p = params(max_depth=2)
    state = new_state(p.prefix_tokens, p.model, "go", 10)

    def brain(s: HarnessState, request: ModelRequest) -> ModelResponse:
        if s.turns == 0:
            return reply(request, ToolUseBlock("t0", "agent", {"prompt": "deeper"}))
        return reply(request, TextBlock("done", 7))

    final = drive(p, state, brain)
    assert (final.children, final.descendants) == (1, 2)


def test_bad_arguments_are_a_validation_error() -> None:
    """A subagent call without tasks is a validation error the model sees."""
    assert child_tasks({"tasks": []}) is None
    assert child_tasks({"tasks": ["a", ""]}) is None
    assert child_tasks([1]) is None
    assert child_tasks({"task": "a"}) == ["a"]
    p = params()
    state = new_state(p.prefix_tokens, p.model, "go", 10)

    def brain(s: HarnessState, request: ModelRequest) -> ModelResponse:
        if s.turns == 0:
            return reply(request, ToolUseBlock("t0", "agent", {"tasks": "a"}))
        return reply(request, TextBlock("done", 7))

    final = drive(p, state, brain)
    assert "rejected its arguments" in observation(final).content


def test_wrong_number_of_results_fails_the_run_as_invalid_response() -> None:
    """A driver that answers 2 children with 1 result fails the run."""
    p = params()
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    final = drive(p, state, spawner(["a", "b"]),
                  lambda e: ChildResults([ChildResult("succeeded", "verified")], 1.0))
    assert (final.status, final.reason) == ("failed", "invalid_response")


def test_without_subagents_the_tool_is_unknown() -> None:
    """With ``subagents`` null, a call of ``agent`` is an unknown tool, and
    the subagent tool is declared only when set."""
    p = HarnessParams(system_prompt_tokens=100)
    assert all(d.name != "agent" for d in p.tool_definitions)
    assert params().tool_definitions[-1].name == "agent"
    with pytest.raises(ParameterError):
        SubagentParams(max_concurrent=0)


def test_new_budget_reasons_are_in_the_outcome_table() -> None:
    """Session and tenant budgets have their own budget_exhausted reasons."""
    assert {"session", "tenant"} <= OUTCOMES["budget_exhausted"]


def test_child_result_includes_the_childs_descendants() -> None:
    """A child's result counts its own usage plus its descendants'."""
    s = new_state(100, "m", "x", 10)
    s.input_tokens, s.output_tokens, s.money_usd = 1_000, 200, 0.5
    s.children_tokens, s.children_cost_usd, s.descendants = 300, 0.25, 2
    s.status, s.reason = "succeeded", "verified"
    r = child_result(s, 9, 12.0)
    assert (r.tokens, r.cost_usd, r.runs, r.answer_tokens) == (1_500, 0.75, 3, 9)


def test_budgets_do_not_count_childrens_usage_per_run() -> None:
    """Run-scoped budgets are the run's own: a parent with a 3-step budget
    whose child used 100 steps' worth of tokens still runs its 2 steps."""
    p = HarnessParams(system_prompt_tokens=100, max_output_tokens=1_000,
                      context_window=50_000, subagents=SubagentParams(),
                      budgets=Budgets(steps=3, tokens=5_000))
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    final = drive(p, state, spawner(["a"]),
                  lambda e: ChildResults([ChildResult("succeeded", "verified", 5, 10**6)], 1.0))
    assert final.status == "succeeded" and final.children_tokens == 10**6


# ------------------------------------------------- without waiting
def test_without_waiting_results_come_back_as_a_later_message() -> None:
    """wait false: the spawn of 2 returns at once ('started'); before the
    next model call the harness collects (CollectChildren, not waiting) and
    gets one result, shown as a message naming it; at the final answer the
    other still runs, so the harness waits for it (CollectChildren, wait),
    shows it and goes round again; the next answer is taken."""
    p = params(wait=False)
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    collects: list[bool] = []
    loop = agent_loop(p, state)
    effect = next(loop)
    assert isinstance(effect, ModelRequest)
    effect = loop.send(reply(effect, ToolUseBlock("t0", "agent", {"tasks": ["a", "b"]})))
    assert isinstance(effect, SpawnRequest) and effect.wait is False
    effect = loop.send(ChildResults([], 0.0))
    assert isinstance(effect, Checkpoint)
    effect = loop.send(None)
    assert effect.__class__.__name__ == "CollectChildren" and effect.wait is False
    collects.append(effect.wait)
    effect = loop.send(ChildResults([ChildResult("succeeded", "verified", 40)], 0.0))
    assert isinstance(effect, ModelRequest)
    assert "1 subagent(s) ended: subagent succeeded" in effect.messages[-1].content[-1].text
    effect = loop.send(reply(effect, TextBlock("done", 7)))  # a final answer: 1 still runs
    assert effect.__class__.__name__ == "CollectChildren" and effect.wait is True
    effect = loop.send(ChildResults([ChildResult("failed", "model_error")], 5.0))
    assert isinstance(effect, Checkpoint)
    effect = loop.send(None)
    assert isinstance(effect, ModelRequest)  # round again: no collection, nothing pending
    assert "subagent failed:model_error" in effect.messages[-1].content[-1].text
    try:
        loop.send(reply(effect, TextBlock("done", 7)))
    except StopIteration as end:
        final: HarnessState = end.value
    assert (final.status, final.children, final.children_failed) == ("succeeded", 2, 1)
    assert final.pending_children == 0
    assert final.children_outcomes == {"succeeded": 1, "failed:model_error": 1}
    assert final.active_s == pytest.approx(3 * 1.0 + 5.0)  # three calls and the wait


def test_a_collection_with_too_many_results_fails_the_run() -> None:
    """A driver handing back more results than children pending fails the
    run as failed:invalid_response."""
    p = params(wait=False)
    state = new_state(p.prefix_tokens, p.model, "go", 10)
    loop = agent_loop(p, state)
    effect = loop.send(None)
    effect = loop.send(reply(effect, ToolUseBlock("t0", "agent", {"task": "a"})))
    loop.send(ChildResults([], 0.0))
    effect = loop.send(None)  # the collection
    two = [ChildResult("succeeded", "verified"), ChildResult("succeeded", "verified")]
    with pytest.raises(StopIteration) as end:
        loop.send(ChildResults(two, 0.0))
    assert (end.value.value.status, end.value.value.reason) == ("failed", "invalid_response")
