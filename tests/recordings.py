"""Small recorded runs for the replay tests, and trace folders holding them.

:func:`conversation` builds a run whose prompts grow exactly as the trace
model says they do (call k+1's prompt = call k's prompt + its output and
reasoning + its tool results + the observation after it), so a faithful replay
must count every prompt exactly. :func:`write_traces` writes runs as a trace
folder with the trace model's writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from sim.harness.messages import Usage
from sim.harness.params import DetectorParams, HarnessParams, Prices
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.traces.writer import write_runs

PRICES = Prices(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)


def tool(name: str = "search", result: int = 30, error: bool = False, duration: float = 0.5,
         **arguments: object) -> ToolCallRecord:
    """A recorded tool call with canonical-JSON ``arguments``; its result's hash
    is derived from the name, arguments and size (equal calls, equal results)."""
    args = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return ToolCallRecord(name, arguments=args, result_tokens=result,
                          result_sha256=f"sha-{name}-{args}-{result}", error=error,
                          duration_s=duration)


def conversation(steps: Sequence[Sequence[ToolCallRecord]], *, first: int = 1_000,
                 output: int = 40, reasoning: int = 0, observation: int = 25,
                 cost: float | None = 0.01, latency: float = 2.0, extra: Sequence[int] = (),
                 finish: str | None = None) -> tuple[CallRecord, ...]:
    """Calls whose prompts grow exactly: ``steps[k]`` are call k's tool calls
    (an empty one is a text turn answered by a user message of
    ``observation`` tokens); ``extra[k]`` tokens more enter after call k (a
    recorded result size that undercounts the provider's). Call 0's prompt is
    ``first``; half of each prompt is read from the cache."""
    calls = []
    prompt = first
    for k, tools in enumerate(steps):
        obs = observation if not tools else 0
        calls.append(CallRecord(
            usage=Usage(input_tokens=prompt - prompt // 2, cache_read_tokens=prompt // 2,
                        output_tokens=output, thinking_tokens=reasoning),
            cost_usd=None if cost is None else cost * (1 + k), finish_reason=finish,
            latency_s=latency, text_tokens=0 if tools else output, observation_tokens=obs,
            tool_calls=list(tools)))
        prompt += output + reasoning + sum(t.result_tokens or 0 for t in tools) + obs + (
            extra[k] if k < len(extra) else 0)
    return tuple(calls)


def recorded(run_id: str, calls: Sequence[CallRecord], *, resolved: bool | None = True,
             exit: str = "user_stop", model: str = "test-model") -> RunRecord:
    """A run with its recorded cost the sum of its calls' costs."""
    costs = [c.cost_usd for c in calls]
    cost = sum(costs) if all(c is not None for c in costs) else None
    return RunRecord(run_id, "sim", "", list(calls), task_id=f"task-{run_id}", model=model,
                     cost_usd=cost, exit=exit, resolved=resolved)


def loose(**changes: object) -> HarnessParams:
    """Candidate parameters under which nothing binds: no budgets, detector
    off, no 'do without it' message, a huge window; ``changes`` replace fields."""
    base = dict(detector=DetectorParams(enabled=False), tool_failure_limit=10 ** 9,
                context_window=10 ** 9, max_output_tokens=1_000, prices=PRICES)
    base.update(changes)
    return HarnessParams(**base)


def write_traces(folder: Path, runs: Sequence[RunRecord], *, with_tools: bool = True) -> Path:
    """Write ``runs`` as a trace folder with the trace model's own writer
    (:func:`sim.traces.writer.write_runs`); ``with_tools`` False records no
    tool calls."""
    folder.mkdir(parents=True, exist_ok=True)
    write_runs(folder, [RunRecord(
        run_id=run.run_id, source="sim", file="test.json", task_id=run.task_id,
        model=run.model, cost_usd=run.cost_usd, exit=run.exit, resolved=run.resolved,
        calls=[c if with_tools else replace(c, tool_calls=[]) for c in run.calls])
        for run in runs])
    return folder
