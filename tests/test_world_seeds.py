"""The vectorised seed hash gives every task exactly the words numpy's
SeedSequence gives it (so streams positioned from a block of tasks at once
are the tasks' own streams, byte for byte)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.world.seeds import spawn_words


def _numpy(seed: int, tasks, n_words: int) -> np.ndarray:
    return np.array([np.random.SeedSequence(seed, spawn_key=(int(i),))
                     .generate_state(n_words, np.uint64) for i in tasks],
                    dtype=np.uint64).reshape(len(tasks), n_words)


@settings(max_examples=200, deadline=None)
@given(seed=st.one_of(st.integers(0, 2**32), st.integers(0, 2**300)),
       tasks=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20),
       n_words=st.integers(1, 16))
def test_spawn_words_equal_numpys_seed_sequence(seed: int, tasks: list[int],
                                                n_words: int) -> None:
    """For any root seed (one word or many) and task indices below 2**32, the
    words of each task are numpy's generate_state(n_words, uint64) of
    SeedSequence(seed, spawn_key=(task,))."""
    assert (spawn_words(seed, np.array(tasks), n_words) == _numpy(seed, tasks, n_words)).all()


def test_indices_past_one_word_fall_back_to_numpy_itself() -> None:
    """A task index of 2**32 or more (a two-word spawn key) still gets numpy's words."""
    tasks = [2**32, 2**40 + 3, 5]
    assert (spawn_words(7, np.array(tasks), 5) == _numpy(7, tasks, 5)).all()


def test_a_block_of_tasks_is_the_tasks_one_by_one() -> None:
    """The words of a block do not depend on which other tasks are in it."""
    block = spawn_words(11, np.arange(100, 200), 5)
    for i in (100, 150, 199):
        assert (spawn_words(11, np.array([i]), 5)[0] == block[i - 100]).all()


def test_pooled_streams_are_the_tasks_own_in_any_order() -> None:
    """StreamPool positions each task's streams at task_states(seed, task),
    whether tasks come in index order (one block of seed words serves many),
    out of order, under another seed or past 2**32."""
    from sim.world.streams import _INCREMENTS, CONCERNS, StreamPool, task_states

    pool = StreamPool()
    for seed, task in [(7, 0), (7, 1), (7, 255), (7, 256), (7, 3), (8, 3), (7, 2**32 + 1)]:
        streams = pool.acquire(seed, task)
        for k, draws in enumerate(streams):
            reference = np.random.Generator(np.random.PCG64(0))
            reference.bit_generator.state = {
                "bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
                "state": {"state": task_states(seed, task)[k], "inc": _INCREMENTS[k]}}
            assert draws.uniform() == reference.random(), (seed, task, CONCERNS[k])
        pool.release(streams)


def test_streams_written_in_place_draw_as_numpy_positions_them() -> None:
    """A pooled stream repositioned by writing its PCG64 state words in place
    (the fast path, used where numpy's layout checks out, as on CPython/x86-64)
    draws exactly what numpy's own state setter gives, uniforms and normals,
    task after task on the same reused generators."""
    from sim.world.streams import StreamPool

    fast, slow = StreamPool(), StreamPool()
    for task in (0, 1, 2, 300, 5):
        a, b = fast.acquire(3, task), slow.acquire(3, task)
        for draws in b:
            draws._raw = None  # numpy's state setter
        for x, y in zip(a, b, strict=True):
            assert [x.uniform() for _ in range(40)] == [y.uniform() for _ in range(40)]
            assert [x.normal() for _ in range(40)] == [y.normal() for _ in range(40)]
        fast.release(a)
        slow.release(b)
    assert all(d._raw is not None for d in fast.acquire(3, 9))  # the fast path is in use here


def _whole_blocks(generator: np.random.Generator, kinds: list[bool]) -> list[float]:
    """The draws of ``kinds`` (True: uniform, False: normal) as whole blocks of
    32 give them: a kind's block is drawn from the generator when its buffer
    is spent, at once."""
    buffers: dict[bool, list[float]] = {True: [], False: []}
    out = []
    for uniform in kinds:
        if not buffers[uniform]:
            block = generator.random(32) if uniform else generator.standard_normal(32)
            buffers[uniform] = block.tolist()
        out.append(buffers[uniform].pop(0))
    return out


@settings(max_examples=150, deadline=None)
@given(kinds=st.lists(st.booleans(), max_size=150), task=st.integers(0, 1000))
def test_a_block_begun_with_one_draw_gives_the_whole_blocks_values(kinds: list[bool],
                                                                    task: int) -> None:
    """Draws take a block's first value alone and the rest later (or before the
    stream's other kind starts a block); any mix of uniforms and normals gets
    exactly the values whole blocks of 32 give, in the same order."""
    from sim.world.streams import _INCREMENTS, StreamPool, task_states

    pool = StreamPool()
    streams = pool.acquire(5, task)
    pool.release(streams)
    streams = pool.acquire(5, task)  # reused generators, repositioned
    reference = np.random.Generator(np.random.PCG64(0))
    reference.bit_generator.state = {
        "bit_generator": "PCG64", "has_uint32": 0, "uinteger": 0,
        "state": {"state": task_states(5, task)[3], "inc": _INCREMENTS[3]}}
    draws = streams[3]
    got = [draws.uniform() if uniform else draws.normal() for uniform in kinds]
    assert got == _whole_blocks(reference, kinds)
