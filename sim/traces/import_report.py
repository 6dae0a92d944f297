"""What an import read, wrote and skipped: :class:`ImportReport` (``import.json``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

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
                       "mini-swe-agent predictions, Claude Code subagent metadata, Harbor "
                       "results and configs, OpenHands event caches and evaluated copies)")
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
