"""The search: each knob alone, then jointly around the best; the recommendation.

:func:`tune` evaluates candidates (:mod:`sim.tuning.knobs`) by replay where
they only tighten the harness in force (:mod:`sim.tuning.replayed`, exact on
the recorded runs) and by the calibrated world otherwise
(:mod:`sim.tuning.world`, a forecast):

1. **each knob alone**: every value of its grid, the other knobs as in force;
   its best value is the one with the lowest objective among those that keep
   successes (below);
2. **jointly**: every combination of each knob's best value and its grid
   neighbours (one step tighter and looser), so interactions (two limits
   each harmless alone stopping different successes) are measured, not
   assumed.

A candidate **keeps successes** when the upper end of the 95% interval of the
share of recorded successes it loses is at most ``1 - keep_successes``.
Objectives (per run): ``cost`` (mean USD), ``p95-cost`` (p95 USD), ``time``
(mean active seconds). Candidates are ranked by their objective relative to
the harness in force evaluated the same way (replayed against replayed,
forecast against forecast), so recorded dollars and forecast dollars are
never compared with each other. The **recommendation** is the lowest-ranked
candidate that keeps successes and costs less than the harness in force;
when none does, it is the harness in force itself (**ties go to the harness
in force**: a setting that changes nothing on these runs is not worth a
change). Among those that cost less, ties go to replayed before forecast,
then the tighter setting, then the order evaluated. The **refusal** is the
candidate just cheaper than the recommendation, with the successes it loses.

**Thin evidence** (status 3) is judged by :mod:`sim.tuning.thin`.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sim.bad_input import InputError
from sim.drivers.replay.reading import forget, open_folder, refused_note
from sim.scenario.model import HarnessConfig
from sim.traces.where import parse_where, slice_folder
from sim.tuning import knobs as kn
from sim.tuning.boundary import Boundary, find_boundary
from sim.tuning.evidence import fill_intervals, pct_interval
from sim.tuning.inforce import default_harness, grids, harness_in_force, setting_in_force
from sim.tuning.inforce import notes as inforce_notes
from sim.tuning.models import MIN_RUNS, split_by_model
from sim.tuning.replayed import ReplayEvaluator, apply, default_workers
from sim.tuning.thin import judge_thin
from sim.tuning.world import DEFAULT_RUNS, CalibratedWorld, ForecastEvaluator, calibrated_world

OBJECTIVES: dict[str, str] = {"cost": "cost_mean", "p95-cost": "cost_p95", "time": "time_mean"}
"""``--objective`` -> the frontier column it minimises."""
STATUS_DONE = 0


@dataclass
class Recommendation:
    """The recommended setting: its knob values, the full harness block it
    makes (``harness``) and its frontier row."""

    setting: kn.Setting
    harness: HarnessConfig
    row: dict[str, Any]

    @property
    def label(self) -> str:
        """The setting as ``knob=value`` words."""
        return kn.label(self.setting)


@dataclass
class TuneResult:
    """What :func:`tune` found: the ``frontier`` (one row per candidate
    evaluated), the ``recommendation``, the setting ``in_force``, the
    ``refusal`` (why the next-cheaper candidate was refused, or None), the
    ``status`` (0, or 3 for thin evidence, then ``thin`` says why and
    ``runs_to_decide`` how many runs would decide) and ``notes``."""

    frontier: pd.DataFrame
    recommendation: Recommendation
    in_force: kn.Setting
    knobs: tuple[str, ...]
    keep_successes: float
    objective: str
    traces: str
    runs: int
    refusal: str | None = None
    status: int = STATUS_DONE
    thin: str | None = None
    runs_to_decide: int | None = None
    might_save: dict[str, Any] | None = None
    """The frontier row of a setting cheaper than the recommendation that
    loses no more than allowed on these runs but not surely (``thin`` says
    why, ``runs_to_decide`` how many runs would decide); None when none."""
    notes: list[str] = field(default_factory=list)
    world_fidelity: str | None = None
    models_note: str | None = None
    """Whether the folder's models differ, and so are tuned each alone
    (:mod:`sim.tuning.models`); None for a folder of one model."""
    per_model: dict[str, TuneResult] = field(default_factory=dict)
    """Each model's own result when the models differ (else empty)."""
    boundaries: list[Boundary] = field(default_factory=list)
    """Each budget knob's boundary search (:mod:`sim.tuning.boundary`)."""
    stopped_runs: pd.DataFrame | None = None
    """The runs the recommendation stops (a replayed one:
    :meth:`~sim.tuning.replayed.ReplayEvaluator.stopped_runs`); None for a
    forecast, whose runs are simulated."""
    where: tuple[str, ...] = ()
    """The ``--where`` conditions that chose the runs tuned (empty: all)."""
    runs_in_folder: int | None = None
    """Runs in the trace folder before ``where`` (None: no slice)."""
    judged_runs: int | None = None
    """Runs whose source records whether they were resolved (``resolved``):
    only those can count as successes (None: not counted)."""
    overshoot: list[str] = field(default_factory=list)
    """Configured against actual for the recommended harness: the worst case
    one run could pass its money and token budgets by under a spend-so-far
    check (:func:`sim.analysis.overshoot.worst_overshoot`, with the most
    parallel tool calls, the largest tool result and, for a window larger than
    that, the largest prompt recorded); sim's harness
    checks each call's worst case, so it passes neither."""

    def __iter__(self) -> Iterator[Any]:  # frontier, recommendation = sim.tune(...)
        return iter((self.frontier, self.recommendation))


class _Evaluations:
    """Evaluates each candidate once, by replay or forecast."""

    def __init__(self, replay: ReplayEvaluator, in_force: kn.InForce, setting_in_force: kn.Setting,
                 world: Callable[[], CalibratedWorld], forecast_runs: int, seed: int,
                 progress: Callable[[str], None] | None) -> None:
        self.replay = replay
        self.in_force = in_force
        self.setting_in_force = setting_in_force
        self.world = world
        self.forecast_runs = forecast_runs
        self.seed = seed
        self.progress = progress
        self.rows: dict[kn.Setting | tuple[str], dict[str, Any]] = {}
        self.forecast: ForecastEvaluator | None = None
        self.base_rows: dict[str, dict[str, Any]] = {}
        self.unforecastable: str | None = None

    def __call__(self, s: kn.Setting, phase: str) -> dict[str, Any] | None:
        if s in self.rows:
            return self.rows[s]
        if self.progress is not None:
            self.progress(kn.label(s))
        if self.in_force.tightens(s):
            row = self.replay.evaluate(s, intervals=False)  # drawn at the end, together
        else:
            if self.unforecastable is not None:
                return None
            if self.forecast is None:
                try:
                    world = self.world()
                except InputError as error:  # e.g. too few runs to calibrate
                    self.unforecastable = (f"settings that loosen the harness in force or "
                                           f"change its detector were not evaluated: no world "
                                           f"could be calibrated to the traces ({error})")
                    return None
                self.forecast = ForecastEvaluator(world, self.setting_in_force,
                                                  runs=self.forecast_runs, seed=self.seed)
                base = self.forecast.evaluate(self.setting_in_force)
                self.base_rows["forecast"] = self._add(self.setting_in_force, base,
                                                       "in force (forecast reference)",
                                                       key=("forecast",))
            row = self.forecast.evaluate(s)
        return self._add(s, row, phase)

    def _add(self, s: kn.Setting, row: dict[str, Any], phase: str,
             key: tuple[str] | None = None) -> dict[str, Any]:
        full = {"setting": kn.label(s), **{k: v for k, v in s}, "phase": phase, **row,
                "_setting": s}
        self.rows[key if key is not None else s] = full
        return full


class _Score:
    """Scores frontier rows: the objective relative to the harness in force
    evaluated the same way, and whether a row keeps successes."""

    def __init__(self, evaluate: _Evaluations, column: str, limit: float) -> None:
        self.evaluate = evaluate
        self.column = column
        self.limit = limit
        self.base: dict[str, Any] = {}

    def ratio(self, row: dict[str, Any]) -> float:
        """``row``'s objective over the reference's (replayed against
        replayed, forecast against forecast)."""
        ref = (self.evaluate.base_rows.get("forecast", self.base) if row["method"] == "forecast"
               else self.base)
        if ref[self.column] > 0:
            return float(row[self.column] / ref[self.column])
        return 0.0 if row[self.column] == 0 else math.inf

    def ok(self, row: dict[str, Any]) -> bool:
        """The upper bound of successes lost is within the share allowed."""
        return bool(row["base_successes"]) and row["lost_high"] <= self.limit + 1e-12

    def best(self, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The preferred row among those that keep successes (:func:`_rank`)."""
        feasible = [r for r in rows if self.ok(r)]
        return min(feasible, key=lambda r: _rank(r, self.ratio(r))) if feasible else None

    def finish(self, rows: list[dict[str, Any]]) -> None:
        """Write each row's objective, ratio and verdict into it."""
        for r in rows:
            r["objective"] = r[self.column]
            r["objective_ratio"] = self.ratio(r)
            r["keeps_successes"] = self.ok(r)


def _check(keep_successes: float, objective: str) -> None:
    if not (isinstance(keep_successes, float | int) and 0 < keep_successes < 1):
        raise InputError(f"must be a share in (0, 1), got {keep_successes!r}",
                         path="--keep-successes")
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose among "
                         f"{', '.join(OBJECTIVES)}", path="--objective")


def _world_maker(world: CalibratedWorld | Callable[[], CalibratedWorld] | None, folder: Path,
                 seed: int, evaluations: int, say: Callable[[str], None] | None
                 ) -> Callable[[], CalibratedWorld]:
    """The world for forecasts, made on first need: ``world`` or a fit to ``folder``."""
    def make() -> CalibratedWorld:
        if world is None:
            if say is not None:
                say("calibrating a world to the traces (for forecasts)")
            return calibrated_world(folder, seed=seed, evaluations=evaluations)
        return world() if callable(world) else world

    return make


def tune(traces: str | os.PathLike[str], *, by_model: bool = True, **options: Any
         ) -> TuneResult:
    """Recommend limits for the runs in the trace folder ``traces``: the
    search of :func:`tune_runs` (same keyword ``options``) on all the runs
    (or the ``where`` slice) and, when ``by_model`` and the folder holds
    several models whose runs differ (:func:`~sim.tuning.models.split_by_model`),
    the same search on each model's runs alone (``per_model``); the test's
    verdict is ``models_note``. Returns a :class:`TuneResult`."""
    result = tune_runs(traces, **options)
    if not by_model:
        return result
    conditions = parse_where(options.get("where"))
    split = split_by_model(traces, conditions)
    result.models_note = split.reason or None
    if split.differ:
        texts = [c.text for c in conditions]
        for model in split.models:
            if options.get("progress"):
                print(f"tune: model {model}", file=sys.stderr)
            result.per_model[model] = tune_runs(
                traces, **{**options, "where": [*texts, f"model={model}"]})
        if split.few:
            result.models_note = (f"{split.reason}; too few runs for their own "
                                  f"({MIN_RUNS} needed): " + ", ".join(split.few))
    return result


def tune_runs(traces: str | os.PathLike[str], *,
              scenario: str | os.PathLike[str] | HarnessConfig | None = None,
              keep_successes: float = 0.99, objective: str = "cost",
              knobs: str | Sequence[str] | None = None,
              grid: Mapping[str, Sequence[kn.Value]] | None = None,
              world: CalibratedWorld | Callable[[], CalibratedWorld] | None = None,
              forecast_runs: int = DEFAULT_RUNS, seed: int = 0, calibration_evaluations: int = 45,
              progress: bool = False, where: str | Sequence[str] | None = None,
              candidates: str | Sequence[str] | Mapping[str, Sequence[kn.Value]] | None = None,
              workers: int | None = None) -> TuneResult:
    """Recommend limits for the runs in the trace folder ``traces`` (see the
    module docstring). ``scenario``: the harness in force (a scenario file or
    a :class:`HarnessConfig`; default :func:`~sim.tuning.inforce.default_harness`);
    ``knobs``: ``tokens``, ``money``, ``steps``, ``detector`` (default the
    budgets); ``grid``: candidate values per knob instead of the derived grid
    (None is unlimited; for ``detector``, a repeat threshold or 0 for off);
    ``world``: a calibrated world (or a function making one) for forecasts,
    default :func:`~sim.tuning.world.calibrated_world` of ``traces`` fitted on
    first need; ``forecast_runs``: simulated tasks per forecast candidate.
    ``candidates``: values added to the grid (``--candidates
    tokens=1.2M,1.5M``, :func:`~sim.tuning.knobs.parse_candidates`, or
    ``{knob: values}``); ``where``: ``--where`` conditions (:mod:`sim.tuning.where`): only the
    runs they select are tuned (replayed, calibrated and counted).
    ``workers``: processes replaying the runs (default
    :func:`~sim.tuning.replayed.default_workers`; the result is the same
    whatever their number).
    Returns a :class:`TuneResult` (``frontier, recommendation = tune(...)``
    unpacks)."""
    _check(keep_successes, objective)
    chosen = kn.parse_knobs(knobs)
    folder = Path(traces)
    conditions = parse_where(where)
    extra = kn.parse_candidates(candidates, chosen)
    if conditions:
        with tempfile.TemporaryDirectory(prefix="sim-tune-slice-") as tmp:
            part, _, total = slice_folder(folder, conditions, tmp)
            result = tune_runs(part, scenario=scenario, keep_successes=keep_successes,
                               objective=objective, knobs=chosen, grid=grid, world=world,
                               forecast_runs=forecast_runs, seed=seed,
                               calibration_evaluations=calibration_evaluations,
                               progress=progress, candidates=extra, workers=workers)
        result.traces = str(folder)
        result.where = tuple(c.text for c in conditions)
        result.runs_in_folder = total
        return result
    opened = open_folder(os.fspath(folder))  # streamed by the workers, or read whole once
    refused = refused_note(opened.refused)  # runs without recorded usage: not replayed
    if not len(opened):
        forget()
        raise InputError("the trace folder holds no runs" + (
            f" to replay ({refused.removeprefix('warning: ')})" if refused else ""),
            source=str(folder))
    say = (lambda text: print(f"tune: {text}", file=sys.stderr)) if progress else None
    try:
        replay = ReplayEvaluator(opened, harness_in_force(scenario, folder),
                                 default_workers() if workers is None else workers)
        try:
            return _tuned(replay, folder, refused, chosen, world, seed,
                          calibration_evaluations, say, forecast_runs, objective, grid, extra,
                          keep_successes)
        finally:
            replay.close()
    finally:
        del opened
        forget()


def _tuned(replay: ReplayEvaluator, folder: Path, refused: str | None,
           chosen: tuple[str, ...], world: CalibratedWorld | Callable[[], CalibratedWorld] | None,
           seed: int, calibration_evaluations: int, say: Callable[[str], None] | None,
           forecast_runs: int, objective: str, grid: Mapping[str, Sequence[kn.Value]] | None,
           extra: dict[str, list[kn.Value]], keep_successes: float) -> TuneResult:
    """:func:`tune_runs` once the runs are read and replayed in force."""
    in_force = setting_in_force(replay.harness_in_force, chosen)
    evaluate = _Evaluations(replay, kn.InForce(dict(in_force)), in_force,
                            _world_maker(world, folder, seed, calibration_evaluations, say),
                            forecast_runs, seed, say)
    score = _Score(evaluate, OBJECTIVES[objective], 1.0 - keep_successes)
    base = evaluate(in_force, "in force")
    assert base is not None  # the harness in force is always replayed
    score.base = base
    boundaries = _search(chosen, grids(chosen, replay, dict(in_force), grid, extra),
                         in_force, evaluate, score, exact=frozenset(grid or ()))
    fill_intervals(evaluate.rows.values(), replay.workers)
    notes = inforce_notes(replay)
    if refused:
        notes.insert(0, refused.removeprefix("warning: "))
    if evaluate.unforecastable is not None:
        notes.append(evaluate.unforecastable)
    rows = list(evaluate.rows.values())
    score.finish(rows)
    evaluated = [r for r in rows if r["phase"] != "in force (forecast reference)"]
    rec_row = _recommended(rows, evaluated, base)
    result = TuneResult(
        frontier=_frame(rows), recommendation=Recommendation(
            rec_row["_setting"], apply(replay.harness_in_force, rec_row["_setting"]),
            {k: v for k, v in rec_row.items() if k != "_setting"}),
        in_force=in_force, knobs=chosen, keep_successes=keep_successes, objective=objective,
        traces=str(folder), runs=replay.count, refusal=_refusal(evaluated, rec_row, score.limit),
        notes=notes, judged_runs=replay.judged,
        world_fidelity=evaluate.forecast.world.fidelity if evaluate.forecast else None)
    result.boundaries = boundaries
    result.overshoot = _overshoot(result.recommendation.harness, *replay.extremes)
    if rec_row["method"] == "replayed":
        result.stopped_runs = replay.stopped_runs(rec_row["_setting"])
    thin = judge_thin(rec_row, base, evaluated, score.limit, judged=replay.judged)
    if thin is not None:
        result.status, result.thin = thin.status, thin.why
        result.runs_to_decide = thin.runs_to_decide
        if thin.candidate is not None:
            result.might_save = {k: v for k, v in thin.candidate.items() if k != "_setting"}
    return result


def _search(chosen: Sequence[str], grids: dict[str, list[kn.Value]], in_force: kn.Setting,
            evaluate: _Evaluations, score: _Score, exact: frozenset[str] = frozenset()
            ) -> list[Boundary]:
    """Each knob alone over its grid and bisected at its boundary
    (:mod:`sim.tuning.boundary`; the values found join its grid; not the
    knobs in ``exact``, whose grid was given: those values only), then
    jointly over each knob's best value and its grid neighbours (module
    docstring); rows land in ``evaluate``; returns the boundaries searched."""
    best: dict[str, kn.Value] = {}
    boundaries: list[Boundary] = []
    forced = kn.InForce(dict(in_force))
    for knob in chosen:
        def alone(value: kn.Value, phase: str, knob: str = knob) -> dict[str, Any] | None:
            return evaluate(kn.setting({**dict(in_force), knob: value}), phase)

        def at_boundary(value: kn.Value, knob: str = knob) -> dict[str, Any] | None:
            return alone(value, f"{knob} boundary")

        def replayable(value: kn.Value, knob: str = knob) -> bool:
            return forced.tightens(kn.setting({**dict(in_force), knob: value}))

        by_value = {value: alone(value, f"{knob} alone") for value in grids[knob]}
        found = (Boundary(knob) if knob in exact else
                 find_boundary(knob, grids[knob], by_value, at_boundary, score.ok, replayable))
        if found.steps:
            boundaries.append(found)
            added = [s.value for s in found.steps if s.value not in by_value]
            grids[knob] = kn.cheaper_first([*grids[knob], *added])
            by_value.update({v: alone(v, f"{knob} boundary") for v in added})
        pick = score.best([r for r in by_value.values() if r is not None])
        best[knob] = dict(pick["_setting"])[knob] if pick is not None else dict(in_force)[knob]
    if len(chosen) > 1:
        axes = [kn.neighbours(grids[k], best[k]) for k in chosen]
        for values in itertools.product(*axes):
            evaluate(kn.setting(dict(zip(chosen, values, strict=True))), "joint")
    return boundaries


def _recommended(rows: list[dict[str, Any]], candidates: list[dict[str, Any]],
                 base: dict[str, Any]) -> dict[str, Any]:
    """The lowest-ranked candidate that keeps successes and costs less than
    the harness in force (ties: the order evaluated), else the harness in
    force (``base``); marked ``recommended``."""
    order = {id(r): i for i, r in enumerate(rows)}
    feasible = [r for r in candidates if r["keeps_successes"] and r is not base
                and round(r["objective_ratio"], 9) < 1.0]
    rec = (min(feasible, key=lambda r: (*_rank(r, r["objective_ratio"]), order[id(r)]))
           if feasible else base)
    for r in rows:
        r["recommended"] = r is rec
    return rec


def _refusal(candidates: list[dict[str, Any]], rec_row: dict[str, Any], limit: float
             ) -> str | None:
    """Why the candidate just cheaper than the recommendation was refused."""
    cheaper = [r for r in candidates if r["objective_ratio"] < rec_row["objective_ratio"]]
    if not cheaper:
        return None
    refused = max(cheaper, key=lambda r: r["objective_ratio"])
    if not refused["base_successes"]:
        return (f"{refused['setting']} ({refused['method']}) would cost "
                f"{_change(refused['objective_ratio'])} against the harness in force, but "
                "with no recorded success there is none to keep")
    lost = pct_interval(refused["lost_share"], refused["lost_low"], refused["lost_high"])
    return (f"{refused['setting']} ({refused['method']}) would cost "
            f"{_change(refused['objective_ratio'])} against the harness in force but "
            f"loses {lost} of successes; the upper bound is above the "
            f"{100 * limit:g}% allowed")


def _overshoot(h: HarnessConfig, parallel: int, largest: int, biggest: int) -> list[str]:
    """The overshoot lines of ``h`` (:attr:`TuneResult.overshoot`) for runs
    whose calls made at most ``parallel`` tool calls, of results of at most
    ``largest`` tokens, with prompts of at most ``biggest`` tokens."""
    from sim.analysis.overshoot import overshoot_lines, worst_overshoot
    from sim.scenario.model import harness_params
    from sim.world.params import WorldParams

    biggest = biggest or 1
    template = harness_params(h, WorldParams())
    # the largest recorded prompt stands for a window the harness leaves unbounded; the
    # window still holds what the harness's own caps need (one call's output, the prefix,
    # the compaction threshold), so a folder of short prompts is no invalid harness
    floor = max(template.max_output_tokens, template.prefix_tokens + 1,
                template.context.compact_at_tokens or 0)
    params = replace(template, context_window=min(template.context_window,
                                                  max(1, biggest, floor)))
    found = worst_overshoot(params, parallel_tool_calls=parallel, tool_result_tokens=largest)
    return overshoot_lines({k: o for k, o in found.items() if o.limit is not None})


def _rank(row: dict[str, Any], ratio: float) -> tuple[Any, ...]:
    """Order of preference among candidates that keep successes: the lower
    objective (to 1e-9), replayed before forecast, then the tighter setting
    (fewer unlimited budgets, then smaller values): at equal cost a limit
    that binds on no success is free insurance against a runaway run."""
    values = [v for k, v in row["_setting"] if k != "detector"]
    return (round(ratio, 9), row["method"] != "replayed", sum(v is None for v in values),
            tuple(math.inf if v is None else v for v in values))


def _change(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f}%" if math.isfinite(ratio) else "more"


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "_setting"} for r in rows])
    for knob in kn.KNOBS:
        if knob in frame.columns:
            frame[knob] = frame[knob].astype(object).where(frame[knob].notna(), None)
    return frame.reset_index(drop=True)


__all__ = ["OBJECTIVES", "Recommendation", "TuneResult", "default_harness", "tune", "tune_runs"]
