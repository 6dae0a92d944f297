"""The budget explorer (sim.explore): a setting of five dials simulates as the
equivalent scenario overrides do, simulations are cached by (setting, tasks),
a view holds the setting, the reference and the token ladder, and the widget
panel moves dials and redraws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.api import load_scenario, simulate
from sim.bad_input import InputError
from sim.explore import Explorer, Setting, panel, readable, side_by_side
from sim.explore.explorer import TOKEN_LADDER, choices

TASKS = 60


@pytest.fixture
def bounded():
    return load_scenario("scenarios/bounded.yaml")


@pytest.fixture
def explorer(bounded):
    return Explorer(bounded, tasks=TASKS)


def test_the_reference_setting_is_the_scenario_as_written(bounded):
    """Setting.of reads the five dials of the scenario's harness."""
    assert Setting.of(bounded) == Setting(tokens=2_000_000, steps=50, repeat_threshold=3,
                                          nudges=1, verifier=True)


def test_a_setting_simulates_as_the_same_overrides_would(explorer, bounded):
    """The rows of a setting are those of simulate() with the dotted-path
    overrides the setting stands for (same tasks, same seed)."""
    setting = Setting(tokens=500_000, steps=20, repeat_threshold=2, nudges=2, verifier=False)
    expected = simulate(bounded, {"harness.budgets.tokens": 500_000,
                                  "harness.budgets.steps": 20,
                                  "harness.detector.repeat_threshold": 2,
                                  "harness.detector.nudges": 2,
                                  "harness.verifier.name": "none"}, tasks=TASKS, workers=1)
    pd.testing.assert_frame_equal(explorer.rows(setting), expected)


def test_verifier_on_is_the_scenarios_own_or_the_oracle(bounded):
    """On: the scenario's verifier (with its options); a scenario without one
    gets the oracle. Off: none."""
    own = Explorer(bounded, tasks=TASKS)
    off = own.reference.replace(verifier=False)
    assert own.overrides(off)["harness.verifier.name"] == "none"
    assert own.overrides(own.reference)["harness.verifier.name"] == "oracle"
    noisy = load_scenario(bounded, {"harness.verifier.name": "noisy",
                                    "harness.verifier.options": {"false_accept": 0.1}})
    assert Explorer(noisy).overrides(Setting.of(noisy))["harness.verifier.options"] == {
        "false_accept": 0.1}
    unverified = Explorer(load_scenario(bounded, {"harness.verifier.name": "none"}))
    on = unverified.reference.replace(verifier=True)
    assert unverified.overrides(on)["harness.verifier.name"] == "oracle"


def test_the_detector_dial_turns_the_detector_on_and_off(bounded):
    """A scenario without a detector starts with it off (its repeat and nudge
    sliders disabled); turned on, the detector stops loops as needs_human,
    turned off no run ends so."""
    off = load_scenario(bounded, {"harness.detector.enabled": False})
    explorer = Explorer(off, tasks=TASKS)
    assert explorer.reference.detector is False
    assert explorer.overrides(explorer.reference)["harness.detector.enabled"] is False
    assert "detector=off" in explorer.reference.label()
    on = explorer.view(explorer.reference.replace(detector=True)).rows
    assert "needs_human:no_progress" in on["outcome"].tolist()
    assert "needs_human:no_progress" not in explorer.rows(explorer.reference)["outcome"].tolist()
    dials = panel(explorer)
    assert dials.controls["nudges"].disabled and dials.controls["repeat_threshold"].disabled
    dials.controls["detector"].value = True
    assert not dials.controls["nudges"].disabled
    assert dials.view.setting.detector is True


def test_moving_the_token_budget_along_the_ladder_costs_no_simulation(explorer):
    """The first view simulates the ladder (the reference's 2M is one of its
    budgets); a budget on the ladder is then free, a new budget costs one
    cell, another dial a new ladder, and going back costs nothing."""
    first = explorer.view()
    assert (first.simulated, first.cached) == (len(TOKEN_LADDER), 0)
    on_ladder = explorer.view(explorer.reference.replace(tokens=500_000))
    assert on_ladder.simulated == 0
    new = explorer.view(explorer.reference.replace(tokens=750_000))
    assert new.simulated == 1
    nudged = explorer.view(explorer.reference.replace(tokens=750_000, nudges=2))
    assert nudged.simulated == len(TOKEN_LADDER) + 1
    assert explorer.view(explorer.reference).simulated == 0
    assert explorer.rows(new.setting) is explorer.rows(new.setting)


def test_the_cache_keeps_the_most_recently_used_cells(bounded):
    """Beyond cache_size entries the least recently used is dropped first."""
    explorer = Explorer(bounded, tasks=20, cache_size=2)
    a, b, c = (explorer.reference.replace(nudges=n) for n in (0, 1, 2))
    explorer.rows(a)
    explorer.rows(b)
    explorer.rows(a)  # a is now the most recent
    explorer.rows(c)
    assert explorer.cached(a, 20) and explorer.cached(c, 20) and not explorer.cached(b, 20)


def test_a_full_view_uses_full_tasks_and_caches_apart(bounded):
    """full=True simulates full_tasks tasks per cell, cached separately from
    the small sample."""
    explorer = Explorer(bounded, tasks=20, full_tasks=50, ladder=(None,))
    small, full = explorer.view(), explorer.view(full=True)
    assert len(small.rows) == 20 and len(full.rows) == 50
    assert full.simulated == 2  # the reference's 2M and the unlimited ladder budget


def test_the_view_holds_the_setting_the_reference_and_the_ladder(explorer):
    """A view's ladder has one cell per token budget (the setting's own
    added), its table compares the setting with the reference in percent
    and dollars, and its frontier marks the setting's ladder cell."""
    view = explorer.view(explorer.reference.replace(tokens=300_000))
    assert view.ladder["cell"].tolist() == [
        "tokens=200k", "tokens=300k", "tokens=500k", "tokens=1M", "tokens=2M", "tokens=5M",
        "tokens=none"]
    assert view.chosen == "tokens=300k"
    succeeded = (view.rows["outcome"] == "succeeded").mean()
    assert view.table().loc["succeeded", "your setting"] == f"{100 * succeeded:.1f}%"
    assert view.summary().loc["bounded as written", "tasks"] == TASKS
    fig = explorer.draw(view)["frontier"]
    chosen = view.ladder.set_index("cell").loc["tokens=300k"]
    point = fig.axes[0].collections[-1].get_offsets()[0]
    assert np.allclose(point, [chosen["cost_mean"], 100 * chosen["succeeded"]])


def test_dials_refuse_unknown_names_and_values(explorer):
    """Setting.replace and Panel.set name the dials; a value a dial does not
    offer is an InputError listing its values."""
    with pytest.raises(InputError, match="no dial named budget"):
        explorer.reference.replace(budget=1)
    dials = panel(explorer)
    with pytest.raises(InputError, match="tokens=123 is not a value of its dial"):
        dials.set(tokens=123)


def test_the_panel_redraws_when_a_dial_moves(explorer):
    """Setting a widget's value redraws: the view, the figures and the output
    area follow the dials; set() moves several dials with one redraw."""
    dials = panel(explorer)
    assert dials.view.setting == explorer.reference
    assert len(dials.output.outputs) == 4  # the table and three figures
    pngs = [o["data"]["image/png"] for o in dials.output.outputs if "image/png" in o["data"]]
    assert len(pngs) == 3 and all(isinstance(png, str) for png in pngs)  # base64 text
    dials.controls["verifier"].value = False
    assert dials.view.setting.verifier is False
    assert "false_success" in dials.view.rows["outcome"].tolist()
    dials.set(tokens=500_000, steps=20)
    assert (dials.view.setting.tokens, dials.view.setting.steps) == (500_000, 20)
    assert "redrawn in" in dials.status.value


def test_a_panel_opened_at_any_budget_offers_it(explorer):
    """panel(explorer, tokens=150_000) opens at a budget the dial does not
    list: it is added to the dial's values."""
    dials = panel(explorer, tokens=150_000)
    assert dials.controls["tokens"].value == 150_000
    assert dials.view.setting.tokens == 150_000


def test_side_by_side_reads_any_sides_in_percent_and_dollars(explorer):
    """side_by_side summarizes task rows per side, in the given order;
    readable turns shares into percent and costs into dollars."""
    a = explorer.rows(explorer.reference)
    b = explorer.rows(explorer.reference.replace(verifier=False))
    summary = side_by_side({"checked": a, "unchecked": b})
    assert summary.index.tolist() == ["checked", "unchecked"]
    assert summary.loc["unchecked", "false_success"] == (b["outcome"] == "false_success").mean()
    table = readable(summary)
    assert table.loc["mean cost per task", "checked"] == f"${a['cost_usd'].mean():,.2f}"
    assert table.loc["tasks", "unchecked"] == f"{TASKS:,}"


def test_choices_add_the_scenarios_own_value_in_order():
    """A dial offers its values ascending, unlimited (None) last, with the
    scenario's own value added."""
    assert choices((10, 50, None), 30) == (10, 30, 50, None)
    assert choices((10, 50), None) == (10, 50, None)
