"""No-progress detector: repetition, cycles, stale observations, a stuck
objective; graduated response (nudge, then needs_human)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    ScriptedDriver,
    calls,
    final,
    last_user_blocks,
    make_params,
    make_state,
    run_script,
    tool_call,
    use,
)

from sim.harness import (
    NUDGE_PREFIX,
    DetectorParams,
    NoProgressDetector,
    TextBlock,
    ToolResult,
    canonical_call,
)
from sim.harness.state import DetectorMemory


def _feed(params: DetectorParams, keys, observations=None, metrics=None, polling=False):
    """Signals returned for each call in turn."""
    detector, memory = NoProgressDetector(params), DetectorMemory()
    observations = observations or ["obs"] * len(keys)
    metrics = metrics or [None] * len(keys)
    return [detector.observe(memory, k, o, polling, m)
            for k, o, m in zip(keys, observations, metrics, strict=True)]


# ------------------------------------------------------------ signatures
@FAST
@given(k=st.integers(2, 8))
def test_repetition_fires_exactly_on_the_kth_identical_call(k: int) -> None:
    """With repeat_threshold = k, k identical calls in a row fire
    "repetition" on the k-th call and not before."""
    signals = _feed(DetectorParams(repeat_threshold=k), ["A"] * k)
    assert signals == [None] * (k - 1) + ["repetition"]


@FAST
@given(keys=st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=12, unique=True),
       k=st.integers(2, 8))
def test_distinct_calls_never_fire(keys: list[str], k: int) -> None:
    """Any number of pairwise distinct calls never fires the detector, whatever
    the repeat threshold (observations identical, stale detection off)."""
    assert _feed(DetectorParams(repeat_threshold=k), keys) == [None] * len(keys)


@FAST
@given(k=st.integers(2, 6), args=st.lists(st.integers(0, 10**6), min_size=2, max_size=6,
                                           unique=True))
def test_loop_never_nudges_on_distinct_calls(k: int, args: list[int]) -> None:
    """Through the loop: distinct tool calls (same tool, different arguments)
    are never flagged, so no nudge is injected and the run completes."""
    params = make_params(detector=DetectorParams(repeat_threshold=k))
    run = run_script(params, model=[tool_call("search", q=str(a)) for a in args] + [final()])
    assert run.state.nudges == 0 and run.events_of("nudge") == []
    assert (run.state.status, run.state.reason) == ("succeeded", "model_complete")


@FAST
@given(k=st.integers(2, 6))
def test_loop_nudges_after_k_identical_calls(k: int) -> None:
    """Through the loop: the k-th identical call gets a nudge in its observation."""
    params = make_params(detector=DetectorParams(repeat_threshold=k))
    run = run_script(params, model=[tool_call("search", q="same")] * k + [final()])
    assert run.state.nudges == 1
    assert len(run.events_of("nudge")) == 1 and run.events_of("nudge")[0].turn == k


def _reference_signal(window: list[str], k: int, max_period: int, repeats: int) -> str | None:
    """Repetition, then cycle, straight from their definitions (module docstring)."""
    if len(window) >= k and len(set(window[-k:])) == 1:
        return "repetition"
    for period in range(2, max_period + 1):
        span = window[-period * repeats:]
        if (len(span) == period * repeats and len(set(span)) > 1
                and all(span[i] == span[i - period] for i in range(period, len(span)))):
            return "cycle"
    return None


@FAST
@given(keys=st.lists(st.sampled_from("abc"), max_size=40), k=st.integers(2, 5),
       max_period=st.integers(2, 4), repeats=st.integers(2, 3))
def test_repetitions_and_cycles_fire_exactly_as_defined(keys: list[str], k: int, max_period: int,
                                                         repeats: int) -> None:
    """Over any sequence of calls, the detector reports a repetition or a cycle
    exactly when the calls since its last detection end in one (its window
    restarts after each detection)."""
    params = DetectorParams(repeat_threshold=k, cycle_max_period=max_period,
                            cycle_repeats=repeats)
    since: list[str] = []
    expected = []
    for key in keys:
        since.append(key)
        signal = _reference_signal(since, k, max_period, repeats)
        expected.append(signal)
        if signal is not None:
            since = []
    assert _feed(params, keys) == expected


def test_cycle_a_b_a_b_fires_on_the_fourth_call() -> None:
    """Alternating calls A-B-A-B are a cycle of period 2 repeated twice."""
    assert _feed(DetectorParams(), ["A", "B", "A", "B"]) == [None, None, None, "cycle"]


def test_longer_cycles_fire_up_to_the_max_period() -> None:
    """A-B-C-A-B-C is a period-3 cycle; with cycle_max_period 2 it is not seen."""
    keys = ["A", "B", "C", "A", "B", "C"]
    assert _feed(DetectorParams(), keys)[-1] == "cycle"
    assert _feed(DetectorParams(cycle_max_period=2), keys) == [None] * 6


def test_a_broken_pattern_is_not_a_cycle() -> None:
    """A-B-A-C does not repeat, so nothing fires."""
    assert _feed(DetectorParams(), ["A", "B", "A", "C"]) == [None] * 4


def test_a_cycle_needs_cycle_repeats_periods() -> None:
    """With cycle_repeats 3, A-B-A-B is not yet a cycle; A-B-A-B-A-B is."""
    signals = _feed(DetectorParams(cycle_repeats=3), ["A", "B"] * 3)
    assert signals == [None] * 5 + ["cycle"]


@FAST
@given(n=st.integers(2, 30))
def test_polling_with_changing_results_never_fires(n: int) -> None:
    """A polling tool called the same way each time is keyed on its result
    too: while the result keeps changing, nothing fires."""
    signals = _feed(DetectorParams(), ["poll"] * n, [f"build {i}%" for i in range(n)],
                    polling=True)
    assert signals == [None] * n


def test_polling_with_unchanged_results_fires() -> None:
    """A polling tool that keeps returning the same result is a repetition."""
    signals = _feed(DetectorParams(repeat_threshold=3), ["poll"] * 3, ["pending"] * 3,
                    polling=True)
    assert signals == [None, None, "repetition"]


def test_polling_through_the_loop() -> None:
    """Through the loop: build_status (a polling tool) polled five times with
    changing results is never nudged; polled three times with the same
    result, it is."""
    polls = [tool_call("build_status", job="42")] * 5 + [final()]
    changing = run_script(model=polls, tools=[f"running {i}/5" for i in range(5)])
    assert changing.state.nudges == 0
    same = run_script(model=polls, tools=["running"] * 5)
    assert same.state.nudges == 1


def test_stale_observations_fire_no_new_information() -> None:
    """With stale_window = 3, distinct calls whose observations were all seen
    before fire "no_new_information" on the third stale one."""
    params = DetectorParams(stale_window=3)
    signals = _feed(params, ["A", "B", "C", "D", "E"], ["x", "y", "x", "y", "x"])
    assert signals == [None, None, None, None, "no_new_information"]


def test_new_information_resets_the_stale_streak() -> None:
    """An unseen observation resets the stale streak."""
    params = DetectorParams(stale_window=2)
    signals = _feed(params, list("ABCDEF"), ["x", "x", "y", "x", "y", "z"])
    assert signals == [None, None, None, None, "no_new_information", None]


def test_stale_detection_is_off_by_default() -> None:
    """stale_window 0 disables the no-new-information signal."""
    assert _feed(DetectorParams(), list("ABCDEFGH"), ["x"] * 8) == [None] * 8


def test_objective_without_improvement_fires_no_movement() -> None:
    """With objective_window = 3, a metric (lower is better) that does not
    improve for 3 steps fires "no_objective_movement"."""
    signals = _feed(DetectorParams(objective_window=3), list("ABCDE"), list("vwxyz"),
                    metrics=[5.0, 4.0, 4.0, 4.5, 4.0])
    assert signals == [None, None, None, None, "no_objective_movement"]


@FAST
@given(start=st.floats(1.0, 1e6), n=st.integers(2, 20))
def test_an_improving_objective_never_fires(start: float, n: int) -> None:
    """A strictly improving metric never fires, however long the run."""
    metrics = [start - i for i in range(n)]
    signals = _feed(DetectorParams(objective_window=1), [f"k{i}" for i in range(n)],
                    [f"o{i}" for i in range(n)], metrics=metrics)
    assert signals == [None] * n


def test_objective_metric_reaches_the_detector_through_the_loop() -> None:
    """ToolResult.metric feeds the objective signal: failing-test counts stuck
    at 3 for objective_window steps are nudged."""
    params = make_params(detector=DetectorParams(objective_window=2))
    run = run_script(params, model=[tool_call("search", q=str(i)) for i in range(3)] + [final()],
                     tools=[ToolResult(f"{i}: 3 failing", 5, metric=3.0) for i in range(3)])
    assert run.state.nudges == 1
    assert run.events_of("nudge")[0].data["signal"] == "no_objective_movement"


def test_a_disabled_detector_never_fires() -> None:
    """detector.enabled False: identical calls are never flagged."""
    params = make_params(detector=DetectorParams(enabled=False))
    run = run_script(params, model=[tool_call("search", q="same")] * 8 + [final()])
    assert run.state.nudges == 0 and run.state.status == "succeeded"


def test_windows_restart_after_a_detection() -> None:
    """After a detection the detector needs fresh evidence: a fourth identical
    call does not fire again, the sixth does."""
    assert _feed(DetectorParams(), ["A"] * 6) == [None, None, "repetition",
                                                 None, None, "repetition"]


# ------------------------------------------------------------- response
def test_first_detection_nudges_the_next_stops_as_needs_human() -> None:
    """Graduated response: the first detection appends a text block of origin
    "nudge" starting with NUDGE_PREFIX after the tool results and the run goes
    on; the next detection ends the run as needs_human:no_progress."""
    run = run_script(model=[tool_call("search", q="same")] * 10)
    s = run.state
    assert (s.status, s.reason) == ("needs_human", "no_progress")
    assert s.detail["signal"] == "repetition"
    assert s.turns == 6 and s.nudges == 1
    third = run.step_requests[3].messages[-1].content
    assert third[0].type == "tool_result"
    nudge = third[-1]
    assert isinstance(nudge, TextBlock) and nudge.origin == "nudge"
    assert nudge.text.startswith(NUDGE_PREFIX) and "search" in nudge.text


def test_a_nudge_that_works_lets_the_run_finish() -> None:
    """A model that changes approach after the nudge finishes normally."""
    run = run_script(model=[tool_call("search", q="same")] * 3
                     + [tool_call("read_file", path="report.py"), final()])
    assert (run.state.status, run.state.reason) == ("succeeded", "model_complete")
    assert run.state.nudges == 1


def test_zero_nudges_stops_on_the_first_detection() -> None:
    """detector.max_nudges = 0: the first detection ends the run, without a nudge,
    and the last observations are still in the history."""
    params = make_params(detector=DetectorParams(max_nudges=0))
    run = run_script(params, model=[tool_call("search", q="same")] * 5)
    s = run.state
    assert (s.status, s.reason) == ("needs_human", "no_progress")
    assert s.turns == 3 and s.nudges == 0
    assert [b.type for b in last_user_blocks(s)] == ["tool_result"]


def test_more_nudges_allowed_means_more_detections_before_stopping() -> None:
    """detector.max_nudges = 2: two nudges, then the third detection stops the run."""
    params = make_params(detector=DetectorParams(max_nudges=2))
    run = run_script(params, model=[tool_call("search", q="same")] * 12)
    assert run.state.nudges == 2 and run.state.turns == 9
    assert run.state.reason == "no_progress"


def test_one_nudge_per_step_even_if_several_calls_fire() -> None:
    """Several calls of one reply that each look stuck give one nudge."""
    reply = calls(use("search", q="a"), use("search", q="a"), use("search", q="a"),
                  use("search", q="a"))
    run = run_script(model=[reply, final()])
    nudges = [b for b in run.state.messages[2].content if getattr(b, "origin", "") == "nudge"]
    assert len(nudges) == 1


def test_a_custom_detector_replaces_the_default() -> None:
    """agent_loop(detector=...) uses any object with observe(); here one that
    flags every second call."""
    class EverySecond:
        def observe(self, memory, call_key, observation_key, polling, metric):
            memory.detections += 1
            return "custom" if memory.detections % 2 == 0 else None

    params = make_params()
    driver = ScriptedDriver(model=[tool_call("search", q=str(i)) for i in range(10)])
    state = driver.drive(params, make_state(params), detector=EverySecond())
    assert (state.status, state.reason, state.turns) == ("needs_human", "no_progress", 4)
    assert state.detail["signal"] == "custom"


# ------------------------------------------------------------ call keys
@FAST
@given(args=st.dictionaries(st.text(max_size=5), st.one_of(
    st.integers(), st.text(max_size=10), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=3)), max_size=5))
def test_canonical_call_ignores_argument_order(args: dict) -> None:
    """The same call with its arguments in another order has the same key."""
    reordered = dict(reversed(list(args.items())))
    assert canonical_call("t", args) == canonical_call("t", reordered)


@FAST
@given(a=st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=6)),
                         max_size=3),
       b=st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=6)),
                         max_size=3))
def test_canonical_call_separates_different_calls(a: dict, b: dict) -> None:
    """Different arguments (or tools) give different keys."""
    if a != b:
        assert canonical_call("t", a) != canonical_call("t", b)
    assert canonical_call("t", a) != canonical_call("u", a)


@FAST
@given(key=st.text(max_size=8), value=st.one_of(st.integers(), st.text(max_size=20),
                                                 st.booleans(), st.none(), st.floats()))
def test_a_one_argument_call_has_the_key_of_the_flat_argument_form(key: str, value) -> None:
    """A call with one scalar argument gets the key every flat call gets (tool
    name, then ``repr(key)=repr(value)`` per sorted argument, NUL-separated;
    hashed past 64 characters), so keys saved in a checkpoint before the
    one-argument fast path still match."""
    text = f"t\0{key!r}={value!r}"
    expected = text if len(text) <= 64 else hashlib.blake2b(
        text.encode(), digest_size=8).hexdigest()
    assert canonical_call("t", {key: value}) == expected
    two = f"t\0{'a'!r}={1!r}\0{key!r}={value!r}"
    if key > "a":
        assert canonical_call("t", {key: value, "a": 1}) == (
            two if len(two) <= 64 else hashlib.blake2b(two.encode(), digest_size=8).hexdigest())
