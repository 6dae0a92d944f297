"""The bare-loop baseline: seed 001's random process as a short pure-Python
loop, with no harness components, drawing from the same streams as the world.

Per task: the hidden need (difficulty stream), per step one uniform from the
model stream, a retry uniform from the tool stream and a tool-duration normal
from the latency stream, exactly as :class:`sim.world.task.SimulatedTask`
draws them. Budgets, detector, retries and verification are inlined as the
seed writes them. It is the yardstick for ``bench_direct.py``: how much the
real harness and the engine cost per simulated step over the process itself.
"""

from __future__ import annotations

import math

from sim.world.difficulty import sample_need
from sim.world.params import WorldParams
from sim.world.streams import StreamPool


def bare_task(world: WorldParams, seed: int, index: int, pool: StreamPool, *, max_steps: int,
              max_tokens: int, detector: bool, retry: bool, verify: bool,
              window: int = 200_000) -> tuple[str, int, int]:
    """One task: (terminal state, model steps, prompt tokens)."""
    streams = pool.acquire(seed, index)
    difficulty, model, tools, latency = streams[:4]
    p = world.policy
    c_loop = p.loop
    c_transient = c_loop + p.transient
    c_validation = c_transient + p.validation
    c_premature = c_validation + p.premature
    prefix = world.tokens.prefix
    per_step = world.tokens.output + world.tokens.tool_result
    need = sample_need(world.difficulty, difficulty)
    premature_at = int(need * p.premature_after)
    done = step = tokens = repeats = 0
    stuck = nudged = False
    try:
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
                math.exp(latency.normal())
                repeats += 1
                if detector and repeats >= 3:
                    if nudged:
                        return "needs_human:no_progress", step, tokens
                    nudged, repeats = True, 0
                    stuck = model.uniform() >= p.escape_after_nudge
                continue
            r = model.uniform()
            if r < c_loop:
                math.exp(latency.normal())
                stuck, repeats = True, 1
            elif r < c_transient:
                math.exp(latency.normal())
                if retry and tools.uniform() < world.retry_success:
                    math.exp(latency.normal())
                    done += 1
            elif r < c_validation:
                math.exp(latency.normal())
            elif r < c_premature and done >= premature_at:
                if not verify:
                    return "false_success", step, tokens
            elif done + 1 >= need:
                return "succeeded", step, tokens
            else:
                math.exp(latency.normal())
                done += 1
    finally:
        pool.release(streams)
