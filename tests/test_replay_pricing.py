"""Replay prices each call by the model that answered it (sim/drivers/replay/pricing.py,
sim/cli/replay.py): the catalogue's prices of the call-level model, never the
scenario's prices silently. The real case: tau2 runs whose run-level model is
``deepseek/deepseek-chat`` (not a catalogue name) with calls of ``deepseek-chat``
(one): replay priced them at the scenario's default prices, 13.6x the recorded
cost, and a $0.10 money budget stopped every run at its first call."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from recordings import write_traces

from sim.cli import main
from sim.drivers.replay import price_models
from sim.harness.messages import Usage
from sim.harness.params import HarnessParams, Prices
from sim.traces.model import CallRecord, RunRecord

SCENARIO = """\
name: pricing
harness:
  model: claude-sonnet-4-5
  prices_date: 2026-01-01
  context_window: 1000000
  max_output_tokens: 100
  detector: {{enabled: false}}
  budgets: {{money_usd: {money}}}
"""

DEEPSEEK_PEAK = Prices(input=0.27, output=1.1, cache_read=0.07, cache_write=0.27)
DEEPSEEK_OFF_PEAK = Prices(input=0.135, output=0.55, cache_read=0.035, cache_write=0.135)
DEEPSEEK = Prices(**{field: 2 / 3 * getattr(DEEPSEEK_PEAK, field)
                     + 1 / 3 * getattr(DEEPSEEK_OFF_PEAK, field)
                     for field in ("input", "output", "cache_read", "cache_write")})
"""deepseek-chat in the catalogue on 2026-01-01 (checked by the test below):
its peak price (00:30 to 16:30 UTC) two thirds of the day, its off-peak price
one third."""


def calls(model: str | None, n: int, *, prompt: int = 40_000, cost: float | None = None
          ) -> tuple[CallRecord, ...]:
    return tuple(CallRecord(usage=Usage(input_tokens=prompt + 500 * k, output_tokens=200),
                            model=model, cost_usd=None if cost is None else cost * (k + 1),
                            latency_s=1.0, text_tokens=200)
                 for k in range(n))


def run(run_id: str, model: str, recorded: tuple[CallRecord, ...]) -> RunRecord:
    return RunRecord(run_id, "sim", "", list(recorded), task_id="t", model=model,
                     exit="user_stop", resolved=True)


def replay(tmp_path: Path, runs: list[RunRecord], money: float, capsys
           ) -> tuple[pd.DataFrame, dict, str]:
    traces = write_traces(tmp_path / "traces", runs)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(money=money))
    out = tmp_path / "out"
    assert main(["replay", str(traces), str(scenario), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    return pd.read_parquet(out / "results.parquet"), summary, err


def test_a_call_is_priced_by_its_own_model_not_the_run_level_name(tmp_path, capsys):
    """Run model ``deepseek/deepseek-chat``, calls ``deepseek-chat``, no recorded
    cost: priced at deepseek-chat's catalogue prices, so a $0.10 budget lets
    five 40k-token calls through (at the scenario's $3/M it would stop the run
    at its first call, $0.12)."""
    rows, summary, err = replay(tmp_path, [run("r", "deepseek/deepseek-chat",
                                               calls("deepseek-chat", 5))], 0.10, capsys)
    row = rows.iloc[0]
    assert not row["stopped"] and row["steps"] == 5
    expected = sum(DEEPSEEK.cost(c.usage.input_tokens, c.usage.output_tokens)
                   for c in calls("deepseek-chat", 5))
    assert row["priced_usd"] == pytest.approx(expected, rel=1e-9)
    pricing = summary["cells"][0]["replay"]["pricing"]
    assert pricing["catalogue"] == ["deepseek-chat"] and not pricing["scenario_prices"]
    assert "warning" not in err


def test_the_catalogue_price_used_is_deepseek_chats():
    import datetime

    from sim.cost import resolve_price_tiers
    def at(hour: int):
        return resolve_price_tiers("deepseek-chat", None,
                                   when=datetime.datetime(2026, 1, 1, hour, tzinfo=datetime.UTC))

    assert at(12).base == DEEPSEEK_PEAK and at(20).base == DEEPSEEK_OFF_PEAK
    day = resolve_price_tiers("deepseek-chat", None, when=datetime.date(2026, 1, 1)).base
    for field in ("input", "output", "cache_read", "cache_write"):
        assert getattr(day, field) == pytest.approx(getattr(DEEPSEEK, field), rel=1e-12)


def test_an_unknown_model_is_priced_from_its_recorded_costs_and_said(tmp_path, capsys):
    """``acme-9000`` is in no catalogue; its calls record costs: its prices
    are the scenario's scaled so its calls cost what was recorded in total,
    the money budget acts on those dollars, and stderr and summary.json say so."""
    recorded = calls("acme-9000", 4, prompt=10_000, cost=0.001)
    rows, summary, err = replay(tmp_path, [run("r", "acme-9000", recorded)], 0.10, capsys)
    row = rows.iloc[0]
    assert not row["stopped"]
    assert row["priced_usd"] == pytest.approx(sum(c.cost_usd for c in recorded), rel=1e-9)
    assert "warning: model 'acme-9000' is not in the price catalogue: priced from the " \
           "recorded cost of its 4 calls" in err
    pricing = summary["cells"][0]["replay"]["pricing"]
    assert list(pricing["from_recorded_cost"]) == ["acme-9000"]
    assert pricing["from_recorded_cost"]["acme-9000"]["recorded_usd"] == pytest.approx(0.01)
    assert summary["cells"][0]["replay"]["recorded"]["unpriced_models"] == []


def test_a_money_budget_stops_an_unknown_model_at_its_recorded_dollars(tmp_path, capsys):
    """Eight calls of 10,000 prompt tokens recorded at $0.01 each (one usage,
    so the scaled prices reproduce each call's cost): a $0.05 budget lets
    calls through while the spend plus the next call's worst case (its prompt
    and 100 output tokens) fits, and stops the run at money, having spent at
    most $0.05 (at the scenario's $3/M, $0.03 a call, it would stop after one)."""
    recorded = tuple(CallRecord(usage=Usage(input_tokens=10_000), model="acme-9000",
                                cost_usd=0.01, latency_s=1.0, text_tokens=1)
                     for _ in range(8))
    rows, _, _ = replay(tmp_path, [run("r", "acme-9000", recorded)], 0.05, capsys)
    row = rows.iloc[0]
    assert row["stopped"] and row["reason"] == "money"
    assert row["cost_usd"] <= 0.05 + 1e-12 and row["steps"] == 4


def test_an_unknown_model_without_any_recorded_cost_is_priced_by_default_and_said(
        tmp_path, capsys):
    _rows, summary, err = replay(tmp_path, [run("r", "acme-9000", calls("acme-9000", 2,
                                                                       prompt=1_000))],
                                10.0, capsys)
    assert "'acme-9000' is not in the price catalogue and no call of it records a cost: " \
           "priced at the scenario's prices" in err
    block = summary["cells"][0]["replay"]
    assert block["pricing"]["scenario_prices"] == ["acme-9000"]
    assert block["recorded"]["unpriced_models"] == ["acme-9000"]


def test_runs_mixing_models_price_each_call_at_its_own_model():
    """price_models and run_params: the first call's model is the run's, the
    others are model_prices entries; the template's prices serve no call."""
    from sim.drivers.replay import run_params

    template = HarnessParams(prices=Prices(input=3.0, output=15.0))
    mixed = run("m", "router", calls("a", 1, cost=0.002) + calls("b", 1, cost=0.004))
    known = {"a": Prices(input=1.0, output=1.0)}
    pricing = price_models([mixed], template, known.get)
    assert pricing.catalogue == ("a",) and list(pricing.recorded) == ["b"]
    params = run_params(template, mixed, None, None, pricing)
    assert params.model == "a" and params.prices == known["a"]
    assert dict(params.model_prices) == {"b": pricing.prices["b"]}


def test_a_run_of_zero_calls_replays_as_recorded(tmp_path, capsys):
    """A run that failed before its first model reply (zero calls): replayed
    as it ended, its exit kept, nothing spent, nothing stopped."""
    failed = RunRecord("f", "sim", "", [], task_id="t", model="deepseek-chat",
                       exit="infrastructure_error")
    rows, _, _ = replay(tmp_path, [failed, run("r", "deepseek-chat",
                                              calls("deepseek-chat", 2))], 1.0, capsys)
    row = rows.set_index("run_id").loc["f"]
    assert (row["steps"], row["outcome"], row["stopped"]) == (0, "ended:infrastructure_error",
                                                              False)
    assert row["cost_usd"] == 0.0


def test_a_named_price_set_is_said_as_the_scenarios_prices_not_the_catalogues(
        tmp_path, capsys):
    """A scenario with ``prices: seed001`` prices every model at $3/$15: a
    run of gpt-4.1 without recorded costs was priced so, but said to be
    "at catalogue prices" (a helper's hunt). It is said at the scenario's
    prices, with no warning of a model missing from the catalogue; without
    the named set the same run is at the catalogue's."""
    runs = [run("r", "gpt-4.1", calls("gpt-4.1", 2, prompt=1_000))]
    traces = write_traces(tmp_path / "traces", runs)
    for name, prices, basis in (("named", "seed001", "scenario"),
                                ("catalogue", None, "catalogue")):
        scenario = tmp_path / f"{name}.yaml"
        text = SCENARIO.format(money=10.0).replace("claude-sonnet-4-5", "gpt-4.1")
        scenario.write_text(text + (f"  prices: {prices}\n" if prices else ""))
        out = tmp_path / name
        assert main(["replay", str(traces), str(scenario), "--out", str(out), "--quiet"]) == 0
        assert "not in the price catalogue" not in capsys.readouterr().err
        block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
        assert block["recorded"]["price_basis"] == {basis: 1}
        assert block["pricing"]["catalogue"] == ([] if prices else ["gpt-4.1"])
    rows = pd.read_parquet(tmp_path / "named" / "results.parquet")
    assert rows["cost_usd"].iloc[0] == pytest.approx((3 * 2_500 + 15 * 400) / 1e6)
