"""One price for a recorded run, whichever command reports it (sim.cost.recorded).

One small folder: runs of gpt-4o recording twice the catalogue's price (a
trustworthy recorded cost, which also fits gpt-4o's prices at 2x), a gpt-4o run
recording $0 with tokens used (priced at the fitted prices), a gpt-4o-mini run
recording $0 (no recorded cost of its model: catalogue prices), a run of a
model nobody lists (the scenario's prices: claude-sonnet-4-5's) and a run of
unknown usage. ``traces summary``, calibrate's data, ``replay`` and ``tune``'s
replays each give each run the same dollars and basis, computed here by hand
from the fixture's tokens and the catalogue prices of 2025-06-01 (gpt-4o:
$2.50 in, $10 out; gpt-4o-mini: $0.15, $0.60; claude-sonnet-4-5: $3, $15).
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_calibrate_cli import write_folder

from sim.calibration.costs import price_unrecorded, run_prices
from sim.calibration.data import load
from sim.cli import main
from sim.cost import lookup_prices
from sim.cost.recorded import (
    CATALOGUE,
    FITTED,
    RECORDED,
    SCENARIO,
    UNPRICED,
    catalogue,
    model_price,
    trusted,
)
from sim.drivers.replay.reading import read_trace_folder
from sim.harness.messages import Usage
from sim.harness.prices import Prices
from sim.scenario.model import HarnessConfig
from sim.traces.model import CallRecord, RunRecord
from sim.traces.summary import summarize
from sim.tuning.replayed import ReplayEvaluator

DAY = datetime.date(2025, 6, 1)  # the day a scenario's prices_date names
UNKNOWN_USAGE = {k: "unknown" for k in ("input_tokens", "cache_read_tokens",
                                        "cache_write_tokens", "output_tokens",
                                        "reasoning_tokens", "cost_usd")}

# gpt-4o at the catalogue: (1000*2.5 + 100*10)/1e6 = 0.0035, (2000*2.5 + 200*10)/1e6 = 0.007;
# recorded at twice that: 0.007 + 0.014 = 0.021 per paid run, 9 paid runs: the scale is 2.
PAID = 0.021
# the $0 gpt-4o run at 2x: 2 * ((4000*2.5 + 400*10) + (6000*2.5 + 600*10)) / 1e6 = 0.07
FREE_FITTED = 0.07
# the $0 gpt-4o-mini run at the catalogue: (10000*0.15 + 1000*0.6)/1e6 = 0.0021
FREE_CATALOGUE = 0.0021
# the unlisted model at claude-sonnet-4-5's prices: (1000*3 + 100*15)/1e6 = 0.0045
UNLISTED = 0.0045

EXPECTED = {**{f"paid{i}": (PAID, RECORDED) for i in range(9)},
            "free": (FREE_FITTED, FITTED), "mini": (FREE_CATALOGUE, CATALOGUE),
            "own": (UNLISTED, SCENARIO)}


def _call(model: str, inp: int, out: int, cost: float | None, n: int, *,
          unknown: bool = False) -> CallRecord:
    last = n == 1
    return CallRecord(Usage(input_tokens=inp, output_tokens=out), model=model, cost_usd=cost,
                      finish_reason="stop" if last else "tool_calls", started_s=2.0 * n,
                      latency_s=1.0, text_tokens=out, observation_tokens=0,
                      provenance=UNKNOWN_USAGE if unknown else {})


def _run(run_id: str, model: str, calls: list[CallRecord], cost: float | None) -> RunRecord:
    return RunRecord(run_id, "tau2", "synthetic.json", calls, task_id=run_id, model=model,
                     exit="agent_stop", resolved=True, cost_usd=cost)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    runs = [_run(f"paid{i}", "gpt-4o", [_call("gpt-4o", 1000, 100, 0.007, 0),
                                        _call("gpt-4o", 2000, 200, 0.014, 1)], PAID)
            for i in range(9)]
    runs.append(_run("free", "gpt-4o", [_call("gpt-4o", 4000, 400, 0.0, 0),
                                        _call("gpt-4o", 6000, 600, 0.0, 1)], 0.0))
    runs.append(_run("mini", "gpt-4o-mini", [_call("gpt-4o-mini", 10000, 1000, 0.0, 1)], 0.0))
    runs.append(_run("own", "ft:my-own-model", [_call("ft:my-own-model", 1000, 100, None, 1)],
                     None))
    runs.append(_run("blind", "gpt-4o", [_call("gpt-4o", 0, 0, None, 1, unknown=True)], None))
    return write_folder(tmp_path_factory.mktemp("one_price") / "t", runs)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("one_price_scenario") / "replay.yaml"
    path.write_text(yaml.safe_dump({
        "name": "replay", "harness": {
            "model": "claude-sonnet-4-5", "prices_date": "2025-06-01",
            "context_window": 10_000_000, "max_output_tokens": 16384,
            "tool_failure_limit": 1_000_000, "budgets": {},
            "detector": {"enabled": False}}}))
    return path


def _scenario_prices() -> Prices:
    return lookup_prices("claude-sonnet-4-5", when=DAY)


def _assert_same(got: dict[str, tuple[float, str]]) -> None:
    assert set(got) == set(EXPECTED)
    for run, (usd, basis) in EXPECTED.items():
        assert got[run][1] == basis, run
        assert got[run][0] == pytest.approx(usd, rel=1e-9, abs=1e-12), run


def test_a_recorded_cost_is_trusted_when_present_and_above_zero_or_for_no_tokens():
    """$0 for a call that used tokens, a missing cost, a NaN or a $0 of
    unrecorded usage are not trusted; $0 for no tokens is."""
    used = Usage(input_tokens=10)
    assert trusted(0.01, used) and trusted(0.0, Usage()) and trusted(0.01, None)
    assert not trusted(0.0, used) and not trusted(None, used)
    assert not trusted(math.nan, used) and not trusted(0.0, None) and not trusted(-1.0, used)


def test_fitted_prices_scale_the_listed_prices_to_the_models_recorded_costs():
    """Two calls recording 3x their listed price give a scale of 3; without
    a recorded cost above $0 the listed prices stand; without any, scenario."""
    listed = Prices(input=1.0, output=2.0, cache_read=0.1, cache_write=1.25)
    calls = [(Usage(input_tokens=1_000_000), 3.0), (Usage(output_tokens=500_000), 3.0),
             (Usage(input_tokens=5), 0.0)]
    fitted = model_price("m", listed, None, calls)
    assert fitted.basis == FITTED and fitted.scale == pytest.approx(3.0)
    assert fitted.prices == Prices(input=3.0, output=6.0, cache_read=0.1 * 3,
                                   cache_write=1.25 * 3)
    assert model_price("m", listed, None, calls[2:]).basis == CATALOGUE
    assert model_price("m", None, listed, []).basis == SCENARIO
    assert model_price("m", None, None, calls).basis == UNPRICED


def test_traces_summary_prices_each_run_by_hand(folder):
    """The summary's ``price`` block: each run's dollars and basis; the run of
    unknown usage and no cost is unpriced; the total is the sum."""
    price = summarize(folder, listed=catalogue(DAY), scenario=_scenario_prices())["price"]
    runs = {r: (math.nan if u is None else u, b) for r, (u, b) in price["runs"].items()}
    assert math.isnan(runs.pop("blind")[0]) and price["runs"]["blind"][1] == UNPRICED
    _assert_same(runs)
    assert price["usd"] == pytest.approx(9 * PAID + FREE_FITTED + FREE_CATALOGUE + UNLISTED)
    assert price["by_basis"][RECORDED]["runs"] == 9
    assert price["models"]["gpt-4o"] == {"basis": FITTED, "scale": pytest.approx(2.0)}


def test_calibrates_data_prices_each_run_by_hand(folder):
    """Calibration's run costs (after it drops the run of unknown usage) are
    the same dollars, with the same bases."""
    traces = load(folder)
    assert "blind" not in set(traces.runs["run_id"])
    priced = run_prices(traces, catalogue(DAY), _scenario_prices())
    _assert_same(dict(zip(traces.runs["run_id"], zip(priced.usd, priced.basis, strict=True),
                          strict=True)))
    cost = price_unrecorded(traces, listed=catalogue(DAY), scenario=_scenario_prices())
    got = dict(zip(cost.runs["run_id"], cost.runs["cost"], strict=True))
    assert {r: pytest.approx(u) for r, (u, _) in EXPECTED.items()} == got


def test_the_worlds_prices_are_another_estimate_that_counts_a_zero_run_as_data(folder):
    """Calibration's world prices (``sim.calibration.prices``) answer another
    question than the one price of a recorded call: what flat prices a
    simulated run should be charged so that runs cost what they were billed.
    The recorded $0 of the free run is data there (the catalogue scaled by
    the nine paid runs' $0.189 over the ten runs' catalogue price, 9 *
    $0.0105 + $0.035 = $0.1295), while the one price of recorded calls
    leaves that untrustworthy $0 out and fits gpt-4o at exactly 2x."""
    from sim.calibration.prices import estimate_prices

    traces = load(folder)
    factor = 9 * PAID / (9 * 0.0105 + 0.035)
    world = estimate_prices(traces, ["gpt-4o"], DAY)["gpt-4o"]
    assert (world.input, world.output) == (round(2.5 * factor, 6), round(10.0 * factor, 6))
    one = model_price("gpt-4o", lookup_prices("gpt-4o", when=DAY), None, [
        (Usage(input_tokens=1000, output_tokens=100), 0.007),
        (Usage(input_tokens=4000, output_tokens=400), 0.0)])
    assert one.basis == FITTED and one.scale == pytest.approx(2.0, rel=1e-12)


def test_replay_prices_each_run_by_hand(folder, scenario, tmp_path, capsys):
    """``sim replay``'s results: each run's ``recorded_calls_usd`` and
    ``price_basis``; the run of unknown usage is not replayed; stdout says
    the bases."""
    assert main(["replay", folder, str(scenario), "--out", str(tmp_path / "r"),
                 "--quiet"]) == 0
    rows = pd.read_parquet(tmp_path / "r" / "results.parquet")
    _assert_same({r: (u, b) for r, u, b in zip(rows["run_id"], rows["recorded_calls_usd"],
                                               rows["price_basis"], strict=True)})
    assert ("priced: 9 runs recorded, 1 at fitted prices (the catalogue scaled to the "
            "model's recorded costs), 1 at catalogue prices, 1 at the scenario's prices"
            in capsys.readouterr().out)


def test_tune_replays_each_run_at_the_same_price_and_saves_what_replay_saves(
        folder, scenario, tmp_path):
    """Tune's replays in force give each run the same price and basis; a
    budget of 5,000 prompt tokens stops the $0 gpt-4o run after its first call
    (it needs 4,000 + 6,000) and the mini run before its only one: tune's saved
    per run and replay's saved dollars agree, $0.07 * 6000-part + $0.0021."""
    h = HarnessConfig.model_validate(yaml.safe_load(scenario.read_text())["harness"])
    evaluator = ReplayEvaluator(read_trace_folder(folder), h)
    _assert_same({r.chosen.run.run_id: (r.chosen.cost_usd, r.chosen.basis)
                  for r in evaluator.baseline})
    row = evaluator.evaluate((("tokens", 5000),))
    # saved: the free run's second call at 2x: 2 * (6000*2.5 + 600*10)/1e6 = 0.042;
    # the mini run's only call, 0.0021; the paid runs need 1,000 + 2,000 and stay whole
    saved = 0.042 + FREE_CATALOGUE
    assert row["saved_mean"] * len(evaluator.baseline) == pytest.approx(saved)
    assert row["saved_tokens_mean"] * len(evaluator.baseline) == pytest.approx(
        6000 + 600 + 10000 + 1000)
    assert main(["replay", folder, str(scenario), "--out", str(tmp_path / "r"), "--quiet",
                 "--set", "harness.budgets.tokens=5000"]) == 0
    rows = pd.read_parquet(tmp_path / "r" / "results.parquet")
    assert rows["saved_usd"].sum() == pytest.approx(saved)


def test_a_run_recording_only_its_total_prices_calls_of_a_model_only_they_name():
    """A run whose calls record no cost (the run records its total) and name a
    model no other record names: every call is priced from that model's
    prices, no KeyError (a generated OpenHands file gave one in ``traces
    summary``). Run r1 records $0.06 over two calls of 100 input tokens at
    $1 and $2 per million: the run keeps its recorded total."""
    from sim.cost.recorded import run_prices as recorded_run_prices

    prices = {"a": Prices(1.0, 0.0, 0.0, 0.0), "b": Prices(2.0, 0.0, 0.0, 0.0)}
    usage = Usage(input_tokens=100, output_tokens=0)
    priced = recorded_run_prices([("r1", "a", 0.06)],
                                 [("r1", "a", usage, None), ("r1", "b", usage, None)],
                                 prices.get)
    assert set(priced.models) == {"a", "b"}
    assert priced.usd == [pytest.approx(0.06)]
    assert priced.basis == [RECORDED]


def test_a_run_recording_only_its_total_is_one_record_of_its_model_in_every_price_path():
    """One rule groups recorded costs by model (sim.cost.recorded.model_records),
    for ``traces summary``/calibrate (run_prices) and replay/tune
    (price_models): run ``t`` (model m, $0.06 recorded, two calls of model x
    recording none) is one record of m holding both usages; run ``c`` (model
    m) has a call of x at $0.01 (one record of x) and a call of y recording
    none (y named, no record); a run of no calls records nothing."""
    from sim.cost.recorded import model_records, only_total
    from sim.drivers.replay import price_models
    from sim.harness.params import HarnessParams
    from sim.traces.model import RunRecord

    u1, u2 = Usage(input_tokens=1_000), Usage(input_tokens=2_000)
    t = ("m", 0.06, [(None, u1, "x"), (None, u2, "x")])
    c = ("m", None, [(0.01, u1, "x"), (None, u2, "y")])
    empty = ("m", 0.5, [])
    assert model_records([t, c, empty]) == {"m": [([u1, u2], 0.06)], "x": [(u1, 0.01)],
                                             "y": []}
    assert only_total(0.03, [None, None]) and not only_total(0.03, [])
    assert not only_total(None, [None]) and not only_total(0.03, [None, 0.0])
    listed = Prices(input=10.0, output=0.0, cache_read=0.0, cache_write=0.0)
    runs = [RunRecord("t", "sim", "", [CallRecord(u1, model="x"), CallRecord(u2, model="x")],
                      model="m", cost_usd=0.06),
            RunRecord("c", "sim", "", [CallRecord(u1, model="x", cost_usd=0.01),
                                       CallRecord(u2, model="y")], model="m")]
    # x: $0.01 for 1,000 tokens listed at $0.01: scale 1; m is named by no call
    pricing = price_models(runs, HarnessParams(prices=listed), lambda model: listed)
    assert list(pricing.fill) == ["x", "y"] and pricing.fill["x"].scale == pytest.approx(1.0)
    from sim.cost.recorded import run_prices as recorded_run_prices
    summed = recorded_run_prices([("t", "m", 0.06), ("c", "m", None)],
                                 [("t", "x", u1, None), ("t", "x", u2, None),
                                  ("c", "x", u1, 0.01), ("c", "y", u2, None)],
                                 lambda model: listed)
    # m's one record: $0.06 for 3,000 tokens listed at $0.03: scale 2
    assert summed.models["m"].scale == pytest.approx(2.0) and summed.models["m"].calls == 2
    assert summed.models["x"] == pricing.fill["x"]


@pytest.mark.parametrize("recorded_name, listed", [
    ("myproxy/gpt-4o", "gpt-4o"),             # a prefix the catalogue does not know
    ("azure/gpt-4o", "gpt-4o"),               # a provider that lists the model
    ("aws/claude-sonnet-4-5", "claude-sonnet-4-5"),  # a provider that does not
])
def test_a_prefixed_model_has_one_catalogue_price_in_calibrate_and_in_replay(recorded_name,
                                                                           listed):
    """Calibrate's and summary's catalogue (:func:`sim.cost.recorded.catalogue`)
    and replay's and tune's (:class:`CataloguePrices`, no price spec) look a
    ``prefix/model`` name up the same way: the three names here are each priced,
    at the listed model's catalogue prices, by both (before, the first and the
    third were unpriced in calibrate and priced in replay)."""
    from sim.drivers.catalogue_prices import CataloguePrices
    from sim.scenario.model import HarnessConfig

    day = datetime.date(2025, 6, 1)
    expected = lookup_prices(listed, when=day)
    from_calibrate = catalogue(day)(recorded_name)
    harness = HarnessConfig.model_validate({"model": listed, "prices_date": day.isoformat()})
    from_replay = CataloguePrices(harness)(recorded_name)
    assert from_calibrate is not None and from_replay is not None
    for price in (from_calibrate, from_replay):
        assert (price.input, price.output, price.cache_read) == (
            expected.input, expected.output, expected.cache_read)


# ------------------------------------------------ one home for a recorded call's price

SIM = Path(__file__).resolve().parent.parent / "sim"
PRICE_CALLERS = {
    ("cost/recorded.py", "call_cost"): "the home: a recorded call's tokens priced",
    ("harness/state.py", "HarnessState.add_usage"): "the harness's own account of a call",
    ("engines/tenant_budget.py", "prompt_cost"): "a simulated prompt against a tenant's budget",
}
"""Where ``Prices.call_cost`` (the harness's low-level rule) may be called in
``sim/``, each with why: everything that prices a recorded call goes through
:func:`sim.cost.recorded.call_cost`."""


def price_callers(source: str) -> set[str]:
    """The qualified names of the functions of ``source`` that call a
    ``.call_cost(...)`` method (``Prices.call_cost``)."""
    import ast

    found: set[str] = set()

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*where, child.name])
                continue
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr == "call_cost"):
                found.add(".".join(where) or "<module>")
            visit(child, where)
    visit(ast.parse(source), [])
    return found


def test_prices_call_cost_is_called_only_by_the_recorded_call_home_and_the_harness():
    """Every call of ``Prices.call_cost`` in ``sim/`` is in
    :func:`sim.cost.recorded.call_cost` (what summary, calibrate, replay and
    tune price recorded calls with) or in one of the listed simulated-run
    accounts; a module that prices a recorded call itself fails here."""
    found = {(path.relative_to(SIM).as_posix(), name)
             for path in sorted(SIM.rglob("*.py"))
             for name in price_callers(path.read_text(encoding="utf-8"))}
    assert found == set(PRICE_CALLERS)


def test_the_price_caller_scan_finds_a_planted_copy():
    """The scan above finds summary's old way (a recorded call's tokens priced
    with ``tiers.call_cost`` written out in the module) in its function."""
    planted = ("def cost_comparison(tiers, u):\n"
               "    return tiers.call_cost(u.input_tokens, u.output_tokens)\n")
    assert price_callers(planted) == {"cost_comparison"}


def test_summary_replay_and_tune_price_recorded_calls_through_the_one_home():
    """``traces summary``, the replay driver and replay's pricing (which tune's
    money needs read: ``priced_calls``) import :func:`sim.cost.recorded.call_cost`."""
    from sim.cost import recorded
    from sim.drivers.replay import driver, pricing
    from sim.traces import summary

    for module in (summary, driver, pricing):
        assert module.call_cost is recorded.call_cost


# ------------------------------------------------ a run's cost from its calls' costs

def test_a_runs_cost_from_its_calls_is_their_exact_sum_in_the_importers_and_in_replay():
    """Ten calls recording $0.10 each cost exactly $1.00 (math.fsum; a plain
    left-to-right sum gives 0.9999999999999999), the same figure where an
    importer records the run's cost (``assemble.run_cost``) and where replay
    reads a run that records none (``RunRecord.recorded_cost_usd``)."""
    from sim.cost.recorded import calls_cost
    from sim.traces.assemble import run_cost

    assert sum([0.1] * 10) != 1.0  # what the old importers' sum gave
    calls = [CallRecord(Usage(input_tokens=10), cost_usd=0.1) for _ in range(10)]
    assert calls_cost(c.cost_usd for c in calls) == 1.0
    assert run_cost(calls) == 1.0
    assert RunRecord("r", "sim", "", calls).recorded_cost_usd == 1.0


def test_a_runs_cost_is_unknown_when_a_call_records_none_or_there_is_no_call():
    """One call without a recorded cost makes the run's cost from its calls
    unknown (None), and so does a run of no call (unknown, not $0); a run's
    own recorded cost is its cost whatever its calls record."""
    from sim.cost.recorded import calls_cost
    from sim.traces.assemble import run_cost

    calls = [CallRecord(Usage(input_tokens=10), cost_usd=0.1), CallRecord(Usage(10))]
    assert calls_cost(c.cost_usd for c in calls) is None and run_cost(calls) is None
    assert calls_cost([]) is None and run_cost([]) is None
    assert RunRecord("r", "sim", "", []).recorded_cost_usd is None
    assert RunRecord("r", "sim", "", calls, cost_usd=0.5).recorded_cost_usd == 0.5
    assert RunRecord("r", "sim", "", [], cost_usd=0.0).recorded_cost_usd == 0.0


def test_a_day_has_one_catalogue_price_whatever_the_hour(monkeypatch):
    """DeepSeek's catalogue price has an off-peak discount (16:30 to 00:30
    UTC): a lookup without a time reads the day's price
    (:func:`sim.cost.prices.prices_day`), as a scenario's ``prices_date``
    does, so a figure never depends on the hour a command runs (before, it
    read "now": calibrate's fitted price comments changed at 00:30 UTC)."""
    import datetime as dt

    from sim.cost import prices as cost_prices

    day = dt.date(2026, 3, 2)
    for hour in (0, 12, 17):
        class Frozen(dt.datetime):
            at_hour = hour

            @classmethod
            def now(cls, tz=None):
                return dt.datetime(2026, 3, 2, cls.at_hour, 5, tzinfo=tz)

        monkeypatch.setattr(cost_prices, "datetime", Frozen)
        assert cost_prices.prices_day() == day
        monkeypatch.undo()
        today = cost_prices.lookup_prices("deepseek-chat", when=cost_prices.prices_day(day))
        monkeypatch.setattr(cost_prices, "datetime", Frozen)
        assert cost_prices.lookup_prices("deepseek-chat") == today
        monkeypatch.undo()
    assert cost_prices.prices_day("2026-03-02") == cost_prices.prices_day(day) == day
    late = dt.datetime(2026, 3, 2, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert cost_prices.prices_day(late) == dt.date(2026, 3, 3)  # its UTC day


def test_a_days_price_weights_each_time_of_day_price_by_the_hours_it_holds():
    """A call at an unknown hour of a day pays, on average, each time-of-day
    price for the share of the day it holds: DeepSeek's peak (00:30 to 16:30
    UTC, 16 hours) and off-peak (8 hours) prices read at instants inside them,
    weighted 2/3 and 1/3 (it read 00:00 UTC before: the off-peak discount, half
    the price two thirds of the day bills). A model without time-of-day prices
    reads its one price; tiers are averaged tier by tier."""
    import datetime as dt

    from sim.cost import prices as cost_prices

    day = dt.date(2026, 3, 2)

    def at(hour: int, minute: int = 0):
        return cost_prices.lookup_price_tiers(
            "deepseek-chat", when=dt.datetime(2026, 3, 2, hour, minute, tzinfo=dt.UTC))

    peak, off = at(12), at(20)
    assert peak.input == 2 * off.input  # the catalogue's two prices
    assert at(0, 29) == off and at(0, 30) == peak and at(16, 29) == peak and at(16, 30) == off
    mean = cost_prices.lookup_price_tiers("deepseek-chat", when=day)
    for field in ("input", "output", "cache_read", "cache_write"):
        assert getattr(mean, field) == pytest.approx(
            2 / 3 * getattr(peak, field) + 1 / 3 * getattr(off, field), rel=1e-12)
    assert mean.thinking is None
    usage = (30_000, 2_000, 100_000)  # input, output, cache read tokens
    hourly = [cost_prices.lookup_price_tiers(
        "deepseek-chat", when=dt.datetime(2026, 3, 2, h, m, tzinfo=dt.UTC))
        for h in range(24) for m in (0, 15, 30, 45)]
    assert mean.call_cost(*usage) == pytest.approx(  # the day's 96 quarter hours, averaged
        sum(p.call_cost(*usage) for p in hourly) / len(hourly), rel=1e-12)
    flat = cost_prices.lookup_price_tiers("gpt-4.1", when=day)
    assert flat == cost_prices.lookup_price_tiers(
        "gpt-4.1", when=dt.datetime(2026, 3, 2, 15, tzinfo=dt.UTC))
    tiered = [(0.25, cost_prices.lookup_price_tiers("gemini-2.5-pro", when=day)),
              (0.75, Prices(input=1.0, output=2.0, cache_read=0.1, cache_write=1.0))]
    both = cost_prices.mean_prices(tiered)
    assert [s for s, _ in both.tiers] == [s for s, _ in tiered[0][1].tiers]
    above = tiered[0][1].tiers[0]
    assert both.tiers[0][1].input == pytest.approx(0.25 * above[1].input + 0.75 * 1.0)
    assert both.input == pytest.approx(0.25 * tiered[0][1].input + 0.75 * 1.0)
    assert both.thinking is None


def test_calibrate_prices_unrecorded_runs_on_the_traces_day_as_its_fit_does(tmp_path):
    """claude-opus-4-6's prompts above 200,000 tokens cost twice the input
    price until 2026-03-13 (the catalogue's dated prices), one price after: a
    run of 2026-03-01 that records no cost is priced at that day's prices
    (the newest run's day, :func:`sim.calibration.jobs.prices_date`, which
    the fitted scenario's ``prices_date`` is too), not today's (before, its
    data were priced at today's while its fit read the traces' day)."""
    from sim.calibration import jobs

    model = "claude-opus-4-6"
    start = datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.UTC)
    runs = [RunRecord(f"r{i}", "tau2", "synthetic.json",
                      [_call(model, 250_000 + i, 1_000, None, 1)], task_id=f"r{i}",
                      model=model, exit="agent_stop", resolved=True, started_at=start)
            for i in range(10)]
    folder = write_folder(tmp_path / "opus", runs)
    assert jobs.prices_date(folder) == "2026-03-01"
    then = lookup_prices(model, prompt_tokens=250_000, when=start.date())
    later = lookup_prices(model, prompt_tokens=250_000, when=datetime.date(2026, 4, 1))
    assert then.input == 2 * later.input  # the catalogue's two prices
    traces = jobs.build(jobs.Spec(folder, 2, 0, None)).traces
    got = dict(zip(traces.runs["run_id"], traces.runs["cost"], strict=True))
    assert got == {f"r{i}": pytest.approx(then.cost(250_000 + i, 1_000), rel=1e-12)
                   for i in range(10)}


def test_an_instants_price_is_the_catalogues_at_that_instant_for_any_time_of_day_rule(
        monkeypatch):
    """Instants share a cached lookup per stretch of their day: the price at
    any instant (UTC, another offset, naive as UTC, a pandas Timestamp, a
    microsecond either side of a bound) is what genai-prices' own
    ``ModelInfo.get_prices`` gives at it, for time-of-day rules the catalogue
    may hold: a window at a fixed offset and one in a zone whose offset has
    changed, one that wraps past midnight, one a microsecond long, a dated
    price beside them. A day's price weights each
    window by its hours (a window of 22:00 to 02:00 UTC: 4 of 24; 00:30 to
    08:30 at UTC+8: 8 of 24)."""
    import random
    from decimal import Decimal
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from genai_prices import types as gp

    from sim.cost import prices as cost_prices

    def price(usd: int) -> gp.ModelPrice:
        return gp.ModelPrice(input_mtok=Decimal(usd), output_mtok=Decimal(2 * usd))

    utc8 = datetime.timezone(datetime.timedelta(hours=8))
    rules = {
        "utc8": [gp.TimeOfDateConstraint(datetime.time(0, 30, tzinfo=utc8),
                                         datetime.time(8, 30, tzinfo=utc8))],
        "wrap": [gp.TimeOfDateConstraint(datetime.time(22), datetime.time(2))],
        "tiny": [gp.TimeOfDateConstraint(datetime.time(3, 17, 41, 123456),
                                         datetime.time(3, 17, 41, 123457))],
        "dated": [gp.StartDateConstraint(datetime.date(2026, 3, 3)),
                  gp.TimeOfDateConstraint(datetime.time(23, 59, 59), datetime.time(0, 0, 1))],
    }
    try:  # a zone whose offset has changed: genai-prices reads a time in it on 1970-01-01
        singapore = ZoneInfo("Asia/Singapore")  # UTC+7:30 then, UTC+8 since 1982
        rules["zone"] = [gp.TimeOfDateConstraint(datetime.time(9, tzinfo=singapore),
                                                 datetime.time(18, tzinfo=singapore))]
    except ZoneInfoNotFoundError:
        pass
    rng = random.Random(7)
    start = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    for name, constraints in rules.items():
        model = gp.ModelInfo(id=name, match=gp.ClauseEquals(equals=name), prices=[
            gp.ConditionalPrice(prices=price(1)),
            *(gp.ConditionalPrice(constraint=c, prices=price(k + 2))
              for k, c in enumerate(constraints))])
        monkeypatch.setattr(cost_prices, "_catalogue_model", lambda *_, m=model: m)
        for cache in (cost_prices._catalogue_tiers, cost_prices._day_tiers,
                      cost_prices._day_bounds):
            cache.cache_clear()
        instants = []
        for _ in range(400):
            moment = start + datetime.timedelta(microseconds=rng.randrange(4 * 86_400 * 10**6))
            instants += [moment, moment.astimezone(utc8), moment.replace(tzinfo=None),
                         pd.Timestamp(moment)]
        for c in constraints:
            if isinstance(c, gp.TimeOfDateConstraint):
                for bound in (c.start_time, c.end_time):
                    for day in range(4):
                        at = datetime.datetime.combine(
                            start.date() + datetime.timedelta(days=day),
                            bound if bound.tzinfo else bound.replace(tzinfo=datetime.UTC))
                        instants += [at + datetime.timedelta(microseconds=d) for d in (-1, 0, 1)]
        for moment in instants:
            got = cost_prices.lookup_price_tiers(name, when=moment)
            assert got.input == float(model.get_prices(moment).input_mtok), (name, moment)
    for cache in (cost_prices._catalogue_tiers, cost_prices._day_tiers, cost_prices._day_bounds):
        cache.cache_clear()
    for name, hours in (("wrap", 4), ("utc8", 8)):
        model = gp.ModelInfo(id=name, match=gp.ClauseEquals(equals=name), prices=[
            gp.ConditionalPrice(prices=price(1)),
            gp.ConditionalPrice(constraint=rules[name][0], prices=price(2))])
        monkeypatch.setattr(cost_prices, "_catalogue_model", lambda *_, m=model: m)
        for cache in (cost_prices._day_tiers, cost_prices._day_bounds,
                      cost_prices._catalogue_tiers):
            cache.cache_clear()
        day = cost_prices.lookup_price_tiers(name, when=datetime.date(2026, 3, 2))
        assert day.input == pytest.approx((hours * 2 + (24 - hours)) / 24, rel=1e-12)
    for cache in (cost_prices._catalogue_tiers, cost_prices._day_tiers, cost_prices._day_bounds):
        cache.cache_clear()


def test_calibrate_says_which_runs_keep_an_untrustworthy_zero_and_why(tmp_path):
    """Runs of a model no price list has, recording $0 while using tokens (an
    exporter that lacked the model's price, as tau2's fine-tuned gpt-4.1's
    140 runs do): nothing prices them, so their $0 stays, and calibrate says
    so, naming the model (it counted only the runs it repriced). The world's
    price of such a model says its runs were all $0, not "least squares
    ... R^2 1.0000"."""
    from sim.calibration import jobs
    from sim.calibration.prices import estimate_prices

    own, paid = "ft:acme-own-model", "gpt-4o"
    runs = [_run(f"own{i}", own, [_call(own, 1000 + i, 100, 0.0, 1)], 0.0) for i in range(6)]
    runs += [_run(f"paid{i}", paid, [_call(paid, 1000, 100, 0.0035, 1)], 0.0035)
             for i in range(6)]
    runs.append(_run("zero", paid, [_call(paid, 2000, 200, 0.0, 1)], 0.0))
    traces = jobs.build(jobs.Spec(write_folder(tmp_path / "t", runs), 2, 0, None)).traces
    kept = {why: n for why, n in traces.repaired.items() if "kept at $0" in why}
    assert list(kept.values()) == [6] and own in next(iter(kept))
    assert {why: n for why, n in traces.repaired.items() if why not in kept} == {
        "runs recording $0 while using tokens (or no cost), priced at fitted prices (the "
        "catalogue scaled to the model's recorded costs)": 1}
    cost = dict(zip(traces.runs["run_id"], traces.runs["cost"], strict=True))
    assert all(cost[f"own{i}"] == 0.0 for i in range(6)) and cost["zero"] > 0
    estimate = estimate_prices(traces, [own])[own]
    assert (estimate.input, estimate.output) == (0.0, 0.0)
    assert "all $0 although they used tokens" in estimate.source
