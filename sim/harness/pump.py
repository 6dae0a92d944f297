"""The one pump: drive a harness loop to its end, handing each effect to an
answerer and telling observers what passed.

Every driver runs the harness loop (:func:`sim.harness.loop.agent_loop`)
through this module: the direct engine and the DES engine against the
stochastic world, the replay driver against recorded runs, the live driver
against a provider. The pump performs nothing itself (it is sans-IO, standard
library only, and keeps no clock): ``answer(effect)`` is the driver's reply
to one effect, and each observer (a trace recorder, OpenTelemetry spans) sees
every effect before it is answered, its result after, and the final state.

- :func:`drive` is the pump for a driver that answers at once (the direct
  engine): ``answer(effect) -> result``.
- :func:`steps` is the same pump as a generator, for a driver that must wait
  while it answers (the DES engine's SimPy process, a replay session's turns,
  the live driver's awaits): ``answer(effect)`` returns a generator whose
  yields the pump passes out to its caller (``yield from``) and whose return
  value is the result. An exception thrown into the pump (an interrupt, a
  close) reaches the answer in progress.

Observers see the loop only; they never change a result. What the loop itself
tells (its :mod:`~sim.harness.events`) goes to ``agent_loop``'s ``observers``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

from sim.harness.effects import Effect, Result
from sim.harness.state import HarnessState

__all__ = ["Answer", "Observer", "Stepped", "drive", "steps"]

Loop = Generator[Effect, Result, HarnessState]
"""The harness loop as a pump drives it (:data:`sim.harness.loop.Loop`)."""

Answer = Callable[[Any], Any]
"""``answer(effect) -> result``: a driver's reply to one effect (typed Any:
each effect type has its own result types, :data:`sim.harness.protocol.ANSWERS`)."""

Stepped = Callable[[Any], Generator[Any, Any, Any]]
"""``answer(effect)``: a generator that may pause (its yields go out of
:func:`steps`) and returns the driver's reply to one effect."""


class Observer(Protocol):
    """What passes through the pump, seen in order: :meth:`effect` when the
    loop yields an effect (the harness has taken the previous result, and
    made any budget checks before this effect), :meth:`result` when the
    driver has answered it, :meth:`end` with the final state."""

    def effect(self, effect: Any) -> None:
        """The loop yielded ``effect``; it is not answered yet."""

    def result(self, effect: Any, result: Any) -> None:
        """``effect`` was answered with ``result`` (not yet sent to the loop)."""

    def end(self, state: HarnessState) -> None:
        """The loop returned ``state``, its final state."""


def drive(loop: Loop, answer: Answer, observers: Sequence[Observer] = ()) -> HarnessState:
    """Send ``loop`` the answer to each effect it yields (``answer(effect)``;
    None before the first) until it returns; tell ``observers`` each effect,
    its result and the end; return the final state. An exception raised by
    ``answer`` or an observer propagates (the loop is left as it was)."""
    send = loop.send
    result: Any = None
    if not observers:
        try:
            while True:
                result = answer(send(result))
        except StopIteration as stop:  # not kept past the clause: it holds this frame
            final: HarnessState = stop.value
            return final
    while True:
        try:
            effect = send(result)
        except StopIteration as stop:
            final = stop.value
            break
        for each in observers:
            each.effect(effect)
        result = answer(effect)
        for each in observers:
            each.result(effect, result)
    for each in observers:
        each.end(final)
    return final


def steps(loop: Loop, answer: Stepped, observers: Sequence[Observer] = ()
          ) -> Generator[Any, Any, HarnessState]:
    """:func:`drive` as a generator: each effect is answered by ``yield from
    answer(effect)``, so whatever the answer yields (a SimPy event, a pause)
    goes out to the caller and what the caller sends back goes in. Returns the
    final state."""
    send = loop.send
    result: Any = None
    while True:
        try:
            effect = send(result)
        except StopIteration as stop:
            final: HarnessState = stop.value
            break
        for each in observers:
            each.effect(effect)
        result = yield from answer(effect)
        for each in observers:
            each.result(effect, result)
    for each in observers:
        each.end(final)
    return final
