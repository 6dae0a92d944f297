"""Candidates that only tighten the harness in force, evaluated by replay.

Every recorded run is replayed (:func:`sim.drivers.replay.replay_runs`, the
real harness loop fed the recorded responses) under the harness in force (the
baseline: a run that succeeded there is a recorded success) and under each
candidate. A candidate that only tightens budgets stops some runs earlier and
changes nothing else, so its row is exact on these runs: the successes it
loses, the recorded dollars it saves (``cost_usd``: each call's recorded cost,
or its price at the run's prices when unrecorded), the active seconds.

Each call is priced at its own model's catalogue prices on the scenario's
``prices_date`` (what a money budget checks; a ``provider/model`` name tried
as the model too, :class:`~sim.drivers.catalogue_prices.CataloguePrices`); a
model the catalogue lacks is priced from its calls' recorded costs, else at
the scenario's prices, and named in the notes (as ``sim replay`` does).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from sim.bad_input import InputError
from sim.drivers.catalogue_prices import CataloguePrices
from sim.drivers.recorded_runs import RecordedRun
from sim.drivers.replay import Replay, RunReplay, replay_runs, run_params
from sim.drivers.replay.pricing import call_cost
from sim.harness.budgets import worst_case_cost
from sim.harness.state import SUCCEEDED
from sim.scenario.model import HarnessConfig, harness_params, resolve_detector
from sim.tuning import evidence
from sim.tuning.knobs import FIELDS, Setting
from sim.world.params import WorldParams

REPLAYED = "replayed"
STOPPED_COLUMNS: tuple[str, ...] = (
    "run_id", "task_id", "model", "exit", "resolved", "outcome_in_force", "outcome",
    "lost_success", "stopped_at_call", "calls_recorded", "prompt_tokens_at_stop",
    "cost_in_force_usd", "cost_usd", "saved_usd")
"""The columns of ``stopped_runs.csv`` (:meth:`ReplayEvaluator.stopped_runs`)."""


def fidelity(replays: list[Replay]) -> str:
    """How exact a replayed row is: exact when the candidate only stopped
    runs; runs where it intervened in a way the recording cannot answer (a
    nudge, a retry, a rejected claim) were followed as recorded, an upper
    bound on their cost, and are counted."""
    diverged = sum(r.diverged for r in replays)
    if not diverged:
        return f"exact on {len(replays):,} recorded runs"
    return (f"{len(replays):,} recorded runs; {diverged:,} diverged where the harness "
            "intervened and were followed as recorded (an upper bound on their cost)")


def apply(h: HarnessConfig, s: Setting) -> HarnessConfig:
    """``h`` with the setting's budgets and detector (validated)."""
    doc = h.model_dump(mode="json")
    for knob, value in s:
        if knob == "detector":
            doc["detector"]["enabled"] = bool(value)
            if value:
                doc["detector"]["repeat_threshold"] = int(value)
        else:
            doc["budgets"][FIELDS[knob]] = value
    return HarnessConfig.model_validate(doc)


class ReplayEvaluator:
    """Replays the recorded ``runs`` under the harness in force ``h`` (once)
    and under candidates (:meth:`evaluate`)."""

    def __init__(self, runs: list[RecordedRun], h: HarnessConfig) -> None:
        self.harness_in_force = h
        if not runs:
            raise InputError("the trace folder holds no runs")
        if h.conversation.enabled:  # replay answers text turns itself (reply_to_user)
            h = h.model_copy(update={"conversation": h.conversation.model_copy(
                update={"enabled": False})})
        self.runs = runs
        self.harness = h
        self.prices_for = CataloguePrices(h)
        self.baseline = self._replay(h)
        self.base_success = np.array([r.chosen.outcome == SUCCEEDED for r in self.baseline])
        self.base_cost = np.array([r.chosen.cost_usd for r in self.baseline])
        self.base_tokens = _tokens(self.baseline)
        self.price_basis = Counter(r.chosen.basis for r in self.baseline)
        """Runs per basis of their one price (:mod:`sim.cost.recorded`)."""

    def _replay(self, h: HarnessConfig) -> list[RunReplay]:
        template = harness_params(h, WorldParams())
        return replay_runs(self.runs, template, prices_for=self.prices_for,
                           make_detector=resolve_detector(h.detector.name))

    def needs(self) -> dict[str, np.ndarray]:
        """What each run needed for the harness in force to admit every call
        it made (see :mod:`sim.tuning.knobs`): steps (model calls), prompt
        tokens, and USD (the largest spend before a call plus that call's
        worst case, at the run's prices)."""
        template = harness_params(self.harness, WorldParams())
        steps, tokens, money = [], [], []
        for item in self.baseline:
            r = item.chosen
            steps.append(r.state.turns)
            tokens.append(r.state.prompt_tokens)
            params = run_params(template, r.run, self.prices_for(r.run.model))
            spent, need = 0.0, 0.0
            for call in r.run.calls:
                need = max(need, spent + worst_case_cost(params.prices,
                                                         call.usage.prompt_tokens,
                                                         params.max_output_tokens))
                spent += call_cost(params.prices, call)
            money.append(need)
        return {"steps": np.array(steps, dtype=float), "tokens": np.array(tokens, dtype=float),
                "money": np.array(money, dtype=float)}

    def stopped_runs(self, s: Setting) -> pd.DataFrame:
        """The runs the candidate ``s`` stops earlier than the harness in
        force, one row each (:data:`STOPPED_COLUMNS`): the run (``run_id``,
        ``task_id``, ``model``), its recorded ``exit`` and ``resolved``, its
        outcome in force (``outcome_in_force``) and under ``s``
        (``outcome``), where ``s`` stops it (``stopped_at_call``: the index of
        the recorded call it does not make, of ``calls_recorded``;
        ``prompt_tokens_at_stop``: prompt tokens over the calls it made), its
        cost in force and under ``s`` (USD) and the saving. Successes lost
        first, then the largest saving."""
        replays = self._replay(apply(self.harness, s))
        rows = []
        for base, cand in zip(self.baseline, replays, strict=True):
            b, c = base.chosen, cand.chosen
            if not c.stopped or (b.stopped and (b.stopped_at or 0) <= (c.stopped_at or 0)):
                continue
            run = c.run
            rows.append({
                "run_id": run.run_id, "task_id": run.task_id, "model": run.model,
                "exit": run.exit, "resolved": run.resolved, "outcome_in_force": b.outcome,
                "outcome": c.outcome, "lost_success": b.outcome == SUCCEEDED != c.outcome,
                "stopped_at_call": c.stopped_at, "calls_recorded": len(run.calls),
                "prompt_tokens_at_stop": c.state.prompt_tokens, "cost_in_force_usd": b.cost_usd,
                "cost_usd": c.cost_usd, "saved_usd": b.cost_usd - c.cost_usd})
        frame = pd.DataFrame(rows, columns=list(STOPPED_COLUMNS))
        return frame.sort_values(["lost_success", "saved_usd"], ascending=[False, False],
                                 kind="stable").reset_index(drop=True)

    def evaluate(self, s: Setting) -> dict[str, Any]:
        """The frontier row of the candidate ``s`` (exact on these runs)."""
        replays = self._replay(apply(self.harness, s))
        chosen = [r.chosen for r in replays]
        row = evidence.row(
            base_success=self.base_success,
            success=np.array([r.outcome == SUCCEEDED for r in chosen]),
            cost=np.array([r.cost_usd for r in chosen]), base_cost=self.base_cost,
            time_s=np.array([r.state.active_s for r in chosen]),
            outcomes=[r.outcome for r in chosen], method=REPLAYED,
            fidelity=fidelity(chosen))
        row["saved_tokens_mean"] = float(np.mean(self.base_tokens - _tokens(replays)))
        return row


def _tokens(replays: list[RunReplay]) -> np.ndarray:
    """Tokens (prompt, output and thinking) each replay's calls spent."""
    return np.array([r.chosen.state.prompt_tokens + r.chosen.state.output_tokens
                     + r.chosen.state.thinking_tokens for r in replays], dtype=float)
