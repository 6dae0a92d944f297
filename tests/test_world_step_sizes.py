"""Observations that differ by step (``world.tokens.by_step``): the tool
results and replies answering a run's n-th model call are multiplied by their
step bin's factor, so a first observation can be larger than the rest (issue
38: a repository listing after the first call)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from pydantic import ValidationError
from worldkit import QUIET, simulate

from sim.world.params import StepSizes

PREFIX, OUT, RESULT = 2_000, 50, 100


def scenario(by_step: dict | None, steps: int = 6) -> dict:
    """A deterministic world: fixed sizes, one tool, ``steps`` steps."""
    tokens: dict = {"prefix": PREFIX, "task": 1, "output": OUT, "tool_result": RESULT}
    if by_step is not None:
        tokens["by_step"] = by_step
    return {"name": "steps", "tasks": 1,
            "harness": {"model": "m", "prices": {"input": 1.0, "output": 1.0, "cache_read": 0.1,
                                                     "cache_write": 1.25},
                        "max_output_tokens": OUT, "detector": {"enabled": False},
                        "verifier": {"name": "none"}},
            "world": {"difficulty": {"distribution": "fixed", "steps": steps},
                      "policy": dict(QUIET),
                      "tools": [{"name": "ls", "timeout_s": 100, "definition_tokens": 0,
                                 "duration": {"distribution": "fixed", "median_s": 1.0}}],
                      "tokens": tokens}}


def test_the_first_observation_is_scaled_by_its_step_bin():
    """Step bins [1], [2, 4), [4, ...) with factors 3, 1, 0.5: the prompt
    grows by OUT + 3 R after call 1, OUT + R after calls 2-3 and OUT + R/2
    after the later ones."""
    _, tasks = simulate(scenario({"edges": [1, 2, 4], "observation": [3.0, 1.0, 0.5]}), 1)
    prompts = [c.prompt_tokens for c in tasks[0].log]
    growth = [b - a for a, b in pairwise(prompts)]
    assert growth == [OUT + 3 * RESULT, OUT + RESULT, OUT + RESULT, OUT + RESULT // 2,
                      OUT + RESULT // 2]
    assert [sum(t for _, t, _ in c.results.values()) for c in tasks[0].log[:-1]] == [
        3 * RESULT, RESULT, RESULT, RESULT // 2, RESULT // 2]


def test_without_by_step_every_observation_has_its_drawn_size():
    """No ``by_step``: the prompt grows by OUT + R at every step."""
    _, tasks = simulate(scenario(None), 1)
    prompts = [c.prompt_tokens for c in tasks[0].log]
    assert prompts == [PREFIX + (OUT + RESULT) * n for n in range(6)]


@pytest.mark.parametrize(("fields", "words"), [
    ({"edges": [2], "observation": [1.0]}, "edges must start at 1"),
    ({"edges": [1, 1], "observation": [1.0, 1.0]}, "edges must increase"),
    ({"edges": [1, 3], "observation": [1.0]}, "observation has 1 values for 2 step bins"),
    ({"edges": [1], "observation": [-1.0]}, "greater than or equal to 0"),
])
def test_inconsistent_step_bins_are_refused(fields, words):
    """Bins that do not start at 1 or increase, or factors that do not match
    them, are refused with a message naming the problem."""
    with pytest.raises(ValidationError, match=words):
        StepSizes.model_validate(fields)


def test_the_task_givers_replies_are_scaled_by_their_step_bin():
    """In a conversation whose model only asks questions, the reply to call 1
    is 3 x the reply size and the later ones the reply size."""
    raw = scenario({"edges": [1, 2], "observation": [3.0, 1.0]})
    raw["harness"].update({"conversation": {"enabled": True}, "budgets": {"steps": 4}})
    raw["world"]["policy"] = {**QUIET, "talk": 1.0}
    raw["world"]["user"] = {"reply": 40, "give_up": 0.0}
    _, tasks = simulate(raw, 1)
    assert [c.observation_tokens for c in tasks[0].log[:3]] == [120, 40, 40]
