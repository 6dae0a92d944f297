"""Checkpoints: the state is saved after every step, round-trips through the
stores, and a stopped run resumes to the end it would have reached anyway."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted import (
    Reply,
    ScriptedDriver,
    calls,
    final,
    make_params,
    make_state,
    run_script,
    thinking,
    tool_call,
    truncated,
    use,
)

from sim.harness import (
    Budgets,
    Checkpoint,
    DetectorParams,
    MemoryStore,
    ModelError,
    SQLiteStore,
    TextBlock,
    ToolError,
    ToolResult,
    Verdict,
    VerifierParams,
    canonical_call,
    resume,
)
from sim.harness.state import from_dict, to_dict

CHECKPOINT = settings(max_examples=50, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])


def _rich_run():
    """A finished run whose state holds every kind of block and counter."""
    params = make_params(verifier=VerifierParams(enabled=True))
    return run_script(params, model=[
        calls(thinking(), use("search", q="a"), use("read_file", path="b.py")),
        ModelError("rate_limit", 429), tool_call("search", q="a"), final("done"), final("ok")],
        tools=[ToolResult("x", 5, 1.0, metric=3.0), ToolError("validation", "bad", 4), "y"],
        verdicts=[Verdict(False, "tests fail", 3), Verdict(True)])


def _stores(tmp_path):
    return {"memory": MemoryStore(), "sqlite-memory": SQLiteStore(":memory:"),
            "sqlite-file": SQLiteStore(str(tmp_path / "checkpoints.db"))}


# ------------------------------------------------------ checkpoint effect
def test_a_checkpoint_follows_every_step() -> None:
    """Each completed step that does not end the run yields Checkpoint(turn)
    with the number of completed steps, after the step's observations."""
    run = run_script(model=[tool_call("search", q=str(i)) for i in range(4)] + [final()])
    assert [c.turn for c in run.of(Checkpoint)] == [1, 2, 3, 4]
    kinds = [type(e).__name__ for e in run.effects]
    assert kinds[:3] == ["ModelRequest", "ToolRequest", "Checkpoint"]


def test_verifier_rejections_and_truncations_are_steps_with_checkpoints() -> None:
    """A rejected claim and a truncated reply each end a step with a checkpoint."""
    params = make_params(verifier=VerifierParams(enabled=True))
    run = run_script(params, model=[final(), truncated(), final()],
                     verdicts=[Verdict(False), Verdict(True)])
    assert [c.turn for c in run.of(Checkpoint)] == [1, 2]


# ------------------------------------------------------------- stores
def test_state_round_trips_through_to_dict_and_json() -> None:
    """to_dict is JSON-compatible and from_dict rebuilds an equal state."""
    state = _rich_run().state
    data = json.loads(json.dumps(to_dict(state)))
    assert to_dict(from_dict(data)) == to_dict(state)
    assert from_dict(data) == state


@pytest.mark.parametrize("kind", ["memory", "sqlite-memory", "sqlite-file"])
def test_stores_round_trip_the_state(kind: str, tmp_path) -> None:
    """MemoryStore and SQLiteStore (in memory or in a file) give back an equal
    state; a store keeps a copy, so later changes to the live state do not
    alter it; an unknown run loads as None."""
    store = _stores(tmp_path)[kind]
    state = _rich_run().state
    store.save("r1", state.turns, state)
    saved = to_dict(state)
    state.turns += 100
    state.messages.clear()
    loaded = store.load("r1")
    assert to_dict(loaded) == saved
    assert store.load("other") is None


def test_sqlite_keeps_every_step_and_survives_reopening(tmp_path) -> None:
    """An SQLite file keeps each step's checkpoint; after closing and
    reopening, the latest and any earlier step can be loaded."""
    path = str(tmp_path / "runs.db")
    store = SQLiteStore(path)
    driver = ScriptedDriver(model=[tool_call("search", q=str(i)) for i in range(3)] + [final()],
                            store=store, run_id="task-7")
    params = make_params()
    driver.drive(params, make_state(params))
    store.close()
    reopened = SQLiteStore(path)
    assert reopened.load("task-7").turns == 3
    assert [reopened.load("task-7", t).turns for t in (1, 2, 3)] == [1, 2, 3]
    assert reopened.load("task-7", 9) is None
    reopened.close()


def test_saving_the_same_step_again_replaces_it() -> None:
    """A second save of one step overwrites the first."""
    store = SQLiteStore(":memory:")
    state = make_state(make_params())
    store.save("r", 1, state)
    state.turns = 1
    state.input_tokens = 99
    store.save("r", 1, state)
    assert store.load("r").input_tokens == 99


# -------------------------------------------------- stop, restore, continue
_BLOCK = st.builds(lambda n, a: use(n, q=str(a), path=str(a)),
                   st.sampled_from(["search", "read_file", "build_status"]), st.integers(0, 4))
_ITEM = st.one_of(
    st.builds(lambda bs, out: calls(*bs, output_tokens=out),
              st.lists(_BLOCK, min_size=1, max_size=2), st.integers(1, 900)),
    st.builds(lambda out: final(output_tokens=out), st.integers(1, 900)),
    st.builds(lambda b: truncated(TextBlock("partial", 4), b), _BLOCK),
    st.builds(ModelError, st.sampled_from(["rate_limit", "server", "overloaded"])),
)
_OUTCOME = st.one_of(
    st.builds(ToolResult, st.sampled_from(["a", "b", "c"]), st.integers(1, 3_000),
              st.floats(0.0, 4.0), st.none() | st.floats(0.0, 5.0)),
    st.builds(ToolError, st.sampled_from(["transient", "validation", "not_found"]),
              st.just("err"), st.integers(1, 50)),
)


@st.composite
def scripts(draw):
    params = make_params(
        context_window=draw(st.sampled_from([12_000, 50_000])),
        verifier=VerifierParams(enabled=draw(st.booleans())),
        detector=DetectorParams(stale_window=draw(st.integers(0, 3)),
                                objective_window=draw(st.integers(0, 3))),
        budgets=Budgets(tokens=draw(st.none() | st.integers(5_000, 300_000)),
                        steps=draw(st.none() | st.integers(1, 25))))
    model = draw(st.lists(_ITEM, min_size=1, max_size=25))
    tools = draw(st.lists(_OUTCOME, max_size=30))
    verdicts = draw(st.lists(st.builds(Verdict, st.booleans(), st.just("no")), max_size=4))
    return params, model, tools, verdicts


def _driver(model, tools, verdicts, store=None) -> ScriptedDriver:
    return ScriptedDriver(model=model, tools=tools, verdicts=verdicts, store=store,
                          default_reply=final(output_tokens=5))


@CHECKPOINT
@given(script=scripts(), data=st.data(), kind=st.sampled_from(["memory", "sqlite-memory"]))
def test_stopping_at_any_checkpoint_and_restoring_reaches_the_same_end(
        script, data, kind, tmp_path) -> None:
    """Stop a run at any checkpoint, load the state from the store into a
    fresh loop and continue with the rest of the script: the run yields the
    same remaining effects and ends in the same state (status, reason, turns,
    tokens, money, history and every counter) as the uninterrupted run."""
    params, model, tools, verdicts = script
    whole = _driver(model, tools, verdicts)
    end = whole.drive(params, make_state(params))
    checkpoints = len(whole.of(Checkpoint))
    if checkpoints == 0:
        return
    k = data.draw(st.integers(1, checkpoints), label="stop at checkpoint")
    store = _stores(tmp_path)[kind]
    split = _driver(model, tools, verdicts, store)
    split.drive(params, make_state(params), stop_at_checkpoint=k)
    assert split.stopped
    stopped_at = len(split.effects)
    restored = store.load("run")
    assert restored is not None and restored.turns == split.of(Checkpoint)[-1].turn
    again = split.drive(params, restored)
    assert (again.status, again.reason) == (end.status, end.reason)
    assert (again.turns, again.input_tokens, again.output_tokens, again.money_usd) == (
        end.turns, end.input_tokens, end.output_tokens, end.money_usd)
    assert to_dict(again) == to_dict(end)
    assert split.effects[stopped_at:] == whole.effects[stopped_at:]


@CHECKPOINT
@given(script=scripts(), extra=st.integers(1, 10))
def test_a_run_stopped_on_steps_resumes_to_the_end_of_a_larger_budget(script, extra) -> None:
    """A run stopped as budget_exhausted:steps, resumed (state.resume) with a
    larger step budget (params.with_budgets), reaches the same end as a run
    given the larger budget from the start."""
    params, model, tools, verdicts = script
    small = params.with_budgets(steps=params.budgets.steps or 3)
    large = small.with_budgets(steps=small.budgets.steps + extra)
    reference = _driver(model, tools, verdicts).drive(large, make_state(large))
    driver = _driver(model, tools, verdicts)
    first = driver.drive(small, make_state(small))
    if (first.status, first.reason) != ("budget_exhausted", "steps"):
        return
    again = driver.drive(large, resume(first, reset_detector=False))
    assert to_dict(again) == to_dict(reference)


def test_resume_with_more_steps_from_the_latest_checkpoint() -> None:
    """The concrete case: 3 steps allowed, the model needs 5; resuming the
    latest checkpoint with 10 steps finishes in the same state as a run that
    had 10 steps from the start (detector memory reset, as after a human
    look: the calls are distinct, so it changes nothing)."""
    script = [tool_call("search", q=str(i)) for i in range(4)] + [final()]
    params = make_params(budgets=Budgets(steps=3))
    store = MemoryStore()
    driver = ScriptedDriver(model=script, store=store)
    stopped = driver.drive(params, make_state(params))
    assert (stopped.status, stopped.reason, stopped.turns) == ("budget_exhausted", "steps", 3)
    more = params.with_budgets(steps=10)
    done = driver.drive(more, resume(store.load("run")))
    reference = run_script(more, model=script).state
    assert (done.status, done.reason, done.turns) == ("succeeded", "model_complete", 5)
    mine, theirs = to_dict(done), to_dict(reference)
    # the detector only remembers the calls made after resuming
    assert mine.pop("detector")["calls"] == [canonical_call("search", {"q": "3"})]
    theirs.pop("detector")
    assert mine == theirs


@pytest.mark.parametrize(("status", "reason"), [("failed", "model_error"),
                                                ("succeeded", "verified"),
                                                ("cancelled", "external_signal")])
def test_runs_that_ended_for_good_cannot_be_resumed(status: str, reason: str) -> None:
    """Only budget_exhausted and needs_human runs can be resumed: resuming a
    failed, succeeded or cancelled run raises ValueError."""
    state = make_state(make_params())
    state.status, state.reason = status, reason
    with pytest.raises(ValueError, match=status):
        resume(state)


def test_failed_run_from_the_loop_cannot_be_resumed() -> None:
    """A run that failed (fatal tool error) raises on resume."""
    run = run_script(model=[tool_call("search", q="x")], tools=[ToolError("fatal", "gone", 1)])
    with pytest.raises(ValueError):
        resume(run.state)


def test_resume_after_needs_human_clears_the_detector_by_default() -> None:
    """A needs_human run resumes with a fresh detector memory (or keeps it
    with reset_detector=False)."""
    run = run_script(model=[tool_call("search", q="same")] * 6)
    state = run.state
    assert state.status == "needs_human" and state.detector.detections == 2
    kept = resume(from_dict(to_dict(state)), reset_detector=False)
    assert kept.detector.detections == 2 and kept.status == "running"
    cleared = resume(state)
    assert cleared.detector.detections == 0 and (cleared.reason, cleared.detail) == ("", {})


def test_a_run_stopped_mid_step_resumes_with_every_call_answered() -> None:
    """A run stopped by a time budget after the model proposed a call but
    before the call ran should, when resumed, not send the model a tool_use
    without a tool_result (providers reject such a history)."""
    params = make_params(model_timeout_s=30.0, budgets=Budgets(active_s=40.0))
    driver = ScriptedDriver(model=[Reply(tool_call("deploy", env="x").content, "tool_use",
                                         latency_s=20.0), final()])
    stopped = driver.drive(params, make_state(params))
    assert (stopped.status, stopped.reason) == ("budget_exhausted", "active_time")
    driver.drive(params.with_budgets(active_s=1_000.0), resume(stopped))
    last = driver.step_requests[-1].messages
    asked = {b.id for b in last[-1].content if b.type == "tool_use"} if last[-1].role == (
        "assistant") else set()
    assert not asked


def test_a_resumed_needs_human_run_gets_its_nudges_again() -> None:
    """A run stopped as needs_human (nudge, then a second detection) saves a
    checkpoint of that last step; resumed by a person, its detector starts
    afresh: the next loop is nudged again before it stops again."""
    params = make_params()
    looping = [tool_call("read_file", path="same.txt")] * 6
    store = MemoryStore()
    driver = ScriptedDriver(model=looping + looping, store=store)
    stopped = driver.drive(params, make_state(params))
    assert (stopped.status, stopped.reason) == ("needs_human", "no_progress")
    assert stopped.nudges == 1
    saved = store.load("run")
    assert saved is not None and saved.status == "needs_human" and saved.turns == stopped.turns
    again = driver.drive(params, resume(saved))
    assert (again.status, again.reason) == ("needs_human", "no_progress")
    assert again.nudges == 2 and again.turns == stopped.turns + 6
