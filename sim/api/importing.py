"""Importing recorded runs from the API: ``sim.import_traces(sources, out)`` is
``python -m sim traces import SOURCE... --out DIR``.

The importer (:func:`sim.traces.importer.import_traces`, the same function the
command calls) reads files and folders of any mix of formats (tau2-bench,
mini-swe-agent, OpenTelemetry GenAI, Inspect AI, sim's own), told apart by
content, and writes the trace folder ``out`` atomically: ``runs.parquet`` (one
row per run), ``calls.parquet`` (one row per model call) and ``import.json``
(what was skipped or repaired, counted by reason).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from sim.traces.importer import ImportReport

__all__ = ["Imported", "import_traces"]

Sources = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""A file or folder, or a list of them."""


@dataclass(frozen=True)
class Imported:
    """A trace folder written by :func:`import_traces`.

    ``runs`` (one row per run: ``run_id``, ``model``, ``steps``, ``cost_usd`` in
    USD, ``resolved``, ...) and ``calls`` (one row per model call: token counts
    per kind, ``cost_usd``, latency in seconds, ``tool_calls``) are the tables
    as :func:`sim.traces.read_traces` reads them back (a call's token count
    the source does not record is missing, ``<NA>``, and its ``provenance``
    says how each figure was obtained); ``report`` counts the runs imported
    and what was skipped or repaired, by reason, and the calls' provenance
    per source (its ``warning_lines()`` and ``lines()`` are what the command
    prints); ``path`` is the trace folder."""

    runs: pd.DataFrame
    calls: pd.DataFrame
    report: ImportReport
    path: Path

    def summary(self) -> dict[str, Any]:
        """The figures of ``python -m sim traces summary`` as a dict: steps
        p50/p95/max, the per-run fit of prompt tokens ``P + h*n``, output
        tokens per call, cache shares, the exit mix, the resolved share and the
        recorded cost (USD) against catalogue prices (calls of unknown usage
        left out), the warnings and the flags on the data itself."""
        from sim.traces.summary import summarize

        return summarize(self.path)

    def describe(self) -> str:
        """:meth:`summary` as the text ``python -m sim traces summary`` prints."""
        from sim.traces.summary import format_summary

        return format_summary(self.summary())


def import_traces(sources: Sources, out: str | os.PathLike[str], *, strict: bool = False,
                  force: bool = False, progress: bool = False,
                  where: str | Sequence[str] | None = None) -> Imported:
    """Import ``sources`` (a file or folder, or a list of them) into the trace
    folder ``out`` and read it back (see :class:`Imported`).

    ``strict``: any skipped file or run is an error and nothing is written;
    ``force``: replace ``out`` if it exists and is not empty; ``progress``: a
    progress bar on stderr; ``where``: ``--where`` conditions on
    ``runs.parquet`` (:mod:`sim.traces.where`): only the runs they select are
    kept in ``out`` (the import's report still counts every run read).
    Raises :class:`sim.bad_input.InputError` (nothing written) when a source
    does not exist, ``out`` holds something else, no run could be imported,
    or ``strict`` and anything was skipped.

    >>> imported = import_traces("../shared/data/traces/tau2/raw",
    ...                          "traces/tau2", force=True)            # doctest: +SKIP
    >>> len(imported.runs), imported.path                               # doctest: +SKIP
    (567, PosixPath('traces/tau2'))
    """
    from sim.traces.importer import import_traces as import_into
    from sim.traces.model import read_traces
    from sim.traces.where import parse_where, slice_folder

    given = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
    from sim.output.progress import progress_bar

    conditions = parse_where(where)
    report = import_into(given, out, strict=strict, force=force,
                         progress=progress_bar if progress else False)
    if conditions:
        slice_folder(out, conditions, out)
    runs, calls = read_traces(out)
    return Imported(runs, calls, report, Path(out))
