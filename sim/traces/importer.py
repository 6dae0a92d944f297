"""Importing traces: files and folders of any mix of formats into one trace folder.

:func:`import_traces` walks the sources (:mod:`sim.traces.sources`), tells each
file's format from its content and hands it to that format's importer:

==================  =============================================================
format              recognised by
==================  =============================================================
``tau2``            a JSON object with ``simulations``, a list of simulation
                    records, or aggregated results (skipped: no trajectory)
``mini-swe-agent``  ``trajectory_format`` ``mini-swe-agent-*``; SWE-bench reports
                    (``resolved_ids``) and ``preds.json`` are read as companions
``otel-genai``      OTLP JSON (``resourceSpans``), one document or JSON Lines
``inspect``         an Inspect AI ``.eval`` archive or JSON log (optional extra)
``claude-code``     Claude Code / Agent SDK session transcripts (JSON Lines of
                    ``sessionId`` lines; subagents' ``.meta.json`` as companions)
``langfuse``        Langfuse observations (public API JSON, exports) and the
                    Langfuse SDK's spans (``langfuse.observation.*``)
``langsmith``       LangSmith batch posts (``post``/``patch``) and exported runs
``openinference``   OpenInference spans (Phoenix): ``openinference.span.kind``
``otel-genai``      (also) spans with OpenLLMetry's older GenAI names
``sim``             a trace folder (``runs.parquet`` + ``calls.parquet``), e.g.
                    what ``python -m sim run --traces`` writes
==================  =============================================================

Each file is read once, and only one file's content is held at a time (runs'
calls are streamed into ``calls.parquet``); OpenTelemetry spans are gathered
across files, since a conversation may span several, and assembled at the end.
What cannot be used is skipped and counted by reason (:mod:`sim.traces.skips`);
with ``strict`` any skip is an :class:`~sim.bad_input.InputError`. Files found
inside a folder whose content is not JSON, an Inspect log or Parquet (logs,
YAML...) are ignored and listed as such. The folder is written atomically
(:func:`~sim.traces.writer.atomic_folder`): an import that fails, or imports no
run, writes nothing.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.traces import (
    claude_code,
    inspect_log,
    langfuse,
    langsmith,
    miniswe,
    openinference,
    otel,
    otel_legacy,
    spantree,
    tau2,
)
from sim.traces import folder as trace_folder
from sim.traces.model import REPORT_FILE, RunRecord
from sim.traces.skips import (
    DUPLICATE,
    TOO_DEEP,
    UNKNOWN_FORMAT,
    Skip,
    Unusable,
    counts,
    phrase,
)
from sim.traces.sources import Input, inputs, read_json, sniff
from sim.traces.writer import TraceWriter, atomic_folder


@dataclass
class ImportReport:
    """What an import read, wrote and skipped (``import.json`` holds it)."""

    sources: list[str]
    runs: int = 0
    calls: int = 0
    runs_by_source: Counter = field(default_factory=Counter)
    run_files: dict[str, int] = field(default_factory=dict)
    skips: list[Skip] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    companions: list[str] = field(default_factory=list)
    repairs: Counter = field(default_factory=Counter)
    """``{(dotted field, reason): count}``: impossible values repaired or set
    to null in the runs imported (:mod:`sim.traces.repairs`)."""

    def repairs_by_field(self) -> dict[str, dict[str, int]]:
        """``{field: {reason: count}}``, fields sorted, reasons most frequent first."""
        out: dict[str, list[str]] = {}
        for (name, reason), n in self.repairs.items():
            out.setdefault(name, []).extend([reason] * n)
        return {name: counts(reasons) for name, reasons in sorted(out.items())}

    def skipped_files(self) -> dict[str, str]:
        """``{file: reason}`` of the files no run was imported from (the reason
        most of their skips give)."""
        reasons: dict[str, list[str]] = {}
        for skip in self.skips:
            if skip.file not in self.run_files:
                reasons.setdefault(skip.file, []).append(skip.reason)
        return {file: next(iter(counts(found))) for file, found in reasons.items()}

    def skipped_runs(self) -> list[Skip]:
        """Runs skipped in files that other runs were imported from."""
        return [s for s in self.skips if s.file in self.run_files]

    def lines(self) -> list[str]:
        """The report for stderr: runs imported, then files and runs skipped."""
        by_source = ", ".join(f"{n} {source}" for source, n in
                              sorted(self.runs_by_source.items()))
        out = [f"imported {self.runs} runs ({self.calls} calls) from {len(self.run_files)} "
               "files or folders" + (f": {by_source}" if by_source else "")]
        files = self.skipped_files()
        if files:
            out.append(phrase(len(files), "file", counts(files.values())))
        runs = self.skipped_runs()
        if runs:
            files_with = len({s.file for s in runs})
            out.append(phrase(len(runs), "run", counts(s.reason for s in runs))
                       + f" (in {files_with} file{'' if files_with == 1 else 's'} that had "
                       "usable runs)")
        if self.repairs:
            total = sum(self.repairs.values())
            parts = "; ".join(f"{name}: " + ", ".join(f"{n} {reason}" for reason, n in
                                                       by_reason.items())
                              for name, by_reason in self.repairs_by_field().items())
            out.append(f"repaired {total} impossible value{'' if total == 1 else 's'} "
                       f"(runs kept): {parts}")
        if self.companions:
            out.append(f"read {len(self.companions)} companion files (SWE-bench reports, "
                       "mini-swe-agent predictions, Claude Code subagent metadata)")
        if self.ignored:
            out.append(f"ignored {len(self.ignored)} files found in folders that are not "
                       "JSON, an Inspect log or a trace folder")
        return out

    def to_dict(self) -> dict[str, Any]:
        files = self.skipped_files()
        runs = self.skipped_runs()
        return {
            "sources": self.sources, "runs": self.runs, "calls": self.calls,
            "runs_by_source": dict(sorted(self.runs_by_source.items())),
            "files_imported": len(self.run_files),
            "skipped_files": {"count": len(files), "by_reason": counts(files.values()),
                              "files": [{"file": f, "reason": r} for f, r in files.items()]},
            "skipped_runs": {"count": len(runs), "by_reason": counts(s.reason for s in runs)},
            "skips": [s.to_dict() for s in self.skips],
            "companions": self.companions, "ignored": self.ignored,
            "repairs": {"count": sum(self.repairs.values()),
                        "by_field": self.repairs_by_field()},
        }


def import_traces(sources: Sequence[str | os.PathLike], out: str | os.PathLike, *,
                  strict: bool = False, force: bool = False,
                  progress: bool = False) -> ImportReport:
    """Import ``sources`` (files and folders) into the trace folder ``out``.

    Returns the :class:`ImportReport`. InputError (nothing written) when a
    source does not exist, ``out`` exists and is not empty (unless ``force``),
    no run could be imported, or ``strict`` and anything was skipped.
    """
    if not sources:
        raise InputError("no sources given")
    items = list(inputs(sources))
    report = ImportReport(sources=[os.fspath(s) for s in sources])
    with atomic_folder(out, force=force) as tmp:
        writer = TraceWriter(tmp)
        try:
            _import(items, writer, report, progress)
            if report.runs == 0:
                detail = "; ".join(report.lines()[1:]) or "no input holds a run"
                raise InputError(f"no runs imported ({detail})",
                                 source=", ".join(report.sources))
            if strict and report.skips:
                first = report.skips[0].message()
                raise InputError(f"{'; '.join(report.lines()[1:])}; first: {first} "
                                 "(--strict: nothing was written)",
                                 source=", ".join(report.sources))
            writer.close()
        except BaseException:
            writer.abort()
            raise
        text = json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False)
        (tmp / REPORT_FILE).write_text(text + "\n", encoding="utf-8")
    return report


def _import(items: list[Input], writer: TraceWriter, report: ImportReport,
            progress: bool) -> None:
    from tqdm import tqdm

    collector = otel.Collector()
    gathered = Gathered()
    reports = miniswe.Reports()
    trajectories: list[tuple[dict, Path, str, str | None]] = []
    first_file: dict[str, str] = {}

    def accept(record: RunRecord | Skip) -> None:
        if isinstance(record, Skip):
            report.skips.append(record)
        elif writer.has(record.run_id):
            report.skips.append(Skip(record.file, DUPLICATE, "already imported from "
                                     f"{first_file[record.run_id]}", record.run_id))
        else:
            try:
                row = writer.add(record)
            except Unusable as problem:
                report.skips.append(Skip(record.file, problem.reason, problem.detail,
                                         record.run_id))
                return
            first_file[record.run_id] = record.file
            report.runs += 1
            report.calls += len(record.calls)
            report.runs_by_source[record.source] += 1
            report.run_files[record.file] = report.run_files.get(record.file, 0) + 1
            if record.source == miniswe.SOURCE and record.resolved is None:
                trajectories.append((row, *_instance(record)))

    bar = tqdm(items, unit="file", file=sys.stderr, disable=not progress, desc="importing",
               mininterval=0.5)
    for item in bar:
        file = os.fspath(item.path)
        try:
            for record in _read(item, file, collector, reports, report, gathered):
                accept(record)
        except Unusable as problem:
            report.skips.append(Skip(file, problem.reason, problem.detail))
        except RecursionError:  # a structure nested deeper than Python walks
            report.skips.append(Skip(file, TOO_DEEP, "values nested deeper than the importer "
                                                     "reads"))
    bar.close()
    for record in collector.runs():
        accept(record)
    for record in gathered.runs():
        accept(record)
    folders = frozenset(f for _, path, instance, _ in trajectories
                        if (f := miniswe.run_folder(path, instance)) is not None)
    for row, path, instance, model in trajectories:
        row["resolved"] = reports.verdict(path, instance, miniswe.run_folder(path, instance),
                                          model, folders)
    report.repairs.update(writer.repairs)


def _instance(record: RunRecord) -> tuple[Path, str, str | None]:
    return Path(record.file), record.task_id or record.run_id, record.model


@dataclass
class Gathered:
    """The formats whose runs are gathered across files and assembled at the
    end (a session's subagents write files of their own)."""

    claude: claude_code.Collector = field(default_factory=claude_code.Collector)
    langfuse: langfuse.Collector = field(default_factory=langfuse.Collector)
    langsmith: langsmith.Collector = field(default_factory=langsmith.Collector)
    spans: list[spantree.Gatherer] = field(default_factory=lambda: [
        spantree.Gatherer(d) for d in (langfuse.DIALECT, openinference.DIALECT,
                                       otel_legacy.DIALECT)])

    def claim_spans(self, values: list, file: str) -> bool:
        """Hand OTLP JSON ``values`` to the first span dialect one of their spans
        belongs to (Langfuse SDK, OpenInference, older OpenLLMetry names);
        False when none does (they are GenAI spans of today's names)."""
        for gatherer in self.spans:
            if any(spantree.claims_any(v, gatherer.dialect.claims) for v in values):
                for value in values:
                    gatherer.add(value, file)
                return True
        return False

    def runs(self) -> Iterator[RunRecord | Skip]:
        yield from self.claude.runs()
        yield from self.langfuse.runs()
        yield from self.langsmith.runs()
        for gatherer in self.spans:
            yield from gatherer.runs()


def _read(item: Input, file: str, collector: otel.Collector, reports: miniswe.Reports,
          report: ImportReport, gathered: Gathered | None = None
          ) -> Iterator[RunRecord | Skip]:
    """The runs and skips of one input; a whole-file problem raises Unusable."""
    if item.folder:
        yield from trace_folder.runs(item.path)
        return
    kind = sniff(item.path)
    if kind != "json":
        yield from _read_other(item, file, kind, report)
        return
    values = read_json(item.path)
    gathered = gathered if gathered is not None else Gathered()
    if _gather(values, file, gathered, collector):
        return
    yield from _read_document(values[0], item, file, collector, reports, report)


def _read_other(item: Input, file: str, kind: str, report: ImportReport
                ) -> Iterator[RunRecord | Skip]:
    """An input that is not JSON: an Inspect log, or something ignored (found
    in a folder) or refused (named)."""
    if kind == "zip":
        if not _inspect_archive(item.path):
            raise Unusable(UNKNOWN_FORMAT, "a zip archive that is not an Inspect AI log")
        yield from inspect_log.runs(item.path, file, "eval")
    elif kind == "inspect-json":
        yield from inspect_log.runs(item.path, file, "json")
    elif not item.named:
        report.ignored.append(file)
    else:
        raise Unusable(UNKNOWN_FORMAT, "a Parquet file that is not part of a trace folder"
                       if kind == "parquet" else
                       "not JSON, JSON Lines, an Inspect log or a trace folder")


def _gather(values: list[Any], file: str, gathered: Gathered, collector: otel.Collector
            ) -> bool:
    """Hand a file's JSON values to the format that gathers runs across files
    (Claude Code, Langfuse, LangSmith, span dialects, OTLP JSON Lines); False
    when none takes them (one document, read on its own)."""
    for detect, collected in ((claude_code.detect, gathered.claude),
                              (langfuse.detect, gathered.langfuse),
                              (langsmith.detect, gathered.langsmith)):
        if detect(values):
            collected.add(values, file)
            return True
    spans = all(otel.detect(v) for v in values)
    if spans and gathered.claim_spans(values, file):
        return True
    if len(values) <= 1:
        return False
    if not spans:
        raise Unusable(UNKNOWN_FORMAT, f"{len(values)} JSON values that are not all "
                                       "OTLP trace exports")
    for value in values:
        collector.add(value, file)
    return True


def _read_document(doc: Any, item: Input, file: str, collector: otel.Collector,
                   reports: miniswe.Reports, report: ImportReport
                   ) -> Iterator[RunRecord | Skip]:
    """The runs of one JSON document, by its format."""
    shape = miniswe.detect(doc)
    if tau2.detect(doc):
        yield from tau2.runs(doc, file)
    elif shape == "trajectory":
        yield miniswe.run(doc, item.path, file)
    elif claude_code.detect_meta(doc) or shape == "predictions":
        report.companions.append(file)
    elif shape == "report":
        reports.add(doc, item.path)
        report.companions.append(file)
    elif otel.detect(doc):
        collector.add(doc, file)
    elif isinstance(doc, dict) and {"eval", "version", "status"} <= doc.keys():
        yield from inspect_log.runs(item.path, file, "json")
    else:
        raise Unusable(UNKNOWN_FORMAT, _describe(doc))


def _inspect_archive(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return "header.json" in names or any(n.startswith("_journal/") for n in names)


def _describe(doc: Any) -> str:
    """What an unrecognised JSON document looks like, for the message."""
    if isinstance(doc, dict):
        keys = ", ".join(sorted(map(str, doc))[:6])
        return f"a JSON object with keys {keys}" + ("..." if len(doc) > 6 else "") if doc \
            else "an empty JSON object"
    if isinstance(doc, list):
        return f"a JSON list of {len(doc)} items" + (
            f" ({type(doc[0]).__name__}s)" if doc else "")
    return f"a JSON {type(doc).__name__}"
