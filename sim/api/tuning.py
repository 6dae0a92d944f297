"""Tuning from the API: ``sim.tune(traces)`` is ``python -m sim tune TRACES``.

:func:`sim.tuning.search.tune` (the search the command runs) replays every
candidate that only tightens the harness in force on the recorded runs and
forecasts the others on a world calibrated to the same traces; the outputs
(``recommended.yaml``, ``frontier.csv``, ``tune.json``, ``report.md``,
``report.html``) are written by :func:`sim.tuning.report.write_outputs`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sim.api.calibrating import Calibrated
from sim.bad_input import InputError

if TYPE_CHECKING:
    from sim.scenario.model import HarnessConfig
    from sim.tuning.knobs import Value
    from sim.tuning.search import Recommendation, TuneResult
    from sim.tuning.world import CalibratedWorld

    World = Calibrated | CalibratedWorld | Callable[[], CalibratedWorld] | None
    """What forecasts the settings the recording cannot answer."""

__all__ = ["Tuned", "tune"]


@dataclass(frozen=True)
class Tuned:
    """Limits recommended by :func:`tune`, and the folder written.

    ``frontier``: one row per candidate setting (``setting``, ``method``
    replayed or forecast, successes ``lost`` with ``lost_share`` and its 95%
    interval ``lost_low``/``lost_high``, ``cost_mean`` and ``cost_p95`` in USD
    per run, ``objective_ratio`` against the harness in force,
    ``keeps_successes``, runs ``stopped`` by reason); ``recommendation``: its
    ``label``, the full ``harness`` block and its frontier ``row``;
    ``refusal``: why the next-cheaper setting was refused (or None);
    ``status``: 0, or 3 when the traces are too few to tell (``result.thin``
    says why); ``result``: the whole :class:`~sim.tuning.search.TuneResult`;
    ``path``: the output folder (``recommended`` is its scenario YAML).
    Unpacks as ``frontier, recommendation``."""

    frontier: pd.DataFrame
    recommendation: Recommendation
    refusal: str | None
    status: int
    result: TuneResult
    path: Path

    @property
    def recommended(self) -> Path:
        """``recommended.yaml``: a scenario whose harness is the recommendation
        (``sim.replay(traces, tuned.recommended)`` checks it)."""
        return self.path / "recommended.yaml"

    def __iter__(self) -> Iterator[Any]:  # frontier, recommendation = sim.tune(...)
        return iter((self.frontier, self.recommendation))


def tune(traces: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None,
         scenario: str | os.PathLike[str] | HarnessConfig | None = None,
         keep_successes: float = 0.99, objective: str = "cost",
         knobs: str | Sequence[str] | None = None, world: World = None,
         grid: Mapping[str, Sequence[Value]] | None = None, forecast_runs: int = 2000,
         seed: int = 0, progress: bool = False, force: bool = False,
         where: str | Sequence[str] | None = None,
         candidates: str | Sequence[str] | Mapping[str, Sequence[Value]] | None = None,
         by_model: bool = True) -> Tuned:
    """Recommend limits from the recorded runs of the trace folder ``traces``,
    write the outputs to ``out`` (default ``reports/tune_<traces name>``, or
    under ``$SIM_OUT``) and return a :class:`Tuned`.

    ``scenario``: the harness in force (a scenario file or a HarnessConfig;
    default the limits the traces state); ``keep_successes``: the share of
    recorded successes a setting must keep, judged by the upper end of the
    95% interval of the share lost; ``objective``: ``cost`` (mean USD per
    run), ``p95-cost`` or ``time`` (mean active seconds); ``knobs``: among
    ``tokens``, ``money``, ``steps``, ``detector`` (default the budgets);
    ``world``: the world that forecasts settings the recording cannot answer
    (a :class:`~sim.api.calibrating.Calibrated` from :func:`sim.calibrate`, a
    :class:`~sim.tuning.world.CalibratedWorld` or a function making one;
    default: calibrated to ``traces`` on first need); ``grid``: candidate
    values per knob instead of the derived grid; ``forecast_runs``: simulated
    tasks per forecast candidate; ``candidates``: values of your own added
    to the grid (``"tokens=1.2M,1.5M steps=30"`` or ``{knob: values}``);
    ``where``: conditions on ``runs.parquet``'s columns (``["model=gpt-4o",
    "started>=2025-01-01"]``, see :mod:`sim.tuning.where`): only the runs
    they select are tuned; ``by_model``: when the folder's models differ,
    also tune each model alone (False: the pooled answer only); ``force``:
    replace an ``out`` holding another tune's outputs (without it, exit 2
    before anything runs; the same tune of the same traces may rewrite its
    folder). Bad input raises
    :class:`sim.bad_input.InputError` before anything runs.

    >>> frontier, recommendation = tune("traces/tau2")         # doctest: +SKIP
    >>> recommendation.label                                    # doctest: +SKIP
    'tokens=270,000 money=$1.2 steps=32'
    """
    from sim.output import folder
    from sim.scenario.project import out_root
    from sim.tuning.knobs import parse_candidates, parse_knobs
    from sim.tuning.report import write_outputs
    from sim.tuning.search import tune as search
    from sim.tuning.where import parse_where

    if forecast_runs < 1:
        raise InputError(f"must be at least 1, got {forecast_runs}", path="--forecast-runs")
    if not (Path(traces) / "runs.parquet").is_file():
        raise InputError("not a trace folder (no runs.parquet); import one with "
                         "'python -m sim traces import'", source=os.fspath(traces))
    target = Path(out) if out is not None else out_root() / f"tune_{Path(traces).name}"
    provenance = _provenance(traces, scenario, keep_successes=keep_successes,
                             objective=objective, knobs=knobs, grid=grid,
                             forecast_runs=forecast_runs, seed=seed,
                             where=[c.text for c in parse_where(where)],
                             candidates=parse_candidates(candidates, parse_knobs(knobs)),
                             by_model=by_model)
    folder.prepare(target, provenance, force=force)
    result = search(traces, scenario=scenario, keep_successes=keep_successes,
                    objective=objective, knobs=knobs, grid=grid, world=_world(world),
                    forecast_runs=forecast_runs, seed=seed, progress=progress, where=where,
                    candidates=candidates, by_model=by_model)
    with folder.replace(target) as staging:
        write_outputs(staging, result, provenance)
    return Tuned(result.frontier, result.recommendation, result.refusal, result.status,
                 result, target)


def _world(world: World) -> CalibratedWorld | Callable[[], CalibratedWorld] | None:
    """A :class:`Calibrated` as the search's CalibratedWorld (its verdict attached)."""
    if not isinstance(world, Calibrated):
        return world
    from sim.tuning.world import CalibratedWorld

    return CalibratedWorld(dict(world.result.doc), world.accepted, tuple(world.result.reasons))


def _provenance(traces: str | os.PathLike[str],
                scenario: str | os.PathLike[str] | HarnessConfig | None,
                **options: Any) -> dict[str, Any]:
    """What names a tune (:func:`sim.output.provenance.identity`): the command,
    the trace folder by content, and as ``scenario`` the harness in force (a
    file by content) with the options."""
    from sim.output.provenance import folder_record, sim_version
    from sim.scenario.model import HarnessConfig as Harness

    if scenario is None:
        in_force: Any = None
    elif isinstance(scenario, Harness):
        in_force = scenario.model_dump(mode="json")
    else:
        in_force = {"sha256": hashlib.sha256(Path(scenario).read_bytes()).hexdigest()
                    if Path(scenario).is_file() else os.fspath(scenario)}
    from sim.tuning.knobs import parse_knobs

    options["knobs"] = list(parse_knobs(options.get("knobs")))
    grid = options.pop("grid", None)
    plain: dict[str, Any] = {k: (list(v) if isinstance(v, tuple) else v)
                             for k, v in options.items()}
    plain["grid"] = None if grid is None else {k: list(v) for k, v in grid.items()}
    return {"command": "tune", "traces": folder_record(traces),
            "scenario": {"harness_in_force": in_force, **plain},
            "sim_version": sim_version()}


def tuned_summary(tuned: Tuned) -> dict[str, Any]:
    """tune.json's content (:func:`sim.tuning.report.summary`): what ``tune
    --format json`` prints."""
    from sim.tuning.report import summary

    return summary(tuned.result)


def tuned_text(tuned: Tuned) -> str:
    """What ``tune`` prints: the recommendation, the frontier's first 12 rows
    and where the outputs are."""
    from sim.output.safe_text import printable
    from sim.tuning.report import frontier_table, lead

    # the lead names models and runs from the traces: shown as text, escapes visible
    return "\n".join([*(printable(line, newlines=False) for line in lead(tuned.result)), "",
                      frontier_table(tuned.result, limit=12),
                      f"\n{len(tuned.frontier)} candidates; outputs in {printable(tuned.path)}/ "
                      "(recommended.yaml, stopped_runs.csv, frontier.csv, tune.json, "
                      "report.md, report.html)"])
