"""Recorded and simulated runs as the same quantities, for comparing them.

A :class:`Sample` holds, per run: steps (model calls), prompt tokens (input +
cache read + cache write, summed), output tokens (summed), cost (USD; NaN when
not recorded), the exit category (:mod:`sim.calibration.exits`) and whether it
was resolved (1, 0, or NaN when unknown), the subagents it started
(``children``: distinct ``calls.agent`` ids of a recorded run, a simulated
run's descendants; steps, tokens and cost are the run's own, its
children's not included: :mod:`sim.calibration.fitting`); and per call, the output tokens and
the index of the run it belongs to. :func:`from_traces` makes one from a trace
folder's runs, :func:`simulate` from a scenario's simulated runs (the direct
engine, every call logged by :class:`~sim.world.call_log.RecordingTask`; a
simulated run is resolved when its task was truly done).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from sim.calibration.data import Traces
from sim.calibration.exits import category


@dataclass
class Sample:
    """Per-run and per-call quantities of a set of runs (see the module docstring)."""

    steps: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cost: np.ndarray
    category: np.ndarray
    resolved: np.ndarray
    call_output: np.ndarray
    call_run: np.ndarray
    reach_tokens: np.ndarray | None = None
    """Per run, its reach towards a prompt-token budget (:mod:`sim.calibration.reach`;
    NaN unknown; None: not watched)."""
    reach_money: np.ndarray | None = None
    """Per run, a bound of its reach towards a money budget (USD; as above)."""
    children: np.ndarray | None = None
    """Per run, the subagents it started (None: not known, all zeros)."""
    child_tokens: np.ndarray | None = None
    """Per run, the tokens its subagents used (prompt, output and reasoning;
    None when ``children`` is)."""

    @property
    def kids(self) -> np.ndarray:
        """Per run, the subagents it started (zeros when not recorded)."""
        return (self.children if self.children is not None
                else np.zeros(self.n, dtype=np.int64))

    @property
    def n(self) -> int:
        """Number of runs."""
        return len(self.steps)

    def take(self, runs: np.ndarray) -> Sample:
        """The sample of the runs at positions ``runs`` (with repeats, in
        order: a bootstrap resample), calls renumbered to match."""
        runs = np.asarray(runs, dtype=np.int64)
        order = np.argsort(self.call_run, kind="stable")
        starts = np.searchsorted(self.call_run[order], np.arange(self.n))
        ends = np.searchsorted(self.call_run[order], np.arange(self.n), side="right")
        lengths = (ends - starts)[runs]  # each taken run's calls, as one index array
        offsets = np.cumsum(lengths) - lengths
        idx = order[np.repeat(starts[runs] - offsets, lengths)
                    + np.arange(int(lengths.sum()), dtype=np.int64)]
        new_run = np.repeat(np.arange(len(runs)), lengths)
        return Sample(self.steps[runs], self.prompt[runs], self.output[runs], self.cost[runs],
                      self.category[runs], self.resolved[runs], self.call_output[idx], new_run,
                      children=None if self.children is None else self.children[runs],
                      child_tokens=None if self.child_tokens is None
                      else self.child_tokens[runs])


def from_traces(traces: Traces) -> Sample:
    """The sample of a trace folder's runs."""
    runs, calls = traces.runs, traces.calls
    index = {r: i for i, r in enumerate(runs["run_id"])}
    resolved = np.array([np.nan if v is None else float(v) for v in runs["resolved"]])
    children = child_tokens = None
    sub = traces.subagent_calls
    if sub is not None:  # (a subset may hold no subagent call: zeros)
        g = sub.groupby("run_id", sort=False)
        children = runs["run_id"].map(g["agent"].nunique()).fillna(0).to_numpy(np.int64)
        used = (sub["prompt"] + sub["output"] + sub["reasoning"]).groupby(
            sub["run_id"], sort=False).sum()
        child_tokens = runs["run_id"].map(used).fillna(0).to_numpy(np.int64)
    return Sample(runs["steps"].to_numpy(np.int64), runs["prompt"].to_numpy(np.int64),
                  runs["output"].to_numpy(np.int64), runs["cost"].to_numpy(float),
                  runs["category"].to_numpy(object), resolved,
                  calls["output"].to_numpy(np.int64),
                  calls["run_id"].map(index).to_numpy(np.int64), children=children,
                  child_tokens=child_tokens)


def simulate(doc: dict[str, Any], runs: int, seed: int, calls: bool = True,
             only: np.ndarray | None = None) -> Sample:
    """``runs`` simulated runs of the scenario mapping ``doc`` at root seed
    ``seed``; ``calls`` False leaves the per-call arrays empty (no call is
    logged: the runs' quantities are the same, the search's loss needs no
    more), True also keeps each run's reach towards the budgets
    (:mod:`sim.calibration.reach`); ``only`` (run indices, ascending) simulates
    those runs alone, each the same run as in the full simulation (its own
    random streams), the sample's runs in that order."""
    from sim.calibration.reach import WatchedTask, reach_usd, unscreened
    from sim.engines.direct import run_task_with_world
    from sim.scenario.model import validate
    from sim.sweeps.cells import build_cell, cells_of
    from sim.world.call_log import RecordingTask
    from sim.world.streams import StreamPool
    from sim.world.task import SimulatedTask

    scenario = validate({**doc, "seed": seed, "tasks": runs},
                        f"the world fitted to the traces ({doc.get('name') or 'calibration'})")
    cell = build_cell(cells_of(scenario)[0])
    pool = StreamPool()
    indices = range(runs) if only is None else [int(i) for i in only]
    n = len(indices)
    steps = np.zeros(n, dtype=np.int64)
    prompt = np.zeros(n, dtype=np.int64)
    output = np.zeros(n, dtype=np.int64)
    cost = np.zeros(n)
    cats = np.empty(n, dtype=object)
    resolved = np.zeros(n)
    reach = np.full(n, np.nan) if calls else None
    money = np.full(n, np.nan) if calls else None
    spawns = cell.params.subagents is not None
    kids = np.zeros(n, dtype=np.int64)
    kid_tokens = np.zeros(n, dtype=np.int64)
    blind = unscreened(cell.params)
    call_output: list[int] = []
    call_run: list[int] = []
    task_type = WatchedTask if calls else SimulatedTask
    for j, i in enumerate(indices):
        record, simulated = run_task_with_world(cell, i, pool, task_type=task_type)
        steps[j] = record.steps
        prompt[j] = record.prompt_tokens
        output[j] = record.output_tokens
        cost[j] = record.cost_usd
        cats[j] = category(f"{record.state}:{record.reason}")
        resolved[j] = float(record.truly_done)
        kids[j] = record.descendants
        kid_tokens[j] = record.children_tokens
        if calls:
            log = cast(RecordingTask, simulated).log  # the task is a task_type
            call_output.extend([call.output_tokens for call in log])
            call_run.extend([j] * len(log))
            watched = cast(WatchedTask, simulated)
            if (not blind and watched.spent == record.prompt_tokens  # all usage seen
                    and not record.compactions and record.reason != "context_overflow"):
                # (an overflow's check is not followed by the request it checked)
                assert reach is not None and money is not None
                reach[j] = watched.reach
                money[j] = reach_usd(cell.params, float(record.cost_usd), watched.top_prompt,
                                     watched.top_output)
    return Sample(steps, prompt, output, cost, cats, resolved,
                  np.asarray(call_output, dtype=np.int64), np.asarray(call_run, dtype=np.int64),
                  reach, money, kids if spawns else None, kid_tokens if spawns else None)


def pooled(samples: list[Sample]) -> Sample:
    """The samples' runs one after another (calls renumbered)."""
    offsets = np.cumsum([0] + [s.n for s in samples[:-1]])
    fields = ("steps", "prompt", "output", "cost", "category", "resolved", "call_output")
    steps, prompt, output, cost, category, resolved, call_output = (
        np.concatenate([getattr(s, f) for s in samples]) for f in fields)
    runs = np.concatenate([s.call_run + o for s, o in zip(samples, offsets, strict=True)])
    children = tokens = None
    if any(s.children is not None for s in samples):
        children = np.concatenate([s.kids for s in samples])
        tokens = np.concatenate([s.child_tokens if s.child_tokens is not None
                                 else np.zeros(s.n, np.int64) for s in samples])
    return Sample(steps, prompt, output, cost, category, resolved, call_output, runs,
                  children=children, child_tokens=tokens)
