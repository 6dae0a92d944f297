"""The exits real runs have, as the world produces them: the task-giver ends
the run (tau2-bench's user_stop) or the model does (agent_stop), a limit on
tool errors, model-API faults that end runs at any step, loops the model
leaves by itself, and tasks that cannot be solved. Shares are checked against
their closed forms within binomial tolerances."""

from __future__ import annotations

import math

import numpy as np
from stats_helpers import within
from worldkit import QUIET, Z, simulate

CHAT = {"prices": "seed001", "detector": {"enabled": False},
        "conversation": {"enabled": True}}


def scenario(need: int, harness=None, **world):
    policy = {**QUIET, **world.pop("policy", {})}
    return {"harness": harness or {"prices": "seed001", "detector": {"enabled": False}},
            "world": {"difficulty": {"distribution": "fixed", "steps": need}, "policy": policy,
                      **world}}


def shares(records) -> dict[str, float]:
    labels = [f"{r.state}:{r.reason}" for r in records]
    return {k: labels.count(k) / len(labels) for k in set(labels)}


def test_the_model_or_the_task_giver_ends_a_finished_conversation():
    """In a conversation, a finished task ends with the model's own marker
    (model_complete) with probability self_end, else the report goes to the
    task-giver, who ends it (user_stop); every run is resolved."""
    n = 1000
    records, _ = simulate(scenario(5, CHAT, policy={"self_end": 0.3}), n)
    s = shares(records)
    assert set(s) == {"succeeded:model_complete", "succeeded:user_stop"}
    assert within(s["succeeded:model_complete"], 0.3, n, z=Z)
    assert all(r.truly_done for r in records)


def test_questions_and_give_ups():
    """Each call is a question to the task-giver with probability talk = 0.5,
    which it answers or gives up on (give_up = 0.2). A run of need N finishes
    unless the task-giver gives up first: P = (p / (1 - (1 - p)(1 - g)))^N with
    p = 0.5 the chance a call is not a question (here N = 4: 0.482)."""
    n, need = 1500, 4
    records, tasks = simulate(scenario(need, CHAT, policy={"talk": 0.5},
                                       user={"give_up": 0.2, "reply": 40}), n)
    resolved = sum(r.truly_done for r in records) / n
    p = (0.5 / (1 - 0.5 * 0.8)) ** need
    assert within(resolved, p, n, z=Z)
    assert all(r.reason == "user_stop" for r in records)
    replies = {c.observation_tokens for t in tasks for c in t.log if not c.tool_calls}
    assert replies <= {0, 40}


def test_tool_error_limit_ends_runs_as_budget_exhausted_errors():
    """With a limit of 2 tool errors, a run ends budget_exhausted:errors exactly
    when its second error was shown before it finished, and then right after."""
    harness = {"prices": "seed001", "detector": {"enabled": False},
               "budgets": {"tool_errors": 2}}
    records, tasks = simulate(scenario(8, harness, policy={"validation": 0.15}), 400)
    ended = 0
    for r, t in zip(records, tasks, strict=True):
        errors = [sum(e for _, _, e in c.results.values()) for c in t.log]
        if r.reason == "errors":
            ended += 1
            assert sum(errors) == 2 and errors[-1] == 1
        else:
            assert sum(errors) < 2 and r.outcome == "succeeded"
    assert 0 < ended < len(records)


def test_persistent_faults_end_runs_at_any_step():
    """A persistent fault (probability f per call) fails the call and its
    retries: a run of N calls survives with probability (1 - f)^N and otherwise
    ends failed:model_error, at a step spread over the whole run."""
    n, need, f = 1500, 5, 0.05
    records, _ = simulate(scenario(need, faults={"persistent": f}), n)
    failed = [r for r in records if r.outcome == "failed:model_error"]
    assert within(len(failed) / n, 1 - (1 - f) ** need, n, z=Z)
    assert {r.steps for r in failed} == set(range(need))
    assert all(r.retries == 0 for r in failed)  # a server error is retried without backoff


def test_loops_the_model_leaves_by_itself():
    """With the detector off, a loop (entered with probability l per fresh
    decision) lasts a geometric number of repeats (mean (1 - s) / s) before the
    model moves on by itself: mean steps N + N l / (1 - l) (1 + (1 - s) / s)."""
    n, need, loop, s = 1500, 6, 0.2, 0.4
    records, _ = simulate(scenario(need, policy={"loop": loop, "self_escape": s}), n)
    steps = np.array([r.steps for r in records])
    expected = need + need * loop / (1 - loop) * (1 + (1 - s) / s)
    assert abs(steps.mean() - expected) <= Z * steps.std(ddof=1) / math.sqrt(n)
    assert all(r.outcome == "succeeded" for r in records)


def test_unsolvable_tasks_run_longer_and_end_unresolved():
    """A share of tasks cannot be solved: their runs take need_scale times the
    need and end with a wrong claim (false_success without a verifier)."""
    n = 1000
    records, _ = simulate(scenario(5, unsolvable={"share": 0.3, "need_scale": 2.0}), n)
    bad = [r for r in records if not r.truly_done]
    assert within(len(bad) / n, 0.3, n, z=Z)
    assert {r.steps for r in bad} == {10} and {r.outcome for r in bad} == {"false_success"}
    assert {r.steps for r in records if r.truly_done} == {5}
