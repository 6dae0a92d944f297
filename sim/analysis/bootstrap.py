"""Percentile-bootstrap intervals and p-values of the change in mean, p50 and
p95 between two samples, paired or not (:func:`bootstrap_changes`), from a
fixed seed so a report is reproducible. Percentiles follow
:mod:`sim.analysis.stats`' one definition.
"""

from __future__ import annotations

import numpy as np

from sim.analysis import stats

BOOTSTRAP_SEED = 20_250_101
"""Seed of the bootstrap's resampling, fixed so a report is reproducible."""


def _stat_columns(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean, p50 and p95 of ``x`` along ``axis`` (sim.analysis.stats' percentiles)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    ranks = [stats.rank(0.5, n), stats.rank(0.95, n)]
    part = np.partition(x, ranks, axis=-1)
    return np.stack([x.mean(axis=-1), part[..., ranks[0]], part[..., ranks[1]]])


def _weighted_stats(values: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Mean, p50 and p95 of resamples given as counts: ``weights[r, j]`` copies
    of ``values[j]`` (sorted ascending) in resample ``r`` of size ``n``;
    shape ``(3, resamples)``. The percentile is the value at rank floor(q n),
    as in :mod:`sim.analysis.stats`."""
    cumulative = np.cumsum(weights, axis=1)
    out = [weights @ values / n]
    for q in (0.5, 0.95):
        position = (cumulative > stats.rank(q, n)).argmax(axis=1)
        out.append(values[position])
    return np.stack(out)


def _relative(base: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """``100 (candidate - base) / base``; 0 when both are 0, +-inf when only the base is."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(base != 0, 100 * (candidate - base) / np.where(base != 0, base, 1),
                        np.where(candidate == base, 0.0, np.copysign(np.inf, candidate - base)))


def _resample_counts(inverse: np.ndarray, k: int, resamples: int,
                     rng: np.random.Generator) -> list[np.ndarray]:
    """Counts per distinct value (``inverse`` maps each task to its value) in
    ``resamples`` resamples of the tasks with replacement, as a list of
    ``(batch, k)`` arrays: multinomial draws when values are few (a draw
    costs about as much as counting 40 tasks), else resampled task indices
    counted (the same distribution either way); batches keep memory bounded."""
    n = inverse.size
    batch = max(1, 4_000_000 // k)
    shares = np.bincount(inverse, minlength=k) / n
    out = []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        if 40 * k <= n:
            out.append(rng.multinomial(n, shares, size=size))
        else:
            out.append(np.stack([np.bincount(inverse[rng.integers(0, n, n)], minlength=k)
                                 for _ in range(size)]))
    return out


def _side_stats(values: np.ndarray, batches: list[np.ndarray], n: int) -> np.ndarray:
    """Mean, p50 and p95 per resample of one side, from count batches over
    ``values`` (any order, repeats allowed)."""
    order = np.argsort(values, kind="stable")
    return np.concatenate([_weighted_stats(values[order], counts[:, order], n)
                           for counts in batches], axis=1)


def _index_stats(samples: tuple[np.ndarray, ...], paired: bool, resamples: int,
                 rng: np.random.Generator) -> list[np.ndarray]:
    """Mean, p50 and p95 per resample of each sample, resampling task
    indices (the same indices for every sample when ``paired``)."""
    n = max(x.size for x in samples)
    batch = max(1, 2_500_000 // n)
    out: list[list[np.ndarray]] = [[] for _ in samples]
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        shared = rng.integers(0, n, (size, n)) if paired else None
        for i, x in enumerate(samples):
            idx = shared if paired else rng.integers(0, x.size, (size, x.size))
            out[i].append(_stat_columns(x[idx]))
    return [np.concatenate(parts, axis=1) for parts in out]


def _resampled_side(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Mean, p50 and p95 per resample of one independent sample."""
    values, inverse = np.unique(x, return_inverse=True)
    if 4 * len(values) > x.size:  # mostly distinct: resample task indices
        return _index_stats((x,), False, resamples, rng)[0]
    return _side_stats(values, _resample_counts(inverse.reshape(-1), len(values), resamples,
                                                rng), x.size)


def bootstrap_changes(base: np.ndarray, candidate: np.ndarray, *, paired: bool,
                      resamples: int, level: float = 0.95, relative: bool = False
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile-bootstrap intervals and p-values of the change (candidate -
    base) in mean, p50 and p95: ``(low, high, p_value)``, arrays of three;
    with ``relative``, arrays of six, the last three the change in percent
    of the base's value (from the same resamples).

    Paired: tasks are resampled in pairs; unpaired: each side alone. When the
    values (pairs, when paired) are few compared with the tasks, as steps,
    tokens and costs are, a resample is drawn as counts per distinct value:
    a multinomial draw over the values with their observed shares, which is
    the ordinary bootstrap's distribution exactly, in time proportional to
    the number of values rather than of tasks; otherwise task indices are
    resampled. The resampling seed is
    :data:`BOOTSTRAP_SEED`. Intervals are the ``(1 - level) / 2`` and ``(1 +
    level) / 2`` quantiles of the resampled changes (linear interpolation);
    the p-value is twice the smaller bootstrap tail beyond zero (with the +1
    correction), the level at which the interval would just touch zero."""
    base = np.asarray(base, dtype=np.float64)
    candidate = np.asarray(candidate, dtype=np.float64)
    if paired and base.shape != candidate.shape:
        raise ValueError("paired samples must have the same length")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    if paired:
        pairs, inverse = np.unique(np.column_stack([base, candidate]), axis=0,
                                   return_inverse=True)
        if 4 * len(pairs) > base.size:  # mostly distinct: resample task indices
            b_stats, c_stats = _index_stats((base, candidate), True, resamples, rng)
        else:
            batches = _resample_counts(inverse.reshape(-1), len(pairs), resamples, rng)
            b_stats = _side_stats(pairs[:, 0], batches, base.size)
            c_stats = _side_stats(pairs[:, 1], batches, base.size)
    else:
        b_stats, c_stats = (_resampled_side(x, resamples, rng) for x in (base, candidate))
    dist = c_stats - b_stats
    point = _stat_columns(candidate) - _stat_columns(base)
    if relative:
        dist = np.concatenate([dist, _relative(b_stats, c_stats)])
        point = np.concatenate([point, _relative(_stat_columns(base), _stat_columns(candidate))])
    below = (dist <= 0).sum(axis=-1)
    above = (dist >= 0).sum(axis=-1)
    p = np.minimum(1.0, 2 * (np.minimum(below, above) + 1) / (resamples + 1))
    tails = ((1 - level) / 2, (1 + level) / 2)
    with np.errstate(invalid="ignore"):
        low, high = np.quantile(dist, tails, axis=-1)
    nearest_low, nearest_high = np.quantile(dist, tails, axis=-1, method="nearest")
    low = np.where(np.isnan(low), nearest_low, low)  # interpolating between infinities
    high = np.where(np.isnan(high), nearest_high, high)
    return np.asarray(low), np.asarray(high), p
