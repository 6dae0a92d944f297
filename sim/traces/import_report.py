"""What an import read, wrote and skipped: :class:`ImportReport` (``import.json``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sim.traces.billed_reads import CONVENTION as BILLED
from sim.traces.provenance import PROVENANCES, warnings
from sim.traces.skips import Skip, counts, phrase


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
    gathered: list[str] = field(default_factory=list)
    """Files handed to a format that gathers runs across files (OpenTelemetry,
    Claude Code, Langfuse, LangSmith, span dialects); not written."""
    merged: list[str] = field(default_factory=list)
    """Gathered files whose records all went into runs (or skips) named by
    another file: a LangSmith patch file, a trace's later spans."""
    inputs: int = 0
    """How many inputs (files and trace folders) were read."""

    provenance: dict[str, dict[str, Counter]] = field(default_factory=dict)
    """``{source: {field: Counter(provenance)}}``: the calls imported, per
    figure, by how it was obtained (:mod:`sim.traces.provenance`)."""
    conventions: dict[str, dict[str, Counter]] = field(default_factory=dict)
    """``{source: {what: Counter(how)}}``: the runs imported, by how the
    importer read a convention that varies (``RunRecord.conventions``)."""

    where: str = ""
    """The ``--where`` conditions the folder was cut to (empty: every run
    imported is in it), as :func:`sim.traces.where.where_text` writes them."""
    runs_kept: int | None = None
    """The runs the ``where`` conditions kept (None without conditions)."""

    def entries(self) -> tuple[int, int, int, int]:
        """What the import has recorded so far: runs, skips, companions and
        ignored files (an input that changes none of them gave nothing)."""
        return self.runs, len(self.skips), len(self.companions), len(self.ignored)

    def account(self, quiet: list[str], reason: str, detail: str) -> None:
        """Account for the ``quiet`` inputs (those that gave nothing while read)
        once every gathered run is in: one named by a run or a skip is
        accounted for; a gathered one is ``merged``; any other is skipped as a
        file with ``reason``. So every input is exactly one of imported (it
        names a run), skipped, ignored, a companion or merged."""
        named = set(self.run_files) | {s.file for s in self.skips}
        gathered = set(self.gathered)
        for file in quiet:
            if file in named:
                continue
            if file in gathered:
                self.merged.append(file)
            else:
                self.skips.append(Skip(file, reason, detail))

    def warnings(self) -> list[str]:
        """The sources whose relied-on figures are estimated or unknown for
        more than 1% of their calls (:func:`sim.traces.provenance.warnings`)."""
        return warnings(self.provenance)

    def provenance_by_source(self) -> dict[str, dict[str, Any]]:
        """``{source: {"calls": n, "by_field": {field: {provenance: calls}}}}``,
        sources sorted, provenances in :data:`PROVENANCES` order (all four,
        zeros kept, so a reader can tell 0 from missing)."""
        out: dict[str, dict[str, Any]] = {}
        for source, by_field in sorted(self.provenance.items()):
            calls = sum(by_field.get("input_tokens", Counter()).values())
            out[source] = {"calls": calls, "by_field": {
                name: {value: int(found.get(value, 0)) for value in PROVENANCES}
                for name, found in by_field.items()}}
        return out

    def conventions_by_source(self) -> dict[str, dict[str, dict[str, int]]]:
        """``{source: {what: {how: runs}}}``, sorted, the most frequent ``how`` first."""
        return {source: {what: dict(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))
                         for what, found in sorted(by_what.items())}
                for source, by_what in sorted(self.conventions.items()) if by_what}

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

    def warning_lines(self) -> list[str]:
        """:meth:`warnings` as lines for the terminal (``warning: ...``),
        printed before :meth:`lines`."""
        return [f"warning: {line}" for line in self.warnings()]

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
        billed = {source: by_what[BILLED[0]][BILLED[1]]
                  for source, by_what in sorted(self.conventions.items())
                  if BILLED[0] in by_what and by_what[BILLED[0]][BILLED[1]]}
        if billed:
            total = sum(billed.values())
            out.append(f"read the cache reads of {total} run{'' if total == 1 else 's'} ("
                       + ", ".join(f"{n} {source}" for source, n in billed.items())
                       + ") from their recorded costs: their usage does not split the prompt "
                       "(provenance derived)")
        if self.companions:
            out.append(f"read {len(self.companions)} companion files (SWE-bench reports, "
                       "mini-swe-agent predictions, Claude Code subagent metadata, Harbor "
                       "results and configs, OpenHands event caches and evaluated copies)")
        if self.merged:
            out.append(f"merged {len(self.merged)} files into runs named by other files "
                       "(their steps or spans belong to traces begun elsewhere)")
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
            "inputs": self.inputs, "merged_files": self.merged,
            "repairs": {"count": sum(self.repairs.values()),
                        "by_field": self.repairs_by_field()},
            "warnings": self.warnings(),
            "provenance": self.provenance_by_source(),
            "conventions": self.conventions_by_source(),
            **({"where": {"conditions": self.where, "runs_kept": self.runs_kept}}
               if self.where else {}),
        }
