"""Comparisons of two harness settings: did the candidate move outcomes or cost?

Input is two sets of per-task rows (the columns of
:class:`~sim.task_record.TaskRecord`), one per side, cells matched by name; output
is a :class:`Comparison` holding DataFrames and a verdict. Nothing here runs a
simulation (see :func:`sim.api.compare`) or writes a file (see
:mod:`sim.output.html`).

**Paired or unpaired.** Task ``i`` of a cell draws from the ``i``-th child of
the root seed, so with the same seed task ``i`` is the same task on both sides
(common random numbers) and rows pair up by (cell, task index). Paired tests
use only the tasks whose outcome changed, which is why they detect small
effects that independent samples of the same size cannot. With different
seeds or different task sets the sides are independent samples and the
unpaired tests below are used instead; the report says which. Every test
treats tasks as independent of each other, which holds for the direct engine;
in a DES cell tasks share capacity (queues, rate limits), so its intervals
are somewhat optimistic about time-related effects.

Outcome shares (shares in [0, 1]; changes in percentage points):

* interval of the change: Newcombe's hybrid score interval built from the two
  95% Wilson intervals of :func:`sim.analysis.stats.share_ci`, with the correlation of
  the paired indicators (Newcombe 1998, paired data, method 10) or without it
  (independent samples, method 10 of the companion paper);
* test of one outcome (succeeded, or one failure outcome): paired, McNemar's
  exact test, a two-sided binomial test of the discordant pairs against 1/2
  (:func:`scipy.stats.binomtest`); unpaired, Fisher's exact test on the 2x2
  table;
* test of the whole outcome distribution: paired, the Stuart-Maxwell test of
  marginal homogeneity (McNemar's test generalised to K outcomes). The usual
  chi-square test of a 2 x K table assumes two independent samples: on paired
  runs, where most tasks end the same way on both sides, it ignores that
  agreement and is far too conservative. Unpaired, the chi-square test of
  homogeneity of the 2 x K table (:func:`scipy.stats.chi2_contingency`).

Steps, prompt tokens, output tokens and cost: mean, p50, p95 and max per side
(:mod:`sim.analysis.stats`' percentile definition), and percentile-bootstrap intervals
of the change in mean, p50 and p95 (:func:`scipy.stats.bootstrap`, resampling
tasks in pairs when paired, each side alone otherwise, from a fixed seed so a
report is reproducible). The max gets no interval: the bootstrap cannot
estimate the sampling distribution of an extreme.

**Verdict.** Each check has a limit: the succeeded share may fall, and each
failure outcome's share may rise, by at most ``max_share_drop_pp``
percentage points; the mean and the p95 cost may rise by at most
``max_cost_rise_pct`` percent. Each check ends in one of three states:

* **regression**: its change passes the limit in the bad direction and its
  p-value, adjusted by Holm's method over every check of the comparison
  (every cell), is below ``alpha``, so a release with no effect is flagged
  with probability at most ``alpha`` however many outcomes and cells there
  are (p-values of cost changes come from the bootstrap distribution of
  their intervals);
* **within its limit**: its (1 - alpha) interval lies inside the limit on
  the bad side (the interval's upper end for a rise, its lower end for the
  succeeded share's fall): a one-sided non-inferiority test at level
  ``alpha / 2``, the equivalence test of "no regression";
* **inconclusive**: neither, because the tasks are too few to tell.

The comparison is a **regression** (exit status 1) when any check is one;
**no regression** (exit 0) only when every check is within its limit (an
intersection-union test: each at ``alpha / 2``, no adjustment needed, since
all must pass); otherwise **inconclusive** (exit 3): a green light needs
evidence, and few tasks give none.

**Tasks that would decide.** For each inconclusive check, assuming the true
change is the one measured and that interval half-widths shrink as
``1 / sqrt(n)`` (both sides growing together, paired or not), the tasks per
cell on each side that give the check power ``POWER`` (80%) to decide it:
``n * ((z_{1 - alpha/2} + z_POWER) / z_{1 - alpha/2} * h / d)^2`` for ``n``
tasks now, ``h`` the interval's half-width on the side facing the limit and
``d`` the distance from the measured change to the limit (the interval then
excludes the limit: within it when the change is inside, beyond it when
outside). The comparison needs the largest of these; a change at its limit
(or needing more than ``MAX_TASKS_TO_DECIDE`` tasks) cannot be decided by
more tasks in practice (reported as None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from sim.analysis import frames, stats
from sim.analysis.bootstrap import BOOTSTRAP_SEED, bootstrap_changes
from sim.analysis.comparison import (
    EXIT_STATUS,
    INCONCLUSIVE,
    MAX_TASKS_TO_DECIDE,
    METRICS,
    PAIRINGS,
    POWER,
    REGRESSION,
    ROW_COLUMNS,
    STATS,
    WITHIN,
    Comparison,
    Side,
    Thresholds,
    check_sentence,
    format_p,
)
from sim.analysis.significance import (
    chi_square_homogeneity,
    fisher_exact,
    holm,
    mcnemar_exact,
    newcombe_interval,
    stuart_maxwell,
)
from sim.bad_input import InputError
from sim.harness.state import SUCCEEDED

__all__ = [
    "BOOTSTRAP_SEED", "EXIT_STATUS", "INCONCLUSIVE", "MAX_TASKS_TO_DECIDE", "METRICS",
    "PAIRINGS", "POWER", "REGRESSION", "ROW_COLUMNS", "STATS", "WITHIN", "Comparison", "Side",
    "Thresholds", "bootstrap_changes", "check_sentence", "chi_square_homogeneity",
    "compare_sides", "decide_pairing", "fisher_exact", "format_p", "holm", "match_cells",
    "mcnemar_exact", "newcombe_interval", "stuart_maxwell"]

__test__ = {"newcombe_interval": newcombe_interval, "holm": holm}
"""The examples of the primitives this module re-exports run with its doctests."""


def match_cells(base: Side, candidate: Side) -> tuple[tuple[str, str], ...]:
    """Cell pairs: one cell each (whatever their names), else the same cell
    names on both sides (in the base's order); anything else is an InputError."""
    if len(base.cells) == 1 and len(candidate.cells) == 1:
        return ((base.cells[0], candidate.cells[0]),)
    if set(base.cells) != set(candidate.cells):
        only_b = sorted(set(base.cells) - set(candidate.cells))
        only_c = sorted(set(candidate.cells) - set(base.cells))
        raise InputError(
            f"the cells do not match by name: only in the base {only_b}, only in the "
            f"candidate {only_c} (multi-cell comparisons pair cells by name)")
    return tuple((name, name) for name in base.cells)


def decide_pairing(base: Side, candidate: Side, pairs: Sequence[tuple[str, str]],
                   pairing: str = "auto") -> tuple[bool, str]:
    """``(paired, note)``. ``auto`` pairs when every matched cell has the same
    task indices on both sides and the sides ran on the same task streams:
    equal seeds when both are known, else (a results folder records no seed)
    the same hidden ground truth for every task. ``paired`` insists on it
    (InputError when task indices differ), ``unpaired`` never pairs."""
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    same_tasks = all(
        np.array_equal(base.cell_rows(b)["task"].to_numpy(),
                       candidate.cell_rows(c)["task"].to_numpy()) for b, c in pairs)
    if pairing == "unpaired":
        return False, "unpaired (asked for): the sides are treated as independent samples"
    recorded = _recorded_pairing(base, candidate, pairs, pairing)
    if recorded is not None:
        return recorded
    if not same_tasks:
        if pairing == "paired":
            raise InputError("cannot pair: the sides ran different task indices")
        return False, ("unpaired: the sides ran different task sets, so tasks do not pair; "
                       "independent-sample tests are used")
    if pairing == "paired":
        return True, "paired (asked for): task i of each cell is compared with task i"
    if base.seed is not None and candidate.seed is not None:
        if base.seed == candidate.seed:
            return True, (f"paired: both sides ran the same task streams (seed {base.seed}), so "
                          "task i is the same task on both sides (common random numbers)")
        return False, (f"unpaired: the sides ran different seeds ({base.seed} and "
                       f"{candidate.seed}), so tasks do not pair; independent-sample tests "
                       "are used")
    same_truth = all(
        np.array_equal(base.cell_rows(b)["ground_truth"].to_numpy(),
                       candidate.cell_rows(c)["ground_truth"].to_numpy()) for b, c in pairs)
    if same_truth:
        return True, ("paired: every task has the same hidden ground truth on both sides, so "
                      "they ran the same task streams (common random numbers)")
    return False, ("unpaired: the tasks' hidden ground truth differs between the sides "
                   "(different seeds or task distributions); independent-sample tests "
                   "are used")


def _recorded_pairing(base: Side, candidate: Side, pairs: Sequence[tuple[str, str]],
                      pairing: str) -> tuple[bool, str] | None:
    """Pairing when a side replays recorded runs (its rows have a ``run_id``
    column, :mod:`sim.output.replay`): paired when both replayed the same runs
    in the same order; a replay and a simulation never pair. None when
    neither side is a replay."""
    replays = ["run_id" in side.rows.columns for side in (base, candidate)]
    if not any(replays):
        return None
    if all(replays) and all(
            base.cell_rows(b)["run_id"].astype(str).tolist()
            == candidate.cell_rows(c)["run_id"].astype(str).tolist() for b, c in pairs):
        return True, ("paired: both sides replayed the same recorded runs, so task i is the "
                      "same run on both sides")
    why = ("the sides replayed different recorded runs" if all(replays) else
           "one side replays recorded runs and the other simulates tasks")
    if pairing == "paired":
        raise InputError(f"cannot pair: {why}")
    return False, f"unpaired: {why}, so tasks do not pair; independent-sample tests are used"


def compare_sides(base: Side, candidate: Side, thresholds: Thresholds | None = None, *,
                  pairing: str = "auto") -> Comparison:
    """Compare ``candidate`` against ``base`` cell by cell (see the module
    docstring for the statistics and the verdict)."""
    thresholds = (thresholds or Thresholds()).validate()
    pairs = match_cells(base, candidate)
    paired, note = decide_pairing(base, candidate, pairs, pairing)
    level = 1 - thresholds.alpha
    outcomes, metrics, tests, checks = [], [], [], []
    for b_name, c_name in pairs:
        b_rows, c_rows = base.cell_rows(b_name), candidate.cell_rows(c_name)
        cell_outcomes = _outcome_table(b_name, b_rows, c_rows, paired, level)
        outcomes.append(cell_outcomes)
        tests.append(_distribution_test(b_name, b_rows, c_rows, paired))
        cell_metrics = _metric_table(b_name, b_rows, c_rows, paired, thresholds.resamples,
                                     level)
        metrics.append(cell_metrics)
        checks.extend(_checks(b_name, cell_outcomes, cell_metrics, thresholds))
    check_frame = pd.DataFrame(checks)
    check_frame["p_adjusted"] = holm(check_frame["p_value"].tolist())
    check_frame["regression"] = (check_frame["beyond_threshold"] == "worse") & (
        check_frame["p_adjusted"] < thresholds.alpha)
    check_frame["improvement"] = (check_frame["beyond_threshold"] == "better") & (
        check_frame["p_adjusted"] < thresholds.alpha)
    check_frame = _decide(check_frame, thresholds.alpha)
    columns = ["cell", "check", "change", "unit", "threshold", "ci_low", "ci_high", "p_value",
               "p_adjusted", "test", "beyond_threshold", "regression", "improvement", "within",
               "status", "tasks_to_decide"]
    return Comparison(base, candidate, tuple(pairs), paired, note, thresholds,
                      pd.concat(outcomes, ignore_index=True),
                      pd.concat(metrics, ignore_index=True),
                      pd.DataFrame(tests), check_frame[columns])


def _outcome_order(b_rows: pd.DataFrame, c_rows: pd.DataFrame) -> list[str]:
    """Outcomes seen on either side: succeeded first, then by base count, candidate
    count (descending) and name."""
    b = b_rows["outcome"].value_counts()
    c = c_rows["outcome"].value_counts()
    names = set(b.index) | set(c.index) | {SUCCEEDED}
    return sorted(names, key=lambda o: (o != SUCCEEDED, -b.get(o, 0), -c.get(o, 0), o))


def _outcome_table(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool,
                   level: float) -> pd.DataFrame:
    n1, n2 = len(b_rows), len(c_rows)
    b_out, c_out = b_rows["outcome"].to_numpy(), c_rows["outcome"].to_numpy()
    rows = []
    for outcome in _outcome_order(b_rows, c_rows):
        in_b, in_c = b_out == outcome, c_out == outcome
        k1, k2 = int(in_b.sum()), int(in_c.sum())
        if paired:
            both = int((in_b & in_c).sum())
            low, high = newcombe_interval(k1, k2, n1, n2, both=both, level=level)
            p, test = mcnemar_exact(k1 - both, k2 - both), "McNemar exact"
        else:
            low, high = newcombe_interval(k1, k2, n1, n2, level=level)
            p, test = fisher_exact(k1, n1, k2, n2), "Fisher exact"
        rows.append({"cell": cell, "outcome": outcome, "base_tasks": n1, "base_count": k1,
                     "base_share": k1 / n1, "candidate_tasks": n2, "candidate_count": k2,
                     "candidate_share": k2 / n2, "change_pp": 100 * (k2 / n2 - k1 / n1),
                     "ci_low_pp": 100 * low, "ci_high_pp": 100 * high, "p_value": p,
                     "test": test})
    return pd.DataFrame(rows)


def _distribution_test(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool
                       ) -> dict[str, Any]:
    names = _outcome_order(b_rows, c_rows)
    if paired:
        table = pd.crosstab(pd.Categorical(b_rows["outcome"], names),
                            pd.Categorical(c_rows["outcome"], names), dropna=False)
        statistic, df, p = stuart_maxwell(table.to_numpy())
        test = "Stuart-Maxwell (paired marginal homogeneity)"
    else:
        b = b_rows["outcome"].value_counts()
        c = c_rows["outcome"].value_counts()
        statistic, df, p = chi_square_homogeneity([int(b.get(o, 0)) for o in names],
                                                  [int(c.get(o, 0)) for o in names])
        test = "chi-square homogeneity (independent samples)"
    return {"cell": cell, "test": test, "statistic": statistic, "df": df, "p_value": p}


def _metric_table(cell: str, b_rows: pd.DataFrame, c_rows: pd.DataFrame, paired: bool,
                  resamples: int, level: float) -> pd.DataFrame:
    rows = []
    for column, _label in METRICS:
        b = b_rows[column].to_numpy()
        c = c_rows[column].to_numpy()
        db, dc = stats.describe(b), stats.describe(c)
        low, high, p = bootstrap_changes(b, c, paired=paired, resamples=resamples, level=level,
                                         relative=True)
        for i, stat in enumerate(STATS):
            change = dc[stat] - db[stat]
            rows.append({
                "cell": cell, "metric": column, "stat": stat, "base": float(db[stat]),
                "candidate": float(dc[stat]), "change": float(change),
                "change_pct": 100 * change / db[stat] if db[stat] else (
                    0.0 if change == 0 else math.inf),
                "ci_low": float(low[i]) if i < 3 else math.nan,
                "ci_high": float(high[i]) if i < 3 else math.nan,
                "ci_low_pct": float(low[i + 3]) if i < 3 else math.nan,
                "ci_high_pct": float(high[i + 3]) if i < 3 else math.nan,
                "p_value": float(p[i]) if i < 3 else math.nan})
    return pd.DataFrame(rows)


def _checks(cell: str, outcomes: pd.DataFrame, metrics: pd.DataFrame, t: Thresholds
            ) -> list[dict[str, Any]]:
    """The checks of one cell: each outcome's share, then mean and p95 cost.
    ``bad`` is +1 when a rise is bad, -1 when a fall is (the succeeded
    share); ``tasks`` the larger side's tasks."""
    out = []
    for row in outcomes.to_dict("records"):
        change = row["change_pp"]
        bad = -1 if row["outcome"] == SUCCEEDED else 1
        worse, better = bad * change > t.max_share_drop_pp, -bad * change > t.max_share_drop_pp
        out.append({"cell": cell, "check": f"{row['outcome']} share", "change": change,
                    "unit": "pp", "threshold": t.max_share_drop_pp,
                    "ci_low": row["ci_low_pp"], "ci_high": row["ci_high_pp"],
                    "p_value": row["p_value"], "test": row["test"],
                    "beyond_threshold": _beyond(worse, better), "bad": bad,
                    "tasks": max(row["base_tasks"], row["candidate_tasks"])})
    cost = metrics[metrics["metric"] == "cost_usd"].set_index("stat")
    tasks = int(outcomes["base_tasks"].iloc[0]), int(outcomes["candidate_tasks"].iloc[0])
    for stat in ("mean", "p95"):
        stat_row = frames.row(cost, stat)
        change = float(stat_row["change_pct"])
        worse, better = change > t.max_cost_rise_pct, -change > t.max_cost_rise_pct
        out.append({"cell": cell, "check": f"{stat} cost", "change": change, "unit": "%",
                    "threshold": t.max_cost_rise_pct, "ci_low": float(stat_row["ci_low_pct"]),
                    "ci_high": float(stat_row["ci_high_pct"]),
                    "p_value": float(stat_row["p_value"]),
                    "test": "bootstrap", "beyond_threshold": _beyond(worse, better), "bad": 1,
                    "tasks": max(tasks)})
    return out


def _decide(checks: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The checks with ``within``, ``status`` and ``tasks_to_decide`` added
    (see the module docstring) and the helper columns ``bad`` and ``tasks``
    dropped."""
    z = scipy_stats.norm.ppf(1 - alpha / 2)
    factor = (z + scipy_stats.norm.ppf(POWER)) / z
    within, status, needs = [], [], []
    for row in checks.to_dict("records"):
        bad, limit = row["bad"], row["threshold"]
        # the change and its interval in the bad direction: larger is worse
        d = bad * row["change"]
        low, high = sorted((bad * row["ci_low"], bad * row["ci_high"]))
        inside = bool(math.isfinite(high) and high <= limit)
        within.append(inside)
        if row["regression"]:
            status.append(REGRESSION)
        elif inside:
            status.append(WITHIN)
        else:
            status.append(INCONCLUSIVE)
        need = None
        if status[-1] == INCONCLUSIVE and math.isfinite(d):
            half, distance = (high - d, limit - d) if d <= limit else (d - low, d - limit)
            # a half-width a million times the distance needs 10^12 times the
            # tasks: past MAX_TASKS_TO_DECIDE (and no overflow on a tiny limit)
            if distance > 0 and math.isfinite(half) and 0 < half <= distance * 1e6:
                planned = row["tasks"] * (factor * half / distance) ** 2
                need = _round_up(planned) if planned <= MAX_TASKS_TO_DECIDE else None
        needs.append(need)
    checks["within"] = within
    checks["status"] = status
    checks["tasks_to_decide"] = pd.array(needs, dtype="Int64")
    return checks.drop(columns=["bad", "tasks"])


def _round_up(n: float) -> int:
    """``n`` rounded up to two significant figures (a planning number)."""
    n = max(1, math.ceil(n))
    scale = 10 ** max(0, len(str(n)) - 2)
    return -(-n // scale) * scale


def _beyond(worse: bool, better: bool) -> str:
    return "worse" if worse else "better" if better else ""
