"""Calibrating from the API: ``sim.calibrate(traces, out)`` is ``python -m sim
calibrate TRACES --out OUT``.

It fits a world to a trace folder with :func:`sim.calibration.pipeline.calibrate`
(the same function the command calls), judges it by k-fold cross-validation,
and writes the fitted scenario to ``out`` and ``calibration.json``,
``calibration.md`` and ``calibration.html`` to the report folder (see
:mod:`sim.calibration` for the method). The options are checked before minutes
of fitting, with the messages the command prints.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sim.bad_input import InputError

if TYPE_CHECKING:
    from sim.calibration.pipeline import Calibration

__all__ = ["Calibrated", "calibrate", "check_writable"]


@dataclass(frozen=True)
class Calibrated:
    """A world fitted by :func:`calibrate`, and the files written.

    ``accepted`` is the cross-validated verdict (``status`` 0 when accepted, 1
    when rejected, as the command's exit status); ``verdict`` says it in
    words (``accepted`` or ``rejected: `` and the measures that failed);
    ``metrics`` has one row per measure held out against simulated runs
    (``measure``, ``ks`` distance, its ``critical`` value, Holm-adjusted
    ``p``, ``rejected``); ``result`` is the whole
    :class:`~sim.calibration.pipeline.Calibration` (its ``doc``, ``ladder``,
    ``folds``, figures via :func:`sim.api.calibration_report.figures`); ``path``
    is the scenario YAML written and ``report`` the report folder."""

    accepted: bool
    verdict: str
    metrics: pd.DataFrame
    result: Calibration
    path: Path
    report: Path

    @property
    def status(self) -> int:
        """0 when the fit is accepted, 1 when it is rejected."""
        return 0 if self.accepted else 1


def calibrate(traces: str | os.PathLike[str], out: str | os.PathLike[str], *,
              report: str | os.PathLike[str] | None = None, name: str | None = None,
              folds: int = 5, seed: int = 0, classes: int | str | None = None,
              by: str | None = None, evaluations: int = 45, search_runs: int | None = None,
              ladder: bool = True, progress: bool = False,
              where: str | Sequence[str] | None = None, **options: Any) -> Calibrated:
    """Fit a scenario to the trace folder ``traces`` and write it to ``out``
    (a ``.yaml`` file; the scenario is named ``name``, default the file's
    stem) with its report in ``report`` (default ``<out stem>_calibration``
    beside ``out``). Returns a :class:`Calibrated`; a rejected fit is a
    result (``accepted`` False, the report says why), not an error.

    ``folds``: cross-validation folds (each run held out once, at least 2);
    ``seed``: of the folds, the search and the simulations; ``classes``: force
    K task classes (clusters of run features) or ``"auto"`` (by BIC);
    ``by="model"``: force one class per model (default: the structure with the
    lowest cross-validated loss); ``evaluations``: simulations the search may
    make (0: direct estimates only); ``search_runs``: simulated runs per search
    simulation (default four times the fitted runs, at least 1,000);
    ``ladder``: the forecast-vs-replay ladder of budgets; ``where``:
    ``--where`` conditions on ``runs.parquet`` (:mod:`sim.traces.where`): only
    the runs they select are fitted; ``options`` go to
    :func:`sim.calibration.pipeline.calibrate`. Bad options raise
    :class:`sim.bad_input.InputError` before anything is fitted.

    >>> fit = calibrate("traces/tau2", "worlds/tau2.yaml")     # doctest: +SKIP
    >>> fit.verdict, fit.path                                   # doctest: +SKIP
    ('accepted', PosixPath('worlds/tau2.yaml'))
    """
    from sim.api.calibration_report import write_report, write_scenario
    from sim.calibration.pipeline import calibrate as fit_world
    from sim.traces.where import parse_where, slice_folder

    _check_options(folds, seed, classes, by, evaluations, search_runs)
    path = Path(out)
    if path.suffix not in (".yaml", ".yml"):
        raise InputError("--out must name a .yaml file", source=str(path))
    folder = Path(report) if report else path.with_name(f"{path.stem}_calibration")
    for parent in (path.parent, folder.parent):  # before minutes of fitting, not after
        check_writable(parent)
    conditions = parse_where(where)
    with tempfile.TemporaryDirectory(prefix="sim-calibrate-slice-") as tmp:
        fitted = (os.fspath(slice_folder(traces, conditions, tmp)[0]) if conditions
                  else os.fspath(traces))
        result = fit_world(fitted, folds=folds, seed=seed, classes=classes, by=by,
                           name=name or path.stem, evaluations=evaluations,
                           search_runs=search_runs, with_ladder=ladder, progress=progress,
                           **options)
    write_scenario(path, result.yaml_text())
    write_report(folder, result)
    return Calibrated(result.status == 0, verdict(result), _metrics(result), result, path, folder)


def verdict(result: Calibration) -> str:
    """``accepted``, or ``rejected: `` and the measures (and the exit mix) that failed."""
    rejected = [m.label for m in result.rejected] + (
        ["exit mix"] if result.exits.rejected else [])
    return "rejected: " + "; ".join(rejected) if rejected else "accepted"


def _metrics(result: Calibration) -> pd.DataFrame:
    rows = [{"measure": m.label, "ks": m.ks, "critical": m.critical, "p": m.p_adjusted,
             "rejected": m.rejected} for m in result.metrics]
    e = result.exits
    rows.append({"measure": "exit mix (total variation)", "ks": e.tv, "critical": e.critical,
                 "p": e.p_adjusted, "rejected": e.rejected})
    return pd.DataFrame(rows)


def _check_options(folds: int, seed: int, classes: int | str | None, by: str | None,
                   evaluations: int, search_runs: int | None) -> None:
    """The command's checks of its options, with its messages."""
    if classes is not None and classes != "auto" and not (
            isinstance(classes, int) and not isinstance(classes, bool) and classes >= 1):
        raise InputError(f"--classes must be a positive integer or auto, got {classes!r}")
    if folds < 2:
        raise InputError(f"--folds must be at least 2, got {folds}")
    if by not in (None, "model"):
        raise InputError(f"--by must be model, got {by!r}")
    if by and classes is not None:
        raise InputError("--by model and --classes each force a structure: give one")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    if evaluations < 0:
        raise InputError(f"--evaluations must be >= 0, got {evaluations}")
    if search_runs is not None and search_runs < 10:
        raise InputError(f"--search-runs must be >= 10, got {search_runs}")


def check_writable(folder: Path) -> None:
    """Make ``folder`` (and its parents) and write a scratch file in it; an
    InputError naming it when the disk refuses (read-only, full, not ours)."""
    from sim.output.folder import WriteFailed, describe_write_error

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".sim-write-check-"):
            pass
    except OSError as error:
        raise WriteFailed(folder, describe_write_error(error),
                          "nothing was fitted: give --out/--report a folder you can write"
                          ) from None


def calibrate_checked(traces: str | os.PathLike[str], out: str | os.PathLike[str], *,
                      classes: str | None = None, workers: int | None = None,
                      **options: Any) -> Calibrated:
    """:func:`calibrate` as ``python -m sim calibrate`` runs it: ``out``
    checked first (its folder writable, then not a folder, a device or a file
    of a results folder: :func:`sim.output.folder.check_file_target`), then
    ``classes`` as typed (a positive integer or ``auto``), with ``workers``
    processes (default: every core)."""
    from sim.output.folder import check_file_target
    from sim.sweeps.cells import default_workers

    check_writable(Path(out).parent)  # the API's own check first: its message
    check_file_target(out, "--out")  # a folder, a device, a results folder's file: now
    return calibrate(traces, out, classes=classes_of(classes),
                     workers=workers or default_workers(), **options)


def classes_of(text: str | None) -> int | str | None:
    """``--classes`` as typed: None, ``auto`` or a positive integer."""
    if text is None or text == "auto":
        return text
    try:
        k = int(text)
    except ValueError:
        raise InputError(f"--classes must be a positive integer or auto, got {text!r}") from None
    if k < 1:
        raise InputError(f"--classes must be a positive integer or auto, got {k}")
    return k


def calibrated_text(fit: Calibrated) -> str:
    """What ``calibrate`` prints: the verdict as a table (structure, metrics,
    exit mix, the fixed prompt-token budgets of the ladder), the verdict and
    where the scenario and its report are."""
    return "\n".join([*table_lines(fit.result), f"fit {fit.verdict}",
                      f"scenario {fit.path}; report in {fit.report}/ (calibration.json, "
                      f"calibration.md, calibration.html)"])


def table_lines(result: Calibration) -> list[str]:
    """The verdict as a table: structure, metrics, exit mix, the fixed
    prompt-token budgets of the ladder."""
    lines = [f"structure: {result.structure.reason}",
             f"{'metric (all folds held out)':<32} {'KS':>6} {'critical':>9} {'p (adj.)':>9}"]
    for m in result.metrics:
        p = f"{m.p_adjusted:>9.3g}" if m.p_adjusted is not None else f"{'untested':>9}"
        lines.append(f"{m.label:<32} {m.ks:>6.3f} {m.critical:>9.3f} {p}"
              + ("  rejected" if m.rejected else ""))
    e = result.exits
    p = f"{e.p_adjusted:>9.3g}" if e.p_adjusted is not None else f"{'untested':>9}"
    lines.append(f"{'exit mix (total variation)':<32} {e.tv:>6.3f} {e.critical:>9.3f} {p}"
                 + ("  rejected" if e.rejected else ""))
    for r in result.ladder:
        if r.budget.kind == "tokens" and r.budget.label.endswith("k prompt tokens"):
            lines.append(f"budget {r.budget.label:<20} successes lost: forecast "
                         f"{_percent(r.forecast['lost'])}, replay {_percent(r.replay['lost'])}; "
                         f"stopped {_percent(r.forecast['stopped'])} vs "
                         f"{_percent(r.replay['stopped'])}")
    return lines


def _percent(share: float | None) -> str:
    """A share as a percentage with one decimal; ``n/a`` when it is unknown
    (None or NaN: no run records an outcome), as the report writes it."""
    if share is None or not math.isfinite(share):
        return "n/a"
    return f"{100 * share:.1f}%"
