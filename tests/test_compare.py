"""Comparisons (sim.analysis.compare, ``python -m sim compare``): statistics against
theory, the verdict's rules (regression, no regression shown by every
interval inside its limit, inconclusive with the tasks that would decide it),
pairing, and the end-to-end claims: stopping on the first detection is
inconclusive on 10 and 100 tasks and a regression of the expected size on
10,000 (exit 3, 3, 1); bounded.yaml against itself under another seed is no
regression on 50,000 unpaired tasks (exit 0); the JUnit files say the same."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from sim import cost
from sim.analysis.compare import (
    ROW_COLUMNS,
    Side,
    Thresholds,
    bootstrap_changes,
    chi_square_homogeneity,
    compare_sides,
    holm,
    mcnemar_exact,
    newcombe_interval,
    stuart_maxwell,
)
from sim.bad_input import InputError
from sim.cli import main
from sim.scenario.model import load_scenario
from sim.world.difficulty import need_cdf

Z = 4.0  # two-sided tolerance in standard errors: a false alarm about once in 16,000 runs
STOP_FIRST_TASKS = 10_000
SELF_TASKS = 50_000


def run_cli(*argv: str) -> tuple[int, str]:
    """Exit status and stdout of ``python -m sim ...`` run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(list(argv))
    return status, out.getvalue()


# -------------------------------------------------- intervals and tests

def test_newcombe_interval_for_independent_shares_matches_newcombe_1998():
    """56/70 against 48/80: Newcombe's (1998) method 10 gives 0.0524 to 0.3339."""
    low, high = newcombe_interval(48, 56, 80, 70)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_paired_interval_covers_the_true_change_at_its_nominal_level():
    """Over 800 samples of 300 correlated pairs (true change +3 pp), the
    paired 95% interval covers the true change 95% of the time, within
    Monte Carlo error (4 standard errors of a 95% coverage rate)."""
    rng = np.random.default_rng(1)
    n, reps = 300, 800
    # joint cells: (base, candidate) in {(1,1), (1,0), (0,1), (0,0)}
    probs = np.array([0.80, 0.02, 0.05, 0.13])  # change = 0.05 - 0.02
    covered = 0
    for _ in range(reps):
        a, b, c, _d = rng.multinomial(n, probs)
        low, high = newcombe_interval(a + b, a + c, n, n, both=a)
        covered += low <= 0.03 <= high
    se = math.sqrt(0.95 * 0.05 / reps)
    assert abs(covered / reps - 0.95) < Z * se


def test_paired_interval_is_narrower_than_unpaired_by_the_ratio_of_standard_errors():
    """Common random numbers pay off: with 94% of pairs agreeing, the paired
    interval of the same change is narrower by about the ratio of the standard
    errors, sqrt((p1 q1 + p2 q2) / ((b + c)/n - ((b - c)/n)^2)), about 1.9."""
    n, k1, k2, both = 1000, 900, 860, 850
    paired = newcombe_interval(k1, k2, n, n, both=both)
    unpaired = newcombe_interval(k1, k2, n, n)
    assert paired[0] < -0.04 < paired[1] and unpaired[0] < -0.04 < unpaired[1]
    p1, p2, b, c = k1 / n, k2 / n, (k1 - both) / n, (k2 - both) / n
    ratio = math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / (b + c - (b - c) ** 2))
    assert (unpaired[1] - unpaired[0]) / (paired[1] - paired[0]) == pytest.approx(ratio,
                                                                                  rel=0.1)


def test_mcnemar_exact_is_a_binomial_test_of_the_discordant_pairs():
    """p = binomtest(c, b + c, 1/2), symmetric in the two kinds of discordant
    pair, and 1 when no pair is discordant."""
    assert mcnemar_exact(3, 12) == pytest.approx(scipy_stats.binomtest(12, 15, 0.5).pvalue)
    assert mcnemar_exact(3, 12) == mcnemar_exact(12, 3)
    assert mcnemar_exact(0, 0) == 1.0


def test_stuart_maxwell_reduces_to_mcnemar_and_matches_fleiss_everitt_for_three_outcomes():
    """Two outcomes: McNemar's chi-square (b - c)^2 / (b + c). Three: the closed
    form of Fleiss and Everitt (1971)."""
    statistic, df, _ = stuart_maxwell(np.array([[10, 5], [2, 20]]))
    assert (statistic, df) == (pytest.approx(9 / 7), 1)
    t = np.array([[20, 5, 3], [2, 30, 9], [6, 1, 40]])
    avg = (t + t.T) / 2
    d = t.sum(axis=1) - t.sum(axis=0)
    n12, n13, n23 = avg[0, 1], avg[0, 2], avg[1, 2]
    closed = ((n23 * d[0] ** 2 + n13 * d[1] ** 2 + n12 * d[2] ** 2)
              / (2 * (n12 * n13 + n12 * n23 + n13 * n23)))
    statistic, df, p = stuart_maxwell(t)
    assert statistic == pytest.approx(closed) and df == 2
    assert p == pytest.approx(scipy_stats.chi2.sf(closed, 2))


def test_stuart_maxwell_ignores_outcomes_that_never_change_and_handles_no_change():
    """An outcome whose tasks all agree adds nothing; no discordance at all is p = 1."""
    t = np.array([[10, 5, 0], [2, 20, 0], [0, 0, 7]])
    assert stuart_maxwell(t)[:2] == (pytest.approx(9 / 7), 1)
    assert stuart_maxwell(np.diag([5, 6, 7])) == (0.0, 0, 1.0)


def test_stuart_maxwell_p_values_are_uniform_under_marginal_homogeneity():
    """Tables drawn from a symmetric joint distribution (marginal homogeneity
    holds) give p-values whose distribution is uniform (KS test, 400 tables)."""
    rng = np.random.default_rng(2)
    joint = np.array([[0.60, 0.04, 0.02], [0.04, 0.20, 0.03], [0.02, 0.03, 0.02]])
    ps = [stuart_maxwell(rng.multinomial(2000, joint.ravel()).reshape(3, 3))[2]
          for _ in range(400)]
    assert scipy_stats.kstest(ps, "uniform").pvalue > 1e-3


def test_chi_square_homogeneity_drops_unseen_outcomes():
    """The 2 x K test ignores outcomes seen on neither side; one outcome is p = 1."""
    with_gap = chi_square_homogeneity([50, 0, 30], [40, 0, 45])
    without = chi_square_homogeneity([50, 30], [40, 45])
    assert with_gap == pytest.approx(without)
    assert chi_square_homogeneity([5, 0], [7, 0]) == (0.0, 0, 1.0)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
@settings(max_examples=100, deadline=None)
def test_holm_adjusted_p_values_are_at_least_raw_at_most_one_and_keep_the_order(ps):
    """Holm's adjustment never lowers a p-value, never exceeds 1, keeps the
    ranking, and equals m * min(p) for the smallest."""
    adjusted = holm(ps)
    assert all(p <= a <= 1 for p, a in zip(ps, adjusted, strict=True))
    order = np.argsort(ps, kind="stable")
    assert all(adjusted[i] <= adjusted[j] for i, j in itertools.pairwise(order))
    assert adjusted[order[0]] == pytest.approx(min(1.0, len(ps) * min(ps)))


def test_bootstrap_is_reproducible_and_covers_a_known_shift():
    """The same samples give the same intervals (fixed seed); a paired shift of
    +1 on every task gives intervals of the mean, p50 and p95 change at +1."""
    rng = np.random.default_rng(3)
    base = rng.lognormal(0, 1, 2000)
    one = bootstrap_changes(base, base + 1, paired=True, resamples=500)
    two = bootstrap_changes(base, base + 1, paired=True, resamples=500)
    assert all(np.array_equal(x, y) for x, y in zip(one, two, strict=True))
    low, high, p = one
    assert np.allclose(low, 1) and np.allclose(high, 1) and (p < 0.01).all()


def test_unpaired_bootstrap_interval_of_the_mean_has_the_normal_theory_width():
    """Two independent normal samples (sd 1, n 2,000 each): the 95% interval of
    the change in mean is about 2 * 1.96 * sqrt(2/2000) wide (within 15%)."""
    rng = np.random.default_rng(4)
    low, high, _ = bootstrap_changes(rng.normal(0, 1, 2000), rng.normal(0, 1, 2000),
                                     paired=False, resamples=1000)
    assert (high[0] - low[0]) == pytest.approx(2 * 1.96 * math.sqrt(2 / 2000), rel=0.15)


# ------------------------------------------------------ synthetic sides

def synthetic_rows(n: int, seed: int, cell: str = "c", cost_factor: float = 1.0,
                   fail_share: float = 0.10) -> pd.DataFrame:
    """n plausible task rows: succeeded or needs_human, lognormal costs."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(3, 40, n)
    outcome = np.where(rng.random(n) < fail_share, "needs_human:no_progress", "succeeded")
    frame = pd.DataFrame({
        "cell": cell, "task": np.arange(n), "outcome": outcome, "steps": steps,
        "input_tokens": steps * 20_000, "cache_read_tokens": 0, "cache_write_tokens": 0,
        "output_tokens": steps * 600, "cost_usd": rng.lognormal(0, 0.8, n) * cost_factor,
        "ground_truth": rng.integers(3, 30, n)})
    return frame[list(ROW_COLUMNS)]


def side(rows: pd.DataFrame, label: str = "s", seed: int | None = 0) -> Side:
    cells = tuple(dict.fromkeys(rows["cell"]))
    return Side(label, f"synthetic {label}", rows, cells, {}, seed)


FAST = Thresholds(resamples=300)


def test_a_ten_percent_paired_cost_rise_is_a_regression_and_three_percent_is_not():
    """Every task 10% dearer: mean and p95 cost rise beyond the 5% limit and
    significantly (a regression); 3% dearer is significant but within the limit."""
    base = synthetic_rows(1000, 1)
    dearer = base.assign(cost_usd=base["cost_usd"] * 1.10)
    result = compare_sides(side(base, "a"), side(dearer, "b"), FAST)
    failing = set(result.checks.loc[result.checks["regression"], "check"])
    assert failing == {"mean cost", "p95 cost"} and result.exit_status == 1
    slightly = base.assign(cost_usd=base["cost_usd"] * 1.03)
    result = compare_sides(side(base, "a"), side(slightly, "b"), FAST)
    assert not result.regression
    assert (result.checks.set_index("check").loc["mean cost", "p_adjusted"] < 0.05)


def test_a_share_drop_beyond_the_limit_needs_significance_to_count():
    """A 2 pp drop of the succeeded share on 200 independent tasks is beyond
    the limit but not significant: no regression; on 20,000 paired tasks the
    same drop is a regression."""
    base = synthetic_rows(200, 2, fail_share=0.10)
    worse = base.copy()
    flip = worse.index[worse["outcome"] == "succeeded"][:4]  # 4 of 200 = 2 pp
    worse.loc[flip, "outcome"] = "needs_human:no_progress"
    result = compare_sides(side(base, "a", 1), side(worse, "b", 2), FAST)
    assert not result.paired and not result.regression
    row = result.checks.set_index("check").loc["succeeded share"]
    assert row["change"] == pytest.approx(-2.0) and row["beyond_threshold"] == "worse"
    big = synthetic_rows(20_000, 3)
    big_worse = big.copy()
    flip = big_worse.index[big_worse["outcome"] == "succeeded"][:400]
    big_worse.loc[flip, "outcome"] = "needs_human:no_progress"
    result = compare_sides(side(big, "a"), side(big_worse, "b"), FAST)
    assert result.paired and result.regression
    assert "succeeded share fell 2.0 pp" in result.verdict


def test_a_side_compared_with_itself_changes_nothing():
    """Identical rows: every change is 0, every p-value 1, no regression."""
    rows = synthetic_rows(500, 4)
    result = compare_sides(side(rows, "a"), side(rows, "b"), FAST)
    assert result.paired and not result.regression
    assert (result.outcomes["change_pp"] == 0).all() and (result.outcomes["p_value"] == 1).all()
    assert (result.metrics["change"] == 0).all()


def test_pairing_follows_seeds_then_ground_truth_and_can_be_forced():
    """Equal seeds pair; different seeds do not; with unknown seeds (results
    folders) identical ground truth pairs; different task sets never pair."""
    rows = synthetic_rows(300, 5)
    other = synthetic_rows(300, 6)
    assert compare_sides(side(rows, "a", 7), side(other, "b", 7), FAST).paired
    assert not compare_sides(side(rows, "a", 7), side(rows, "b", 8), FAST).paired
    assert compare_sides(side(rows, "a", None), side(other.assign(
        ground_truth=rows["ground_truth"]), "b", None), FAST).paired
    assert not compare_sides(side(rows, "a", None), side(other, "b", None), FAST).paired
    fewer = compare_sides(side(rows, "a"), side(rows.head(200), "b"), FAST)
    assert not fewer.paired and "different task sets" in fewer.pairing_note
    assert not compare_sides(side(rows, "a"), side(rows, "b"), FAST,
                             pairing="unpaired").paired
    with pytest.raises(InputError, match="different task indices"):
        compare_sides(side(rows, "a"), side(rows.head(200), "b"), FAST, pairing="paired")


def test_cells_pair_by_name_and_a_mismatch_is_bad_input():
    """Single cells pair whatever their names; several cells pair by name; a
    name on one side only is an InputError naming it."""
    a = pd.concat([synthetic_rows(100, 7, "x=1"), synthetic_rows(100, 8, "x=2")])
    b = pd.concat([synthetic_rows(100, 9, "x=2"), synthetic_rows(100, 10, "x=1")])
    result = compare_sides(side(a, "a"), side(b, "b"), FAST)
    assert result.cell_pairs == (("x=1", "x=1"), ("x=2", "x=2"))
    single = compare_sides(side(synthetic_rows(50, 1, "one"), "a"),
                           side(synthetic_rows(50, 1, "two"), "b"), FAST)
    assert single.cell_pairs == (("one", "two"),)
    c = pd.concat([synthetic_rows(100, 9, "x=2"), synthetic_rows(100, 10, "x=3")])
    with pytest.raises(InputError, match=r"only in the base \['x=1'\]"):
        compare_sides(side(a, "a"), side(c, "b"), FAST)


@pytest.mark.parametrize("bad", [Thresholds(max_share_drop_pp=-1), Thresholds(alpha=0),
                                 Thresholds(alpha=1.5), Thresholds(resamples=10),
                                 Thresholds(max_cost_rise_pct=float("nan"))])
def test_bad_thresholds_are_input_errors(bad):
    """Negative or NaN limits, alpha outside (0, 1) and too few resamples are refused."""
    with pytest.raises(InputError):
        bad.validate()


def test_comparison_dict_is_plain_json():
    """to_dict() holds only JSON values (no NaN: the max's missing interval is null)."""
    rows = synthetic_rows(200, 11)
    data = compare_sides(side(rows, "a"), side(rows, "b"), FAST).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["regression"] is False
    assert any(m["stat"] == "max" and m["ci_low"] is None for m in data["metrics"])


# ---------------------------------- stopping on the first detection (seed 001)

def expected_stop_first_drop(path: str) -> float:
    """The fall of the succeeded share when the detector of ``path`` stops on
    its first detection instead of nudging once, derived from the world's
    parameters.

    With the same seed the two harnesses agree on every task until its first
    detection; the candidate then stops it, the base nudges it, so the drop is
    P(a task's first loop is detected, the nudge frees it, and it then
    finishes within budget without looping again). Per model call the model
    loops with probability ``loop``, makes progress with probability ``p``
    (a productive call, or a transient error whose harness retry works;
    premature claims count as progress before ``premature_after`` of the work,
    then as a rejected claim), else wastes the call. A detected loop costs
    ``repeat_threshold`` calls; the nudge frees the model with probability
    ``escape_after_nudge`` and the freeing call is an ordinary draw. A task
    needs ``need`` productive calls (the rounded lognormal of
    :mod:`sim.world.difficulty`) within the calls the token budget allows
    (prompt of call k is prefix + k (output + tool result)) and the step
    budget. An exact dynamic programme over (calls, progress) per need."""
    s = load_scenario(path)
    w, h = s.world, s.harness
    p = w.policy
    p_early = 1 - p.loop - p.transient - p.validation + p.transient * w.retry_success
    p_late = p_early - p.premature
    per_call = w.tokens.output + w.tokens.tool_result
    calls = 1
    while cost.input_tokens(calls + 1, w.tokens.prefix, per_call) <= h.budgets.tokens:
        calls += 1
    calls = min(calls, h.budgets.steps or calls)
    repeat = h.detector.repeat_threshold
    drop = 0.0
    for need in range(1, 400):
        weight = need_cdf(w.difficulty, need) - need_cdf(w.difficulty, need - 1)
        if weight < 1e-12:
            continue
        half = int(need * p.premature_after)
        prog = np.array([p_early if k < half else p_late for k in range(need)])
        fresh = np.zeros(need)  # never looped, by progress
        fresh[0] = 1.0
        freed = np.zeros(need)  # freed by the nudge
        pending = [np.zeros(need) for _ in range(repeat)]
        for _ in range(calls):
            freed += pending.pop(0)
            pending.append(np.zeros(need))
            pending[-1] += fresh * p.loop * p.escape_after_nudge
            drop += weight * freed[-1] * prog[-1]
            fresh = _step(fresh, prog, p.loop)
            freed = _step(freed, prog, p.loop)
    return drop


def _step(mass: np.ndarray, prog: np.ndarray, loop: float) -> np.ndarray:
    """One model call: progress moves mass up one level (finishing leaves),
    waste keeps it, a loop removes it (handled by the caller)."""
    out = mass * (1 - prog - loop)
    out[1:] += mass[:-1] * prog[:-1]
    return out


def junit_cases(path: Path) -> dict[str, str]:
    """``{test case name: "failure" | "skipped" | "passed"}`` of a JUnit file."""
    root = ET.parse(path).getroot()
    cases = {}
    for case in root.iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "skipped", "error")]
        cases[case.get("name")] = kinds[0] if kinds else "passed"
    return cases


@pytest.fixture(scope="module")
def stop_first(tmp_path_factory):
    """``python -m sim compare bounded.yaml bounded_stop_first.yaml`` on
    10,000 tasks, JSON on stdout, results saved, JUnit written:
    (status, JSON, out folder)."""
    out = tmp_path_factory.mktemp("stop_first") / "report"
    status, stdout = run_cli("compare", "scenarios/bounded.yaml",
                             "scenarios/bounded_stop_first.yaml", "--tasks",
                             str(STOP_FIRST_TASKS), "--format", "json", "--quiet",
                             "--out", str(out), "--save-results",
                             "--junit", str(out.parent / "junit.xml"))
    return status, json.loads(stdout), out


@pytest.mark.slow
def test_stopping_on_the_first_detection_is_a_regression_of_the_succeeded_share(stop_first):
    """On 10,000 tasks: exit status 1; the comparison is paired (same seed);
    the succeeded share falls and needs_human:no_progress rises beyond the 1
    pp limit with tiny Holm-adjusted p-values; the cost checks fall, within
    their limits (stopped runs end early). The JUnit file has a failure for
    exactly the regressions and no skipped case."""
    status, data, out = stop_first
    assert status == 1 and data["regression"] and data["paired"]
    assert data["outcome"] == "regression" and data["exit_status"] == 1
    checks = {c["check"]: c for c in data["checks"]}
    assert checks["succeeded share"]["regression"] and checks["succeeded share"]["change"] < -1
    assert checks["needs_human:no_progress share"]["regression"]
    assert checks["succeeded share"]["p_adjusted"] < 1e-10
    assert not checks["mean cost"]["regression"] and checks["mean cost"]["change"] < 0
    assert checks["mean cost"]["status"] == "within"
    assert data["verdict"].startswith("regression: bounded: succeeded share fell")
    cases = junit_cases(out.parent / "junit.xml")
    failing = {f"bounded: {c['check']}" for c in data["checks"] if c["regression"]}
    assert {name for name, kind in cases.items() if kind == "failure"} == failing
    assert "skipped" not in cases.values() and len(cases) == len(data["checks"])


@pytest.mark.parametrize("tasks", [10, 100])
def test_few_tasks_of_a_real_regression_are_inconclusive_not_a_pass(tasks, tmp_path):
    """bounded vs stop_first on 10 or 100 tasks cannot show every check
    within its limit (the succeeded share's interval reaches past -1 pp) nor
    a significant regression: exit status 3, with the tasks that would
    decide it (more than were run); the JUnit file skips the undecided
    checks and fails none; the Markdown summary starts with the verdict."""
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    status, stdout = run_cli("compare", "scenarios/bounded.yaml",
                             "scenarios/bounded_stop_first.yaml", "--tasks", str(tasks),
                             "--format", "json", "--quiet", "--out", str(tmp_path / "out"),
                             "--resamples", "500", "--junit", str(junit),
                             "--summary-md", str(summary))
    data = json.loads(stdout)
    assert status == 3 and data["outcome"] == "inconclusive" and data["exit_status"] == 3
    assert data["tasks_to_decide"] > tasks
    checks = {c["check"]: c for c in data["checks"]}
    succeeded = checks["succeeded share"]
    assert succeeded["status"] == "inconclusive" and succeeded["ci_low"] < -1
    assert succeeded["tasks_to_decide"] > tasks
    cases = junit_cases(junit)
    assert "failure" not in cases.values()
    assert cases["bounded: succeeded share"] == "skipped"
    assert {n for n, k in cases.items() if k == "skipped"} == {
        f"bounded: {c['check']}" for c in data["checks"] if c["status"] == "inconclusive"}
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## ⚠️ inconclusive") and "tasks" in text


@pytest.mark.slow
def test_the_succeeded_share_falls_by_the_derived_amount(stop_first):
    """The drop matches the derivation (:func:`expected_stop_first_drop`,
    about 7 pp: half of the ~17% of runs whose first loop is detected, times
    the ~85% of freed runs that then finish) within Z standard errors of a
    paired difference, and the reported interval lies around the measured
    change with the paired standard error's width."""
    _, data, _ = stop_first
    expected = expected_stop_first_drop("scenarios/bounded.yaml")
    assert 0.06 < expected < 0.08
    row = next(o for o in data["outcomes"] if o["outcome"] == "succeeded")
    n = row["base_tasks"]
    change = row["change_pp"] / 100
    se = math.sqrt(abs(change) * (1 - abs(change)) / n)  # all discordance is one way
    assert abs(-change - expected) < Z * se
    assert row["ci_low_pp"] < row["change_pp"] < row["ci_high_pp"] < 0
    assert (row["ci_high_pp"] - row["ci_low_pp"]) / 100 == pytest.approx(2 * 1.96 * se, rel=0.2)


@pytest.mark.slow
def test_the_lost_successes_are_exactly_the_runs_the_nudge_rescued(stop_first):
    """Common random numbers make the comparison exact: the fall of the
    succeeded share equals the share of base runs that were nudged and then
    succeeded, task for task."""
    _, data, out = stop_first
    base = pd.read_parquet(out / "base" / "results.parquet")
    candidate = pd.read_parquet(out / "candidate" / "results.parquet")
    rescued = (base["nudges"] >= 1) & (base["outcome"] == "succeeded")
    lost = (base["outcome"] == "succeeded") & (candidate["outcome"] != "succeeded")
    assert rescued.equals(lost)
    row = next(o for o in data["outcomes"] if o["outcome"] == "succeeded")
    assert row["change_pp"] == pytest.approx(-100 * rescued.mean())


@pytest.mark.slow
def test_the_comparison_report_holds_tables_and_every_figure(stop_first):
    """report.md links every figure file; report.html embeds each one as a
    base64 PNG and fetches nothing; comparison.json equals the JSON printed."""
    _, data, out = stop_first
    pngs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert pngs == ["bounded_cost_ccdf.png", "bounded_steps.png", "outcomes.png",
                    "share_changes.png"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert all(f"(figures/{name})" in markdown for name in pngs)
    assert "McNemar" in markdown and "Stuart-Maxwell" in markdown and "REGRESSION" in markdown
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == len(pngs)
    assert "http://" not in page and "https://" not in page and "figures/" not in page
    assert json.loads((out / "comparison.json").read_text()) == data


@pytest.mark.slow
def test_results_folders_compare_like_their_scenarios(stop_first):
    """The saved results folders record their seed and resolved scenario;
    compared as folders they pair (same seed) and give the same outcome
    table and verdict (exit 1) as the scenarios did."""
    _, data, out = stop_first
    summary = json.loads((out / "base" / "summary.json").read_text())
    assert summary["provenance"]["scenario"]["name"] == "bounded"
    assert summary["provenance"]["tasks"] == STOP_FIRST_TASKS
    status, stdout = run_cli("compare", str(out / "base"), str(out / "candidate"),
                             "--format", "json", "--out", str(out.parent / "again"),
                             "--resamples", "200")
    again = json.loads(stdout)
    assert status == 1 and again["paired"] and "(seed 7)" in again["pairing"]
    assert again["outcomes"] == data["outcomes"]


@pytest.mark.slow
def test_a_folder_compared_with_itself_is_no_regression(stop_first):
    """Same 10,000 rows on both sides: every interval is inside its limit, exit status 0."""
    _, _, out = stop_first
    status, stdout = run_cli("compare", str(out / "base"), str(out / "base"), "--out",
                             str(out.parent / "same"), "--resamples", "200")
    assert status == 0 and "no regression" in stdout


@pytest.mark.slow
def test_folders_of_different_sizes_and_missing_folders_are_bad_input(stop_first, tmp_path):
    """Results folders with different task counts, a missing path, or a folder
    without results exit with status 2."""
    _, _, out = stop_first
    small = tmp_path / "small"
    small.mkdir()
    rows = pd.read_parquet(out / "base" / "results.parquet").head(100)
    rows.to_parquet(small / "results.parquet")
    (small / "summary.json").write_text((out / "base" / "summary.json").read_text())
    assert run_cli("compare", str(out / "base"), str(small), "--out", str(tmp_path / "o"))[0] == 2
    assert run_cli("compare", str(tmp_path / "nowhere"), str(small))[0] == 2
    (tmp_path / "empty").mkdir()
    assert run_cli("compare", str(tmp_path / "empty"), str(small))[0] == 2


# ------------------------------------------------- bounded against itself

@pytest.mark.slow
def test_bounded_against_itself_under_another_seed_is_no_regression(tmp_path):
    """Two seeds are two independent samples of the same harness: on 50,000
    tasks a side the comparison is unpaired (and says so) and shows every
    check within its limit (its 95% interval inside it): exit 0, and a
    JUnit file where every check passes."""
    out, junit = tmp_path / "self", tmp_path / "junit.xml"
    status, stdout = run_cli("compare", "scenarios/bounded.yaml", "scenarios/bounded.yaml",
                             "--candidate-set", "seed=8", "--tasks", str(SELF_TASKS),
                             "--quiet", "--out", str(out), "--resamples", "1000",
                             "--junit", str(junit), "--summary-md", str(tmp_path / "s.md"))
    assert status == 0 and "verdict: no regression" in stdout
    assert "unpaired: the sides ran different seeds (7 and 8)" in stdout
    data = json.loads((out / "comparison.json").read_text())
    assert data["outcome"] == "no regression" and all(c["within"] for c in data["checks"])
    succeeded = next(c for c in data["checks"] if c["check"] == "succeeded share")
    assert -1 < succeeded["ci_low"] < succeeded["ci_high"]
    assert set(junit_cases(junit).values()) == {"passed"}
    assert (tmp_path / "s.md").read_text(encoding="utf-8").startswith("## ✅ no regression")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "**unpaired**" in report and "Fisher" in report and "chi-square" in report
    assert report.startswith("# Comparison: bounded: seed: 7 -> 8\n")  # what changed


def test_identical_sides_of_few_tasks_are_inconclusive_and_of_many_no_regression():
    """The same rows on both sides: with 100 tasks an unchanged share's
    paired interval still reaches beyond 1 pp (100 pairs cannot rule out a
    1 pp drop), so the verdict is inconclusive; with 20,000 it is inside the
    limit: no regression."""
    few = synthetic_rows(100, 12)
    result = compare_sides(side(few, "a"), side(few, "b"), FAST)
    assert result.outcome == "inconclusive" and result.exit_status == 3
    assert result.tasks_to_decide > 100
    many = synthetic_rows(20_000, 12)
    result = compare_sides(side(many, "a"), side(many, "b"), FAST)
    assert result.outcome == "no regression" and result.exit_status == 0


# ------------------------------------------------------- multi-cell, CLI

GRID = """\
name: grid
tasks: 60
seed: 3
harness:
  prices: seed001
  budgets: {tokens: 2000000, steps: 50}
  verifier: {name: oracle}
sweep:
  harness.detector.nudges: %s
"""


def test_multi_cell_scenarios_compare_cell_by_cell_and_mismatches_exit_2(tmp_path):
    """Two grids with the same cells compare cell by cell (one outcome table
    per cell; 60 tasks a cell decide nothing: exit 3); grids whose cells
    differ are bad input (status 2)."""
    a, b, c = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    a.write_text(GRID % "[0, 1]")
    b.write_text(GRID % "[0, 1]" + "  harness.budgets.steps: [20]\n")
    c.write_text(GRID % "[1, 2]")
    status, stdout = run_cli("compare", str(a), str(a), "--format", "json", "--quiet",
                             "--out", str(tmp_path / "ab"), "--resamples", "200",
                             "--set", "harness.budgets.steps=30")
    data = json.loads(stdout)
    assert status == 3 and [c["base"] for c in data["cells"]] == ["nudges=0", "nudges=1"]
    assert {o["cell"] for o in data["outcomes"]} == {"nudges=0", "nudges=1"}
    assert run_cli("compare", str(a), str(b), "--quiet", "--out", str(tmp_path / "x"))[0] == 2
    assert run_cli("compare", str(a), str(c), "--quiet", "--out", str(tmp_path / "y"))[0] == 2


@pytest.mark.parametrize("flags", [["--tasks", "0"], ["--workers", "0"], ["--alpha", "2"],
                                   ["--max-share-drop", "-1"], ["--pairing", "paired",
                                                                "--candidate-set", "tasks=30"]])
def test_bad_options_exit_2(flags, tmp_path):
    """Out-of-range options, and pairing sides that ran different task sets, exit 2."""
    status, _ = run_cli("compare", "scenarios/bounded.yaml", "scenarios/bounded.yaml",
                        "--tasks", "20", "--quiet", "--out", str(tmp_path), *flags)
    assert status == 2


def test_example_report_is_committed_small_and_without_rows():
    """reports/examples/stop_first holds the CLI's report (no Parquet), under 1 MB."""
    folder = Path("reports/examples/stop_first")
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"report.md", "report.html", "comparison.json"} <= names
    assert not any(name.endswith(".parquet") for name in names)
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < 1_000_000
    data = json.loads((folder / "comparison.json").read_text())
    assert data["regression"] and data["paired"]


@pytest.mark.parametrize("alpha", [1e-16, 5e-324, 0.0, 1.0])
def test_a_level_no_normal_quantile_reaches_is_refused(alpha: float) -> None:
    """A family-wise level below 1e-9 (below about 1e-16 no normal quantile
    exists: the critical values raised) or outside (0, 1) is an InputError."""
    from sim.analysis.comparison import Thresholds

    with pytest.raises(InputError, match="alpha must be in"):
        Thresholds(alpha=alpha).validate()
    assert Thresholds(alpha=1e-9).validate().alpha == 1e-9


def test_a_limit_of_the_smallest_float_is_undecidable_without_an_overflow_warning():
    """A limit of 5e-324 pp (or %): no finite number of tasks decides it.
    Planning the tasks divided an interval by the limit, overflowing with a
    RuntimeWarning on stderr; now an unchanged share is inconclusive with no
    plan, and no warning."""
    import warnings

    rows = synthetic_rows(200, 3)
    tiny = Thresholds(max_share_drop_pp=5e-324, max_cost_rise_pct=5e-324, resamples=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare_sides(side(rows, "a"), side(rows, "b"), tiny)
    assert result.outcome == "inconclusive" and result.exit_status == 3
    share = result.checks.iloc[0]
    assert share["change"] == 0 and share["ci_high"] > 0 and share["status"] == "inconclusive"
    assert result.checks["tasks_to_decide"].isna().all()
