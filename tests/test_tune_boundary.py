"""The boundary search: each budget bisected between the tightest grid value
that keeps successes and the next tighter one, to the resolution a user sets,
with the runs each step stops; ``--candidates`` adds a user's own values."""

from __future__ import annotations

import json

import pytest
from test_tune_headline import _run

from sim.bad_input import InputError
from sim.cli import main
from sim.traces.writer import write_runs
from sim.tuning.boundary import between, find_boundary, resolution
from sim.tuning.knobs import parse_candidates
from sim.tuning.search import tune


def test_resolution_is_what_a_user_sets():
    """1 step; three significant figures of tokens (at least 1) and dollars."""
    assert resolution("steps", 37) == 1
    assert resolution("tokens", 359_000) == 1_000
    assert resolution("tokens", 50) == 1
    assert resolution("money", 1.25) == pytest.approx(0.01)
    assert between("steps", 11, 12) is None and between("steps", 5, 40) == 22
    assert between("tokens", 250_000, 360_000) == 305_000


def test_bisection_finds_the_tightest_value_that_keeps_on_a_monotone_loss():
    """A loss that is 0 from 1,234 tokens up: from the grid 1,000 (refused)
    and 5,000 (keeps), bisection ends one resolution apart (three significant
    figures: 10 tokens) at 1,240 and 1,230, having evaluated only values
    between them."""
    def row(value):
        lost = 0 if value >= 1234 else 1
        return {"lost": lost, "stopped_runs": 5 + lost, "base_successes": 10}

    seen = []

    def evaluate(value):
        seen.append(value)
        return row(value)

    found = find_boundary("tokens", [1000, 5000, None], {1000: row(1000), 5000: row(5000)},
                          evaluate, lambda r: r["lost"] == 0, lambda v: True)
    assert (found.keeps, found.refused) == (1240, 1230)
    assert all(1000 < v < 5000 for v in seen) and len(seen) == len(set(seen)) <= 14
    assert [s.value for s in found.steps[:2]] == [1000, 5000]
    assert "keeps successes at 1,240 (stops 5 runs, loses 0 of 10); not at 1,230" in (
        found.sentence())


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """60 successes of each length 3..12 calls (600) and 30 failures of 50;
    call k's prompt is 1,000 * (k + 1) tokens, so a run of n calls needs
    1,000 * n(n+1)/2 prompt tokens: 6,000 ... 78,000 for the successes."""
    folder = tmp_path_factory.mktemp("boundary") / "traces"
    folder.mkdir()
    write_runs(folder, [_run(i, 3 + i % 10, True) for i in range(600)]
               + [_run(600 + i, 50, False) for i in range(30)])
    return folder


def test_the_token_grid_is_bisected_to_the_boundary(spread):
    """The derived token grid (quantiles: 36,000, 55,000, 66,000, 78,000,
    then 1.3M) has 66,000 refused (it stops the 60 successes of 12 calls,
    which need 78,000) and 78,000 keeping every success; the
    bisection ends at 78,000 (stops the 30 failures, loses none) against
    77,900 (one resolution below: also stops the 60 successes of 12 calls),
    and the recommendation is tokens=78,000."""
    result = tune(spread, knobs="tokens")
    (found,) = result.boundaries
    assert (found.keeps, found.refused) == (78_000, 77_900)
    steps = {s.value: s for s in found.steps}
    assert (steps[66_000].lost, steps[66_000].stops, steps[66_000].keeps) == (60, 90, False)
    assert (steps[78_000].stops, steps[78_000].lost) == (30, 0)
    assert (steps[77_900].stops, steps[77_900].lost, steps[77_900].of) == (90, 60, 600)
    assert all(66_000 < s.value < 78_000 for s in found.steps[2:] if s.value != 77_900)
    assert dict(result.recommendation.setting) == {"tokens": 78_000}
    assert set(result.frontier["phase"]) >= {"tokens alone", "tokens boundary"}


def test_a_grid_given_is_searched_as_given(spread):
    """grid={'steps': [5, 40]}: those values only, no bisection."""
    result = tune(spread, knobs="steps", grid={"steps": [5, 40]})
    assert result.boundaries == []
    assert set(result.frontier["setting"]) == {"steps=5", "steps=40", "steps=unlimited"}


def test_candidates_of_your_own_join_the_grid(spread, tmp_path, capsys):
    """--candidates steps=25,30 evaluates both beside the derived grid; the
    boundary search is in tune.json; a bad candidate is exit 2."""
    out = tmp_path / "o"
    assert main(["tune", str(spread), "--knobs", "steps", "--candidates", "steps=25,30",
                 "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "tune.json").read_text())
    settings = {r["setting"]: r["phase"] for r in summary["frontier"]}
    assert settings["steps=25"] == settings["steps=30"] == "steps alone"
    assert summary["boundaries"][0]["knob"] == "steps"
    capsys.readouterr()
    assert main(["tune", str(spread), "--knobs", "steps", "--candidates", "tokens=1M",
                 "--out", str(tmp_path / "o2"), "--quiet"]) == 2
    assert "--candidates" in capsys.readouterr().err


def test_candidate_values_read_suffixes_and_words():
    assert parse_candidates("tokens=1.2M,150k money=$0.5,unlimited detector=off,3") == {
        "tokens": [1_200_000, 150_000], "money": [0.5, None], "detector": [0, 3]}
    for bad in ("tokens=1.5", "steps=-1", "tokens", "speed=3", "tokens=lots"):
        with pytest.raises(InputError, match="--candidates"):
            parse_candidates(bad)


def test_a_candidate_that_rounds_to_nothing_or_leaves_the_harness_is_refused() -> None:
    """A money candidate below the millionth it is kept to (5e-324 rounded to
    $0, which the harness refuses with a traceback) is an InputError naming
    ``--candidates``; so is a setting the harness's own validation refuses."""
    from sim.scenario.model import HarnessConfig
    from sim.tuning.replayed import apply

    for tiny in ("5e-324", "1e-300", "0.0000004"):
        with pytest.raises(InputError, match=r"at least 0\.000001") as refused:
            parse_candidates(f"money={tiny}")
        assert refused.value.path == "--candidates"
    assert parse_candidates("money=0.000001") == {"money": [1e-06]}
    with pytest.raises(InputError, match="is not a harness sim runs") as refused:
        apply(HarnessConfig(), (("steps", -3),))
    assert refused.value.path == "--candidates"
