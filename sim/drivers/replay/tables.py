"""A trace folder held as its checked Arrow tables, recorded runs built a
slice at a time (:class:`TraceTables`).

Replaying 100,000 runs must not build 100,000 runs' Python objects in one
process: the folder is read and checked once (:func:`sim.traces.reading.load_tables`:
types, required values, bounds, every call belonging to a run, calls numbered
``0..steps-1``), kept as Arrow columns (a forked worker shares them), and the
:class:`~sim.drivers.recorded_runs.RecordedRun` objects of runs ``start`` to
``stop - 1`` are built from those columns when a chunk needs them
(:meth:`TraceTables.recorded`), the same objects
:func:`~sim.drivers.recorded_runs.recorded_runs` builds from pandas frames.
Folder-wide figures the replay reports (tool calls, whether text hashes are
recorded, each call's model and recorded cost) are read from the columns.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim.bad_input import InputError
from sim.drivers.recorded_runs import PURPOSES, RecordedCall, RecordedRun, RecordedTool
from sim.drivers.replay.pricing import ModelPricing, models_pricing
from sim.harness.messages import Usage
from sim.harness.params import HarnessParams, Prices
from sim.traces.schema import TOKEN_COLUMNS

_CALL_COLUMNS = ("call", "model", "input_tokens", "cache_read_tokens", "cache_write_tokens",
                 "output_tokens", "reasoning_tokens", "cost_usd", "finish_reason", "latency_s",
                 "text_tokens", "observation_tokens", "text_sha256", "observation_sha256",
                 "purpose", "agent")
_TOOL_FIELDS = ("name", "arguments", "result_tokens", "result_sha256", "error", "duration_s")


@dataclass(frozen=True)
class TraceTables:
    """The checked tables of one trace folder (``source``): ``runs`` in file
    order, ``calls`` as written, ``order`` the calls' rows sorted by run then
    call number, and ``offsets`` (length runs + 1): run i's calls are
    ``order[offsets[i]:offsets[i + 1]]``."""

    runs: pa.Table
    calls: pa.Table
    order: np.ndarray
    offsets: np.ndarray
    source: str
    refused: dict[str, int] = field(default_factory=dict)
    """Runs of the folder left out, by reason (:func:`without_unknown_usage`):
    the recording cannot answer a request with a usage it did not record."""

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> TraceTables:
        """Read and check ``folder`` (an :class:`InputError` naming the file,
        the column and the run for anything wrong)."""
        from sim.traces.reading import load_tables

        runs, calls = load_tables(folder)
        source = os.fspath(folder)
        check_purposes(calls, source)
        runs, calls, refused = without_unknown_usage(runs, calls)
        codes = pc.index_in(calls.column("run_id"), value_set=runs.column("run_id"))
        code = codes.to_numpy(zero_copy_only=False).astype(np.int64)
        number = calls.column("call").to_numpy().astype(np.int64)
        order = np.lexsort((number, code))
        counts = np.bincount(code, minlength=runs.num_rows)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return cls(runs, call_columns(calls), order, offsets, source, refused)

    def __len__(self) -> int:
        return self.runs.num_rows

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return int(pc.sum(pc.list_value_length(self.calls.column("tool_calls"))).as_py() or 0)

    @property
    def text_hashes(self) -> bool:
        """Whether any call records a (non-empty) hash of its text."""
        hashes = pc.drop_null(self.calls.column("text_sha256"))
        return bool(len(hashes)) and bool(pc.any(pc.greater(pc.utf8_length(hashes), 0)).as_py())

    def call_models(self, default: str) -> pa.Array:
        """The model of every call, in run then call order: its own, else its
        run's, else ``default`` (an empty name counts as none)."""
        counts = np.diff(self.offsets)
        runs = pa.array(np.repeat(np.arange(len(self)), counts))
        own = named(self.calls.column("model").take(pa.array(self.order)))
        of_run = named(self.runs.column("model").take(runs))
        return pc.coalesce(own, of_run, pa.scalar(default))

    def pricing(self, template: HarnessParams,
                prices_for: Callable[[str | None], Prices | None] | None) -> ModelPricing:
        """:func:`~sim.drivers.replay.pricing.price_models` of every run, from
        the columns (a model's calls are built only when its recorded costs
        price it)."""
        models = self.call_models(template.model)
        costed = pc.is_valid(self.calls.column("cost_usd").take(pa.array(self.order)))

        def calls_of(name: str) -> list[RecordedCall]:
            mask = pc.and_(pc.equal(models, name), costed)
            where = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
            return recorded_calls(self.calls.take(pa.array(self.order[where])))

        return models_pricing(pc.unique(models).to_pylist(), calls_of, template, prices_for)

    def recorded(self, start: int, stop: int) -> list[RecordedRun]:
        """The recorded runs ``start`` to ``stop - 1``, each with its calls in
        order (what :func:`~sim.drivers.recorded_runs.recorded_runs` gives)."""
        rows = self.order[self.offsets[start]:self.offsets[stop]]
        part = self.calls.take(pa.array(rows))
        calls = recorded_calls(part)
        head = self.runs.slice(start, stop - start)
        ids = head.column("run_id").to_pylist()
        source, task, model, exit_, resolved, cost = (head.column(n).to_pylist() for n in (
            "source", "task_id", "model", "exit", "resolved", "cost_usd"))
        bounds = (self.offsets[start:stop + 1] - self.offsets[start]).tolist()
        return [RecordedRun(run_id=str(ids[i]), calls=tuple(calls[bounds[i]:bounds[i + 1]]),
                            source=source[i] or "", task_id=task[i], model=model[i],
                            exit=exit_[i], resolved=resolved[i], cost_usd=cost[i])
                for i in range(stop - start)]


USAGE_ABSENT = "per-call usage absent"
TOTALS_ONLY = "per-call usage absent (run totals only)"
SOME_UNKNOWN = "usage unknown for some calls"
"""Why a run is not replayed: none of its calls records usage (and the run
records no totals, or only run totals), or some do not."""


def read_trace_folder(folder: str | os.PathLike) -> list[RecordedRun]:
    """The runs of a trace folder, in the order of ``runs.parquet``, read and
    checked by :func:`sim.traces.reading.load_tables` (a missing folder or
    file, a file that is not Parquet, a missing column or a bad value is an
    :class:`InputError` naming the file), built from its Arrow columns
    (:class:`sim.drivers.replay.tables.TraceTables`); runs with a call whose
    usage is unknown are left out (``TraceTables.refused`` counts them)."""
    tables = TraceTables.load(folder)
    return tables.recorded(0, len(tables))


def without_unknown_usage(runs: pa.Table, calls: pa.Table
                          ) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """``(runs, calls, refused)``: the runs whose calls all record their
    usage (no null token count) and their calls, and the others counted by
    reason (:data:`USAGE_ABSENT`, :data:`TOTALS_ONLY`, :data:`SOME_UNKNOWN`)."""
    missing = None
    for name in TOKEN_COLUMNS:
        null = pc.is_null(calls.column(name))
        missing = null if missing is None else pc.or_(missing, null)
    if missing is None or not pc.any(missing).as_py():
        return runs, calls, {}
    counted = pc.value_counts(pc.filter(calls.column("run_id"), missing))
    unknown = dict(zip(counted.field("values").to_pylist(),
                       counted.field("counts").to_pylist(), strict=True))
    bad = pa.array(list(unknown), pa.string())
    ids, steps = runs.column("run_id").to_pylist(), runs.column("steps").to_pylist()
    totals = np.zeros(runs.num_rows, dtype=np.int64)
    for name in TOKEN_COLUMNS:
        totals += runs.column(name).to_numpy().astype(np.int64, copy=False)
    refused: dict[str, int] = {}
    for run, step, total in zip(ids, steps, totals.tolist(), strict=True):
        if run in unknown:
            why = (SOME_UNKNOWN if unknown[run] < step else TOTALS_ONLY if total
                   else USAGE_ABSENT)
            refused[why] = refused.get(why, 0) + 1
    runs = runs.filter(pc.invert(pc.is_in(runs.column("run_id"), value_set=bad)))
    calls = calls.filter(pc.invert(pc.is_in(calls.column("run_id"), value_set=bad)))
    return runs, calls, dict(sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])))


def refused_note(refused: dict[str, int]) -> str | None:
    """The line that says which runs were not replayed, by reason (None: none)."""
    if not refused:
        return None
    n = sum(refused.values())
    reasons = ", ".join(f"{k:,} {why}" for why, k in refused.items())
    return (f"warning: {n:,} run{'' if n == 1 else 's'} not replayed: {reasons} "
            "(a replay answers each request with the call's recorded usage)")


def call_columns(calls: pa.Table) -> pa.Table:
    """The columns of ``calls`` a replay reads."""
    return calls.select(["run_id", *_CALL_COLUMNS, "tool_calls"])


def recorded_calls(part: pa.Table) -> list[RecordedCall]:
    """The RecordedCall of every row of ``part`` (calls, in order)."""
    c = {name: part.column(name).to_pylist() for name in _CALL_COLUMNS}
    tools = part.column("tool_calls").combine_chunks()
    ends = tools.offsets.to_numpy().tolist()
    flat = tools.flatten()
    t = {name: flat.field(name).to_pylist() for name in _TOOL_FIELDS}
    made = [RecordedTool(name=t["name"][j], arguments=t["arguments"][j],
                         result_tokens=t["result_tokens"][j],
                         result_sha256=t["result_sha256"][j], error=bool(t["error"][j]),
                         duration_s=t["duration_s"][j]) for j in range(len(flat))]
    out = []
    for i in range(part.num_rows):
        out.append(RecordedCall(
            usage=Usage(c["input_tokens"][i], c["output_tokens"][i], c["cache_read_tokens"][i],
                        c["cache_write_tokens"][i], c["reasoning_tokens"][i]),
            cost_usd=c["cost_usd"][i], finish_reason=c["finish_reason"][i],
            latency_s=c["latency_s"][i], text_tokens=c["text_tokens"][i] or 0,
            observation_tokens=c["observation_tokens"][i] or 0,
            tools=tuple(made[ends[i]:ends[i + 1]]), model=c["model"][i],
            text_sha256=c["text_sha256"][i], observation_sha256=c["observation_sha256"][i],
            purpose=c["purpose"][i] or "step", agent=c["agent"][i] or None))
    return out


def named(values: Any) -> Any:
    """``values`` with empty strings as nulls."""
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)


def check_purposes(calls: pa.Table, source: str) -> None:
    """Every call's ``purpose`` one of :data:`PURPOSES` (or null: a step), and
    every tool call named; else the InputError the row-by-row reader gives."""
    purpose = calls.column("purpose")
    bad = pc.and_(pc.is_valid(purpose),
                  pc.invert(pc.is_in(purpose, value_set=pa.array(PURPOSES))))
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise InputError(f"purpose is {purpose[i].as_py()!r}: expected one of "
                         f"{', '.join(PURPOSES)}", source=source, path=_where(calls, i))
    tools = calls.column("tool_calls")
    names = pc.struct_field(pc.list_flatten(tools), ["name"])
    if names.null_count:
        j = pc.index(pc.is_null(names), True).as_py()
        parents = pc.list_parent_indices(tools).to_numpy()
        i = int(parents[j])
        first = int(np.flatnonzero(parents == i)[0])
        raise InputError("a tool call must be a record with a name", source=source,
                         path=f"{_where(calls, i)}, tool call {j - first}")


def _where(calls: pa.Table, i: int) -> str:
    row: dict[str, Any] = {n: calls.column(n)[i].as_py() for n in ("run_id", "call")}
    return f"calls.parquet, run {row['run_id']!r}, call {row['call']}"
