"""Replaying many recorded runs: each in the requested mode and, when it
diverged, in the other mode too (the bounds)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sim.bad_input import InputError
from sim.drivers.replay.driver import Replay, RunDriver, replay_run
from sim.drivers.replay.options import ReplayOptions, run_params
from sim.drivers.replay.pricing import ModelPricing, price_models
from sim.drivers.replay.session import has_children, replay_session
from sim.harness.detector import Detector
from sim.harness.params import HarnessParams, ParameterError, Prices
from sim.harness.pump import Observer
from sim.traces.model import RunRecord


@dataclass(frozen=True)
class RunReplay:
    """One run replayed: ``chosen`` under the requested ``after_intervention``
    mode, and the run under each mode: ``lower`` (stop: the run ends at its
    first intervention) and ``upper`` (continue: it goes on as recorded). For a
    run without an intervention all three are the same replay."""

    chosen: Replay
    lower: Replay
    upper: Replay


def replay_runs(runs: list[RunRecord], template: HarnessParams, *,
                prices_for: Callable[[str | None], Prices | None] | None = None,
                options: ReplayOptions | None = None,
                make_detector: Callable[[HarnessParams], Detector] | None = None,
                progress: Callable[[int], None] | None = None,
                pricing: ModelPricing | None = None,
                observe: Callable[[RunDriver], Sequence[Observer]] | None = None
                ) -> list[RunReplay]:
    """Replay every run (in order) under ``template``: each in the requested
    mode and, when it diverged, in the other mode too (for the bounds).
    Calls are priced by their own model (``pricing``, else
    :func:`price_models` with ``prices_for(model)``: a model's catalogue
    prices, None when unknown; without ``prices_for`` every model takes the
    template's prices), ``make_detector`` builds the candidate's detector from
    a run's parameters, ``progress(done)`` is called after each run.
    A run with children (calls with an ``agent``) is replayed as a session:
    :func:`~sim.drivers.replay.session.replay_session`. Parameters the
    candidate cannot run a recording with are an InputError naming the run.
    ``observe(driver)``: pump observers of each run's replay in the requested
    mode (:func:`~sim.drivers.replay.driver.replay_run`; not a session's)."""
    options = options or ReplayOptions()
    if pricing is None:
        pricing = price_models(runs, template, prices_for)
    other = replace(options, after_intervention="stop" if options.after_intervention ==
                    "continue" else "continue")
    out = []
    for i, run in enumerate(runs):
        try:
            checked = replace(template, subagents=None) if has_children(run) else template
            params = run_params(checked, run, None, options, pricing)  # validated when built
        except ParameterError as error:
            path, message = error.problems[0]
            raise InputError(f"the candidate cannot replay run {run.run_id!r}: {message}",
                             path=f"harness.{path}") from None
        if has_children(run):  # parent and children under one session's ledgers
            chosen = replay_session(run, template, options, pricing, make_detector)
            second = (replay_session(run, template, other, pricing, make_detector)
                      if chosen.diverged else chosen)
        else:
            chosen = replay_run(run, params, options, _detector(make_detector, params),
                                pricing.fill, observe)
            second = (replay_run(run, params, other, _detector(make_detector, params),
                                 pricing.fill) if chosen.diverged else chosen)
        if chosen.diverged:
            lower, upper = ((chosen, second) if options.after_intervention == "stop"
                            else (second, chosen))
        else:
            lower = upper = chosen
        out.append(RunReplay(chosen, lower, upper))
        if progress is not None:
            progress(i + 1)
    return out



def _detector(make: Callable[[HarnessParams], Detector] | None, params: HarnessParams
              ) -> Detector | None:
    """A fresh detector for one replay (None: the harness's default)."""
    return make(params) if make is not None else None
