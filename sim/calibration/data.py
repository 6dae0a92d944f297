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
  repeats the previous call's: same name and arguments), ``keys`` (the keys
  of its tool calls, name and canonical arguments, in the calls of runs where
  some tool call recurs, else None: what a no-progress detector compares,
  :mod:`sim.calibration.detection`), ``observation``
  (tokens of other messages entering after the call), ``last`` (the run's
  final call), ``latency_s``, ``started_s``, ``cost``, ``tool_s`` (seconds
  its tool calls ran, NaN when not recorded);
- per run: ``steps``, ``prompt`` and ``output`` (sums), ``cost`` (NaN when not
  recorded), ``exit`` (the label) and ``category`` (:mod:`sim.calibration.exits`;
  a run without a label, of a source none of whose runs records one (as
  OpenTelemetry's runs that ended without an error), is the agent's own end
  when its last call answered without a tool call, else ``other``; a source
  that labels some runs and not others leaves the rest ``other``: in a
  conversation the last answer does not say who ended it),
  ``resolved``, ``model``, ``first_prompt``, ``trailing_repeats`` (repeats
  of one call that end the run: its final loop), and ``P`` and ``h``: the least-
  squares fit of the run's prompts ``prompt(n) = P + h n`` (n the 0-based call).

A run's **own** calls are its parent agent's: calls with a null ``agent``.
Calls made by its subagents (a non-null ``agent``: Claude Code subagents,
nested agent spans) are kept apart in ``Traces.subagent_calls`` (the same
columns, derived over the whole run in call order, as the fan-out fit
reads them: :mod:`sim.calibration.fanout`), so every per-run quantity above
(steps, sums, the prompt line, the final loop) and every fit of the run's
own class counts the parent's calls only; a run's ``cost`` is then its
recorded cost less its subagents' recorded call costs (NaN when a
subagent call's cost is not recorded: priced from the parent's usage by
:mod:`sim.calibration.costs`). :attr:`Traces.all_calls` is both, in run and
call order.

Only a run's loop steps are calls here (a simulated run's compaction and
grader calls, ``purpose`` other than ``step``, count in its sums but are no
steps). Runs with no model calls or no token usage are dropped and counted
(``Traces.dropped``), and so are runs with a call whose usage the source did
not record (a null token count, provenance ``unknown``): their sums and
prompt lines would count those calls as zero, so they are left out of every
token fit, counted with the number of such calls. ``load(..., keep_empty=True)``
keeps the runs with no calls (zero steps). :func:`split` draws the held-out runs.
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
TOKENS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
          "reasoning_tokens")
"""A call's token columns; a null one is a count the source did not record."""
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
    subagent_calls: pd.DataFrame | None = None
    """The calls of the runs' subagents (non-null ``agent``; None: none)."""

    def subset(self, run_ids) -> Traces:
        """The traces of the given runs only (in this object's order)."""
        keep = set(run_ids)
        runs = self.runs[self.runs["run_id"].isin(keep)].reset_index(drop=True)
        calls = self.calls[self.calls["run_id"].isin(keep)].reset_index(drop=True)
        sub = self.subagent_calls
        if sub is not None:
            sub = sub[sub["run_id"].isin(keep)].reset_index(drop=True)
        return Traces(self.folder, runs, calls, dict(self.dropped), dict(self.repaired), sub)

    @property
    def all_calls(self) -> pd.DataFrame:
        """The runs' own calls and their subagents', in run and call order
        (the calls alone when no subagent made one)."""
        if self.subagent_calls is None or self.subagent_calls.empty:
            return self.calls
        both = pd.concat([self.calls, self.subagent_calls], ignore_index=True)
        return both.sort_values(["run_id", "call"], kind="stable").reset_index(drop=True)

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
    runs, calls, tools = _read(path)
    if runs.empty:
        raise InputError("the trace folder has no runs", source=str(path))
    order = calls.sort_values(["run_id", "call"], kind="stable").index.to_numpy()
    calls = calls.take(order).reset_index(drop=True)
    unknown_calls = calls[list(TOKENS)].isna().any(axis=1).to_numpy()  # null: not recorded
    unknown = set(calls["run_id"].to_numpy()[unknown_calls])
    mine = _own(calls)
    ordered_tools = tools.take(order)
    sub = None
    if not mine.all():  # the subagents' calls apart; the parents' derived on their own
        import pyarrow as pa

        sub = _derive_calls(calls.copy(), ordered_tools)[~mine].reset_index(drop=True)
        calls = _derive_calls(calls[mine].reset_index(drop=True),
                              ordered_tools.filter(pa.array(mine)))
    else:
        calls = _derive_calls(calls, ordered_tools)
    usage = pd.concat([calls, sub] if sub is not None else [calls]).groupby(
        "run_id", sort=False)[["prompt", "output"]].sum()
    totals = calls.groupby("run_id", sort=False)[["prompt", "output", "reasoning"]].sum()
    purpose = calls["purpose"] if "purpose" in calls else pd.Series(None, index=calls.index)
    calls = calls[purpose.isna() | (purpose == "step")].reset_index(drop=True)
    if sub is not None:
        kind = sub["purpose"] if "purpose" in sub else pd.Series(None, index=sub.index)
        sub = sub[kind.isna() | (kind == "step")].reset_index(drop=True)
    n_calls = calls.groupby("run_id", sort=False).size()
    dropped: dict[str, int] = {}
    has_calls = runs["run_id"].isin(n_calls.index)
    if (~has_calls).any():
        dropped["no model calls"] = int((~has_calls).sum())
    used = usage.index[(usage["prompt"] > 0) | (usage["output"] > 0)]
    partial = runs["run_id"].isin(unknown)
    no_usage = has_calls & ~runs["run_id"].isin(used) & ~partial
    if no_usage.any():
        dropped["no token usage"] = int(no_usage.sum())
    if partial.any():
        dropped[f"calls of unknown token usage ({int(unknown_calls.sum())} calls)"] = int(
            partial.sum())
    empty = runs[~has_calls]
    runs = runs[runs["run_id"].isin(used) & ~partial].reset_index(drop=True)
    if runs.empty:
        why = (f"; {int(partial.sum())} runs have calls of unknown token usage, left out"
               if partial.any() else "")
        raise InputError("no run records any token usage (every call has zero prompt and "
                         f"output tokens{why}): nothing to fit", source=str(path))
    if len(runs) < MIN_RUNS:
        raise InputError(f"calibration needs at least {MIN_RUNS} runs with token usage (it fits "
                         f"on some and measures the fit on the others); this folder has "
                         f"{len(runs)}", source=str(path))
    if keep_empty and (~has_calls).any():
        runs = pd.concat([runs, empty], ignore_index=True)
        dropped.pop("no model calls", None)
    calls = calls[calls["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
    derived = _derive_runs(runs, calls, totals)
    if sub is not None:
        sub = sub[sub["run_id"].isin(set(runs["run_id"]))].reset_index(drop=True)
        derived["cost"] = _own_cost(derived, sub)
    return Traces(str(path), derived, calls, dropped, subagent_calls=sub)


def _own(calls: pd.DataFrame) -> np.ndarray:
    """Which calls are the runs' own (a null ``agent``), not a subagent's."""
    if "agent" not in calls:
        return np.ones(len(calls), dtype=bool)
    return calls["agent"].isna().to_numpy(bool)


def _own_cost(runs: pd.DataFrame, sub: pd.DataFrame) -> np.ndarray:
    """Each run's recorded cost less its subagents' recorded call costs (USD;
    NaN where a subagent call of the run has no recorded cost)."""
    g = sub.groupby("run_id", sort=False)["cost"]
    spent = g.sum(min_count=1)
    unknown = set(sub.loc[sub["cost"].isna(), "run_id"])
    ids = runs["run_id"]
    less = ids.map(spent).fillna(0.0).to_numpy(float)
    missing = ids.isin(unknown).to_numpy(bool)
    cost = runs["cost"].to_numpy(float) - less
    cost[missing] = np.nan
    return cost


def _read(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, Any]:
    """The two tables, checked by the trace model's reader (missing files or
    columns, wrong types, calls that do not add up are InputErrors naming
    them; :func:`sim.traces.model.load_tables`), with nullable columns as
    plain floats and objects, and the calls' ``tool_calls`` kept as the Arrow
    column (read column-wise by :func:`_tool_columns`, never as Python dicts);
    a call ``purpose`` outside the trace model's refused here, before any fit
    (:func:`sim.traces.reading.check_purposes`, as replay, tune and ``traces
    summary`` refuse it)."""
    from sim.traces.model import load_tables
    from sim.traces.reading import check_purposes

    runs, calls = load_tables(path)
    check_purposes(calls, str(path))
    tools = calls.column("tool_calls").combine_chunks()
    return _plain(runs), _plain(calls.drop_columns(["tool_calls"])), tools


def _plain(table: Any) -> pd.DataFrame:
    """An Arrow table as pandas: integers and floats as float64 with NaN,
    booleans and strings as objects with None (what the derivations below
    expect), other types as pyarrow converts them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if pa.types.is_integer(kind) or pa.types.is_floating(kind):
            out[name] = pc.cast(column, pa.float64()).to_numpy()
        elif pa.types.is_boolean(kind):
            out[name] = np.array(column.to_pylist(), dtype=object)
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            out[name] = column.to_pandas().astype(object).to_numpy()
        else:
            out[name] = column.to_pandas()
    return pd.DataFrame(out, index=pd.RangeIndex(table.num_rows))


def _derive_calls(calls: pd.DataFrame, tools: Any) -> pd.DataFrame:
    """The per-call quantities of the module docstring (``calls`` sorted by
    run and call; ``tools`` their ``tool_calls`` in the same order)."""
    for c in TOKENS:
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
    name, arguments = _tool_columns(calls, tools)
    runs = calls["run_id"].to_numpy()
    calls["keys"] = _recurring_keys(runs, tools)
    has = calls["tools"].to_numpy() > 0
    repeat = np.zeros(len(calls), dtype=bool)
    repeat[1:] = (has[1:] & has[:-1] & (runs[1:] == runs[:-1])
                  & (name[1:] == name[:-1]) & (arguments[1:] == arguments[:-1]))
    calls["repeat"] = repeat
    last = np.ones(len(calls), dtype=bool)
    last[:-1] = runs[1:] != runs[:-1]
    calls["last"] = last
    return calls


def _tool_columns(calls: pd.DataFrame, tools: Any) -> tuple[np.ndarray, np.ndarray]:
    """The per-call columns of the tool calls ``tools`` (an Arrow list of
    structs, one list per call; a null list has none): ``tools``, ``text``,
    ``errors``, ``results``, ``tool`` (the first tool's name, "" when none
    or unnamed), ``tool_s`` (NaN when no duration is recorded); returns the
    first tool call's name and arguments (object arrays, None when absent),
    the key of a repeated call."""
    import pyarrow.compute as pc

    n = len(calls)
    count = pc.fill_null(pc.list_value_length(tools), 0).to_numpy().astype(np.int64)
    flat = pc.list_flatten(tools)
    parent = pc.list_parent_indices(tools).to_numpy().astype(np.int64)

    def summed(field: str, fill: Any) -> np.ndarray:
        values = pc.fill_null(pc.struct_field(flat, field), fill).to_numpy(zero_copy_only=False)
        return np.bincount(parent, weights=values.astype(float), minlength=n)

    calls["tools"] = count
    calls["text"] = count == 0
    calls["errors"] = np.rint(summed("error", False)).astype(np.int64)
    calls["results"] = np.rint(summed("result_tokens", 0)).astype(np.int64)
    seconds = pc.struct_field(flat, "duration_s")
    timed = np.bincount(parent, weights=pc.is_valid(seconds).to_numpy(zero_copy_only=False)
                        .astype(float), minlength=n)
    tool_s = np.where(timed > 0, summed("duration_s", 0.0), np.nan)
    first = np.zeros(n, dtype=np.int64)
    has = count > 0
    first[has] = np.cumsum(count)[has] - count[has]  # each call's first tool call in ``flat``
    name = np.full(n, None, dtype=object)
    arguments = np.full(n, None, dtype=object)
    name[has] = np.asarray(pc.struct_field(flat, "name").to_pandas(), dtype=object)[first[has]]
    arguments[has] = np.asarray(pc.struct_field(flat, "arguments").to_pandas(),
                                dtype=object)[first[has]]
    calls["tool"] = np.array([v or "" for v in name], dtype=object)
    calls["tool_s"] = tool_s
    return name, arguments


def _recurring_keys(runs: np.ndarray, tools: Any) -> np.ndarray:
    """Per call (``runs``: each call's run id), the keys of its tool calls as a
    tuple (``name``, a NUL, the arguments as recorded: the trace model keeps
    them as canonical JSON, so two keys are equal exactly when the harness's
    ``canonical_call`` keys are), for the calls of runs in which some tool
    call (name and arguments) occurs twice; None for the calls of other runs,
    which no repetition or cycle detector can stop."""
    import pyarrow.compute as pc

    n = len(runs)
    keys = np.full(n, None, dtype=object)
    flat = pc.list_flatten(tools)
    if not len(flat):
        return keys
    parent = pc.list_parent_indices(tools).to_numpy().astype(np.int64)
    names = pc.fill_null(pc.struct_field(flat, "name"), "")
    arguments = pc.fill_null(pc.struct_field(flat, "arguments"), "")
    key = np.asarray(pc.binary_join_element_wise(names, arguments, "\0").to_pandas(),
                     dtype=object)
    run_code = pd.factorize(runs)[0]  # the runs as integers: hashed once, compared as ints
    owner = run_code[parent]
    recurs = pd.DataFrame({"run": owner, "name": names.to_pandas(),  # not the keys: pandas
                           "arguments": arguments.to_pandas()}  # hashes stop at a NUL
                          ).duplicated(keep=False).to_numpy()
    if not recurs.any():
        return keys
    recurring = np.zeros(int(run_code.max()) + 1, dtype=bool)
    recurring[owner[recurs]] = True
    chosen = recurring[owner]
    call_of = parent[chosen]
    in_runs = recurring[run_code]
    for i in np.flatnonzero(in_runs).tolist():
        keys[i] = ()
    for call, k in zip(call_of.tolist(), key[chosen].tolist(), strict=True):
        keys[call] = (*keys[call], k)
    return keys


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
    labels = out["exit"].to_numpy(object)
    kinds = {label: category(label) for label in set(labels)}
    out["category"] = np.array([kinds[label] for label in labels], dtype=object)
    # a source none of whose runs records an exit (OpenTelemetry: none when a
    # run ends without error): a run that ended on an answer is the agent's end
    source = runs["source"].fillna("").astype(str)
    labelling = set(source[out["exit"] != ""])
    answered = calls.loc[calls["last"].to_numpy(bool) & calls["text"].to_numpy(bool),
                         "run_id"]
    unlabelled = ((out["exit"] == "") & ~source.isin(labelling)
                  & out["run_id"].isin(set(answered)))
    out.loc[unlabelled, "category"] = "agent"
    out["resolved"] = [None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))
                       else bool(v) for v in runs["resolved"]]
    for c in ("step_limit", "cost_limit_usd", "error_limit", "message_limit", "duration_s"):
        values = runs[c] if c in runs else pd.Series(np.nan, index=runs.index)
        out[c] = pd.to_numeric(values, errors="coerce").astype(float)
    position = calls.groupby("run_id", sort=False).cumcount().to_numpy()
    fresh = pd.Series(np.where(calls["repeat"].to_numpy(bool), -1, position),
                      index=calls.index).groupby(calls["run_id"], sort=False).max()
    out["trailing_repeats"] = (out["steps"] - 1 - fresh.reindex(out.index).fillna(
        -1)).clip(lower=0).astype(np.int64)  # the final loop's repeats (0: none)
    first = g["prompt"].first()
    out["first_prompt"] = first.reindex(out.index).fillna(0).astype(np.int64)
    p, h = _lines(calls)
    out["P"] = p.reindex(out.index).fillna(0.0).to_numpy(float)
    out["h"] = h.reindex(out.index).fillna(0.0).to_numpy(float)
    return out.reset_index(drop=True)


def _lines(calls: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per run (indexed by run id), the least-squares line ``prompt(n) = P + h n``
    over its calls (n the 0-based position of the call in the run; one call:
    h = 0), computed for all runs at once from centred sums."""
    runs = calls["run_id"].to_numpy()
    y = calls["prompt"].to_numpy(float)
    if not len(y):
        empty = pd.Series([], dtype=float)
        return empty, empty
    start = np.flatnonzero(np.r_[True, runs[1:] != runs[:-1]])
    size = np.diff(np.r_[start, len(y)])
    group = np.repeat(np.arange(start.size), size)
    n = np.arange(len(y)) - start[group]
    n_mean = (size - 1) / 2.0
    y_mean = np.bincount(group, weights=y) / size
    dn = n - n_mean[group]
    sxx = np.bincount(group, weights=dn * dn)
    sxy = np.bincount(group, weights=dn * (y - y_mean[group]))
    h = np.divide(sxy, sxx, out=np.zeros_like(sxy), where=sxx > 0)
    index = pd.Index(runs[start])
    return pd.Series(y_mean - h * n_mean, index=index), pd.Series(h, index=index)


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
