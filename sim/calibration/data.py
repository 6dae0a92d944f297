"""Reading a trace folder for calibration: checks, derived quantities, the split.

:func:`load` reads ``runs.parquet`` and ``calls.parquet`` with the trace
model's checked reader (:func:`sim.traces.model.read_traces`), refuses what
calibration cannot use with an
:class:`~sim.bad_input.InputError` (no such folder, no runs, fewer than
:data:`MIN_RUNS` usable runs, no token usage at all), and returns
:class:`Traces`: one row per usable run and one per call, with the quantities
every later stage reads (units: tokens, USD, seconds):

- per call: ``prompt`` (input + cache read + cache write), ``output``,
  ``reasoning``, ``tools`` (tool calls made), ``text`` (no tool call),
  ``errors`` (tool results flagged as errors), ``results`` (tokens of the tool
  results), ``tool`` (the first tool's name), ``repeat`` (the first tool call
  repeats the previous call's: same name and arguments), ``observation``
  (tokens of other messages entering after the call), ``last`` (the run's
  final call), ``latency_s``, ``started_s``, ``cost``, ``tool_s`` (seconds
  its tool calls ran, NaN when not recorded);
- per run: ``steps``, ``prompt`` and ``output`` (sums), ``cost`` (NaN when not
  recorded), ``exit`` (the label) and ``category`` (:mod:`sim.calibration.exits`),
  ``resolved``, ``model``, ``first_prompt``, and ``P`` and ``h``: the least-
  squares fit of the run's prompts ``prompt(n) = P + h n`` (n the 0-based call).

Only a run's loop steps are calls here (a simulated run's compaction and
grader calls, ``purpose`` other than ``step``, count in its sums but are no
steps). Runs with no model calls or no token usage are dropped and counted
(``Traces.dropped``), unless ``load(..., keep_empty=True)`` keeps the runs
with no calls (zero steps). :func:`split` draws the held-out runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sim.bad_input import InputError
from sim.calibration.exits import category

RUNS_FILE, CALLS_FILE = "runs.parquet", "calls.parquet"
MIN_RUNS = 10
"""Fewest usable runs calibration accepts: it fits on some and measures on the others."""



@dataclass
class Traces:
    """The usable runs of a trace folder (see the module docstring)."""

    folder: str
    runs: pd.DataFrame
    calls: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)
    """Values calibration replaced, by reason (:mod:`sim.calibration.costs`)."""

    def subset(self, run_ids) -> Traces:
        """The traces of the given runs only (in this object's order)."""
        keep = set(run_ids)
        runs = self.runs[self.runs["run_id"].isin(keep)].reset_index(drop=True)
        calls = self.calls[self.calls["run_id"].isin(keep)].reset_index(drop=True)
        return Traces(self.folder, runs, calls, dict(self.dropped), dict(self.repaired))

    @property
    def n(self) -> int:
        """Number of runs."""
        return len(self.runs)


def load(folder: str | Path, *, keep_empty: bool = False) -> Traces:
    """The usable runs of the trace folder ``folder``, or an InputError.

    ``keep_empty`` keeps the runs with no model call (a provider error or a
    timeout before the first reply): zero steps and tokens, their exit and
    cost as recorded, so that the exit mix and the endings (a fault at the
    first call) count them; they still do not count towards
    :data:`MIN_RUNS`. By default they are dropped and counted in
    ``Traces.dropped``, as before."""
    path = Path(folder)
    runs, calls = _read(path)
    if runs.empty:
        raise InputError("the trace folder has no runs", source=str(path))
    calls = calls.sort_values(["run_id", "call"], kind="stable").reset_index(drop=True)
    calls = _derive_calls(calls)
    usage = calls.groupby("run_id", sort=False)[["prompt", "output"]].sum()
    totals = calls.groupby("run_id", sort=False)[["prompt", "output", "reasoning"]].sum()
    purpose = calls["purpose"] if "purpose" in calls else pd.Series(None, index=calls.index)
    calls = calls[purpose.isna() | (purpose == "step")].reset_index(drop=True)
    n_calls = calls.groupby("run_id", sort=False).size()
    dropped: dict[str, int] = {}
    has_calls = runs["run_id"].isin(n_calls.index)
    if (~has_calls).any():
        dropped["no model calls"] = int((~has_calls).sum())
    used = usage.index[(usage["prompt"] > 0) | (usage["output"] > 0)]
    no_usage = has_calls & ~runs["run_id"].isin(used)
    if no_usage.any():
        dropped["no token usage"] = int(no_usage.sum())
    empty = runs[~has_calls]
    runs = runs[runs["run_id"].isin(used)].reset_index(drop=True)
    if runs.empty:
        raise InputError("no run records any token usage (every call has zero prompt and "
                         "output tokens): nothing to fit", source=str(path))
    if len(runs) < MIN_RUNS:
        raise InputError(f"calibration needs at least {MIN_RUNS} runs with token usage (it fits "
                         f"on some and measures the fit on the others); this folder has "
                         f"{len(runs)}", source=str(path))
    if keep_empty and (~has_calls).any():
        runs = pd.concat([runs, empty], ignore_index=True)
        dropped.pop("no model calls", None)
    calls = calls[calls["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    return Traces(str(path), _derive_runs(runs, calls, totals), calls, dropped)


def _read(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two tables, checked by the trace model's reader (missing files or
    columns, wrong types, calls that do not add up are InputErrors naming
    them), with nullable columns as plain floats and objects."""
    from sim.traces.model import read_traces

    runs, calls = read_traces(path)
    return _plain(runs), _plain(calls)


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Nullable numbers as float64 with NaN, nullable booleans and strings as
    objects with None (what the derivations below expect)."""
    out = {}
    for name, column in frame.items():
        kind = str(column.dtype)
        if kind in ("Int64", "Float64"):
            out[name] = column.astype("float64")
        elif kind in ("boolean", "string") or kind.startswith("string"):
            out[name] = column.astype(object).where(column.notna(), None)
        else:
            out[name] = column
    return pd.DataFrame(out, index=frame.index)


def _derive_calls(calls: pd.DataFrame) -> pd.DataFrame:
    tokens = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
              "reasoning_tokens")
    for c in tokens:
        calls[c] = pd.to_numeric(calls[c], errors="coerce").fillna(0).astype(np.int64)
    calls["prompt"] = calls["input_tokens"] + calls["cache_read_tokens"] + calls[
        "cache_write_tokens"]
    calls["output"] = calls["output_tokens"]
    calls["reasoning"] = calls["reasoning_tokens"]
    calls["cost"] = pd.to_numeric(calls["cost_usd"], errors="coerce").astype(float)
    for c in ("latency_s", "started_s"):
        calls[c] = pd.to_numeric(calls[c], errors="coerce").astype(float)
    calls["observation"] = pd.to_numeric(calls["observation_tokens"], errors="coerce").fillna(
        0).astype(np.int64)
    lists = [list(v) if v is not None and not isinstance(v, float) else []
             for v in calls["tool_calls"]]
    _tool_columns(calls, lists)
    keys = [(v[0].get("name"), v[0].get("arguments")) if v else None for v in lists]
    runs = calls["run_id"].to_numpy()
    repeat = np.zeros(len(keys), dtype=bool)
    for i in range(1, len(keys)):
        repeat[i] = keys[i] is not None and runs[i] == runs[i - 1] and keys[i] == keys[i - 1]
    calls["repeat"] = repeat
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = runs[1:] != runs[:-1]
    calls["last"] = last
    return calls.drop(columns=["tool_calls"])


def _tool_columns(calls: pd.DataFrame, lists: list[list[Any]]) -> None:
    """The per-call columns of the tool calls ``lists`` (one list per call):
    ``tools``, ``text``, ``errors``, ``results``, ``tool``, ``tool_s``."""
    calls["tools"] = np.array([len(v) for v in lists], dtype=np.int64)
    calls["text"] = calls["tools"] == 0
    calls["errors"] = np.array([sum(1 for t in v if t.get("error")) for v in lists],
                               dtype=np.int64)
    calls["results"] = np.array([sum(int(t.get("result_tokens") or 0) for t in v)
                                 for v in lists], dtype=np.int64)
    calls["tool"] = [v[0].get("name") or "" if v else "" for v in lists]
    seconds = [[t.get("duration_s") for t in v if t.get("duration_s") is not None] for v in lists]
    calls["tool_s"] = np.array([sum(s) if s else np.nan for s in seconds], dtype=float)


def _derive_runs(runs: pd.DataFrame, calls: pd.DataFrame, totals: pd.DataFrame) -> pd.DataFrame:
    g = calls.groupby("run_id", sort=False)
    sums = g[["tools", "errors"]].sum().join(totals)
    runs = runs.set_index("run_id", drop=False)
    out = pd.DataFrame({"run_id": runs["run_id"]})
    out["model"] = runs["model"].fillna("").astype(str)
    out["steps"] = g.size().reindex(out.index).fillna(0).astype(np.int64)
    for c in ("prompt", "output", "reasoning", "tools", "errors"):
        out[c] = sums[c].reindex(out.index).fillna(0).astype(np.int64)
    recorded = pd.to_numeric(runs["cost_usd"], errors="coerce").astype(float)
    out["cost"] = recorded
    out["exit"] = runs["exit"].fillna("").astype(str)
    out["category"] = [category(label) for label in out["exit"]]
    out["resolved"] = runs["resolved"].map(lambda v: None if v is None or v is pd.NA
                                           or (isinstance(v, float) and np.isnan(v))
                                           else bool(v))
    for c in ("step_limit", "cost_limit_usd", "error_limit", "message_limit", "duration_s"):
        values = runs[c] if c in runs else pd.Series(np.nan, index=runs.index)
        out[c] = pd.to_numeric(values, errors="coerce").astype(float)
    first = g["prompt"].first()
    out["first_prompt"] = first.reindex(out.index).fillna(0).astype(np.int64)
    fits = {run: _line(group["prompt"].to_numpy(float)) for run, group in g}
    out["P"] = [fits.get(r, (0.0, 0.0))[0] for r in out.index]
    out["h"] = [fits.get(r, (0.0, 0.0))[1] for r in out.index]
    return out.reset_index(drop=True)


def _line(prompts: np.ndarray) -> tuple[float, float]:
    """Least squares ``prompt(n) = P + h n`` over a run's calls (one call: h = 0)."""
    if prompts.size < 2:
        return float(prompts[0]), 0.0
    n = np.arange(prompts.size, dtype=float)
    h, p = np.polyfit(n, prompts, 1)
    return float(p), float(h)


def split(traces: Traces, fraction: float, seed: int) -> tuple[Traces, Traces]:
    """``(fit, held_out)``: a random share ``fraction`` of the runs held out
    (at least one run on each side), drawn with ``numpy.random.default_rng(seed)``."""
    if not 0.0 < fraction < 1.0:
        raise InputError(f"--holdout-fraction must be in (0, 1), got {fraction}")
    n = traces.n
    k = min(n - 1, max(1, round(fraction * n)))
    order = np.random.default_rng(seed).permutation(n)
    ids = traces.runs["run_id"].to_numpy()
    held = set(ids[order[:k]])
    return (traces.subset([r for r in ids if r not in held]),
            traces.subset([r for r in ids if r in held]))
