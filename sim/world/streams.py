"""Random streams (DESIGN.md "Randomness and reproducibility").

One ``numpy.random.SeedSequence(seed)``; task ``i`` gets its own child,
``SeedSequence(seed, spawn_key=(i,))``, and within a task one stream per
concern (difficulty, model behaviour, tool behaviour, latency, operations:
the DES engine's human decisions, sizes: drawn token sizes, and user: the
task-giver's decisions). Stream ``k``
is a PCG64 generator whose 128-bit state is words ``2k, 2k+1`` of the
child's ``generate_state(8, uint64)`` and whose increment is a fixed odd
constant per concern (:class:`StreamPool`). So task ``i``
draws the same numbers in every cell of a sweep and on both sides of a
comparison (common random numbers), and the concerns never borrow from each
other: changing how often tools are retried does not shift the model's draws.

Draws are taken in blocks (``Generator.random(n)``) and handed out one by one,
which keeps the per-step cost low; a stream repositioned for a new task sets
its generator's state only when it first draws, so concerns a task never uses
cost nothing. No global random state is used anywhere.
"""

from __future__ import annotations

import numpy as np

DIFFICULTY, MODEL, TOOLS, LATENCY, OPERATIONS, SIZES, USER = 0, 1, 2, 3, 4, 5, 6
CONCERNS: tuple[str, ...] = ("difficulty", "model", "tools", "latency", "operations", "sizes",
                             "user")
_BLOCK = 32


class Draws:
    """Uniform [0, 1) and standard normal draws from one stream, in blocks."""

    __slots__ = ("_rng", "_u", "_ui", "_z", "_zi", "_pending")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._u: list[float] = []
        self._ui = 0
        self._z: list[float] = []
        self._zi = 0
        self._pending: dict | None = None

    def uniform(self) -> float:
        """The next uniform draw in [0, 1)."""
        i = self._ui
        if i == len(self._u):
            if self._pending is not None:
                self._position()
            self._u = self._rng.random(_BLOCK).tolist()
            i = 0
        self._ui = i + 1
        return self._u[i]

    def normal(self) -> float:
        """The next standard normal draw."""
        i = self._zi
        if i == len(self._z):
            if self._pending is not None:
                self._position()
            self._z = self._rng.standard_normal(_BLOCK).tolist()
            i = 0
        self._zi = i + 1
        return self._z[i]

    def reset(self, state: dict) -> None:
        """Position the stream at ``state`` (a PCG64 state dict) and drop
        buffered draws; the generator takes the state at the first draw."""
        self._pending = state
        self._u = []
        self._ui = 0
        self._z = []
        self._zi = 0

    def _position(self) -> None:
        self._rng.bit_generator.state = self._pending
        self._pending = None


_INCREMENTS = tuple(((0x9E3779B97F4A7C15F39CC0605CEDC835 * (k + 1)) | 1) & ((1 << 128) - 1)
                    for k in range(len(CONCERNS)))


def task_states(seed: int, task: int) -> list[int]:
    """The 128-bit PCG64 states of task ``task``, one per concern: word pairs
    of the task's child ``SeedSequence(seed, spawn_key=(task,))``."""
    n = len(CONCERNS)
    words = np.random.SeedSequence(seed, spawn_key=(task,)).generate_state(2 * n, np.uint64)
    words = words.tolist()
    return [(words[2 * k] << 64) | words[2 * k + 1] for k in range(n)]


class StreamPool:
    """Reusable generators, so starting a task costs no generator construction.

    ``acquire(seed, task)`` returns the task's :class:`Draws` (one per
    concern of :data:`CONCERNS`), each a PCG64 set to the task's state for that
    concern with a fixed odd increment per concern; ``release`` returns them
    for reuse once the task has ended. Tasks running side by side (the DES
    engine) simply hold different sets.
    """

    def __init__(self) -> None:
        self._free: list[tuple[Draws, ...]] = []

    def acquire(self, seed: int, task: int) -> tuple[Draws, ...]:
        """The streams of ``task`` under ``seed`` (one per concern), freshly positioned."""
        states = task_states(seed, task)
        streams = self._free.pop() if self._free else tuple(
            Draws(np.random.Generator(np.random.PCG64(0))) for _ in CONCERNS)
        for k, draws in enumerate(streams):
            draws.reset({"bit_generator": "PCG64",
                         "state": {"state": states[k], "inc": _INCREMENTS[k]},
                         "has_uint32": 0, "uinteger": 0})
        return streams

    def release(self, streams: tuple[Draws, ...]) -> None:
        """Give a finished task's streams back for reuse."""
        self._free.append(streams)


def task_streams(seed: int, task: int) -> tuple[Draws, ...]:
    """The independent streams of task ``task`` (not pooled)."""
    return StreamPool().acquire(seed, task)
