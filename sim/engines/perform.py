"""The one table of how each kind of effect is performed: who answers it,
how long it takes, and what a cancelled one is answered with.

:data:`EFFECTS` maps each effect type of :mod:`sim.harness.effects` to an
:class:`EffectKind`. Everything that performs effects reads it instead of
switching on the effect's type:

- the direct engine answers each effect with :func:`answers`, the table bound
  to the answering object's class (``SimulatedTask``: ``respond``,
  ``execute``, ``verify``, ``approve``, ``reply``; checkpoints and backoff
  waits are answered with None); a spawn of child runs (``spawn``) and the
  collection of children started without waiting (``collect``) are
  performed by the engine itself, which runs the children's loops;
- the DES engine answers the same way and lets :meth:`EffectKind.seconds`
  pass on its shared clock (a model call in a pool of slots or behind rate
  limits takes its own path: :mod:`sim.engines.des`), and answers an effect
  an operator cancelled with :attr:`EffectKind.cancelled`;
- a driver plugs in the same way: an object with those five methods, each
  called as ``method(effect, now)`` (``now``: seconds on the driver's clock),
  gets its table from :func:`answers`; a driver that cancels effects in
  flight answers them with ``EFFECTS[type(effect)].cancelled(elapsed)``.
  A driver that does something for a checkpoint or a backoff wait (the live
  driver saves the state, sleeps) defines ``checkpoint`` and ``wait`` too; a
  method an answerer lacks answers with a TypeError naming it (the replay
  driver has no task-giver to ``reply``).

A dict lookup on the exact type replaces an ``isinstance`` chain (effects are
never subclassed); ``benchmarks/bench_direct.py`` measures the engine with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.harness import effects as fx
from sim.harness.effects import Effect, Result

Answer = Callable[[Any, Any, float], Result]
"""``answer(answerer, effect, now)``: the answering object's reply to one
effect sent at ``now`` (seconds). The effect is typed Any because the table
is heterogeneous: each entry receives only its own effect type."""


@dataclass(frozen=True, slots=True)
class EffectKind:
    """How one type of effect is performed.

    ``method``: the answerer's method that answers it; ``optional``: an
    answerer without that method answers it with None (nothing to compute in
    a simulation: a checkpoint, a backoff wait whose time the clock lets
    pass). ``seconds(effect, result)``: the seconds it takes on a shared
    clock, or None when no time passes. ``series``: the
    DES time series it counts in while it lasts (``busy_model_slots`` for a
    model call holding a slot of an unlimited pool, ``parked`` for an
    approval), or None. ``cancelled(elapsed)``: the result the harness gets
    for it when an operator cancelled it after ``elapsed`` seconds in flight.
    """

    method: str
    seconds: Callable[[Any, Any], float | None]
    cancelled: Callable[[float], Result]
    series: str | None = None
    optional: bool = False


def _no_time(effect: Any, result: Any) -> None:
    return None


def _nothing(answerer: Any, effect: Any, now: float) -> None:
    return None


def _some_time(effect: Any, result: Any) -> float | None:
    """A duration that may be zero (then no time passes at all)."""
    return result.duration_s or None


EFFECTS: dict[type, EffectKind] = {
    fx.ModelRequest: EffectKind(
        "respond", lambda effect, result: result.latency_s,
        lambda elapsed: fx.ModelError("cancelled", message="cancelled by an operator",
                                   latency_s=elapsed), "busy_model_slots"),
    fx.ToolRequest: EffectKind(
        "execute", lambda effect, result: result.duration_s,
        lambda elapsed: fx.ToolError("cancelled", "cancelled by an operator", 0, elapsed)),
    fx.Checkpoint: EffectKind("checkpoint", _no_time, lambda elapsed: None, optional=True),
    fx.Wait: EffectKind("wait", lambda effect, result: effect.seconds, lambda elapsed: elapsed,
                        optional=True),
    fx.VerifyRequest: EffectKind("verify", _some_time,
                              lambda elapsed: fx.Verdict(False, duration_s=elapsed)),
    fx.UserTurn: EffectKind("reply", _some_time, lambda elapsed: fx.UserReply(duration_s=elapsed)),
    fx.ApprovalRequest: EffectKind(
        "approve", lambda effect, result: result.waited_s,
        lambda elapsed: fx.ApprovalDecision(False, elapsed, False, "cancelled"), "parked"),
    fx.SpawnRequest: EffectKind(
        "spawn", lambda effect, result: result.duration_s,
        lambda elapsed: fx.ChildResults([], elapsed)),
    fx.CollectChildren: EffectKind(
        "collect", lambda effect, result: result.duration_s,
        lambda elapsed: fx.ChildResults([], elapsed)),
}
"""Every effect type the harness yields, and how it is performed."""


_TABLES: dict[type, dict[type, Answer]] = {}


def answers(answerer: type) -> dict[type, Answer]:
    """Effect type -> the function answering it, for objects of class
    ``answerer`` (called as ``answer(obj, effect, now)``). Built once per
    class from :data:`EFFECTS`, so a subclass that overrides a method (e.g.
    one that logs every call) is answered by its override."""
    table = _TABLES.get(answerer)
    if table is None:
        table = _TABLES[answerer] = {kind: _method(answerer, how)
                                     for kind, how in EFFECTS.items()}
    return table


def _method(answerer: type, how: EffectKind) -> Answer:
    """``answerer``'s method for ``how``; without one, None for an optional
    effect, else a function raising a TypeError that names both."""
    method: Answer | None = getattr(answerer, how.method, None)
    if method is not None:
        return method
    if how.optional:
        return _nothing

    def cannot(obj: Any, effect: Any, now: float) -> Result:
        raise TypeError(f"{answerer.__name__} cannot answer {effect!r} (no {how.method!r})")
    return cannot


def perform(answerer: Any, effect: Effect, now: float) -> Result:
    """``answerer``'s answer to ``effect`` sent at ``now`` (seconds on the
    task's clock; it matters only for prompt-cache lifetimes): the model's
    reply, a tool's outcome, the verifier's verdict, a human's approval
    decision, the task-giver's reply, or None for a checkpoint (nothing to
    store in a simulation) and a backoff wait. An unknown effect is a
    TypeError."""
    answer = answers(type(answerer)).get(type(effect))
    if answer is None:
        raise TypeError(f"unknown effect {effect!r}")
    return answer(answerer, effect, now)
