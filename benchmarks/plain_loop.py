"""The plain-loop baseline: seed 001's random process as the plainest Python
there is, with ``random.Random`` and no harness, world or stream objects.

The honest yardstick of per-step speed (issue 14): what the random process
itself costs in CPython. It draws the same kinds of numbers as the world (the
hidden need, one uniform per step, a retry uniform, a tool-duration lognormal)
but from ``random.Random(seed * 1_000_003 + index)``, so its tasks are
statistically, not individually, the engine's. Steps per run follow the same
distribution, so steps per CPU second compare like with like.
"""

from __future__ import annotations

import math
import random

from sim.world.params import WorldParams


def plain_task(world: WorldParams, seed: int, index: int, *, max_steps: int, max_tokens: int,
               detector: bool, retry: bool, verify: bool, window: int = 200_000
               ) -> tuple[str, int, int]:
    """One task: (terminal state, model steps, prompt tokens)."""
    rng = random.Random(seed * 1_000_003 + index)
    uniform, gauss = rng.random, rng.gauss
    p = world.policy
    c_loop = p.loop
    c_transient = c_loop + p.transient
    c_validation = c_transient + p.validation
    c_premature = c_validation + p.premature
    prefix = world.tokens.prefix
    per_step = world.tokens.output + world.tokens.tool_result
    d = world.difficulty
    need = max(d.min, round(math.exp(d.mu + d.sigma * gauss(0.0, 1.0))))
    premature_at = int(need * p.premature_after)
    done = step = tokens = repeats = 0
    stuck = nudged = False
    while True:
        context = prefix + per_step * step
        if step >= max_steps:
            return "budget_exhausted:steps", step, tokens
        if tokens + context > max_tokens:
            return "budget_exhausted:tokens", step, tokens
        if context > window:
            return "failed:context_overflow", step, tokens
        tokens += context
        step += 1
        if stuck:
            math.exp(gauss(0.0, 1.0))
            repeats += 1
            if detector and repeats >= 3:
                if nudged:
                    return "needs_human:no_progress", step, tokens
                nudged, repeats = True, 0
                stuck = uniform() >= p.escape_after_nudge
            continue
        r = uniform()
        if r < c_loop:
            math.exp(gauss(0.0, 1.0))
            stuck, repeats = True, 1
        elif r < c_transient:
            math.exp(gauss(0.0, 1.0))
            if retry and uniform() < world.retry_success:
                math.exp(gauss(0.0, 1.0))
                done += 1
        elif r < c_validation:
            math.exp(gauss(0.0, 1.0))
        elif r < c_premature and done >= premature_at:
            if not verify:
                return "false_success", step, tokens
        elif done + 1 >= need:
            return "succeeded", step, tokens
        else:
            math.exp(gauss(0.0, 1.0))
            done += 1
