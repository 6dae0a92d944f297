"""SWE-bench reports: which instances a run resolved, for mini-swe-agent runs.

SWE-bench's evaluation (and sb-cli) writes a report, a JSON object with
``resolved_ids``, ``unresolved_ids``..., that an import may meet beside
mini-swe-agent's trajectories (:mod:`sim.traces.miniswe`); :class:`Reports`
gathers them and gives each run the verdict of its own report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sim.traces.model import as_list

REPORT_LISTS = ("resolved_ids", "unresolved_ids", "error_ids", "completed_ids",
                "incomplete_ids", "empty_patch_ids")
"""The lists of instance ids a report holds (``resolved_ids`` says resolved,
the others not)."""

REPORTS_FOLDER = "sb-cli-reports"
"""Where sb-cli saves reports (``--output_dir`` default), next to the
predictions it submitted: ``{subset}__{split}__{run_id}.json`` (then ``-1``,
``-2``... when the name is taken), ``run_id`` being the predictions' folder
name by default."""


@dataclass(frozen=True, slots=True)
class _Report:
    folder: Path
    stem: str
    verdicts: dict[str, bool]


class Reports:
    """SWE-bench reports met during an import, each applied to its own run.

    An instance is resolved (True) if the report lists it in ``resolved_ids``,
    not (False) if in another of its lists. A report belongs to the run whose
    run folder or model it names in its file name (a report that names
    another run folder of the import is that run's, even if it names the
    model too): sb-cli's
    ``{subset}__{split}__{run_id}.json`` (``run_id`` the run folder by
    default; a ``-N`` suffix for a re-fetched report), SWE-bench's own
    ``{model}.{run_id}.json`` (the model with ``/`` as ``__``). It is looked
    for in the trajectory's folder and its ancestors, and in a
    ``sb-cli-reports/`` folder beside any of them. The report that names the
    run folder wins over one that names only the model; nearer folders win
    over farther ones; a report that names nothing counts only when it is the
    only report in the run folder itself (or in its ``sb-cli-reports/``).
    Reports are never merged: a run takes one report's verdict, and a run
    with no report of its own gets None (unknown)."""

    def __init__(self) -> None:
        self._reports: list[_Report] = []

    @property
    def count(self) -> int:
        """How many reports were added."""
        return len(self._reports)

    def add(self, doc: dict, path: Path) -> int:
        """Register the report at ``path``; returns how many instances it lists."""
        verdicts: dict[str, bool] = {}
        for key in REPORT_LISTS:
            for instance in as_list(doc.get(key)):
                if not isinstance(instance, str | int) or isinstance(instance, bool):
                    continue
                if key == "resolved_ids":
                    verdicts[str(instance)] = True
                else:
                    verdicts.setdefault(str(instance), False)
        self._reports.append(_Report(_resolved_folder(path.parent), _stem(path.name),
                                     verdicts))
        return len(verdicts)

    def verdict(self, trajectory: Path, instance: str, run_folder: str | None = None,
                model: str | None = None, run_folders: frozenset[str] = frozenset()
                ) -> bool | None:
        """The verdict on ``instance`` of the report that belongs to the run of
        ``trajectory`` (in ``run_folder``, by ``model``; ``run_folders``: every
        run folder of the import), or None."""
        report = self.report_for(trajectory, run_folder, model, run_folders)
        return None if report is None else report.verdicts.get(instance)

    def report_for(self, trajectory: Path, run_folder: str | None, model: str | None,
                   run_folders: frozenset[str] = frozenset()) -> _Report | None:
        folders = [_resolved_folder(trajectory.parent)]
        folders += list(folders[0].parents)
        distance: dict[Path, int] = {}
        for i, folder in enumerate(folders):
            distance.setdefault(folder, 2 * i)
            distance.setdefault(folder / REPORTS_FOLDER, 2 * i + 1)
        home = folders[1] if run_folder is not None and len(folders) > 1 else folders[0]
        models = {m for m in (model, model.replace("/", "__") if model else None) if m}
        best: tuple[int, int, str] | None = None
        chosen = None
        for report in self._reports:
            if report.folder not in distance:
                continue
            names_run = _names(report.stem, run_folder)
            if not names_run and any(_names(report.stem, other) for other in run_folders
                                     if other != run_folder):
                continue  # another run's report
            score = 2 * names_run + any(_names(report.stem, m) for m in models)
            if score == 0:
                alone = sum(r.folder == report.folder for r in self._reports) == 1
                if not (alone and report.folder in (home, home / REPORTS_FOLDER)):
                    continue
            key = (score, -distance[report.folder], report.stem)
            if best is None or key > best:
                best, chosen = key, report
        return chosen


def _resolved_folder(folder: Path) -> Path:
    try:
        return folder.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the folder as named
        return folder.absolute()


def _stem(name: str) -> str:
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _names(stem: str, name: str | None) -> bool:
    """Whether a report's file stem names ``name`` as a whole part (between
    ``__`` or ``.`` separators, or all of it), a ``-N`` suffix allowed."""
    if not name:
        return False
    for candidate in {stem, re.sub(r"-\d+$", "", stem)}:
        if candidate == name:
            return True
        for sep in ("__", "."):
            if (candidate.endswith(sep + name) or candidate.startswith(name + sep)
                    or f"{sep}{name}{sep}" in candidate):
                return True
    return False
