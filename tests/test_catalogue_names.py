"""A ``prefix/model`` name is looked up in the catalogue as
:func:`sim.cost.prices.catalogue_names` says in every price path, the
calibrated world's prices (:func:`sim.calibration.prices.estimate_prices`)
included: a router's or provider's prefix (``myproxy/gpt-4o``,
``openai/gpt-4o``) does not make a listed model unpriced there while replay
and tune price it at the catalogue.

Fixture: runs of one prefixed model, two calls each, computed by hand at the
catalogue prices of 2025-06-01 (gpt-4o: $2.50 in, $10 out per million):
(1000 * 2.5 + 100 * 10) / 1e6 + (2000 * 2.5 + 200 * 10) / 1e6 = $0.0105 a run.
"""

from __future__ import annotations

import datetime

import pytest
from test_calibrate_cli import write_folder

from sim.calibration.data import load
from sim.calibration.prices import estimate_prices
from sim.harness.messages import Usage
from sim.traces.model import CallRecord, RunRecord

DAY = datetime.datetime(2025, 6, 1, tzinfo=datetime.UTC)
LISTED_RUN = 0.0105  # one run at gpt-4o's catalogue prices (module docstring)


def _run(i: int, model: str, cost: float | None) -> RunRecord:
    calls = [CallRecord(Usage(input_tokens=1000 * (n + 1), output_tokens=100 * (n + 1)),
                        model=model, cost_usd=None if cost is None else cost * (n + 1) / 3,
                        finish_reason="stop" if n else "tool_calls", started_s=2.0 * n,
                        latency_s=1.0, text_tokens=100, observation_tokens=0)
             for n in range(2)]
    return RunRecord(f"r{i}", "tau2", "synthetic.json", calls, task_id=f"t{i}", model=model,
                     exit="agent_stop", resolved=True, cost_usd=cost)


@pytest.mark.parametrize("name", ["myproxy/gpt-4o", "openai/gpt-4o"])
def test_a_prefixed_model_without_recorded_costs_gets_the_listed_models_world_prices(
        tmp_path, name):
    """No recorded costs: the world's prices are the catalogue's of the
    listed model ($2.50 / $10 for gpt-4o), not $0 ("not in the catalogue")."""
    folder = write_folder(tmp_path / "t", [_run(i, name, None) for i in range(10)])
    got = estimate_prices(load(folder), [name], DAY)[name]
    assert (got.input, got.output) == (2.5, 10.0)
    assert got.source == "the catalogue's (no recorded costs)"


@pytest.mark.parametrize("name", ["myproxy/gpt-4o", "openai/gpt-4o"])
def test_a_prefixed_model_with_recorded_costs_scales_the_listed_models_prices(tmp_path, name):
    """Each run recorded at twice the catalogue's price ($0.021 against
    $0.0105): the catalogue's prices scaled by exactly 2 ($5 / $20), not a
    least-squares fit as for a model the catalogue does not know."""
    folder = write_folder(tmp_path / "t", [_run(i, name, 2 * LISTED_RUN) for i in range(10)])
    got = estimate_prices(load(folder), [name], DAY)[name]
    assert (got.input, got.output) == (pytest.approx(5.0), pytest.approx(20.0))
    assert got.source.startswith("the catalogue's x 2, ")
