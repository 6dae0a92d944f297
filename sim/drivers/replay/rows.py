"""A replayed run as results rows: its :class:`~sim.task_record.TaskRecord`
(the columns every results folder has) and the replay's own columns
(:func:`replay_row`, typed by :data:`REPLAY_DTYPES`) that the report reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sim.drivers.replay.driver import Replay
from sim.drivers.replay.options import ReplayOptions
from sim.drivers.replay.pricing import ModelPricing
from sim.drivers.replay.reading import runs_of
from sim.drivers.replay.replayed import PARENT, Session
from sim.drivers.replay.runs import RunReplay, replay_runs
from sim.engines.gc_paused import gc_paused
from sim.harness.detector import Detector
from sim.harness.params import HarnessParams
from sim.task_record import TaskRecord
from sim.traces.model import RunRecord


def task_record(replay: Replay, cell: str, index: int) -> TaskRecord:
    """The :class:`TaskRecord` of a replayed run (the columns every results
    folder has). ``ground_truth`` is -1 (a recording has no hidden ground
    truth) and ``truly_done`` is the recorded ``resolved`` (False when unknown)."""
    s = replay.state
    return TaskRecord(
        cell=cell, task=index, state=replay.status, reason=replay.reason,
        outcome=replay.outcome, steps=s.turns, tool_calls=s.tool_calls,
        input_tokens=s.input_tokens, output_tokens=s.output_tokens,
        cache_read_tokens=s.cache_read_tokens, cache_write_tokens=s.cache_write_tokens,
        thinking_tokens=s.thinking_tokens, cost_usd=replay.cost_usd, active_s=s.active_s,
        wall_s=s.wall_s, retries=s.retries, nudges=s.nudges,
        verifier_rejections=s.verifier_rejections, compactions=s.compactions,
        ground_truth=-1, truly_done=bool(replay.run.resolved), end_s=s.wall_s)


def _pairs(items: list[tuple[int, str]]) -> str:
    return ";".join(f"{kind}@{k}" for k, kind in items)


def replay_row(item: RunReplay) -> dict[str, Any]:
    """The replay's own columns of a run's row in results.parquet (beside the
    :class:`TaskRecord` columns): the run's identity and recording (exit,
    resolved, steps, tool calls, prompt and output tokens, recorded cost and
    its price at the run's prices; ``saved_usd``: the recorded cost of the
    calls the candidate did not make, and ``saved_priced_usd`` at the run's
    prices; ``price_basis``: what ``recorded_calls_usd``, the run's one price,
    rests on, :mod:`sim.cost.recorded`), what the candidate did (stopped and at
    which call, diverged and where and how, detector firings, who ended the
    replay), the two bounds (cost and outcome if the run stops at its first
    intervention and if it continues as recorded) and fidelity (prompt counts
    that differ from the recording, text turns, unrecorded arguments)."""
    r = item.chosen
    run = r.run
    first = r.interventions[0] if r.interventions else None
    return {
        "run_id": run.run_id, "source": run.source, "task_id": run.task_id or "",
        "model": run.model or "", "recorded_exit": run.exit or "",
        "recorded_resolved": run.resolved, "recorded_steps": len(run.calls),
        "recorded_tool_calls": run.tool_calls,
        "recorded_prompt_tokens": run.prompt_tokens,
        "recorded_output_tokens": sum(c.usage.output_tokens + c.usage.thinking_tokens
                                      for c in run.calls),
        "recorded_cost_usd": run.recorded_cost_usd,
        "cost_recorded": all(c.cost_usd is not None for c in run.calls),
        "recorded_calls_usd": r.recorded_calls_usd, "saved_usd": r.saved_usd,
        "recorded_priced_usd": r.recorded_priced_usd, "priced_usd": r.priced_usd,
        "saved_priced_usd": r.saved_priced_usd, "price_basis": r.basis,
        "ended_by": r.ended_by, "stopped": r.stopped, "stopped_at": r.stopped_at,
        "diverged": r.diverged, "diverged_at": None if first is None else first[0],
        "divergence": "" if first is None else first[1],
        "interventions": _pairs(r.interventions), "detector_signals": _pairs(r.firings),
        "firings": len(r.firings),
        "cost_lower_usd": item.lower.cost_usd, "cost_upper_usd": item.upper.cost_usd,
        "prompt_tokens_lower": item.lower.state.prompt_tokens,
        "prompt_tokens_upper": item.upper.state.prompt_tokens,
        "outcome_if_stop": item.lower.outcome, "outcome_if_continue": item.upper.outcome,
        "prompt_exact": r.prompt_mismatches == 0, "prompt_mismatches": r.prompt_mismatches,
        "prompt_max_deviation": r.prompt_max_deviation, "resized_steps": r.resized,
        "text_turns": r.text_turns, "unrecorded_arguments": r.unrecorded_arguments,
        "passed_over_calls": r.passed_over,
        "verdict_unknown": r.verdict_unknown,
        **({} if r.session is None else session_columns(r.session)),
    }


def session_columns(session: Session) -> dict[str, Any]:
    """The columns of a run with children (only then: a folder without
    subagents keeps its results as they were): ``children`` (count),
    ``children_states`` (``id=status:reason;...``), where the session budget
    stopped the session (``session_stopped_by``: ``parent`` or the child's
    id, empty when not stopped; ``session_stopped_call``: the run's call
    number; ``session_agent_call``: the call's index among its agent's;
    ``session_running_tokens``: the running sum that call would have
    reached) and the concurrency cap (``max_running_children``
    as recorded, ``children_delayed`` by the cap; :mod:`sim.drivers.replay.session`). Typed where
    results are written (:func:`sim.output.replay.session_rows`)."""
    by = session.stopped_by
    return {
        "children": len(session.children),
        "children_states": ";".join(f"{a}={state}" for a, state in session.children),
        "session_stopped_by": "" if by is None else "parent" if by == PARENT else by,
        "session_stopped_call": session.stopped_call,
        "session_agent_call": session.agent_call,
        "session_running_tokens": session.running_tokens,
        "session_stop": "" if by is None else session.text(),
        "max_running_children": session.max_running,
        "children_delayed": session.delayed,
    }


REPLAY_DTYPES: dict[str, str] = {
    "run_id": "string", "source": "string", "task_id": "string", "model": "string",
    "recorded_exit": "string", "recorded_resolved": "boolean", "recorded_steps": "int64",
    "recorded_tool_calls": "int64", "recorded_prompt_tokens": "int64",
    "recorded_output_tokens": "int64", "recorded_cost_usd": "Float64",
    "cost_recorded": "bool", "recorded_calls_usd": "float64", "saved_usd": "float64",
    "recorded_priced_usd": "float64", "priced_usd": "float64", "saved_priced_usd": "float64",
    "price_basis": "string", "ended_by": "string",
    "stopped": "bool", "stopped_at": "Int64", "diverged": "bool", "diverged_at": "Int64",
    "divergence": "string", "interventions": "string", "detector_signals": "string",
    "firings": "int64", "cost_lower_usd": "float64", "cost_upper_usd": "float64",
    "prompt_tokens_lower": "int64", "prompt_tokens_upper": "int64",
    "outcome_if_stop": "string", "outcome_if_continue": "string", "prompt_exact": "bool",
    "prompt_mismatches": "int64", "prompt_max_deviation": "int64", "resized_steps": "int64",
    "text_turns": "int64", "unrecorded_arguments": "int64", "passed_over_calls": "int64",
    "verdict_unknown": "bool",
}
"""pandas dtype of every column of :func:`replay_row` (nullable where a value may be
missing: a run the source does not judge, an unrecorded cost, a run not stopped)."""


def replay_rows(runs: list[RunRecord], template: HarnessParams, options: ReplayOptions,
                pricing: ModelPricing, make_detector: Callable[[HarnessParams], Detector] | None,
                cell: str, start: int) -> tuple[list[TaskRecord], list[dict[str, Any]]]:
    """Replay ``runs`` (a chunk of a trace folder whose first run is number
    ``start``) with :func:`~sim.drivers.replay.runs.replay_runs` and return
    their rows: the task records (task ``start``, ``start + 1``, ...) and the
    replay's own columns. The work one worker does for ``replay --workers``:
    each run's rows depend on that run, the template, the options and the
    pricing (made from all runs beforehand) only, so they are the same for any
    chunking."""
    replays = replay_runs(runs, template, options=options, pricing=pricing,
                          make_detector=make_detector)
    return ([task_record(r.chosen, cell, start + i) for i, r in enumerate(replays)],
            [replay_row(r) for r in replays])


def replay_slice(folder: str, start: int, stop: int, template: HarnessParams,
                 options: ReplayOptions, pricing: ModelPricing,
                 make_detector: Callable[[HarnessParams], Detector] | None, cell: str,
                 streamed: bool = False) -> tuple[list[TaskRecord], list[dict[str, Any]]]:
    """:func:`replay_rows` of runs ``start`` to ``stop - 1`` of the trace
    folder (:func:`sim.drivers.replay.reading.runs_of`: read whole, or,
    ``streamed``, their calls read here by row range; their objects built
    here): a chunk of ``replay --workers`` sent as a path and two numbers. The cyclic
    garbage collector is paused for the chunk (a replay makes many
    short-lived objects and few cycles; its passes over the live heap took
    about a sixth of the time)."""
    with gc_paused():
        runs = runs_of(folder, start, stop, streamed)
        return replay_rows(runs, template, options, pricing, make_detector, cell, start)
