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
candidate that keeps successes (ties: replayed before forecast, then the
order evaluated); the **refusal** is the candidate just cheaper than it, with
the successes it loses.

**Thin evidence** (status 3): no candidate cheaper than the harness in force
keeps successes, yet one of them loses no more than the allowed share on these
runs: the traces are too few to tell. The runs that would decide are those
giving the allowed share's test 80% power for that candidate, assuming its
observed loss is the true one and the interval's half-width shrinks as
``1/sqrt(n)`` (:mod:`sim.analysis.compare`'s planning rule).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats as scipy_stats

from sim.analysis.compare import POWER
from sim.bad_input import InputError
from sim.drivers.recorded_runs import read_trace_folder
from sim.scenario.model import HarnessConfig
from sim.tuning import knobs as kn
from sim.tuning.evidence import pct_interval
from sim.tuning.replayed import ReplayEvaluator, apply
from sim.tuning.world import DEFAULT_RUNS, CalibratedWorld, ForecastEvaluator, calibrated_world

OBJECTIVES: dict[str, str] = {"cost": "cost_mean", "p95-cost": "cost_p95", "time": "time_mean"}
"""``--objective`` -> the frontier column it minimises."""
ALPHA = 0.05
MAX_RUNS_TO_DECIDE = 10**9
STATUS_DONE, STATUS_THIN = 0, 3


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
    notes: list[str] = field(default_factory=list)
    world_fidelity: str | None = None
    overshoot: list[str] = field(default_factory=list)
    """Configured against actual for the recommended harness: the worst case
    one run could pass its money and token budgets by under a spend-so-far
    check (:func:`sim.analysis.overshoot.worst_overshoot`, with the most
    parallel tool calls, the largest tool result and, for a window larger than
    that, the largest prompt recorded); sim's harness
    checks each call's worst case, so it passes neither."""

    def __iter__(self) -> Iterator[Any]:  # frontier, recommendation = sim.tune(...)
        return iter((self.frontier, self.recommendation))


def default_harness(folder: str | Path) -> HarnessConfig:
    """The harness the traces state: no budgets but the limits recorded in
    ``runs.parquet`` (``step_limit`` as steps, ``cost_limit_usd`` as money,
    ``error_limit`` as tool errors; the largest where runs differ), the
    detector off, a window larger than any recorded prompt, no "do without
    this tool" message, prices as of the newest run's day."""
    runs = pd.read_parquet(Path(folder) / "runs.parquet")
    budgets: dict[str, Any] = {}
    for column, name, kind in (("step_limit", "steps", int), ("cost_limit_usd", "money_usd",
                                                               float),
                               ("error_limit", "tool_errors", int)):
        if column in runs.columns:
            values = pd.to_numeric(runs[column], errors="coerce").dropna()
            values = values[values > 0]
            if len(values):
                budgets[name] = kind(values.max())
    doc: dict[str, Any] = {"context_window": 10_000_000, "tool_failure_limit": 1_000_000,
                           "budgets": budgets, "detector": {"enabled": False}}
    if "started_at" in runs.columns:
        started = pd.to_datetime(runs["started_at"], errors="coerce", utc=True).dropna()
        if len(started):
            doc["prices_date"] = str(started.max().date())
    return HarnessConfig.model_validate(doc)


def _in_force(h: HarnessConfig, knobs: Sequence[str]) -> kn.Setting:
    values: dict[str, kn.Value] = {}
    for knob in knobs:
        if knob == "detector":
            values[knob] = h.detector.repeat_threshold if h.detector.enabled else 0
        else:
            values[knob] = getattr(h.budgets, kn.FIELDS[knob])
    return kn.setting(values)


def _runs_to_decide(n: int, share: float, high: float, limit: float) -> int | None:
    """Runs giving the test of ``share <= limit`` 80% power (module docstring)."""
    z = scipy_stats.norm.ppf(1 - ALPHA / 2)
    factor = (z + scipy_stats.norm.ppf(POWER)) / z
    half, distance = high - share, limit - share
    if distance <= 0 or half <= 0:
        return None
    planned = n * (factor * half / distance) ** 2
    if planned > MAX_RUNS_TO_DECIDE:
        return None
    planned = max(1, math.ceil(planned))
    scale = 10 ** max(0, len(str(planned)) - 2)
    return int(-(-planned // scale) * scale)


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
            row = self.replay.evaluate(s)
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


def tune(traces: str | os.PathLike[str], *,
         scenario: str | os.PathLike[str] | HarnessConfig | None = None,
         keep_successes: float = 0.99, objective: str = "cost",
         knobs: str | Sequence[str] | None = None,
         grid: Mapping[str, Sequence[kn.Value]] | None = None,
         world: CalibratedWorld | Callable[[], CalibratedWorld] | None = None,
         forecast_runs: int = DEFAULT_RUNS, seed: int = 0, calibration_evaluations: int = 45,
         progress: bool = False) -> TuneResult:
    """Recommend limits for the runs in the trace folder ``traces`` (see the
    module docstring). ``scenario``: the harness in force (a scenario file or
    a :class:`HarnessConfig`; default :func:`default_harness`); ``knobs``:
    ``tokens``, ``money``, ``steps``, ``detector`` (default the budgets);
    ``grid``: candidate values per knob instead of the derived grid (None is
    unlimited; for ``detector``, a repeat threshold or 0 for off); ``world``:
    a calibrated world (or a function making one) for forecasts, default
    :func:`~sim.tuning.world.calibrated_world` of ``traces`` fitted on first
    need. Returns a :class:`TuneResult` (``frontier, recommendation =
    tune(...)`` unpacks)."""
    if not (isinstance(keep_successes, float | int) and 0 < keep_successes < 1):
        raise InputError(f"must be a share in (0, 1), got {keep_successes!r}",
                         path="--keep-successes")
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose among "
                         f"{', '.join(OBJECTIVES)}", path="--objective")
    chosen = kn.parse_knobs(knobs)
    folder = Path(traces)
    runs = read_trace_folder(folder)
    if not runs:
        raise InputError("the trace folder holds no runs", source=str(folder))
    h = _harness(scenario, folder)
    say = (lambda text: print(f"tune: {text}", file=sys.stderr)) if progress else None
    replay = ReplayEvaluator(runs, h)
    in_force = _in_force(h, chosen)
    force = kn.InForce(dict(in_force))

    def make_world() -> CalibratedWorld:
        if world is None:
            if say is not None:
                say("calibrating a world to the traces (for forecasts)")
            return calibrated_world(folder, seed=seed, evaluations=calibration_evaluations)
        return world() if callable(world) else world

    evaluate = _Evaluations(replay, force, in_force, make_world, forecast_runs, seed, say)
    grids = _grids(chosen, replay, dict(in_force), grid)
    notes = _notes(replay)
    limit = 1.0 - keep_successes
    column = OBJECTIVES[objective]
    base = evaluate(in_force, "in force")
    assert base is not None  # the harness in force is always replayed

    def ratio(row: dict[str, Any]) -> float:
        ref = evaluate.base_rows.get("forecast", base) if row["method"] == "forecast" else base
        return row[column] / ref[column] if ref[column] > 0 else (
            0.0 if row[column] == 0 else math.inf)

    def ok(row: dict[str, Any]) -> bool:
        return bool(row["base_successes"]) and row["lost_high"] <= limit + 1e-12

    best: dict[str, kn.Value] = {}
    for knob in chosen:
        candidates = []
        for value in grids[knob]:
            s = kn.setting({**dict(in_force), knob: value})
            row = evaluate(s, f"{knob} alone")
            if row is not None:
                candidates.append(row)
        feasible = [r for r in candidates if ok(r)]
        pick = min(feasible, key=lambda r: _rank(r, ratio(r))) if feasible else None
        best[knob] = dict(pick["_setting"])[knob] if pick is not None else dict(in_force)[knob]
    if len(chosen) > 1:
        axes = [kn.neighbours(grids[k], best[k]) for k in chosen]
        for values in itertools.product(*axes):
            evaluate(kn.setting(dict(zip(chosen, values, strict=True))), "joint")
    if evaluate.unforecastable is not None:
        notes.append(evaluate.unforecastable)
    rows = list(evaluate.rows.values())
    for r in rows:
        r["objective"] = r[column]
        r["objective_ratio"] = ratio(r)
        r["keeps_successes"] = ok(r)
    order = {id(r): i for i, r in enumerate(rows)}
    candidates = [r for r in rows if r["phase"] != "in force (forecast reference)"]
    feasible = [r for r in candidates if r["keeps_successes"]]
    rec_row = (min(feasible, key=lambda r: (*_rank(r, r["objective_ratio"]), order[id(r)]))
               if feasible else base)
    for r in rows:
        r["recommended"] = r is rec_row
    cheaper = [r for r in candidates if r["objective_ratio"] < rec_row["objective_ratio"]]
    refused = max(cheaper, key=lambda r: r["objective_ratio"]) if cheaper else None
    refusal = None
    if refused is not None:
        lost = pct_interval(refused["lost_share"], refused["lost_low"], refused["lost_high"])
        refusal = (f"{refused['setting']} ({refused['method']}) would cost "
                   f"{_change(refused['objective_ratio'])} against the harness in force but "
                   f"loses {lost} of successes; the upper bound is above the "
                   f"{100 * limit:g}% allowed")
    result = TuneResult(
        frontier=_frame(rows), recommendation=Recommendation(
            rec_row["_setting"], apply(replay.harness_in_force, rec_row["_setting"]),
            {k: v for k, v in rec_row.items() if k != "_setting"}),
        in_force=in_force, knobs=chosen, keep_successes=keep_successes, objective=objective,
        traces=str(folder), runs=len(runs), refusal=refusal, notes=notes,
        world_fidelity=evaluate.forecast.world.fidelity if evaluate.forecast else None)
    result.overshoot = _overshoot(result.recommendation.harness, runs)
    _judge_thin(result, base, candidates, limit)
    return result


def _overshoot(h: HarnessConfig, runs: list[Any]) -> list[str]:
    from sim.analysis.overshoot import overshoot_lines, worst_overshoot
    from sim.scenario.model import harness_params
    from sim.world.params import WorldParams

    parallel = max((len(c.tools) for r in runs for c in r.calls), default=0)
    largest = max((t.result_tokens or 0 for r in runs for c in r.calls for t in c.tools),
                  default=0)
    biggest = max((c.usage.prompt_tokens for r in runs for c in r.calls), default=1)
    # the largest recorded prompt stands for a window the harness leaves unbounded
    params = replace(harness_params(h, WorldParams()),
                     context_window=max(1, min(h.context_window, biggest)))
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


def _judge_thin(result: TuneResult, base: dict[str, Any], candidates: list[dict[str, Any]],
                limit: float) -> None:
    """Status 3 when the traces are too few to tell (module docstring)."""
    if not base["base_successes"]:
        result.status = STATUS_THIN
        result.thin = ("no recorded run succeeded under the harness in force: there are no "
                       "successes to keep, so no limit can be judged")
        return
    if result.recommendation.row["objective_ratio"] < 1.0:
        return
    hopeful = [r for r in candidates if r["objective_ratio"] < 1.0 and r["lost_share"] <= limit
               and not r["keeps_successes"]]
    if not hopeful:
        return
    needs = [(_runs_to_decide(r["runs"], r["lost_share"], r["lost_high"], limit), r)
             for r in hopeful]
    decidable = [(n, r) for n, r in needs if n is not None]
    result.status = STATUS_THIN
    if decidable:
        n, r = min(decidable, key=lambda nr: nr[0])
        result.runs_to_decide = n
        forecast = r["method"] == "forecast"
        which = "simulated runs (--forecast-runs)" if forecast else "runs like these"
        result.thin = (f"too few runs to tell: {r['setting']} ({r['method']}) loses "
                       f"{pct_interval(r['lost_share'], r['lost_low'], r['lost_high'])} of "
                       f"{r['base_successes']:,} {'simulated' if forecast else 'recorded'} "
                       f"successes, within the {100 * limit:g}% allowed but not surely; about "
                       f"{n:,} {which} would decide (80% power), against {r['runs']:,} now")
    else:
        result.thin = ("too few runs to tell: every cheaper setting's loss of successes is "
                       "at its limit, which more runs cannot decide")


def _harness(scenario: str | os.PathLike[str] | HarnessConfig | None, folder: Path
             ) -> HarnessConfig:
    if scenario is None:
        return default_harness(folder)
    if isinstance(scenario, HarnessConfig):
        return scenario
    from sim.scenario.model import load_scenario, read_yaml

    raw = read_yaml(str(scenario))
    if "harness" not in raw:
        raise InputError("has no harness section: tune needs the harness in force",
                         source=str(scenario), path="harness")
    return load_scenario(scenario).harness


def _grids(chosen: Sequence[str], replay: ReplayEvaluator, in_force: dict[str, kn.Value],
           given: Mapping[str, Sequence[kn.Value]] | None) -> dict[str, list[kn.Value]]:
    needs = replay.needs()
    out: dict[str, list[kn.Value]] = {}
    for knob in chosen:
        if given is not None and knob in given:
            values = list(dict.fromkeys(given[knob]))
            if in_force[knob] not in values:
                values.append(in_force[knob])
            out[knob] = (kn.cheaper_first(values) if knob != "detector" else values)
        elif knob == "detector":
            out[knob] = kn.detector_grid(in_force[knob])
        else:
            out[knob] = kn.budget_grid(knob, needs[knob], replay.base_success, in_force[knob])
    return out


def _notes(replay: ReplayEvaluator) -> list[str]:
    notes = []
    if replay.prices_for.unpriced:
        notes.append("models the price catalogue lacks are priced from their calls' recorded "
                     "costs (else at the scenario's prices) for money budgets: "
                     + ", ".join(sorted(replay.prices_for.unpriced)))
    return notes


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "_setting"} for r in rows])
    for knob in kn.KNOBS:
        if knob in frame.columns:
            frame[knob] = frame[knob].astype(object).where(frame[knob].notna(), None)
    return frame.reset_index(drop=True)


__all__ = ["OBJECTIVES", "Recommendation", "TuneResult", "default_harness", "tune"]
