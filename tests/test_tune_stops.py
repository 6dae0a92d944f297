"""One pass for every candidate (:mod:`sim.tuning.stops`): the replay in force
notes, before each step call, the counters the budget checks read; a tighter
candidate's stop is found by its own Limits on those marks, and a run is
replayed again only where the marks cannot answer.

Hand-made runs: three calls of gpt-4o, prompts of 1,000, 2,000 and 3,000
tokens, 100 output tokens each, recorded costs of $0.001, $0.002 and $0.003
(the prompt's thousands of tokens in thousandths of a dollar); the first two
call a tool, the last answers."""

from __future__ import annotations

import pytest

from benchmarks.tune_world import simulated_traces
from sim.drivers.replay import replay_runs
from sim.drivers.replay.reading import TraceTables
from sim.harness.budgets import worst_case_cost
from sim.harness.messages import Usage
from sim.scenario.model import HarnessConfig, harness_params, resolve_detector
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.tuning.inforce import grids, harness_in_force, setting_in_force
from sim.tuning.knobs import InForce, setting
from sim.tuning.replayed import ReplayEvaluator, apply
from sim.tuning.stops import answerable, as_stopped
from sim.world.params import WorldParams

HARNESS = {"max_output_tokens": 600, "detector": {"enabled": False}}


def _call(prompt: int, output: int = 100, tool: bool = True) -> CallRecord:
    return CallRecord(
        usage=Usage(input_tokens=prompt, output_tokens=output), cost_usd=prompt / 1e6,
        tool_calls=[ToolCallRecord("search", arguments=f'{{"q": {prompt}}}', result_tokens=50)]
        if tool else [],
        text_tokens=0 if tool else output)


def _run(run_id: str = "a", first_output: int = 100) -> RunRecord:
    return RunRecord(run_id, "sim", "", [_call(1000, first_output), _call(2000),
                                         _call(3000, tool=False)],
                     model="gpt-4o", resolved=True, exit="done")


def _redriven(evaluator: ReplayEvaluator, s) -> list:
    """What tune reads of a replay of every run under ``s`` by the harness loop."""
    h = apply(evaluator.harness, s)
    return [as_stopped(r.chosen) for r in replay_runs(
        evaluator.runs, harness_params(h, WorldParams()), prices_for=evaluator.prices_for,
        make_detector=resolve_detector(h.detector.name), pricing=evaluator.pricing)]


def test_a_token_budget_stops_the_run_before_the_call_that_would_pass_it():
    """With 3,500 prompt tokens the checks before call 1 see 1,000 + 2,000 and
    pass, those before call 2 see 3,000 + 3,000 and refuse: the run stops at
    call 2 (budget_exhausted:tokens) having spent $0.001 + $0.002 and 3,000
    prompt tokens, answered from the marks (nothing replayed again) and as a
    replay under the budget ends it."""
    evaluator = ReplayEvaluator([_run()], HarnessConfig.model_validate(HARNESS))
    s = setting({"tokens": 3500})
    [got] = evaluator.replays(s)
    assert (got.outcome, got.stopped_at, got.calls, got.prompt_tokens, got.turns) == (
        "budget_exhausted:tokens", 2, 2, 3000, 2)
    assert got.cost_usd == pytest.approx(0.003)
    assert (evaluator.marked, evaluator.redriven) == (1, 0)
    assert [got] == _redriven(evaluator, s)


@pytest.mark.parametrize("cap, stopped_at", [(1, 1), (2, 2)])
def test_a_step_cap_stops_the_run_at_the_call_after_its_last_step(cap, stopped_at):
    """A cap of 1 step stops the run at call 1, a cap of 2 at call 2 (each the
    first step call the cap does not admit), from the marks alone."""
    evaluator = ReplayEvaluator([_run()], HarnessConfig.model_validate(HARNESS))
    s = setting({"steps": cap})
    [got] = evaluator.replays(s)
    assert (got.outcome, got.stopped_at, got.turns) == (
        "budget_exhausted:steps", stopped_at, cap)
    assert evaluator.redriven == 0
    assert [got] == _redriven(evaluator, s)


def test_a_reply_past_its_worst_case_is_replayed_again():
    """Call 0 reports 5,000 output tokens, past the cap of 600 its worst case
    was checked with: a money budget between that worst case and what the
    call cost passes the checks before it and refuses after it
    (``check_usage``), which no mark sees, so the run is replayed again: one
    run, and the answer is the replay's."""
    evaluator = ReplayEvaluator([_run(first_output=5000)], HarnessConfig.model_validate(HARNESS))
    state = evaluator.baseline[0].chosen.state
    prices = harness_params(evaluator.harness, WorldParams())
    first = evaluator.marks[0]
    assert first is not None
    spent_after_call_0 = first.rows[1][7]
    worst = worst_case_cost(evaluator.pricing.prices.get(state.model, prices.prices), 1000, 600)
    assert worst < spent_after_call_0
    s = setting({"money": (worst + spent_after_call_0) / 2})
    got = evaluator.replays(s)
    assert evaluator.redriven == 1
    assert got == _redriven(evaluator, s)
    assert got[0].outcome == "budget_exhausted:money" and got[0].calls == 1


@pytest.mark.parametrize("change, expected", [
    ({}, True), ({"budgets": {"tokens": 10}}, True),
    ({"visibility": {"on_limit": "finalize"}}, False),
    ({"visibility": {"show_budget": True}}, False),
    ({"detector": {"enabled": True}}, False), ({"max_output_tokens": 500}, False)])
def test_the_marks_answer_only_candidates_that_change_budgets_under_stop_on_limit(
        change, expected):
    """A harness that shows the budget or finalizes on a limit (either way the
    run differs before any refusal, or after it in a way the recording cannot
    answer), or a candidate that changes anything but the tokens, money and
    steps budgets, is replayed again; a change of those budgets alone is not."""
    base = HarnessConfig.model_validate(HARNESS)
    doc = base.model_dump(mode="json")
    for key, value in change.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    other = HarnessConfig.model_validate(doc)
    in_force = other if "visibility" in change else base
    assert answerable(in_force, other) is expected


@pytest.fixture(scope="module")
def generated() -> ReplayEvaluator:
    """120 runs of the known world (a 60-step backstop in force)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        traces = simulated_traces(Path(tmp), 120, seed=11)
        tables = TraceTables.load(traces)
        return ReplayEvaluator(tables.recorded(0, len(tables)), harness_in_force(None, traces))


def test_every_candidate_of_the_grid_stops_every_run_as_a_replay_does(generated):
    """Every candidate of tune's own grid for the three budgets (each alone)
    and a few joint ones: each run's outcome, stop, steps, tokens and cost
    from the one pass equal a replay of every run under the candidate; and
    the marks, not replays, answered all but a few of the runs the candidates
    could stop."""
    chosen = ("tokens", "money", "steps")
    in_force = dict(setting_in_force(generated.harness_in_force, chosen))
    forced = InForce(in_force)
    candidates = [setting({**in_force, knob: value})
                  for knob, values in grids(chosen, generated, in_force, None, {}).items()
                  for value in values]
    candidates += [setting({"tokens": 200_000, "money": 0.3, "steps": 25}),
                   setting({"tokens": 50_000, "money": 2.0, "steps": 60})]
    candidates = [s for s in candidates if forced.tightens(s)]
    assert len(candidates) >= 12
    for s in candidates:
        assert generated.replays(s) == _redriven(generated, s), s
    assert generated.marked > 10 * max(1, generated.redriven)


def _same_call(prompt: int, arguments: str = '{"q": 1}') -> CallRecord:
    return CallRecord(usage=Usage(input_tokens=prompt, output_tokens=100), cost_usd=prompt / 1e6,
                      tool_calls=[ToolCallRecord("search", arguments=arguments, result_tokens=50)])


DEEP = '{"q": ' + '{"a": ' * 70 + "1" + "}" * 70 + "}"
"""Arguments nested 71 levels deep: past the harness's 64, so the call is
rejected with a message and the tool is not run."""


def test_a_stop_after_a_tool_call_left_unrun_is_read_as_a_replay_reads_it():
    """Call 1 asks for a tool with arguments nested past the harness's limit:
    the harness rejects it and never runs the tool; at the mark before call
    2 that step is over (its checkpoint passed), so no tool call is due and a
    stop there is not mid-step. Every step cap and token
    budget that stops the run is answered from the marks (nothing replayed
    again) and equals a replay of the run under it."""
    run = RunRecord("deep", "sim", "", [_call(1000), _same_call(2000, DEEP), _call(3000),
                                        _call(4000, tool=False)],
                    model="gpt-4o", resolved=True, exit="done")
    evaluator = ReplayEvaluator([run], HarnessConfig.model_validate(HARNESS))
    marks = evaluator.marks[0]
    assert marks is not None and marks.exact
    tools_run, tools_due = marks.rows[2][-3], marks.rows[2][-2]
    assert (tools_run, tools_due) == (0, 0)  # call 1's tool call was refused: the step is over
    candidates = [setting({"steps": cap}) for cap in (1, 2, 3)] + [
        setting({"tokens": t}) for t in (2500, 5000, 8000)]
    for s in candidates:
        assert evaluator.replays(s) == _redriven(evaluator, s), s
    assert (evaluator.marked, evaluator.redriven) == (len(candidates), 0)


def test_a_tool_call_refused_in_an_earlier_step_leaves_a_later_stop_at_the_call_not_made():
    """Call 1's tool call is refused (nested past the harness's limit) and
    never run; calls 2 and 3 run theirs. A cap of 4 steps stops the run
    before call 4: the recorded call it did not make is call 4, in the marks'
    reading and in a replay (when the driver counted tools run and due over
    the whole run, the refused call made every later stop read as mid-step,
    at call 3)."""
    run = RunRecord("refused", "sim", "", [_call(1000), _same_call(2000, DEEP), _call(3000),
                                           _call(4000), _call(5000), _call(6000, tool=False)],
                    model="gpt-4o", resolved=True, exit="done")
    evaluator = ReplayEvaluator([run], HarnessConfig.model_validate(HARNESS))
    s = setting({"steps": 4})
    redriven = _redriven(evaluator, s)
    assert evaluator.replays(s) == redriven
    assert (redriven[0].stopped_at, redriven[0].outcome) == (4, "budget_exhausted:steps")


def test_a_run_ended_mid_step_by_the_detector_is_replayed_again_at_a_cap_of_its_steps():
    """With the detector on (repeats of 2), six identical calls end as
    needs_human in step 4's tool calls, and the loop's last effect is the
    checkpoint that ends it (``top_end``). A cap of 4 steps passes every
    mark (0 to 3 steps made) but refuses on the final counters (4 steps):
    the marks cannot tell whether the run got there, so exactly that
    candidate replays the run again; caps 1 to 3 stop it at a mark and caps
    5 to 7 leave it as in force. Each equals a replay under it."""
    h = HarnessConfig.model_validate({**HARNESS, "detector": {"enabled": True,
                                                              "repeat_threshold": 2}})
    run = RunRecord("loop", "sim", "", [*(_same_call(1000 * (i + 1)) for i in range(6)),
                                        _call(7000, tool=False)],
                    model="gpt-4o", resolved=True, exit="done")
    evaluator = ReplayEvaluator([run], h)
    marks = evaluator.marks[0]
    assert marks is not None and marks.top_end and not marks.budget_end
    assert evaluator.baseline[0].chosen.outcome == "needs_human:no_progress"
    assert evaluator.baseline[0].chosen.state.turns == 4
    for cap in range(1, 8):
        s = setting({"steps": cap})
        before = evaluator.redriven
        assert evaluator.replays(s) == _redriven(evaluator, s), cap
        assert evaluator.redriven - before == (cap == 4), cap
