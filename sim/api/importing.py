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

__all__ = ["Imported", "TraceFolder", "import_traces", "summary_text", "trace_summary",
           "write_trace_folder"]

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
    from sim.traces.model import read_traces

    written = write_trace_folder(sources, out, strict=strict, force=force, progress=progress,
                                 where=where)
    runs, calls = read_traces(out)
    return Imported(runs, calls, written.report, written.path)


@dataclass(frozen=True)
class TraceFolder:
    """A trace folder :func:`write_trace_folder` wrote: the import's
    ``report``, the folder ``path``, and with ``--where`` conditions the
    runs ``kept`` of the ``total`` read and the conditions as text (``where``)."""

    report: ImportReport
    path: Path
    kept: int | None = None
    total: int | None = None
    where: str = ""

    def notes(self) -> list[str]:
        """What ``traces import`` prints on stderr: the warnings, the report's
        lines and, with conditions, how many runs were kept (as text)."""
        from sim.output.safe_text import printable

        lines = [printable(line) for line in (*self.report.warning_lines(), *self.report.lines())]
        if self.kept is not None:
            lines.append(printable(f"kept {self.kept:,} of {self.total:,} runs imported "
                                   f"({self.where})"))
        return lines

    def text(self) -> str:
        """What ``traces import`` prints on stdout: the warnings, then the line
        naming the folder and its files."""
        from sim.output.safe_text import printable

        return "\n".join([*(printable(line) for line in self.report.warning_lines()),
                          f"traces in {printable(self.path)}/ (runs.parquet, calls.parquet, "
                          f"import.json)"])


def write_trace_folder(sources: Sources, out: str | os.PathLike[str], *, strict: bool = False,
                       force: bool = False, progress: bool = False,
                       where: str | Sequence[str] | None = None, workers: int = 1,
                       scheduler: str | None = None) -> TraceFolder:
    """Import ``sources`` into the trace folder ``out`` as :func:`import_traces`
    does, without reading it back; ``workers`` processes (or ``scheduler``:
    :func:`sim.sweeps.schedulers.make_scheduler`) read the files, and the
    folder written is the same for any number. Bad ``where`` conditions are
    refused before any file is read."""
    from sim.progress import progress_bar
    from sim.traces.importer import import_traces as import_into
    from sim.traces.where import parse_where

    given = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
    conditions = parse_where(where)  # a bad condition before any file is read
    bar = progress_bar if progress else False
    if workers == 1 and scheduler in (None, "local"):
        report = import_into(given, out, strict=strict, force=force, progress=bar,
                             where=conditions)
    else:
        from sim.sweeps.schedulers import make_scheduler

        with make_scheduler(scheduler, workers) as where_run:
            report = import_into(given, out, strict=strict, force=force, progress=bar,
                                 scheduler=where_run, where=conditions)
    if not conditions:
        return TraceFolder(report, Path(out))
    return TraceFolder(report, Path(out), report.runs_kept, report.runs, report.where)


def trace_summary(folder: str | Path,
                  where: str | Sequence[str] | None = None) -> dict[str, Any]:
    """The figures of a trace folder (:func:`sim.traces.summary.summarize`;
    see :meth:`Imported.summary`), of the runs ``where`` selects."""
    from sim.traces.summary import summarize

    return summarize(folder, where=where)


def summary_text(summary: dict[str, Any]) -> str:
    """:func:`trace_summary` as ``traces summary`` prints it (names as text)."""
    from sim.output.safe_text import printable
    from sim.traces.summary import format_summary

    return printable(format_summary(summary))
