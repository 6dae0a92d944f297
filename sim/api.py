"""The Python API, for notebooks and scripts: load a scenario, change a
setting, simulate, compare; results come back as pandas DataFrames.

>>> from sim import load_scenario, simulate, sweep, compare
>>> bounded = load_scenario("scenarios/bounded.yaml", {"tasks": 200})
>>> rows = simulate(bounded, {"harness.budgets.tokens": 1_000_000})
>>> rows["outcome"].value_counts(normalize=True)            # doctest: +SKIP
>>> rows, summary = sweep(bounded, {"sweep": {"harness.detector.nudges": [0, 1, 2]}})
>>> summary[["cell", "succeeded", "cost_mean", "cost_p95"]]  # doctest: +SKIP
>>> result = compare("scenarios/bounded.yaml", "scenarios/bounded_stop_first.yaml",
...                  tasks=2000)                             # doctest: +SKIP
>>> result.verdict, result.outcomes                          # doctest: +SKIP

Overrides are a dict of dotted paths to Python values (``{"harness.budgets.tokens":
None}`` removes the token budget) or, as on the command line, a list of
``"dotted.path=value"`` strings with YAML values. Every function takes
``workers`` (processes; default all cores; results do not depend on it) and
``progress`` (a progress bar on stderr; default off). Bad input raises
:class:`sim.bad_input.InputError` with a message naming the file and field. A
scenario that names a detector or verifier by import path (code to import and
run) is refused unless the call passes ``allow_plugins=True``.

Units, as everywhere: shares in [0, 1], tokens as counts, cost in USD, times
in seconds; percentiles are observed values at rank floor(q n) (:mod:`sim.analysis.stats`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from sim.analysis.compare import PAIRINGS, Comparison, Side, Thresholds, compare_sides
from sim.bad_input import InputError
from sim.output.html import summary_frame
from sim.output.results import PARQUET_NAME, SUMMARY_NAME, cell_summary, table_frame
from sim.scenario.limits import check_workers
from sim.scenario.model import Scenario, set_dotted, validate
from sim.scenario.model import load_scenario as _load_yaml
from sim.sweeps.cells import CellRun, cells_of, default_workers

Overrides = Mapping[str, Any] | Sequence[str] | None
"""``{"dotted.path": value}`` or ``["dotted.path=value", ...]`` (YAML values)."""

__all__ = ["Comparison", "ComparisonPlan", "SweepFrames", "compare", "load_scenario",
           "plan_comparison", "read_results", "run_comparison", "simulate", "summarize",
           "sweep", "with_overrides"]


class SweepFrames(NamedTuple):
    """The results of a sweep: ``rows`` (one per task of every cell, the
    columns of :class:`sim.task_record.TaskRecord`) and ``summary`` (one per cell,
    see :func:`sim.output.html.summary_frame`). Unpacks as ``rows, summary``."""

    rows: pd.DataFrame
    summary: pd.DataFrame


# --------------------------------------------------------------- scenarios

def with_overrides(scenario: Scenario, overrides: Overrides = None, *,
                   allow_plugins: bool = False) -> Scenario:
    """A copy of ``scenario`` with ``overrides`` applied and validated (a
    detector or verifier named by import path needs ``allow_plugins``).

    >>> s = load_scenario("scenarios/bounded.yaml")
    >>> with_overrides(s, {"harness.detector.nudges": 0}).harness.detector.nudges
    0
    """
    if not overrides:
        return scenario
    raw = scenario.model_dump(mode="python")
    source = scenario.name or "scenario"
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            set_dotted(raw, str(key), value, source)
    else:
        from sim.scenario.model import parse_override

        if isinstance(overrides, str):
            raise InputError("overrides must be a dict or a list of 'path=value' strings, "
                             f"got the string {overrides!r}")
        for item in overrides:
            key, value = parse_override(item, source)
            set_dotted(raw, key, value, source)
    return validate(raw, source, allow_plugins=allow_plugins)


def load_scenario(source: str | os.PathLike | Scenario, overrides: Overrides = None, *,
                  allow_plugins: bool = False) -> Scenario:
    """A validated :class:`~sim.scenario.Scenario` from a YAML file (or a
    Scenario), with ``overrides`` applied. A scenario file names code to run
    (a detector or verifier by import path) only with ``allow_plugins=True``.

    >>> load_scenario("scenarios/bounded.yaml", {"tasks": 100}).tasks
    100
    """
    scenario = (source if isinstance(source, Scenario)
                else _load_yaml(source, allow_plugins=allow_plugins))
    return with_overrides(scenario, overrides, allow_plugins=allow_plugins)


def _settings(tasks: int | None, seed: int | None) -> dict[str, int]:
    out = {}
    if tasks is not None:
        if tasks < 1:
            raise InputError(f"tasks must be >= 1, got {tasks}")
        out["tasks"] = tasks
    if seed is not None:
        if seed < 0:
            raise InputError(f"seed must be >= 0, got {seed}")
        out["seed"] = seed
    return out


def _prepare(scenario: str | os.PathLike | Scenario, overrides: Overrides, tasks: int | None,
             seed: int | None, allow_plugins: bool = False) -> Scenario:
    return with_overrides(load_scenario(scenario, overrides, allow_plugins=allow_plugins),
                          _settings(tasks, seed), allow_plugins=allow_plugins)


def _run(scenario: Scenario, runs: list[CellRun], workers: int | None, progress: bool
         ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Run the cells in chunks (:func:`sim.sweeps.chunks.run_collected`: workers send
    Arrow columns, no record objects) and return the rows of every cell and
    the cells' summaries."""
    check_workers(workers, "workers")
    from sim.sweeps.chunks import run_collected

    result = run_collected(runs, scenario.tasks, workers=workers or default_workers(),
                           progress=progress)
    frames, cells = [], []
    for run in runs:
        frame = table_frame(result.tables.pop(run.name))  # each table freed once converted
        frames.append(frame)
        cell = cell_summary(run.name, run.params(), frame)
        if run.name in result.capacity:
            cell["capacity"] = result.capacity[run.name]
        cells.append(cell)
    return pd.concat(frames, ignore_index=True), cells


# -------------------------------------------------------------- simulating

def simulate(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
             tasks: int | None = None, seed: int | None = None, workers: int | None = None,
             progress: bool = False, allow_plugins: bool = False) -> pd.DataFrame:
    """Simulate the scenario's base cell (its ``sweep``, if any, is ignored):
    one row per task, the columns of :class:`sim.task_record.TaskRecord` (``cell``,
    ``task``, ``outcome``, ``steps``, ``input_tokens``, ``cost_usd``, ...).

    ``tasks`` and ``seed`` override the scenario's; the same scenario and seed
    give the same rows. ``allow_plugins`` lets the scenario name a detector or
    verifier by import path (code that is imported and run).

    >>> rows = simulate("scenarios/bounded.yaml", tasks=50, workers=1)
    >>> len(rows), rows["task"].tolist()[:3]
    (50, [0, 1, 2])
    """
    s = _prepare(scenario, overrides, tasks, seed, allow_plugins).model_copy(
        update={"sweep": {}})
    rows, _ = _run(s, [CellRun(s.name, s, ())], workers, progress)
    return rows


def sweep(scenario: str | os.PathLike | Scenario, overrides: Overrides = None, *,
          tasks: int | None = None, seed: int | None = None, workers: int | None = None,
          progress: bool = False, allow_plugins: bool = False) -> SweepFrames:
    """Simulate every cell of the scenario's sweep grid (one cell without a
    sweep): ``(rows, summary)``, see :class:`SweepFrames`. Add or replace the
    grid with an override: ``{"sweep": {"harness.budgets.tokens": [5e5, 1e6, 2e6]}}``.

    >>> rows, summary = sweep("scenarios/bounded.yaml", {"sweep": {
    ...     "harness.detector.nudges": [0, 1]}}, tasks=50, workers=1)
    >>> summary["cell"].tolist()
    ['nudges=0', 'nudges=1']
    """
    s = _prepare(scenario, overrides, tasks, seed, allow_plugins)
    rows, cells = _run(s, cells_of(s), workers, progress)
    return SweepFrames(rows, summary_frame(cells))


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-cell summary (as :func:`sweep` returns it) of task rows, cells
    in order of first appearance; sweep parameters are not known from rows."""
    cells = [cell_summary(str(name), {}, group.reset_index(drop=True))
             for name, group in rows.groupby("cell", sort=False)]
    return summary_frame(cells)


# ----------------------------------------------------------- results folders

def _read_folder(folder: Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    parquet, summary = folder / PARQUET_NAME, folder / SUMMARY_NAME
    for path in (parquet, summary):
        if not path.is_file():
            raise InputError(f"not a results folder: {path.name} is missing",
                             source=str(folder))
    try:
        rows = pd.read_parquet(parquet)
        cells = json.loads(summary.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"cannot read the results ({error.__class__.__name__}: {error})",
                         source=str(folder)) from None
    return rows, cells


def read_results(folder: str | os.PathLike) -> SweepFrames:
    """The rows and per-cell summary of a results folder written by ``python -m
    sim sweep``/``run`` (``results.parquet`` and ``summary.json``)."""
    rows, cells = _read_folder(Path(folder))
    return SweepFrames(rows, summary_frame(cells))


# -------------------------------------------------------------- comparing

def _count(n: int) -> str:
    return f"{n:,} task{'s' if n != 1 else ''} per cell"


def _scenario_side(s: Scenario, source: str, workers: int | None, progress: bool) -> Side:
    runs = cells_of(s)
    rows, cells = _run(s, runs, workers, progress)
    return Side(s.name, f"scenario {source} (seed {s.seed}, {_count(s.tasks)}, "
                        f"engine {s.engine})", rows, tuple(r.name for r in runs),
                {c["name"]: c["params"] for c in cells}, s.seed)


def _rows_side(rows: pd.DataFrame, label: str, source: str,
               cells: list[dict[str, Any]] | None = None) -> Side:
    names = [c["name"] for c in cells] if cells else list(dict.fromkeys(rows["cell"]))
    params = {c["name"]: c.get("params", {}) for c in cells or []}
    counts = rows.groupby("cell", sort=False).size()
    sizes = sorted(set(counts.tolist()))
    size = _count(sizes[0]) if len(sizes) == 1 else f"{sizes[0]:,} to {sizes[-1]:,} tasks"
    seeds = {c.get("seed") for c in cells or []}
    seed = seeds.pop() if len(seeds) == 1 else None
    known = f"seed {seed}" if seed is not None else "seed not recorded"
    return Side(label, f"{source} ({size}; {known})", rows, tuple(names), params, seed)


class _Spec(NamedTuple):
    kind: str  # "scenario", "folder" or "rows"
    value: Any
    label: str


def _spec(source: Any) -> _Spec:
    if isinstance(source, Scenario):
        return _Spec("scenario", source, source.name)
    if isinstance(source, SweepFrames):
        return _Spec("rows", source.rows, "rows")
    if isinstance(source, pd.DataFrame):
        return _Spec("rows", source, "rows")
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            return _Spec("folder", path, path.name or str(path))
        if path.is_file():
            return _Spec("scenario", path, path.stem)
        from sim.scenario.catalog import resolve  # a scenario's name, or an InputError

        path = Path(resolve(path))
        return _Spec("scenario", path, path.stem)
    raise InputError(f"cannot compare a {type(source).__name__}: give a scenario file, a "
                     "results folder, a Scenario or a DataFrame of task rows")


@dataclass(frozen=True)
class ComparisonPlan:
    """Both sides of a comparison resolved and validated, nothing simulated
    yet: per side its kind (``scenario``, ``folder`` or ``rows``), label and
    source, and the resolved Scenario or the rows (and cells) read. See
    :func:`plan_comparison`; :func:`run_comparison` carries it out."""

    specs: tuple[_Spec, _Spec]
    scenarios: tuple[Scenario | None, Scenario | None]
    folders: tuple[tuple[pd.DataFrame | None, list[dict[str, Any]] | None], ...]
    thresholds: Thresholds
    pairing: str

    def provenance(self) -> dict[str, Any]:
        """What the comparison compares: per side the resolved scenario of a
        simulated side, or the folder of a results side
        (:mod:`sim.output.provenance`)."""
        from sim.output.provenance import RESULT_FILES, folder_record, sim_version

        out: dict[str, Any] = {"command": "compare", "sim_version": sim_version()}
        for role, spec, scenario in zip(("base", "candidate"), self.specs, self.scenarios,
                                        strict=True):
            if scenario is not None:
                out[role] = {"scenario": scenario.model_dump(mode="json")}
            elif spec.kind == "folder":
                out[role] = {"folder": folder_record(spec.value, RESULT_FILES)}
            else:
                out[role] = {"rows": len(spec.value)}
        return out


def plan_comparison(base: Any, candidate: Any, *, tasks: int | None = None,
                    seed: int | None = None, overrides: Overrides = None,
                    base_overrides: Overrides = None, candidate_overrides: Overrides = None,
                    pairing: str = "auto", max_share_drop_pp: float = 1.0,
                    max_cost_rise_pct: float = 5.0, alpha: float = 0.05,
                    resamples: int = 2000, allow_plugins: bool = False) -> ComparisonPlan:
    """Resolve and validate both sides of :func:`compare` (same arguments)
    without simulating: bad input fails here, before any work."""
    thresholds = Thresholds(max_share_drop_pp, max_cost_rise_pct, alpha, resamples).validate()
    specs = (_spec(base), _spec(candidate))
    folder_tasks = None
    folders = tuple(_read_folder(s.value) if s.kind == "folder" else (None, None)
                    for s in specs)
    for rows, _cells in folders:
        if rows is not None and len(rows):
            folder_tasks = int(rows.groupby("cell").size().max())
    if specs[0].kind != "scenario" and specs[1].kind != "scenario" and (
            tasks is not None or seed is not None or overrides or base_overrides
            or candidate_overrides):
        raise InputError("tasks, seed and overrides apply to scenarios; neither side is one")
    scenarios: list[Scenario | None] = []
    for spec, own in zip(specs, (base_overrides, candidate_overrides), strict=True):
        if spec.kind != "scenario":
            scenarios.append(None)
            continue
        s = _prepare(spec.value, overrides, tasks if tasks is not None else folder_tasks, seed,
                     allow_plugins)
        scenarios.append(with_overrides(s, own, allow_plugins=allow_plugins))
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    return ComparisonPlan(specs, (scenarios[0], scenarios[1]), folders, thresholds, pairing)


def run_comparison(plan: ComparisonPlan, *, workers: int | None = None,
                   progress: bool = False) -> Comparison:
    """Simulate the scenario sides of ``plan`` and compare (see :func:`compare`)."""
    sides = []
    for spec, scenario, (rows, cells) in zip(plan.specs, plan.scenarios, plan.folders,
                                             strict=True):
        if scenario is not None:
            source = str(spec.value) if not isinstance(spec.value, Scenario) else scenario.name
            sides.append(_scenario_side(scenario, source, workers, progress))
        elif spec.kind == "folder":
            assert rows is not None  # plan_comparison read the folder
            sides.append(_rows_side(rows, spec.label, f"results folder {spec.value}", cells))
        else:
            sides.append(_rows_side(spec.value, spec.label, "task rows"))
    if plan.specs[0].kind == "folder" and plan.specs[1].kind == "folder":
        _same_counts(sides[0], sides[1])
    b, c = _distinct_labels(*sides)
    return compare_sides(b, c, plan.thresholds, pairing=plan.pairing)


def compare(base: Any, candidate: Any, *, tasks: int | None = None, seed: int | None = None,
            overrides: Overrides = None, base_overrides: Overrides = None,
            candidate_overrides: Overrides = None, pairing: str = "auto",
            max_share_drop_pp: float = 1.0, max_cost_rise_pct: float = 5.0,
            alpha: float = 0.05, resamples: int = 2000, workers: int | None = None,
            progress: bool = False, allow_plugins: bool = False) -> Comparison:
    """Compare a candidate harness setting with a base: outcome shares, steps,
    tokens and cost, cell by cell, with intervals, tests and a verdict (see
    :mod:`sim.analysis.compare` for the statistics).

    Each side is a scenario file, a :class:`~sim.scenario.Scenario`, a
    results folder (``results.parquet`` + ``summary.json``) or a DataFrame of
    task rows. Scenarios are simulated here: ``tasks``, ``seed`` and
    ``overrides`` apply to both, ``base_overrides``/``candidate_overrides`` to
    one side (e.g. ``candidate_overrides={"seed": 8}`` for a second seed).
    Without ``tasks``, a scenario compared with a results folder runs as many
    tasks as the folder's cells hold. Two results folders must hold the same
    number of tasks per cell (else InputError).

    ``pairing``: ``auto`` (pair tasks by index when both sides ran the same
    task streams), ``paired`` or ``unpaired``. Thresholds: ``max_share_drop_pp``
    (percentage points), ``max_cost_rise_pct`` (percent), ``alpha``
    (family-wise level); ``resamples`` of the bootstrap. ``allow_plugins``
    lets a scenario name a detector or verifier by import path.

    The result's ``outcome`` is ``regression``, ``no regression`` (every
    check shown within its limit) or ``inconclusive`` (``tasks_to_decide``
    says how many tasks would decide it); ``exit_status`` 1, 0 or 3.

    >>> result = compare("scenarios/bounded.yaml", "scenarios/bounded.yaml",
    ...                  tasks=100, candidate_overrides={"harness.detector.nudges": 0},
    ...                  workers=1)
    >>> result.paired, result.exit_status in (0, 1, 3)
    (True, True)
    """
    plan = plan_comparison(base, candidate, tasks=tasks, seed=seed, overrides=overrides,
                           base_overrides=base_overrides,
                           candidate_overrides=candidate_overrides, pairing=pairing,
                           max_share_drop_pp=max_share_drop_pp,
                           max_cost_rise_pct=max_cost_rise_pct, alpha=alpha,
                           resamples=resamples, allow_plugins=allow_plugins)
    return run_comparison(plan, workers=workers, progress=progress)


def _same_counts(base: Side, candidate: Side) -> None:
    b = base.rows.groupby("cell").size().to_dict()
    c = candidate.rows.groupby("cell").size().to_dict()
    if len(b) == 1 and len(c) == 1:
        b, c = {"": next(iter(b.values()))}, {"": next(iter(c.values()))}
    bad = {k: (b.get(k), c.get(k)) for k in set(b) | set(c) if b.get(k) != c.get(k)}
    if bad:
        detail = ", ".join(f"{k or 'the cell'}: {x} vs {y}" for k, (x, y) in sorted(bad.items()))
        raise InputError(f"the results folders hold different numbers of tasks ({detail}); "
                         "compare folders of the same size")


def _distinct_labels(base: Side, candidate: Side) -> tuple[Side, Side]:
    """Sides whose labels differ (same-named sides get their seed or role added)."""
    if base.label != candidate.label:
        return base, candidate
    from dataclasses import replace

    if base.seed is not None and candidate.seed is not None and base.seed != candidate.seed:
        return (replace(base, label=f"{base.label} (seed {base.seed})"),
                replace(candidate, label=f"{candidate.label} (seed {candidate.seed})"))
    return (replace(base, label=f"{base.label} (base)"),
            replace(candidate, label=f"{candidate.label} (candidate)"))


def tune(traces: str | os.PathLike[str], *, scenario: str | os.PathLike[str] | None = None,
         keep_successes: float = 0.99, objective: str = "cost",
         knobs: str | Sequence[str] | None = None, **options: Any) -> Any:
    """Recommend limits from the recorded runs of a trace folder (``python -m
    sim tune``; see :mod:`sim.tuning.search`). Returns a
    :class:`~sim.tuning.search.TuneResult` that unpacks as ``frontier,
    recommendation``: the frontier as a DataFrame (one row per candidate:
    successes lost with their 95% interval, mean and p95 cost, runs stopped by
    reason, each row labelled replayed or forecast) and the
    :class:`~sim.tuning.search.Recommendation` (its ``label``, ``harness``
    block and ``row``). ``options`` go to :func:`sim.tuning.search.tune`
    (``grid``, ``world``, ``forecast_runs``, ``seed``, ``progress``)."""
    from sim.tuning.search import tune as _tune

    return _tune(traces, scenario=scenario, keep_successes=keep_successes, objective=objective,
                 knobs=knobs, **options)
