"""The harness in force and the candidates searched around it.

The harness in force is a scenario's (``--scenario``) or, by default, the one
the traces state (:func:`default_harness`); the knobs' values in it are the
setting every candidate is measured against, and each knob's grid of
candidates is derived from what the recorded runs needed
(:func:`sim.tuning.knobs.budget_grid`) unless given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from sim.bad_input import InputError
from sim.output.files import read_parquet
from sim.scenario.model import HarnessConfig
from sim.tuning import knobs as kn
from sim.tuning.replayed import ReplayEvaluator

__all__ = ["default_harness", "grids", "harness_in_force", "notes", "setting_in_force"]

_RECORDED_LIMITS = (("step_limit", "steps", int), ("cost_limit_usd", "money_usd", float),
                    ("error_limit", "tool_errors", int))
"""``runs.parquet`` column -> the budget it states, and its type."""


def default_harness(folder: str | Path) -> HarnessConfig:
    """The harness the traces state: no budgets but the limits recorded in
    ``runs.parquet`` (``step_limit`` as steps, ``cost_limit_usd`` as money in
    USD, ``error_limit`` as tool errors; the largest where runs differ), the
    detector off, a window larger than any recorded prompt, no "do without
    this tool" message, prices as of the newest run's day."""
    runs = read_parquet(Path(folder) / "runs.parquet")  # not pd.read_parquet: see it
    budgets: dict[str, Any] = {}
    for column, name, kind in _RECORDED_LIMITS:
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


def harness_in_force(scenario: str | os.PathLike[str] | HarnessConfig | None, folder: Path
                     ) -> HarnessConfig:
    """``scenario``'s harness (a file with a harness section, or a
    HarnessConfig), or :func:`default_harness` of the trace folder."""
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


def setting_in_force(h: HarnessConfig, knobs: Sequence[str]) -> kn.Setting:
    """The knobs' values in the harness ``h`` (the detector as its repeat
    threshold, 0 when off)."""
    values: dict[str, kn.Value] = {}
    for knob in knobs:
        if knob == "detector":
            values[knob] = h.detector.repeat_threshold if h.detector.enabled else 0
        else:
            values[knob] = getattr(h.budgets, kn.FIELDS[knob])
    return kn.setting(values)


def grids(chosen: Sequence[str], replay: ReplayEvaluator, in_force: dict[str, kn.Value],
          given: Mapping[str, Sequence[kn.Value]] | None,
          extra: Mapping[str, Sequence[kn.Value]] | None = None) -> dict[str, list[kn.Value]]:
    """Each knob's candidate values: ``given`` (plus the value in force), or
    derived from what each recorded run needed (budgets) or around the
    threshold in force (detector); ``extra`` values (a user's own
    ``--candidates``) are added to either."""
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
        if extra and extra.get(knob):
            added = [v for v in extra[knob] if v not in out[knob]]
            out[knob] = (kn.cheaper_first([*out[knob], *added]) if knob != "detector"
                         else [*out[knob], *added])
    return out


def notes(replay: ReplayEvaluator) -> list[str]:
    """What the frontier's reader must know about the replay's prices: the
    basis of the runs' prices (:func:`sim.cost.recorded.basis_line`), and the
    models the catalogue lacks."""
    from sim.cost.recorded import basis_line

    out = [f"{basis_line(replay.price_basis)} (each run's one price: its recorded cost "
           "where trustworthy)"] if replay.price_basis else []
    if replay.prices_for.unpriced:
        out.append("models the price catalogue lacks are priced from their calls' recorded "
                   "costs (else at the scenario's prices) for money budgets: "
                   + ", ".join(sorted(replay.prices_for.unpriced)))
    return out
