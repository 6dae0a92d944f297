"""Outcomes as data: one table of terminal states and their reasons, checked
when a run ends; every run ends once, in the table; drivers end and cancel
runs only through the harness, so observers always see the terminal event."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    ScriptedDriver,
    calls,
    final,
    make_params,
    make_state,
    run_script,
    tool_call,
    truncated,
    use,
)

import sim.engines
import sim.harness
from sim.harness import (
    OUTCOMES,
    RESUMABLE,
    TERMINAL_STATES,
    Budgets,
    DetectorParams,
    HarnessState,
    ModelError,
    ToolError,
    Verdict,
    VerifierParams,
    cancel,
    park,
    request_abort,
    resume,
)
from sim.harness.state import end_run

HARNESS = Path(sim.harness.__file__).parent
ENGINES = Path(sim.engines.__file__).parent


def test_the_table_lists_every_terminal_state_with_its_reasons() -> None:
    """OUTCOMES has the five terminal states of DESIGN.md, each with at least
    one reason; TERMINAL_STATES is its keys; the resumable ones are
    budget_exhausted and needs_human; waiting_approval is not terminal."""
    assert set(OUTCOMES) == {"succeeded", "needs_human", "budget_exhausted", "failed",
                             "cancelled"}
    assert tuple(OUTCOMES) == TERMINAL_STATES and all(OUTCOMES.values())
    assert {"budget_exhausted", "needs_human"} == RESUMABLE
    assert "waiting_approval" not in OUTCOMES
    assert "invalid_response" in OUTCOMES["failed"]


def _stops_in(path: Path) -> set[tuple[str, str]]:
    """(status constant, reason) of every ``stop(STATUS, "reason")`` call."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "stop":
            status, reason = node.args[:2]
            assert isinstance(status, ast.Name), ast.dump(node)
            if isinstance(reason, ast.Constant):
                found.add((status.id, reason.value))
    return found


def test_every_literal_ending_of_the_loop_is_in_the_table() -> None:
    """Each place the loop stops a run with a literal reason names an outcome
    of the table (the budget reasons come from the budget checks: checked
    below)."""
    stops = set().union(*(_stops_in(HARNESS / f"{name}.py") for name in (
        "loop", "guards", "model_calls", "recovery", "tool_calls", "on_limit")))
    assert len(stops) >= 10
    statuses = {name: getattr(sim.harness.state, name) for name, _ in stops}
    for name, reason in stops:
        assert reason in OUTCOMES[statuses[name]], (name, reason)


def test_the_budget_checks_raise_only_reasons_of_the_table() -> None:
    """Every limit the harness raises LimitExceeded for is a budget_exhausted
    reason, and every budget_exhausted reason is raised somewhere."""
    reasons = set().union(*(re.findall(r'LimitExceeded\("([a-z_]+)"', path.read_text())
                            for path in HARNESS.glob("*.py")))
    assert reasons == OUTCOMES["budget_exhausted"]


@pytest.mark.parametrize(("status", "reason"), [("succeeded", "done"), ("finished", "ok"),
                                                ("failed", "external_signal"), ("running", "")])
def test_ending_a_run_with_an_outcome_not_in_the_table_is_a_bug(status: str, reason: str
                                                                 ) -> None:
    """end_run raises ValueError for a status or reason not in OUTCOMES and
    leaves the state running."""
    state = make_state(make_params())
    with pytest.raises(ValueError, match="unknown outcome"):
        end_run(state, status, reason)
    assert state.status == "running" and not state.terminal


def test_a_run_ends_only_once() -> None:
    """Ending an ended run raises RuntimeError naming how it ended."""
    state = make_state(make_params())
    end_run(state, "failed", "model_error", {"diagnostic": {}})
    assert (state.status, state.reason, state.detail) == ("failed", "model_error",
                                                          {"diagnostic": {}})
    with pytest.raises(RuntimeError, match="failed:model_error"):
        end_run(state, "cancelled", "external_signal")


_ITEMS = st.lists(st.one_of(
    st.builds(lambda q: tool_call("search", q=str(q)), st.integers(0, 2)),
    st.builds(lambda q: calls(use("read_file", path=str(q)), use("deploy", env="x")),
              st.integers(0, 2)),
    st.just(final()), st.just(truncated()),
    st.builds(ModelError, st.sampled_from(["rate_limit", "server", "auth", "timeout",
                                           "context_overflow", "malformed"]))),
    max_size=25)
_TOOLS = st.lists(st.sampled_from(["ok", ToolError("transient", "503", 3),
                                   ToolError("fatal", "x", 1), ToolError("validation", "v", 2)]),
                  max_size=25)


@FAST
@given(items=_ITEMS, tools=_TOOLS, verify=st.booleans(), steps=st.none() | st.integers(1, 8),
       tokens=st.none() | st.integers(3_000, 40_000), nudges=st.integers(0, 2))
def test_every_run_ends_once_in_an_outcome_of_the_table(items, tools, verify, steps, tokens,
                                                        nudges) -> None:
    """Whatever the model and tools do, the run ends in exactly one terminal
    state whose reason the table allows, with one terminal event, last, that
    says the same."""
    params = make_params(verifier=VerifierParams(enabled=verify),
                         budgets=Budgets(steps=steps, tokens=tokens),
                         detector=DetectorParams(max_nudges=nudges))
    run = run_script(params, model=items, tools=tools, default_reply=final(),
                     verdicts=[Verdict(False)] * 2)
    s = run.state
    assert s.status in OUTCOMES and s.reason in OUTCOMES[s.status]
    terminal = [e for e in run.events if e.kind == "terminal"]
    assert len(terminal) == 1 and run.events[-1] is terminal[0]
    assert (terminal[0].data["status"], terminal[0].data["reason"]) == (s.status, s.reason)


# ------------------------------------------------ the harness's own API for drivers
def test_cancel_ends_a_queued_run_through_the_loop_with_its_terminal_event() -> None:
    """cancel() on a run whose loop is not being driven records
    cancelled:external_signal and tells the observers, without any effect."""
    params = make_params()
    state = make_state(params)
    seen = []
    assert cancel(params, state, observers=(seen.append,)) is state
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert [(e.kind, e.data) for e in seen] == [
        ("terminal", {"status": "cancelled", "reason": "external_signal"})]


def test_cancel_leaves_an_ended_run_as_it_ended() -> None:
    """A run stopped as budget_exhausted (waiting for a person) stays so when
    cancelled, and its abort flag is not set."""
    params = make_params(budgets=Budgets(steps=1))
    run = run_script(params, model=[tool_call("search", q="x")] * 2)
    state = run.state
    assert cancel(params, state) is state
    assert (state.status, state.reason) == ("budget_exhausted", "steps")
    assert not state.abort_requested


def test_request_abort_ends_a_driven_run_after_the_effect_in_flight() -> None:
    """request_abort during a tool call: the run ends cancelled:external_signal
    when the call returns, with one terminal event."""
    def abort(effect, state):
        if type(effect).__name__ == "ToolRequest":
            request_abort(state)

    driver = ScriptedDriver(model=[tool_call("search", q="x"), final()], on_effect=abort)
    params = make_params()
    state = driver.drive(params, make_state(params))
    assert (state.status, state.reason) == ("cancelled", "external_signal")
    assert [e.kind for e in driver.events].count("terminal") == 1


def test_park_adds_wall_time_and_refuses_impossible_seconds() -> None:
    """park() adds parked seconds (wall, not active); NaN, infinite or
    negative seconds raise ValueError and change nothing."""
    state = HarnessState()
    park(state, 12.5)
    assert (state.parked_s, state.active_s, state.wall_s) == (12.5, 0.0, 12.5)
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError):
            park(state, bad)
    assert state.parked_s == 12.5


def test_resume_counts_nudges_once() -> None:
    """A run has one nudge counter (state.nudges, all nudges given); resuming
    it records where the detector's memory starts, so the nudge limit counts
    only the nudges since."""
    run = run_script(model=[tool_call("read_file", path="same")] * 6)
    state = run.state
    assert (state.status, state.nudges) == ("needs_human", 1)
    resume(state)
    assert state.nudges == 1 and state.detector.nudges_before == 1


def _assigned_attributes(path: Path) -> list[tuple[int, str, str]]:
    """(line, object, attribute) of every attribute assignment in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    found.append((node.lineno, t.value.id, t.attr))
    return found


STATE_FIELDS = set(HarnessState.__dataclass_fields__)


@pytest.mark.parametrize("path", sorted(ENGINES.glob("*.py")), ids=lambda p: p.name)
def test_the_engines_write_no_field_of_the_harness_state(path: Path) -> None:
    """No engine assigns a HarnessState field (status, reason, abort flag,
    parked time, ...) on a variable named state: they use request_abort, park,
    cancel and resume, so every end goes through the harness."""
    bad = [f"{path.name}:{line} {name}.{attr}" for line, name, attr in _assigned_attributes(path)
           if name in ("state", "s", "final") and attr in STATE_FIELDS]
    assert bad == []
