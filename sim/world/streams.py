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

Draws are taken in blocks of 32 (``Generator.random(n)``) and handed out one
by one, which keeps the per-step cost low; a stream repositioned for a new task
sets its generator's state only when it first draws, so concerns a task never
uses cost nothing. A block's first draw is taken alone and its other 31 at
its second draw (or before the stream's other kind of draw starts a block), so
a concern a task draws from once (the difficulty's need) pays for one draw,
not 32; the generator consumes the same values in the same order, so every
draw is the one a whole block gives (numpy's ``random`` and
``standard_normal`` fill an array with consecutive single draws). The
children's words are computed for blocks of consecutive tasks at once
(:mod:`sim.world.seeds`: numpy's hash, vectorised, the same words), so
starting a task builds no SeedSequence. The layout is unchanged: every task
draws exactly the numbers it drew before. No global random state
is used anywhere.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from sim.world.seeds import spawn_words

DIFFICULTY, MODEL, TOOLS, LATENCY, OPERATIONS, SIZES, USER = 0, 1, 2, 3, 4, 5, 6
CONCERNS: tuple[str, ...] = ("difficulty", "model", "tools", "latency", "operations", "sizes",
                             "user")
_BLOCK = 32
_PAD = [0.0]  # stands for a block's first draw, handed out alone
_INCREMENTS = tuple(((0x9E3779B97F4A7C15F39CC0605CEDC835 * (k + 1)) | 1) & ((1 << 128) - 1)
                    for k in range(len(CONCERNS)))


class Draws:
    """Uniform [0, 1) and standard normal draws from one stream, in blocks.

    A stream of a :class:`StreamPool` is repositioned for each task with
    :meth:`reset` (the task's seed words; the stream's concern picks its pair)
    and takes that state at its first draw; a buffer index of ``_BLOCK``
    means the buffer is spent. A block of either kind starts with its first
    draw alone (``_u_rest``/``_z_rest`` then say its other 31 are still to
    be drawn), and is completed at its second draw or before the other kind
    starts a block, so the generator gives out exactly the values of whole
    blocks, in the same order."""

    __slots__ = ("_rng", "_u", "_ui", "_z", "_zi", "_words", "_word", "_state", "_raw",
                 "_u_rest", "_z_rest")

    def __init__(self, rng: np.random.Generator, concern: int | None = None) -> None:
        """Draws from ``rng`` as it is; with a ``concern`` (a pool's stream),
        ``rng`` must be a PCG64 generator, which :meth:`reset` repositions."""
        self._rng = rng
        self._u: list[float] = []
        self._ui = _BLOCK
        self._z: list[float] = []
        self._zi = _BLOCK
        self._u_rest = self._z_rest = False  # a block begun with its first draw alone
        self._words: list[int] | None = None  # the task's seed words, until the first draw
        self._word = 2 * (concern or 0)
        # the PCG64 state dict numpy reads, kept and refilled in place
        self._state: dict[str, Any] = {
            "bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
            "state": {"state": 0, "inc": _INCREMENTS[concern or 0]}}
        self._raw = None if concern is None else _state_words(rng, self._state)

    def uniform(self) -> float:
        """The next uniform draw in [0, 1)."""
        i = self._ui
        if i == _BLOCK:
            return self._next_uniform()
        self._ui = i + 1
        return self._u[i]

    def normal(self) -> float:
        """The next standard normal draw."""
        i = self._zi
        if i == _BLOCK:
            return self._next_normal()
        self._zi = i + 1
        return self._z[i]

    def _next_uniform(self) -> float:
        """A uniform past the buffer: the second draw of a begun block (its
        other 31 drawn now), or the first of a new block, drawn alone."""
        if self._u_rest:
            self._u_rest = False
            self._u = _PAD + self._rng.random(_BLOCK - 1).tolist()
            self._ui = 2
            return self._u[1]
        if self._words is not None:
            self._position()
        elif self._z_rest:  # the normals' begun block first, as a whole block draws it
            self._rest_of_normals()
        self._u_rest = True
        value: float = self._rng.random()
        return value

    def _next_normal(self) -> float:
        """A normal past the buffer (as :meth:`_next_uniform`)."""
        if self._z_rest:
            self._rest_of_normals()
            self._zi = 2
            return self._z[1]
        if self._words is not None:
            self._position()
        elif self._u_rest:
            self._u_rest = False
            self._u = _PAD + self._rng.random(_BLOCK - 1).tolist()
            self._ui = 1
        self._z_rest = True
        value: float = self._rng.standard_normal()
        return value

    def _rest_of_normals(self) -> None:
        """Draw the other 31 normals of the begun block into the buffer."""
        self._z_rest = False
        self._z = _PAD + self._rng.standard_normal(_BLOCK - 1).tolist()
        self._zi = 1

    def reset(self, words: list[int]) -> None:
        """Position the stream for a task whose seed words are ``words``
        (:func:`sim.world.seeds.spawn_words`; this stream's 128-bit state is
        the pair of its concern) and drop buffered draws; the generator takes
        the state at the first draw."""
        self._words = words
        self._ui = self._zi = _BLOCK
        self._u_rest = self._z_rest = False

    def _position(self) -> None:
        words, k = self._words, self._word
        if words is None:
            return
        raw = self._raw
        if raw is not None:  # the state's two words written in place (its increment is set)
            raw[0], raw[1] = words[k + 1], words[k]
        else:
            self._state["state"]["state"] = (words[k] << 64) | words[k + 1]
            self._rng.bit_generator.state = self._state
        self._words = None


_CAPSULE_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _state_address(bits: np.random.PCG64) -> int | None:
    """The address of ``bits``' 128-bit state and increment: the ``state`` of
    the ``bitgen_t`` in numpy's documented ``bit_generator.capsule`` points at
    the PCG64 state, whose first field points at them. (numpy's
    ``bit_generator.ctypes.state_address`` gives the same, but builds ctypes
    function prototypes on first use, some 60 us per generator.)"""
    bitgen = _CAPSULE_POINTER(bits.capsule, b"BitGenerator")
    state = ctypes.c_void_p.from_address(bitgen).value if bitgen else None
    return ctypes.c_void_p.from_address(state).value if state else None


def _state_words(rng: np.random.Generator, state: dict[str, Any]) -> Any:
    """Set ``rng`` (a PCG64) to ``state`` and return a ctypes view of its
    128-bit state word as (low, high) uint64 (:func:`_state_address`), so
    repositioning a stream writes two words instead of parsing a state dict
    (2-3 us). The layout is checked here: a write through the view must read
    back as numpy's own state with the increment untouched, else None
    (numpy's state setter is used)."""
    bits = rng.bit_generator
    bits.state = state
    if not isinstance(bits, np.random.PCG64):
        return None
    try:
        address = _state_address(bits)
        if not address:
            return None
        raw = (ctypes.c_uint64 * 2).from_address(address)
        if _LAYOUT_CHECKED:  # the same layout for every PCG64 of this numpy
            return raw
        probe = 0x0123456789ABCDEF_FEDCBA9876543210
        raw[0], raw[1] = probe & (2**64 - 1), probe >> 64
        read = bits.state
    except (AttributeError, TypeError, ValueError, OSError):  # pragma: no cover - no ctypes
        return None
    ok = (read["state"]["state"] == probe and read["state"]["inc"] == state["state"]["inc"]
          and not read["has_uint32"])
    rng.bit_generator.state = state
    if ok:
        _LAYOUT_CHECKED.append(True)
    return raw if ok else None


_LAYOUT_CHECKED: list[bool] = []  # not empty once a PCG64's layout read back right


def task_states(seed: int, task: int) -> list[int]:
    """The 128-bit PCG64 states of task ``task``, one per concern: word pairs
    of the task's child ``SeedSequence(seed, spawn_key=(task,))``."""
    n = len(CONCERNS)
    words = np.random.SeedSequence(seed, spawn_key=(task,)).generate_state(2 * n, np.uint64)
    words = words.tolist()
    return [(words[2 * k] << 64) | words[2 * k + 1] for k in range(n)]


_BLOCK_TASKS = 256


_ZERO = np.random.SeedSequence(0)  # a pooled generator's first state, replaced at once


class StreamPool:
    """Reusable generators, so starting a task costs no generator construction.

    ``acquire(seed, task)`` returns the task's :class:`Draws` (one per
    concern of :data:`CONCERNS`), each a PCG64 set to the task's state for that
    concern with a fixed odd increment per concern; ``release`` returns them
    for reuse once the task has ended. Tasks running side by side (the DES
    engine) simply hold different sets.

    The states are those of :func:`task_states`, computed for a block of
    ``256`` consecutive tasks at once (:func:`sim.world.seeds.spawn_words`),
    so a task's set-up builds no SeedSequence: engines start tasks in index
    order.
    """

    def __init__(self) -> None:
        self._free: list[tuple[Draws, ...]] = []
        self._block: tuple[int, int, list[list[int]]] | None = None  # seed, first task, words

    def _words(self, seed: int, task: int) -> list[int]:
        """The seed words of ``task`` (two per concern), from the current block."""
        block = self._block
        if block is None or block[0] != seed or not 0 <= task - block[1] < len(block[2]):
            n = len(CONCERNS)
            words = spawn_words(seed, np.arange(task, task + _BLOCK_TASKS), 2 * n).tolist()
            block = self._block = (seed, task, words)
        return block[2][task - block[1]]

    def acquire(self, seed: int, task: int) -> tuple[Draws, ...]:
        """The streams of ``task`` under ``seed`` (one per concern), freshly positioned."""
        words = self._words(seed, task)
        streams = self._free.pop() if self._free else tuple(
            Draws(np.random.Generator(np.random.PCG64(_ZERO)), k) for k in range(len(CONCERNS)))
        for draws in streams:  # Draws.reset, inline
            draws._words = words
            draws._ui = draws._zi = _BLOCK
            draws._u_rest = draws._z_rest = False
        return streams

    def release(self, streams: tuple[Draws, ...]) -> None:
        """Give a finished task's streams back for reuse."""
        self._free.append(streams)


def task_streams(seed: int, task: int) -> tuple[Draws, ...]:
    """The independent streams of task ``task`` (not pooled)."""
    return StreamPool().acquire(seed, task)


def child_streams(seed: int, path: tuple[int, ...]) -> tuple[Draws, ...]:
    """The independent streams of a child run (a subagent): ``path`` is its
    root task's index followed by its ordinal among its parent's children at
    each level (``(task, k)`` for the ``k``-th child of task ``task``, 0-based),
    the spawn key of its ``SeedSequence(seed, spawn_key=path)``. A child's
    streams never overlap its root task's (``spawn_key=(task,)``) or another
    child's, and they do not depend on the order children run in."""
    n = len(CONCERNS)
    words = np.random.SeedSequence(seed, spawn_key=path).generate_state(2 * n, np.uint64)
    streams = tuple(Draws(np.random.Generator(np.random.PCG64(_ZERO)), k) for k in range(n))
    listed = words.tolist()
    for draws in streams:
        draws.reset(listed)
    return streams
