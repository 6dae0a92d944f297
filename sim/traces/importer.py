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
``otel-genai``      OTLP JSON (``resourceSpans``), one document or JSON Lines;
                    the SDK's ``ConsoleSpanExporter`` output (printed spans)
``inspect``         an Inspect AI ``.eval`` archive or JSON log (optional extra)
``claude-code``     Claude Code / Agent SDK session transcripts (JSON Lines of
                    ``sessionId`` lines; subagents' ``.meta.json`` as companions)
``langfuse``        Langfuse observations (public API JSON, exports) and the
                    Langfuse SDK's spans (``langfuse.observation.*``)
``langsmith``       LangSmith batch posts (``post``/``patch``) and exported runs
``swe-agent``       SWE-agent ``.traj`` (``trajectory``, ``history``, ``info.model_stats``):
                    run-level usage only
``openinference``   OpenInference spans (Phoenix): ``openinference.span.kind``;
                    Phoenix's spans dataframe (Parquet, JSON Lines) and REST list
``openhands``       OpenHands event lists (``source`` + ``action``/``observation``),
                    a session's event store (one event per file, gathered) and
                    evaluation ``output.jsonl`` lines (``instance_id``, ``history``)
``openhands-sdk``   OpenHands V1 (``software-agent-sdk``) events (``kind`` + ``source``):
                    a conversation folder (``base_state.json`` + ``events/``, gathered)
                    and event lists (JSON Lines or one JSON list)
``harbor``          Harbor ATIF trajectories (``schema_version`` ``ATIF-v1.*``);
                    a trial's or job's ``result.json``, ``config.json`` and
                    ``lock.json`` as companions
``otel-genai``      (also) spans with OpenLLMetry's older GenAI names
``sim``             a trace folder (``runs.parquet`` + ``calls.parquet``), e.g.
                    what ``python -m sim run --traces`` writes
==================  =============================================================

A file of spans goes to the first span dialect (Langfuse, OpenInference,
older OpenLLMetry) one of its spans belongs to, which reads each span in the
dialect that claims it: a Langfuse trace holding OpenInference LLM spans
(Langfuse's OpenAI Agents SDK setup) or GenAI chat spans (Pydantic AI)
counts them all.

Each file is read once, and only one file's content is held at a time (runs'
calls are streamed into ``calls.parquet``); OpenTelemetry spans are gathered
across files, since a conversation may span several, and assembled at the end.
What cannot be used is skipped and counted by reason (:mod:`sim.traces.skips`);
with ``strict`` any skip is an :class:`~sim.bad_input.InputError`. Files found
inside a folder whose content is not JSON, an Inspect log or Parquet (logs,
YAML...) are ignored and listed as such. Every input is accounted for
(:meth:`~sim.traces.import_report.ImportReport.account`): a file that gave no
run, skip, companion or ignored entry is skipped as ``no runs``, unless its
records were gathered into runs named by another file (``merged``). The folder is written atomically
(:func:`~sim.traces.writer.atomic_folder`): an import that fails, or imports no
run, writes nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.jobs import chunk_size, in_order, spans
from sim.traces import (
    claude_code,
    genai_dialect,
    harbor,
    inspect_log,
    langfuse,
    langsmith,
    miniswe,
    openhands,
    openhands_sdk,
    openinference,
    otel,
    otel_legacy,
    phoenix,
    spantree,
    sweagent,
    tau2,
)
from sim.traces import folder as trace_folder
from sim.traces.billed_reads import with_billed_reads
from sim.traces.import_report import ImportReport
from sim.traces.model import REPORT_FILE, RunRecord
from sim.traces.skips import (
    DUPLICATE,
    NO_RUNS,
    UNKNOWN_FORMAT,
    Skip,
    Unusable,
    or_skip,
)
from sim.traces.sources import Input, describe, inputs, inspect_archive, read_json, sniff
from sim.traces.streaming import Restart, Scheduler, add_folder
from sim.traces.where import Condition, slice_folder, where_text
from sim.traces.writer import TraceWriter, atomic_folder


def import_traces(sources: Sequence[str | os.PathLike], out: str | os.PathLike, *,
                  strict: bool = False, force: bool = False,
                  progress: bool | Callable[..., Any] = False,
                  scheduler: Scheduler | None = None,
                  where: Sequence[Condition] = ()) -> ImportReport:
    """Import ``sources`` (files and folders) into the trace folder ``out``.

    ``where`` (:func:`sim.traces.where.parse_where`): only the runs those
    conditions select are written (the report still counts every run
    imported; its ``where`` and ``runs_kept`` say what was kept). The cut is
    made before the folder is put in place: a ``where`` no run meets is an
    InputError, ``out`` as it was.

    ``progress``: a bar of the files read on stderr: True a tqdm bar, or a
    factory taking tqdm's arguments (the CLI's and API's
    ``sim.progress.progress_bar``: one line per tenth off a terminal).

    With a ``scheduler`` (:mod:`sim.sweeps.schedulers`: local worker
    processes or Dask), the files are read in chunks (:func:`sim.jobs.chunk_size`:
    at most :data:`FILES_PER_CHUNK`) on its workers (:func:`read_chunk`) while this
    process writes, in file order: the result is the same, byte for byte, as
    without one, whatever the worker count.

    Returns the :class:`ImportReport`. InputError (nothing written) when a
    source does not exist, ``out`` exists and is not empty (unless ``force``),
    no run could be imported, or ``strict`` and anything was skipped.
    """
    if not sources:
        raise InputError("no sources given")
    items = list(inputs(sources))
    whole: set[str] = set()
    while True:
        try:
            return _import_once(sources, items, out, strict, force, progress, scheduler, whole,
                                where)
        except Restart as again:  # a folder streamed in part must be read whole
            whole.add(again.folder)


def _import_once(sources: Sequence[str | os.PathLike], items: list[Input],
                 out: str | os.PathLike, strict: bool, force: bool,
                 progress: bool | Callable[..., Any],
                 scheduler: Scheduler | None, whole: set[str],
                 where: Sequence[Condition] = ()) -> ImportReport:
    """One attempt of :func:`import_traces`; the trace folders in ``whole``
    are read whole, the others streamed (:class:`Restart` when one cannot be)."""
    report = ImportReport(sources=[os.fspath(s) for s in sources])
    with atomic_folder(out, force=force) as tmp:
        writer = TraceWriter(tmp)
        try:
            _import(items, writer, report, progress, scheduler, whole)
            if report.runs == 0:
                detail = "; ".join(report.lines()[1:]) or "no input holds a run"
                first = f"; first: {report.skips[0].message()}" if report.skips else ""
                raise InputError(f"no runs imported ({detail}){first}",
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
        if where:
            try:
                _, report.runs_kept, _ = slice_folder(tmp, where, tmp)
            except InputError as error:
                raise InputError(error.message, source=os.fspath(out)) from None
            report.where = where_text(where)
        text = json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False)
        # a lone surrogate (a run id read from "\\ud800" in JSON) is written as its JSON escape
        (tmp / REPORT_FILE).write_bytes((text + "\n").encode("utf-8", "backslashreplace"))
    return report


def _import(items: list[Input], writer: TraceWriter, report: ImportReport,
            progress: bool | Callable[..., Any], scheduler: Scheduler | None = None,
            whole: frozenset[str] | set[str] = frozenset()) -> None:
    from tqdm import tqdm

    collector = otel.Collector()
    gathered = Gathered()
    reports = miniswe.Reports()
    trajectories: list[tuple[dict, Path, str, str | None]] = []
    first_file: dict[str, str] = {}
    openhands_rows: dict[str, dict] = {}
    held: dict[str, tuple[Path, list[RunRecord]]] = {}
    """Harbor ATIF runs whose agent folder holds a native file, by that file's
    real path: kept unless the native file gives a run (harbor.in_trial)."""
    gave_runs: set[str] = set()  # real paths of the files that gave a run

    def accept(record: RunRecord | Skip, hold: bool = True) -> None:
        if isinstance(record, RunRecord) and hold and record.source == harbor.SOURCE:
            own = harbor.native(Path(record.file))
            if own is not None:
                held.setdefault(os.path.realpath(own), (own, []))[1].append(record)
                return
        if isinstance(record, RunRecord):
            record = harbor.in_trial(record)
        if isinstance(record, Skip):
            report.skips.append(record)
        elif record.run_id in openhands_rows and openhands.rewritten(
                openhands_rows[record.run_id], record):  # eval_infer's copy, with a verdict
            openhands.take_verdict(openhands_rows[record.run_id], record)
            if record.file not in report.companions:
                report.companions.append(record.file)
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
            gave_runs.add(os.path.realpath(record.file))
            report.runs += 1
            report.calls += len(record.calls)
            report.runs_by_source[record.source] += 1
            report.run_files[record.file] = report.run_files.get(record.file, 0) + 1
            if record.source == miniswe.SOURCE and record.resolved is None:
                trajectories.append((row, *_instance(record)))
            elif record.source == openhands.SOURCE:
                openhands_rows[record.run_id] = row

    alone = scheduler if len(items) == 1 else None  # a single folder: read on the workers
    make_bar = progress if callable(progress) else tqdm
    bar = make_bar(items, unit="file", file=sys.stderr, disable=not progress, desc="importing",
                   mininterval=0.5)
    quiet: list[str] = []  # inputs that gave nothing while read
    report.inputs = len(items)
    for item, read in zip(bar, _read_ahead(items, scheduler), strict=True):
        file = os.fspath(item.path)
        before = report.entries()
        if read is not None:  # read by a worker: runs and skips in the file's order
            for record in read:
                accept(record)
        else:
            _read_input(item, file, whole, alone, writer, report, first_file, collector,
                        reports, gathered, accept)
        if report.entries() == before:
            quiet.append(file)
    bar.close()
    for record in with_billed_reads(list(collector.runs())):
        accept(record)
    for record in gathered.runs():
        accept(record)
    for real, (own, atif_runs) in held.items():  # a native file that gave no run: the ATIF's
        for record in atif_runs:
            accept(harbor.converted_duplicate(record, own) if real in gave_runs
                   else record, hold=False)
    folders = frozenset(f for _, path, instance, _ in trajectories
                        if (f := miniswe.run_folder(path, instance)) is not None)
    for row, path, instance, model in trajectories:
        row["resolved"] = reports.verdict(path, instance, miniswe.run_folder(path, instance),
                                          model, folders)
    report.repairs.update(writer.repairs)
    report.provenance, report.conventions = writer.provenance, writer.conventions
    report.account(quiet, NO_RUNS, "it holds no run (an empty log, folder or list of runs)")


def _read_input(item: Input, file: str, whole: frozenset[str] | set[str],
                alone: Scheduler | None, writer: TraceWriter, report: ImportReport,
                first_file: dict[str, str], collector: otel.Collector,
                reports: miniswe.Reports, gathered: Gathered,
                accept: Callable[[RunRecord | Skip], None]) -> None:
    """Read one input in this process, its runs to ``accept``; a whole-file
    problem is a skip of the file."""
    def read() -> None:
        if item.folder and add_folder(item.path, writer, report, first_file,
                                      file in whole, alone):
            return
        for record in _read(item, file, collector, reports, report, gathered):
            accept(record)

    skip = or_skip(read, file)
    if skip is not None:
        report.skips.append(skip)


FILES_PER_CHUNK = 32
"""The most files one worker reads at a time (the chunks depend on the file
count alone: the same for any worker count)."""


def read_chunk(items: list[Input]) -> list[list[RunRecord | Skip] | None]:
    """In a worker: the runs and skips of each input read on its own, or None
    for an input this process cannot finish alone (a trace folder, written
    as columns by the parent; a file whose runs are gathered across files, a
    SWE-bench report, a companion or an ignored file): the parent reads
    those in order, as without workers."""
    out: list[list[RunRecord | Skip] | None] = []
    for item in items:
        if item.folder:
            out.append(None)
            continue
        file = os.fspath(item.path)
        collector, reports, gathered = otel.Collector(), miniswe.Reports(), Gathered()
        report = ImportReport(sources=[])
        read: list[RunRecord | Skip] | Skip = or_skip(
            partial(list, _read(item, file, collector, reports, report, gathered)), file)
        records: list[RunRecord | Skip] = [read] if isinstance(read, Skip) else read
        touched = (collector.spans or reports.count or gathered.count() or report.ignored
                   or report.companions)
        out.append(None if touched else records)
    return out


def _read_ahead(items: list[Input], scheduler: Scheduler | None
                ) -> Iterator[list[RunRecord | Skip] | None]:
    """Per input, in order: what a worker read (:func:`read_chunk`), or None
    for the caller to read (every input without a scheduler)."""
    if scheduler is None or len(items) < 2:
        yield from (None for _ in items)
        return
    size = chunk_size(len(items), most=FILES_PER_CHUNK)
    jobs = [(items[low:high],) for low, high in spans(len(items), size)]
    for read in in_order(scheduler.run(read_chunk, jobs)):
        yield from read


def _instance(record: RunRecord) -> tuple[Path, str, str | None]:
    return Path(record.file), record.task_id or record.run_id, record.model


SPAN_DIALECTS = (langfuse.DIALECT, openinference.DIALECT, otel_legacy.DIALECT)
"""The span dialects, in the order a file's spans are offered to them."""
READ_ORDER = (langfuse.DIALECT, openinference.DIALECT, genai_dialect.DIALECT,
              otel_legacy.DIALECT)
"""The dialects a span dialect's trace reads a span in: the first that claims
it (:func:`spantree.mixed`). Today's GenAI names come before the older ones a
span may also carry; a file of GenAI spans alone goes to :mod:`otel`."""


@dataclass
class Gathered:
    """The formats whose runs are gathered across files and assembled at the
    end (a session's subagents write files of their own)."""

    claude: claude_code.Collector = field(default_factory=claude_code.Collector)
    langfuse: langfuse.Collector = field(default_factory=langfuse.Collector)
    langsmith: langsmith.Collector = field(default_factory=langsmith.Collector)
    openhands: openhands.Collector = field(default_factory=openhands.Collector)
    openhands_sdk: openhands_sdk.Collector = field(default_factory=openhands_sdk.Collector)
    spans: list[spantree.Gatherer] = field(default_factory=lambda: [
        spantree.Gatherer(spantree.mixed(d, READ_ORDER)) for d in SPAN_DIALECTS])

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

    def take_spans(self, spans: list[otel.Span], collector: otel.Collector) -> None:
        """Spans read from another container (printed by the SDK's console
        exporter) go where their OTLP JSON would: to the first span dialect
        one of them belongs to, else to the GenAI ``collector``."""
        for gatherer in self.spans:
            if any(gatherer.dialect.claims(s.attributes) for s in spans):
                gatherer.spans.spans.extend(spans)
                return
        collector.spans.extend(spans)

    def count(self) -> int:
        """How many sessions, traces, steps and spans were gathered."""
        return (len(self.claude.sessions) + len(self.langfuse.traces)
                + len(self.langsmith.steps) + len(self.openhands.sessions)
                + len(self.openhands_sdk.sessions)
                + sum(len(g.spans.spans) for g in self.spans))

    def runs(self) -> Iterator[RunRecord | Skip]:
        """The gathered runs, format by format; those of the observability
        formats (Langfuse, LangSmith, the span dialects), whose usage may keep
        a prompt total without its cache split, with the cache reads their
        recorded costs imply (:mod:`sim.traces.billed_reads`). Claude Code and
        OpenHands record the split (Anthropic's usage, LiteLLM's cache
        counts): their runs stream as they are assembled."""
        yield from self.claude.runs()
        yield from with_billed_reads(list(self.langfuse.runs()))
        yield from with_billed_reads(list(self.langsmith.runs()))
        yield from self.openhands.runs()
        yield from self.openhands_sdk.runs()
        for gatherer in self.spans:
            yield from with_billed_reads(list(gatherer.runs()))


def _read(item: Input, file: str, collector: otel.Collector, reports: miniswe.Reports,
          report: ImportReport, gathered: Gathered | None = None
          ) -> Iterator[RunRecord | Skip]:
    """The runs and skips of one input; a whole-file problem raises Unusable."""
    if item.folder:
        yield from trace_folder.runs(item.path)
        return
    kind = sniff(item.path)
    gathered = gathered if gathered is not None else Gathered()
    if kind == "parquet" and phoenix.is_dataframe(item.path):
        gathered.take_spans(phoenix.parquet_spans(item.path, file), collector)
        return
    if kind != "json":
        yield from _read_other(item, file, kind, report)
        return
    values = read_json(item.path)
    v1 = openhands_sdk.detect(values)
    if v1 in ("event", "state"):  # a conversation folder's files, gathered by folder
        gathered.openhands_sdk.add(values[0], item.path, file)
        report.gathered.append(file)
        return
    if v1 == "events":  # an event list: one run
        yield from openhands_sdk.runs(values, file)
        return
    shape = openhands.detect(values, item.path)
    if shape == "event":  # one event of a session's store, gathered by session
        gathered.openhands.add(values[0], item.path, file)
        report.gathered.append(file)
        return
    if shape in ("cache-page", "metadata"):  # the store's pages repeat its events
        report.companions.append(file)
        return
    if shape is not None:  # a trajectory, or evaluation output lines
        yield from openhands.runs(values, file)
        return
    if _gather(values, file, gathered, collector):
        report.gathered.append(file)
        return
    yield from _read_document(values[0], item, file, collector, reports, report)


def _read_other(item: Input, file: str, kind: str, report: ImportReport
                ) -> Iterator[RunRecord | Skip]:
    """An input that is not JSON: an Inspect log, or something ignored (found
    in a folder) or refused (named)."""
    if kind == "zip":
        if not inspect_archive(item.path):
            raise Unusable(UNKNOWN_FORMAT, "a zip archive that is not an Inspect AI log")
        yield from inspect_log.runs(item.path, file, "eval")
    elif kind == "inspect-json":
        yield from inspect_log.runs(item.path, file, "json")
    elif not item.named:
        report.ignored.append(file)
    else:
        raise Unusable(UNKNOWN_FORMAT, "a Parquet file that is not part of a trace folder "
                       "nor a Phoenix spans dataframe"
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
    if all(otel.is_printed_span(v) for v in values):
        gathered.take_spans(otel.printed_spans(values, file), collector)
        return True
    if phoenix.detect(values):
        gathered.take_spans(phoenix.spans(values, file), collector)
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
    atif = harbor.detect(doc)
    if tau2.detect(doc):
        yield from tau2.runs(doc, file)
    elif shape == "trajectory":
        yield miniswe.run(doc, item.path, file)
    elif sweagent.detect(doc):
        yield sweagent.run(doc, item.path, file)
    elif atif == "trajectory":
        yield harbor.run(doc, item.path, file)
    elif atif is not None or claude_code.detect_meta(doc) or shape == "predictions":
        # Harbor's trial and job files are read beside their trajectories
        report.companions.append(file)
    elif shape == "report":
        reports.add(doc, item.path)
        report.companions.append(file)
    elif otel.detect(doc):
        collector.add(doc, file)
        report.gathered.append(file)
    elif isinstance(doc, dict) and {"eval", "version", "status"} <= doc.keys():
        yield from inspect_log.runs(item.path, file, "json")
    else:
        raise Unusable(UNKNOWN_FORMAT, describe(doc))
