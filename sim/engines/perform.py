"""The one place where the simulated world answers the harness's effects.

Both engines perform every effect through :func:`perform`: which part of the
:class:`~sim.world.task.SimulatedTask` answers which effect is decided here
(the direct engine answers the three effects of every step, a model request,
a tool request and a checkpoint, inline exactly as :func:`perform` does, to
save a call per effect; ``tests/test_engine_equivalence.py`` holds the
engines to the same results). The direct engine adds the seconds each answer reports to
the task's own clock (through the harness's accounting); the DES engine lets
that time pass on its shared clock, with queues and rate limits around the
model calls.
"""

from __future__ import annotations

from sim.harness.effects import (
    ApprovalRequest,
    Checkpoint,
    Effect,
    ModelRequest,
    Result,
    ToolRequest,
    UserTurn,
    VerifyRequest,
    Wait,
)
from sim.world.task import SimulatedTask


def perform(task: SimulatedTask, effect: Effect, now: float) -> Result:
    """The world's answer to ``effect`` sent at ``now`` (seconds on the task's
    clock; it matters only for prompt-cache lifetimes): the model's reply, a
    tool's outcome, the verifier's verdict, a human's approval decision, the
    task-giver's reply, or
    None for a checkpoint (nothing to store in a simulation) and a backoff
    wait (the engine lets ``effect.seconds`` pass)."""
    kind = type(effect)  # exact types, checked by frequency (this runs once per effect)
    if kind is ModelRequest:
        return task.respond(effect, now)  # type: ignore[arg-type]
    if kind is ToolRequest:
        return task.execute(effect)  # type: ignore[arg-type]
    if kind is Checkpoint or kind is Wait:
        return None
    if kind is UserTurn:
        return task.reply(effect)  # type: ignore[arg-type]
    if kind is VerifyRequest:
        return task.verify(effect)  # type: ignore[arg-type]
    if kind is ApprovalRequest:
        return task.approve(effect)  # type: ignore[arg-type]
    raise TypeError(f"unknown effect {effect!r}")
