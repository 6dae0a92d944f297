"""A run that used tokens and records $0 (a cost tracker that did not know the
model's price) is priced at its model's fitted prices for calibration; a model
nobody prices keeps its $0."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_calibrate_cli import a_run, write_folder

from sim.calibration.costs import KEPT_FREE, REASON, price_unrecorded
from sim.calibration.data import load
from sim.cost import lookup_prices
from sim.cost.recorded import BASIS_TEXT, FITTED


def priced(i: int, steps: int, model: str, cost: float | None):
    run = a_run(i, steps)
    return replace(run, model=model, cost_usd=cost,
                   calls=[replace(c, model=model) for c in run.calls])


def tokens_usd(run, p) -> float:
    return sum(c.usage.input_tokens * p.input + c.usage.output_tokens * p.output
               for c in run.calls) / 1e6


def test_zero_cost_runs_are_priced_at_the_catalogue_scaled_to_the_models_recorded_costs(
        tmp_path):
    """Runs of a catalogue model recording twice the catalogue's price set the
    scale; its runs recording $0 are priced at twice the catalogue; runs of a
    model no catalogue knows, all at $0, keep $0 (counted, naming the model);
    runs with a cost keep it."""
    model = "claude-sonnet-4-5"
    p = lookup_prices(model)
    paid = [priced(i, 4 + i % 5, model, None) for i in range(12)]
    paid = [replace(r, cost_usd=2 * tokens_usd(r, p)) for r in paid]
    unpaid = [priced(100 + i, 3 + i % 4, model, 0.0) for i in range(6)]
    unknown = [priced(200 + i, 5, "ft:nobody-knows-me", 0.0) for i in range(4)]
    traces = load(write_folder(tmp_path / "t", paid + unpaid + unknown))
    out = price_unrecorded(traces)
    cost = dict(zip(out.runs["run_id"], out.runs["cost"], strict=True))
    for r in unpaid:
        assert cost[r.run_id] == pytest.approx(2 * tokens_usd(r, p), rel=1e-4)
    for r in unknown:
        assert cost[r.run_id] == 0.0
    for r in paid:
        assert cost[r.run_id] == pytest.approx(r.cost_usd, rel=1e-12)
    assert out.repaired == {REASON.format(basis=BASIS_TEXT[FITTED]): len(unpaid),
                            KEPT_FREE.format(models="ft:nobody-knows-me"): len(unknown)}
    assert (traces.runs["cost"] == 0).sum() == len(unpaid) + len(unknown)  # input untouched


def test_traces_without_zero_costs_are_returned_as_they_are(tmp_path):
    traces = load(write_folder(tmp_path / "t", [a_run(i, 5) for i in range(12)]))
    assert price_unrecorded(traces) is traces
