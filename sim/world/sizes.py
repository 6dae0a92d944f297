"""The token sizes a simulated task draws (tokens).

:class:`TaskSizes` is the part of :class:`~sim.world.task.SimulatedTask`
that sizes its calls: a fixed size, or a draw of the size's distribution from
the task's sizes stream, times the run's size multiplier. A world whose every
size is fixed (``World.fixed``) is read without any draw.
"""

from __future__ import annotations

from bisect import bisect_right

from sim.world.distributions import BaseDistribution
from sim.world.streams import Draws
from sim.world.world import World


def _drawn(dist: BaseDistribution | None, draws: Draws) -> float:
    """A draw of ``dist`` (a size with no fixed value always has one)."""
    if dist is None:
        raise ValueError("a size with neither a fixed value nor a distribution")
    return dist.sample(draws)


class TaskSizes:
    """Sizes of one task's outputs, answers and tool results (tokens). The
    task sets ``world``, ``sizes`` (its sizes stream) and ``scale`` (the
    run's size multiplier, 1.0 for none)."""

    __slots__ = ()
    world: World
    sizes: Draws
    scale: float

    def _size(self, fixed: int | None, dist: BaseDistribution | None, floor: int,
              step: float = 1.0) -> int:
        """One size in tokens: ``fixed`` or a draw of ``dist`` (sizes stream),
        times the run's multiplier and ``step`` (the step bin's), rounded, at
        least ``floor``."""
        x: float = fixed if fixed is not None else _drawn(dist, self.sizes)
        if self.scale != 1.0:
            x *= self.scale
        if step != 1.0:
            x *= step
        return max(floor, int(x + 0.5))

    def _step_scale(self, call: int) -> float:
        """The observation multiplier of the step bin of the run's model call
        ``call`` (1-based: the ``turn`` of the tool request or task-giver turn
        that answers it; ``tokens.by_step``; 1.0 without)."""
        w = self.world
        scales = w.obs_scale
        if scales is None:
            return 1.0
        b = bisect_right(w.obs_edges, call) - 1
        return scales[b if b > 0 else 0]

    def _output(self) -> int:
        w = self.world
        return w.fixed.output if w.fixed else self._size(w.output_tokens, w.output_dist, 1)

    def _answer_size(self) -> int:
        w = self.world
        return w.fixed.answer if w.fixed else self._size(w.answer_tokens, w.answer_dist, 1)

    def _final_size(self) -> int:
        """A final answer's output (a claim that the task is done): as
        :meth:`_answer_size`, drawn from ``tokens.final_output`` when the world
        sizes final answers apart from messages."""
        w = self.world
        if not w.final_split:
            return self._answer_size()
        return self._size(w.final_tokens, w.final_dist, 1)

    def _result_size(self, name: str, call: int = 1) -> int:
        """A result of tool ``name`` answering the run's model call ``call`` (1-based)."""
        w = self.world
        if w.fixed:
            return w.fixed.results[name]
        fixed, dist = w.tool_result[name]
        return self._size(fixed, dist, 0, self._step_scale(call))
