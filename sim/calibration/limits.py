"""The recorded harness's limits, as the traces state them or its stops show them.

- **steps**: the runs' step limit, else the most steps a run stopped by the
  step limit reached, else a message limit over the mean messages per call;
- **tool errors** and **money**: the runs' recorded limits (the median); a
  tool-error limit the runs do not state is the fewest tool errors of a run
  it stopped (the harness refuses the next model call once a run's tool
  errors reach it);
- **prompt tokens** and **output tokens**: no trace column states them, but a
  run the recorded harness stopped for them (``budget_exhausted:tokens``,
  ``budget_exhausted:output_tokens``) bounds them. The harness refuses a call
  whose prompt (or whose output cap) would take the run past its budget, so
  the budget ``B`` is at least every run's total (``L``, the largest) and
  below each stopped run's total plus the call it was refused (``U``, the
  smallest: the next prompt of an append-only history, the last prompt plus
  its output, tool results and other observations; for output, the largest
  output a call made, the cap the harness reserves). The budget is the
  middle of ``[L, U)``, or ``L`` when the estimated ``U`` is not above it.

The **context window** of a harness that failed runs on a context overflow
(``failed:context_overflow``, category ``context``) is bracketed the same way:
at least the largest prompt sent, below a failed run's next prompt; such a
harness did not compact in an emergency.

Time budgets are not read back (the traces' durations hold the tools' and
the model's time, but not the worst case the harness reserved): a run the
recorded harness stopped for time stays a censored run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.calibration.data import Traces


@dataclass
class Limits:
    """The recorded harness's limits (None: none known); ``notes`` by limit."""

    steps: int | None
    tool_errors: int | None
    money_usd: float | None
    tokens: int | None
    output_tokens: int | None
    notes: dict[str, str] = field(default_factory=dict)
    context_window: int | None = None


def _median(traces: Traces, column: str) -> float | None:
    values = traces.runs[column].dropna()
    return float(values.median()) if len(values) else None


def limits(traces: Traces) -> Limits:
    """The limits of ``traces``' recorded harness (see the module docstring)."""
    runs, calls = traces.runs, traces.calls
    notes: dict[str, str] = {}
    step_limit = _median(traces, "step_limit")
    steps = None if step_limit is None else int(step_limit)
    stopped = runs.loc[runs["category"] == "steps", "steps"]
    if steps is None and len(stopped):
        steps = int(stopped.max())
        notes["steps"] = (f"the most steps of the {len(stopped)} runs the recorded step or "
                          f"message limit stopped")
    message_limit = _median(traces, "message_limit") if steps is None else None
    if message_limit is not None and len(calls):
        per_step = float((1 + calls["tools"] + (calls["text"] & ~calls["last"])).mean())
        steps = max(1, int(message_limit / per_step))
        notes["steps"] = f"message limit {message_limit:g} / {per_step:.2f} messages per call"
    errors = _median(traces, "error_limit")
    hit = (runs["category"] == "errors").to_numpy(bool)
    if errors is None and hit.any():  # refused once the run's tool errors reach the limit
        errors = float(max(1, int(runs["errors"].to_numpy()[hit].min())))
        notes["tool_errors"] = (f"the fewest tool errors of the {int(hit.sum())} runs the "
                                f"recorded tool-error limit stopped")
    tokens = _token_budget(traces, "budget_exhausted:tokens", "prompt", notes)
    output = _token_budget(traces, "budget_exhausted:output_tokens", "output", notes)
    return Limits(steps, None if errors is None else int(errors),
                  _median(traces, "cost_limit_usd"), tokens, output, notes,
                  _context_window(traces, notes))


def _next_prompts(traces: Traces, hit: np.ndarray) -> np.ndarray:
    """The prompt the runs ``hit`` (a mask of the runs) would have sent next:
    their last prompt plus its output, tool results and other observations
    (an append-only history)."""
    calls = traces.calls
    last = calls[calls["last"].to_numpy(bool)].set_index("run_id")
    after = last.reindex(traces.runs["run_id"].to_numpy(object)[hit])
    return (after["prompt"] + after["output"] + after["results"]
            + after["observation"]).to_numpy(float)


def _middle(low: float, ends: np.ndarray) -> tuple[int, float]:
    """``(the middle of [low, high), high)``, ``high`` the smallest finite of
    ``ends`` (``low`` itself when it is not above ``low``)."""
    ends = ends[np.isfinite(ends)]
    high = float(ends.min()) if ends.size else low
    return (int((low + high) / 2) if high > low else int(low)), high


def _context_window(traces: Traces, notes: dict[str, str]) -> int | None:
    """The context window that failed the runs stopped by a context overflow
    (None when none was): at least the largest prompt sent, below a failed
    run's next prompt."""
    hit = (traces.runs["category"] == "context").to_numpy(bool)
    if not hit.any() or not len(traces.calls):
        return None
    low = float(traces.calls["prompt"].max())
    window, high = _middle(low, _next_prompts(traces, hit))
    notes["context"] = (f"{int(hit.sum())} runs failed by a context overflow: a window of "
                        f"at least {int(low):,} tokens (the largest prompt), below "
                        f"{int(high):,} (a failed run's next prompt), and no emergency "
                        f"compaction")
    return window


def _token_budget(traces: Traces, label: str, column: str, notes: dict[str, str]
                  ) -> int | None:
    """The prompt (``column`` "prompt") or output (``"output"``) token budget
    that stopped the runs labelled ``label`` (None when none was)."""
    runs, calls = traces.runs, traces.calls
    hit = (runs["exit"].str.lower() == label).to_numpy(bool)
    if not hit.any():
        return None
    totals = runs[column].to_numpy(float)
    if column == "output":
        totals = totals + runs["reasoning"].to_numpy(float)
    low = float(totals.max())
    refused = (_next_prompts(traces, hit) if column == "prompt" else
               np.full(int(hit.sum()), float((calls["output"] + calls["reasoning"]).max())))
    budget, high = _middle(low, totals[hit] + refused)
    notes[column + "_tokens"] = (
        f"{int(hit.sum())} runs stopped by the recorded {column} token budget: at least "
        f"{int(low):,} (the largest total), below {int(high):,} (a stopped run's total and "
        f"the call refused)")
    return budget
