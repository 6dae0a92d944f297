"""The simulated model's answer to a budget it is shown (world.visible_budget,
an assumption no trace fits yet): the wrap-up share below ``wrap_up_at``
matches ``wrap_up`` within binomial tolerance, a wrapped-up answer is right
with ``wrap_up_success``, the forced final answer with ``finalize_success``,
and a world never shown a budget behaves as if the block were not there."""

from __future__ import annotations

import math
from typing import Any

import pytest
from stats_helpers import within
from worldkit import QUIET, Z, simulate

NEED = 100  # no run finishes its work within the step budget: only wrap-ups answer
STEPS = 20


def _raw(wrap_up: float, *, show: bool = True, on_limit: str = "stop",
         block: bool = True) -> dict[str, Any]:
    world: dict[str, Any] = {"difficulty": {"distribution": "fixed", "steps": NEED},
                             "policy": QUIET}
    if block:
        world["visible_budget"] = {"wrap_up_at": 0.2, "wrap_up": wrap_up,
                                   "wrap_up_success": 0.4, "finalize_success": 0.3}
    return {"harness": {"budgets": {"steps": STEPS}, "verifier": {"name": "oracle"},
                        "visibility": {"show_budget": show, "on_limit": on_limit}},
            "world": world}


@pytest.mark.parametrize("wrap_up", [0.3, 0.7])
def test_the_wrap_up_share_below_the_threshold_is_the_configured_probability(
        wrap_up: float) -> None:
    """With 20 steps, the note before call i (0-based) says 20 - i of 20
    steps are left: a share below 0.2 only for i = 17, 18, 19. There each
    call wraps up (a reply without tool calls) with probability wrap_up,
    within binomial tolerance of the eligible calls; earlier calls never do;
    and the share of wrap-ups that are right (the run succeeds) is
    wrap_up_success (0.4)."""
    records, tasks = simulate(_raw(wrap_up), 400, seed=3)
    eligible = wrapped = early = 0
    for task in tasks:
        for i, call in enumerate(task.log):
            if i > 16:
                eligible += 1
                wrapped += call.tool_calls == 0
            else:
                early += call.tool_calls == 0
    assert early == 0
    assert eligible > 300
    assert within(wrapped / eligible, wrap_up, eligible, z=Z), (wrapped, eligible)
    right = sum(r.state == "succeeded" for r in records)
    assert within(right / wrapped, 0.4, wrapped, z=Z), (right, wrapped)


def test_the_finalize_answer_is_right_with_finalize_success() -> None:
    """on_limit finalize: every run reaches its step limit (it needs 100
    steps), makes the finalize call, and its answer is right, ending as
    succeeded:finalized, with probability finalize_success (0.3)."""
    records, _ = simulate(_raw(0.0, on_limit="finalize"), 600, seed=5)
    finalized = sum(r.reason == "finalized" for r in records)
    assert all(r.reason in ("finalized", "steps") for r in records)
    assert within(finalized / len(records), 0.3, len(records), z=Z), finalized


def test_without_the_block_a_forced_answer_is_wrong() -> None:
    """A world without visible_budget never answers the finalize call right."""
    records, _ = simulate(_raw(0.0, on_limit="finalize", block=False), 100, seed=5)
    assert [r.reason for r in records] == ["steps"] * 100


def test_a_model_never_shown_its_budget_ignores_the_block() -> None:
    """Without show_budget there is no note to read: the runs are the same,
    record for record, as in the world without the block."""
    with_block, _ = simulate(_raw(0.7, show=False), 60, seed=9)
    without, _ = simulate(_raw(0.7, show=False, block=False), 60, seed=9)
    assert with_block == without


def test_the_model_reads_the_smallest_share_the_note_reports() -> None:
    """budget_share takes the smallest left/total of the note's budgets
    (money included), and None from a text that reports none."""
    from sim.world.task import budget_share

    assert budget_share("Budget: 12,000 of 50,000 prompt tokens left; 3 of 30 steps left") \
        == 0.1
    assert budget_share("Budget: $0.25 of $1.00 left; 9 of 10 steps left") == 0.25
    assert budget_share("The task is complete.") is None


def test_a_logistic_wrap_up_matches_its_expected_count() -> None:
    """With wrap_up_slope 20 (wrap_up 0.8, wrap_up_at 0.3) call i (0-based)
    of a 20-step run wraps up with p_i = 0.8 / (1 + exp(20 ((20 - i) / 20 -
    0.3))) at every i: the wrap-ups counted over the calls made are their
    summed p_i within Z standard deviations (sqrt of summed p_i (1 - p_i))."""
    raw = _raw(0.8)
    raw["world"]["visible_budget"].update(wrap_up_at=0.3, wrap_up_slope=20.0)
    _, tasks = simulate(raw, 300, seed=4)
    expected = variance = 0.0
    wrapped = 0
    for task in tasks:
        for i, call in enumerate(task.log):
            p = 0.8 / (1 + math.exp(20 * ((STEPS - i) / STEPS - 0.3)))
            expected += p
            variance += p * (1 - p)
            wrapped += call.tool_calls == 0
    assert variance > 50
    assert abs(wrapped - expected) <= Z * math.sqrt(variance), (wrapped, expected)
