"""What an engine needs to run the tasks of one scenario cell."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sim.harness.detector import Detector
from sim.harness.loop import Loop, agent_loop
from sim.harness.params import HarnessParams
from sim.harness.retry_budget import RetryBudget
from sim.harness.scopes import Ledger
from sim.harness.state import HarnessState
from sim.world.world import World


@dataclass(frozen=True)
class Cell:
    """One point of a sweep: harness parameters, the compiled world, the
    detector to use (a factory, since detectors may keep per-run settings), the
    root seed, and the cell's name and parameter values for the results."""

    name: str
    params: HarnessParams
    world: World
    make_detector: Callable[[HarnessParams], Detector]
    seed: int
    values: tuple[tuple[str, object], ...] = ()

    def loop(self, state: HarnessState, params: HarnessParams | None = None, *,
             retry_budget: RetryBudget | None = None, retry_key: str = "",
             ledgers: Sequence[Ledger] | None = None, started_s: float = 0.0) -> Loop:
        """The harness loop of a task of this cell, run on ``state`` with
        ``params`` (default: the cell's; a resumed DES task's are extended)
        and a fresh detector of :attr:`make_detector`; ``retry_budget``,
        ``retry_key``, ``ledgers`` and ``started_s`` (seconds) as
        :func:`~sim.harness.loop.agent_loop` takes them."""
        params = self.params if params is None else params
        return agent_loop(params, state, detector=self.make_detector(params),
                          retry_budget=retry_budget, retry_key=retry_key, ledgers=ledgers,
                          started_s=started_s)
