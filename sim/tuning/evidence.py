"""One candidate's row of the frontier, every number with its 95% interval.

Given, per run (a recorded run replayed, or a simulated task on common random
numbers), whether it succeeded under the harness in force and under the
candidate, and the candidate's cost (USD), active time (seconds) and outcome:

- **successes lost**: the runs that succeeded in force and not under the
  candidate, as a share of those that succeeded in force (``lost`` /
  ``base_successes``), with its 95% Wilson interval
  (:func:`sim.analysis.stats.share_ci`); ``kept_share`` is one minus it.
  The interval reaches past the runs at hand: it says how many successes the
  setting would lose on future runs like these. A setting passes
  ``--keep-successes K`` when the interval's upper end is at most ``1 - K``;
- **gained**: runs that succeed only under the candidate (a looser
  forecast);
- **cost** (USD per run: mean and p95, :mod:`sim.analysis.stats`' percentile)
  and **time** (mean active seconds per run), with percentile-bootstrap
  intervals (:func:`scipy.stats.bootstrap`, fixed seed), and the mean
  **saving** per run against the harness in force (paired bootstrap);
- **stopped by reason**: the share of runs ending in each
  ``budget_exhausted:*`` or ``needs_human:*`` outcome, with Wilson intervals.

``method`` labels every number of the row: ``replayed`` (exact on the
recorded runs) or ``forecast`` (the calibrated world's, with its ``fidelity``).
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from sim.analysis import stats

BOOTSTRAP_SEED = 20_261_201
RESAMPLES = 999
BATCH_VALUES = 4_000_000
"""Resampled values a bootstrap holds at once (beyond it, resamples are drawn
a batch at a time: the generator gives the same draws in order, so the
interval is the same; 32 MB of float64 instead of 800 MB at 100,000 runs)."""
LEVEL = 0.95
STOPPING = ("budget_exhausted:", "needs_human:")
_RNG = "rng" if "rng" in inspect.signature(scipy_stats.bootstrap).parameters else "random_state"
"""scipy's name of the bootstrap's generator argument (``rng`` since 1.15)."""
"""Outcome prefixes counted as runs stopped by the harness."""


def _p95(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The p95 along ``axis`` in :mod:`sim.analysis.stats`' definition (the
    value of that rank in sorted order, found by a partition: the same value,
    without sorting each of a bootstrap's resamples whole)."""
    n = x.shape[axis]
    k = stats.rank(0.95, n)
    out: np.ndarray = np.take(np.partition(x, k, axis=axis), k, axis=axis)
    return out


_KEPT = 4096
"""Intervals :func:`_interval` remembers (the most recent first out)."""
_INTERVALS: dict[tuple[str, bytes], tuple[float, float]] = {}


def _interval(values: np.ndarray, statistic: Any) -> tuple[float, float]:
    """Percentile-bootstrap 95% interval of ``statistic`` of ``values``
    (:func:`_intervals` of one)."""
    return _intervals([(values, statistic)])[0]


def _intervals(wanted: list[tuple[np.ndarray, Any]]) -> list[tuple[float, float]]:
    """Percentile-bootstrap 95% interval of each ``statistic`` of its
    ``values`` (``wanted``: pairs, the values all of one size).

    The bootstrap's draws depend only on the seed and the number of values,
    so every interval of a row is drawn from the same resamples, and the
    interval of the same values is always the same: it is remembered, by a
    digest of the values' bytes, and found again for another candidate whose
    runs cost the same (a joint setting that stops the runs one knob alone
    stops, the harness in force's neighbours). The intervals not remembered
    are computed by one paired bootstrap of their values (the same draws
    gathered from each; a statistic of the stacked intervals), which gives
    each the interval its own bootstrap gives (test_tune_scale.py)."""
    arrays = [np.ascontiguousarray(v, dtype=float) for v, _ in wanted]
    keys = [(statistic.__name__, hashlib.blake2b(v.tobytes(), digest_size=20).digest())
            for v, (_, statistic) in zip(arrays, wanted, strict=True)]
    out: list[tuple[float, float] | None] = [_INTERVALS.get(k) for k in keys]
    missing = [i for i, found in enumerate(out) if found is None
               and not _degenerate(arrays[i])]
    if len(missing) > 1:
        for i, pair in zip(missing, _paired([(arrays[i], wanted[i][1]) for i in missing]),
                           strict=True):
            out[i] = pair
    done: list[tuple[float, float]] = []
    for i, known in enumerate(out):
        interval = known if known is not None else _bootstrap(arrays[i], wanted[i][1])
        if keys[i] not in _INTERVALS:
            _INTERVALS[keys[i]] = interval
            if len(_INTERVALS) > _KEPT:
                del _INTERVALS[next(iter(_INTERVALS))]
        done.append(interval)
    return done


def _degenerate(values: np.ndarray) -> bool:
    """Fewer than two values, or all equal: the interval is the point."""
    return values.size < 2 or float(values.min()) == float(values.max())


def _paired(wanted: list[tuple[np.ndarray, Any]]) -> list[tuple[float, float]]:
    """:func:`_bootstrap` of each pair, from one paired bootstrap."""
    samples: list[np.ndarray] = []
    where: list[int] = []
    for values, _ in wanted:
        found = next((k for k, v in enumerate(samples) if v is values), None)
        if found is None:
            samples.append(values)
            found = len(samples) - 1
        where.append(found)

    def statistic(*resampled: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.stack([f(resampled[k], axis=axis)
                         for k, (_, f) in zip(where, wanted, strict=True)])

    n = samples[0].size
    options: dict[str, Any] = {_RNG: np.random.default_rng(BOOTSTRAP_SEED)}
    if n * RESAMPLES * len(samples) > BATCH_VALUES:  # the same draws, a batch at a time
        options["batch"] = max(1, BATCH_VALUES // (n * len(samples)))
    result = scipy_stats.bootstrap(
        tuple(samples), statistic, vectorized=True, paired=True, n_resamples=RESAMPLES,
        confidence_level=LEVEL, method="percentile", **options)
    ci = result.confidence_interval
    low, high = np.asarray(ci.low, dtype=float), np.asarray(ci.high, dtype=float)
    return [(float(a), float(b)) for a, b in zip(low, high, strict=True)]


def _bootstrap(values: np.ndarray, statistic: Any) -> tuple[float, float]:
    """:func:`_interval`, computed."""
    if _degenerate(values):
        point = float(statistic(values[None, :], axis=-1)[0]) if values.size else math.nan
        return point, point
    options: dict[str, Any] = {_RNG: np.random.default_rng(BOOTSTRAP_SEED)}
    if values.size * RESAMPLES > BATCH_VALUES:  # the same draws, a batch of resamples at a time
        options["batch"] = max(1, BATCH_VALUES // values.size)
    result = scipy_stats.bootstrap(
        (values,), statistic, vectorized=True, n_resamples=RESAMPLES, confidence_level=LEVEL,
        method="percentile", **options)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


_INTERVAL_KEYS = (("cost_mean_low", "cost_mean_high"), ("cost_p95_low", "cost_p95_high"),
                  ("time_low", "time_high"), ("saved_low", "saved_high"))
"""A row's interval fields, in the order of :func:`row`'s intervals."""
PENDING = "_intervals"
"""The key of a row whose intervals are left to :func:`fill_intervals`: the
values and statistics they are drawn from."""


def row(*, base_success: np.ndarray, success: np.ndarray, cost: np.ndarray,
        base_cost: np.ndarray, time_s: np.ndarray, outcomes: Iterable[str] | Mapping[str, int],
        method: str, fidelity: str = "", intervals: bool = True) -> dict[str, Any]:
    """The frontier row of one candidate (see the module docstring).
    ``outcomes``: each run's, or the runs per outcome. ``intervals``: False
    leaves the bootstrap intervals NaN and the row holds what they are drawn
    from (key :data:`PENDING`) for :func:`fill_intervals`."""
    base_success = np.asarray(base_success, dtype=bool)
    success = np.asarray(success, dtype=bool)
    cost = np.asarray(cost, dtype=float)
    base_cost = np.asarray(base_cost, dtype=float)
    time_s = np.asarray(time_s, dtype=float)
    n = int(base_success.size)
    base_k = int(base_success.sum())
    lost = int((base_success & ~success).sum())
    gained = int((~base_success & success).sum())
    if base_k:
        lost_low, lost_high = stats.share_ci(lost, base_k, LEVEL)
        lost_share = lost / base_k
    else:
        lost_low, lost_high, lost_share = 0.0, 1.0, math.nan
    saved = base_cost - cost
    wanted = [(cost, np.mean), (cost, _p95), (time_s, np.mean), (saved, np.mean)]
    (mean_low, mean_high), (p95_low, p95_high), (time_low, time_high), (
        saved_low, saved_high) = (_intervals(wanted) if intervals
                                  else [(math.nan, math.nan)] * len(wanted))
    counts = (Counter({o: k for o, k in outcomes.items() if k and o.startswith(STOPPING)})
              if isinstance(outcomes, Mapping)
              else Counter(o for o in outcomes if o.startswith(STOPPING)))
    stopped = {}
    for outcome, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        low, high = stats.share_ci(k, n, LEVEL)
        stopped[outcome] = {"runs": k, "share": k / n, "low": low, "high": high}
    out = {
        "method": method, "runs": n, "base_successes": base_k,
        "successes": int(success.sum()), "lost": lost, "gained": gained,
        "lost_share": lost_share, "lost_low": lost_low, "lost_high": lost_high,
        "kept_share": 1.0 - lost_share if base_k else math.nan,
        "cost_mean": stats.cost_summary(cost)["mean"], "cost_mean_low": mean_low,
        "cost_mean_high": mean_high, "cost_p95": float(_p95(cost[None, :])[0]),
        "cost_p95_low": p95_low, "cost_p95_high": p95_high,
        "saved_mean": float(np.mean(saved)), "saved_low": saved_low, "saved_high": saved_high,
        "time_mean": float(np.mean(time_s)), "time_low": time_low, "time_high": time_high,
        "stopped_runs": int(sum(counts.values())), "stopped": stopped, "fidelity": fidelity,
    }
    if not intervals:
        out[PENDING] = wanted
    return out


def fill_intervals(rows: Iterable[dict[str, Any]], workers: int = 1) -> None:
    """Write the bootstrap intervals of every row left without them
    (:func:`row` with ``intervals=False``) into it, and drop its
    :data:`PENDING` values: each the interval :func:`_intervals` gives
    (remembered intervals found again, the others drawn by paired
    bootstraps), spread over ``workers`` forked processes when there are
    several to draw (each interval is its own bootstrap's whatever it is
    drawn with: the same values)."""
    waiting = [r for r in rows if PENDING in r]
    wanted = [pair for r in waiting for pair in r.pop(PENDING)]
    arrays = [np.ascontiguousarray(v, dtype=float) for v, _ in wanted]
    keys = [(f.__name__, hashlib.blake2b(v.tobytes(), digest_size=20).digest())
            for v, (_, f) in zip(arrays, wanted, strict=True)]
    todo: dict[tuple[str, bytes], tuple[np.ndarray, Any]] = {}
    known: dict[tuple[str, bytes], tuple[float, float]] = {}  # held here: drawing may evict
    for key, v, (_, f) in zip(keys, arrays, wanted, strict=True):
        if key in _INTERVALS:
            known[key] = _INTERVALS[key]
        elif key not in todo:
            todo[key] = (v, f)
    by_size: dict[int, list[tuple[str, bytes]]] = {}
    for key, (v, _) in todo.items():  # a paired bootstrap draws values of one size
        by_size.setdefault(v.size, []).append(key)
    for same in by_size.values():
        found = _drawn([todo[k] for k in same], workers)
        for key, interval in zip(same, found, strict=True):
            _INTERVALS[key] = known[key] = interval
    done = [known[k] for k in keys]
    for i, r in enumerate(waiting):
        for (low, high), interval in zip(_INTERVAL_KEYS, done[4 * i:4 * i + 4], strict=True):
            r[low], r[high] = interval
    while len(_INTERVALS) > _KEPT:
        del _INTERVALS[next(iter(_INTERVALS))]


_WANTED: list[tuple[np.ndarray, Any]] = []
"""The intervals forked workers draw (set before the fork)."""


def _drawn(wanted: list[tuple[np.ndarray, Any]], workers: int) -> list[tuple[float, float]]:
    """:func:`_intervals` of ``wanted`` (not remembered), in ``workers``
    forked processes when there are several, a share of them each."""
    import multiprocessing

    parts = max(1, min(workers, len(wanted)))
    if parts == 1:
        return _intervals(wanted)
    global _WANTED
    _WANTED = wanted
    bounds = [len(wanted) * k // (2 * parts) for k in range(2 * parts + 1)]
    try:
        with multiprocessing.get_context("fork").Pool(parts) as pool:
            found = pool.map(_drawn_part, list(itertools.pairwise(bounds)))
    finally:
        _WANTED = []
    return [interval for part in found for interval in part]


def _drawn_part(bounds: tuple[int, int]) -> list[tuple[float, float]]:
    """In a worker: :func:`_intervals` of ``_WANTED[low:high]``."""
    low, high = bounds
    return _intervals(_WANTED[low:high])


def pct_interval(share: float, low: float, high: float, digits: int = 1) -> str:
    """``2.1% [1.2, 3.4]`` (``n/a`` for an undefined share: no successes)."""
    if not math.isfinite(share):
        return "n/a"
    return f"{100 * share:.{digits}f}% [{100 * low:.{digits}f}, {100 * high:.{digits}f}]"
