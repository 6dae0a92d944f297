"""The seed words of many tasks at once: numpy's SeedSequence hash, vectorised.

Task ``i`` of root seed ``seed`` draws from streams positioned by
``SeedSequence(seed, spawn_key=(i,)).generate_state(n, uint64)``
(:mod:`sim.world.streams`). Building one SeedSequence per task costs more than
a short task's whole simulation, so :func:`spawn_words` computes the same
words for a block of task indices with a few numpy array operations: the
hash of the root entropy is shared by every task, and only the mixing of the
spawn key and the output hash run per task, as uint32 arrays.

The arithmetic is numpy's own (``numpy/random/bit_generator.pyx``: pool size
4, ``hashmix``/``mix`` with their constants, the output hash of
``generate_state``); the words are identical to numpy's, which
``tests/test_world_seeds.py`` checks for random seeds and indices. Seeds or
indices this code does not cover (negative, or an index of 2**32 or more)
fall back to numpy's SeedSequence itself.
"""

from __future__ import annotations

import numpy as np

_POOL = 4
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_SHIFT = 16
_MASK = 0xFFFFFFFF


def _words32(n: int) -> list[int]:
    """An int >= 0 as little-endian uint32 words (0 is one word), as numpy coerces it."""
    if n == 0:
        return [0]
    out = []
    while n:
        out.append(n & _MASK)
        n >>= 32
    return out


def _mix(x: int, y: int) -> int:
    r = (_MIX_L * x - _MIX_R * y) & _MASK
    return r ^ (r >> _SHIFT)


class _Hash:
    """The running hash constant of ``mix_entropy`` (its sequence does not
    depend on the data, so one sequence serves every task)."""

    def __init__(self) -> None:
        self.const = _INIT_A

    def scalar(self, value: int) -> int:
        value ^= self.const
        self.const = (self.const * _MULT_A) & _MASK
        value = (value * self.const) & _MASK
        return value ^ (value >> _SHIFT)

    def array(self, values: np.ndarray) -> np.ndarray:
        values = values ^ np.uint32(self.const)
        self.const = (self.const * _MULT_A) & _MASK
        values = values * np.uint32(self.const)
        return values ^ (values >> np.uint32(_SHIFT))


def _mix_array(x: np.ndarray | int, y: np.ndarray) -> np.ndarray:
    r: np.ndarray = np.uint32(_MIX_L) * np.asarray(x, dtype=np.uint32) - np.uint32(_MIX_R) * y
    return r ^ (r >> np.uint32(_SHIFT))


def spawn_words(seed: int, tasks: np.ndarray, n_words: int) -> np.ndarray:
    """``SeedSequence(seed, spawn_key=(i,)).generate_state(n_words, np.uint64)``
    for every ``i`` in ``tasks`` (a 1-d integer array), as an array of shape
    ``(len(tasks), n_words)`` of uint64."""
    tasks = np.asarray(tasks, dtype=np.int64)
    if seed < 0 or (tasks.size and (tasks.min() < 0 or tasks.max() > _MASK)):
        return np.array([np.random.SeedSequence(seed, spawn_key=(int(i),))
                         .generate_state(n_words, np.uint64) for i in tasks],
                        dtype=np.uint64).reshape(len(tasks), n_words)
    run = _words32(seed)
    run += [0] * (_POOL - len(run))  # a spawn key pads the root entropy to the pool
    h = _Hash()
    pool: list[int] = [h.scalar(run[i]) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = _mix(pool[dst], h.scalar(pool[src]))
    for src in range(_POOL, len(run)):  # root entropy past the pool's four words
        for dst in range(_POOL):
            pool[dst] = _mix(pool[dst], h.scalar(run[src]))
    # the spawn key, one word per task: the first part that differs by task
    key = tasks.astype(np.uint32)
    mixed = [np.full(len(tasks), p, dtype=np.uint32) for p in pool]
    for dst in range(_POOL):
        mixed[dst] = _mix_array(mixed[dst], h.array(key))
    # generate_state: the pool words in turn, through the output hash
    out = np.empty((len(tasks), 2 * n_words), dtype=np.uint32)
    const = _INIT_B
    for i in range(2 * n_words):
        value = mixed[i % _POOL] ^ np.uint32(const)
        const = (const * _MULT_B) & _MASK
        value = value * np.uint32(const)
        out[:, i] = value ^ (value >> np.uint32(_SHIFT))
    low = out[:, 0::2].astype(np.uint64)
    high = out[:, 1::2].astype(np.uint64)
    return low | (high << np.uint64(32))
