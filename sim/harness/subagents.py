"""Subagents: the model starts child runs by calling the subagent tool.

A call of the tool named ``params.subagents.tool`` (default ``agent``) is not
run as a tool: the harness turns it into one
:class:`~sim.harness.effects.SpawnRequest` and the driver runs each child with
the SAME loop (:func:`~sim.harness.loop.agent_loop`), the parent's parameters
(so its own limits and its own detector) and a fresh state from
:func:`child_state`; the parent waits for them all. The rules, in order:

1. arguments: ``{"tasks": [str, ...]}`` (one child per task) or
   ``{"task": str}`` / ``{"prompt": str}`` (one child, Claude Code's Task
   tool); anything else is a validation error the model sees;
2. depth: a run at depth ``max_depth`` (a child when ``max_depth`` is 1)
   cannot start children: a permission error the model sees;
3. total: a call that would take the run's own children past ``max_total``
   is refused whole: a permission error the model sees;
4. the children run, at most ``max_concurrent`` at once (the driver queues
   the rest); the parent's active time grows by the seconds it waited;
5. the results: every child that succeeded gives its answer (its tokens are
   the tool result's); a child that ended in any other state makes the call
   a tool error (kind ``subagent``, classified like any other tool error:
   the model is told to plan around it) whose text names each failed
   child's ``state:reason``. A driver that answers with a wrong number of
   results fails the run as ``failed:invalid_response``;
6. without waiting (``wait`` false), the spawn's tool result says the
   children started; before each later model call the harness collects the
   results of those that have ended (:func:`collect`) and shows them to the
   model as a message (the same texts: answers, or the failed children's
   ``state:reason``); a final answer while children still run is not taken:
   the harness waits for them, shows their results and goes round again.

Every refusal and failure counts as a tool error of the subagent tool (the
error budget and "do without it" apply). The run's state counts its
children, the failed ones, its descendants and what they used
(``children_tokens``, ``children_cost_usd``); its own token and money
counters stay its own. Budgets shared by a parent and its descendants are
session ledgers (:mod:`sim.harness.scopes`), which the driver hands to every
run of the tree.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NoReturn

from sim.harness import events as ev
from sim.harness.classifier import actionable_tool_error
from sim.harness.effects import (
    ChildResult,
    ChildSpec,
    CollectChildren,
    Effect,
    Result,
    SpawnRequest,
    ToolError,
)
from sim.harness.guards import Run, check_abort, receive, spend
from sim.harness.messages import TextBlock, ToolUseBlock, make_message, text_block
from sim.harness.params import SubagentParams
from sim.harness.state import FAILED, SUCCEEDED, HarnessState, new_state, stop

__all__ = ["child_result", "child_state", "child_tasks", "collect", "spawn"]


def child_tasks(arguments: Any) -> list[str] | None:
    """The children's task statements a subagent call's ``arguments`` ask
    for, or None when they hold none (not an object, no ``tasks`` list of
    non-empty strings, no ``task`` or ``prompt`` string)."""
    if not isinstance(arguments, dict):
        return None
    tasks = arguments.get("tasks")
    if tasks is None:
        one = arguments.get("task", arguments.get("prompt"))
        tasks = [one] if one is not None else None
    if (not isinstance(tasks, list) or not tasks
            or not all(isinstance(t, str) and t.strip() for t in tasks)):
        return None
    return tasks


def child_state(prefix_tokens: int, model: str, child: ChildSpec) -> HarnessState:
    """A fresh state for the child ``child``: its task as the first user
    message (``child.task_tokens`` long) at ``child.depth``."""
    state = new_state(prefix_tokens, model, child.task, child.task_tokens)
    state.depth = child.depth
    return state


def spawn(run: Run, call: ToolUseBlock, rules: SubagentParams
          ) -> Generator[Effect, Result, tuple[str, bool, int]]:
    """Perform the subagent call ``call`` under ``rules`` (see the module
    docstring); return its observation as ``(text, is_error, tokens)``, which
    :func:`~sim.harness.tool_calls.run_tools` shows the model as the call's
    result (an error counted like any tool error)."""
    state = run.state
    tasks = child_tasks(call.input)
    if tasks is None:
        return _refused(call, "validation", "expected {\"tasks\": [task, ...]} or "
                        "{\"task\": task}, each a non-empty string")
    if state.depth >= rules.max_depth:
        return _refused(call, "permission", f"a run at depth {state.depth} cannot start "
                        f"subagents (max_depth {rules.max_depth})")
    cap = rules.max_total
    if cap is not None and state.children + len(tasks) > cap:
        return _refused(call, "permission", f"{len(tasks)} more subagents would pass the "
                        f"cap of {cap} per run ({state.children} started)")
    check_abort(state)
    children = tuple(ChildSpec(task, text_block(task).tokens, state.depth + 1)
                     for task in tasks)
    limits = run.limits
    request = SpawnRequest(call, children, rules.max_concurrent, state.turns, limits.ledgers,
                           limits.now(state), rules.wait)
    answer = receive(request, (yield request))
    results = answer.results
    spend(run, answer.duration_s)
    check_abort(state)  # cancelled while the children ran (a cancelled spawn has no results)
    if not rules.wait:
        if results:
            _wrong_count(len(results), 0)
        state.children += len(children)
        state.pending_children += len(children)
        state.tool_calls += 1
        text = (f"{len(children)} subagent(s) started; their results will come back as a "
                f"message when they end.")
        return text, False, text_block(text).tokens
    if len(results) != len(children):
        stop(FAILED, "invalid_response", diagnostic={
            "effect": "SpawnRequest", "field": "results", "value": f"{len(results)} results",
            "expected": f"{len(children)} (one per child)"})
    _count(state, results)
    state.tool_calls += 1
    failed = [(i, r) for i, r in enumerate(results) if r.status != SUCCEEDED]
    if run.emit:
        run.emit(ev.TOOL_EXECUTED, {"tool": call.name, "success": not failed,
                                    "children": len(results), "children_failed": len(failed),
                                    "duration_s": answer.duration_s, "attempts": 1})
    answers = sum(r.answer_tokens for r in results if r.status == SUCCEEDED)
    if not failed:
        return f"{len(results)} subagent(s) succeeded.", False, answers
    ended = "; ".join(f"subagent {i + 1} ended as {r.status}:{r.reason}" for i, r in failed)
    text, error, tokens = _refused(call, "subagent",
                                   f"{len(failed)} of {len(results)} failed ({ended})")
    return text, error, tokens + answers


def collect(run: Run, wait: bool) -> Generator[Effect, Result, None]:
    """Collect the results of the run's children started without waiting
    that have ended (all of them, waited for, when ``wait``), and show them
    to the model as a message (see the module docstring, rule 6)."""
    state = run.state
    request = CollectChildren(wait, state.turns)
    answer = receive(request, (yield request))
    results = answer.results
    spend(run, answer.duration_s)
    check_abort(state)
    if len(results) > state.pending_children or (wait and
                                                  len(results) != state.pending_children):
        _wrong_count(len(results), state.pending_children)
    if not results:
        return
    state.pending_children -= len(results)
    state.children -= len(results)  # counted when started; _count counts them again
    _count(state, results)
    answers = sum(r.answer_tokens for r in results if r.status == SUCCEEDED)
    ended = "; ".join(f"subagent {r.status}:{r.reason}" if r.status != SUCCEEDED
                      else "subagent succeeded" for r in results)
    text = f"[harness] {len(results)} subagent(s) ended: {ended}."
    state.append(make_message("user", [TextBlock(text, text_block(text).tokens + answers,
                                                 "subagents")]))


def _wrong_count(got: int, expected: int) -> NoReturn:
    """Fail the run: a driver answered with the wrong number of results."""
    stop(FAILED, "invalid_response", diagnostic={
        "effect": "SpawnRequest", "field": "results", "value": f"{got} results",
        "expected": f"{expected}"})


def _count(state: HarnessState, results: list[ChildResult]) -> None:
    """Add the children's outcomes and usage to the parent's state."""
    state.children += len(results)
    state.children_failed += sum(1 for r in results if r.status != SUCCEEDED)
    state.descendants += sum(r.runs for r in results)
    state.children_tokens += sum(r.tokens for r in results)
    state.children_cost_usd += sum(r.cost_usd for r in results)
    outcomes = state.children_outcomes
    for r in results:
        label = SUCCEEDED if r.status == SUCCEEDED else f"{r.status}:{r.reason}"
        outcomes[label] = outcomes.get(label, 0) + 1


def _refused(call: ToolUseBlock, kind: str, what: str) -> tuple[str, bool, int]:
    """A tool error of ``kind`` for the subagent call, as the model reads it
    (:func:`~sim.harness.classifier.actionable_tool_error`)."""
    text = actionable_tool_error(call.name, ToolError(kind, what, 0), 1)
    return text, True, text_block(text).tokens


def child_result(state: HarnessState, answer_tokens: int, duration_s: float) -> ChildResult:
    """The :class:`ChildResult` of a child run that ended in ``state``
    (``answer_tokens``: its final answer's; ``duration_s``: its wall seconds
    on the driver's clock), with its own descendants' usage included."""
    return ChildResult(state.status, state.reason, answer_tokens,
                       state.total_tokens + state.children_tokens,
                       state.money_usd + state.children_cost_usd, duration_s,
                       1 + state.descendants)
