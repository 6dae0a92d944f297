"""Task classes for calibration: which runs are of the same kind.

Two ways, chosen by the command line:

- ``by="model"``: one class per model; models with fewer than
  :data:`MIN_MODEL_RUNS` fitted runs share a class ``other`` (a lone one keeps
  its own). A model some of whose runs read the prompt cache and some never
  do, each at least :data:`MIN_SPLIT_RUNS` runs, is two classes: ``model``
  (the runs with a cache read) and ``model uncached`` (the others, named by
  :data:`UNCACHED`). Runs a provider does not cache at all came another way
  (another deployment, harness or prompt setup): they differ in more than
  the price of their prompt (on tau2, claude-opus-4-6's 94 uncached runs grow
  their prompt 544 tokens per step against 294 for its 129 cached ones, and
  cost 5 times as much), so the class gives them their own sizes, steps and
  endings, drawn together; a world's ``cache.hits.run_share`` alone would
  give an uncached run the cached runs' sizes. Then, within each such
  class, runs that never message the task-giver (no call without tool
  calls before the run's last) beside runs that do, each at least
  :data:`MIN_SPLIT_RUNS`, are a class of their own (``model solo``, named by
  :data:`SOLO`) when there are more of them than a constant message rate
  would leave silent by chance (:func:`silent_beyond_chance`): an agent
  that works some tasks alone and converses on others (on tau2, gpt-4.1's 40
  runs the agent ends after tool calls alone, 290 output tokens each at the
  median, against its 100 conversations' 912) has two kinds of run, which
  one message rate and one output size per call cannot give;
- clusters (``classes=K`` or ``"auto"``): a Gaussian mixture with diagonal
  covariances, fitted by expectation maximisation to standardised per-run
  features (log first prompt, log history growth per step, log median output
  per call, share of calls without tool calls, log steps, recorded cost per
  million prompt tokens), started from k-means++ seeds drawn with the given
  seed; ``auto`` picks the K in 1..:data:`MAX_AUTO` with the lowest BIC. A run
  belongs to its most probable component.

Classes are named ``c1``, ``c2``, ... by decreasing size (``by="model"``: by
the model's name), so the same traces and seed always give the same classes.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.bad_input import InputError
from sim.calibration.data import Traces

MIN_CLASS_RUNS = 8
"""Fewest runs per cluster ``auto`` allows on average (it tries K up to n / this)."""
MIN_MODEL_RUNS = 3
MIN_SPLIT_RUNS = 8
"""Fewest runs each of a model's cached and uncached runs needs to be a class of its own."""
UNCACHED = "{} uncached"
"""The name of a model's class of runs that never read the cache (the model's name in it)."""
SOLO = "{} solo"
"""The name of a class's runs that never message the task-giver (the class's name in it)."""
SOLO_ALPHA = 0.05
"""Level of the test that silent runs are more than chance leaves (:func:`silent_beyond_chance`)."""
MAX_AUTO = 8


def features(traces: Traces) -> np.ndarray:
    """The per-run feature matrix clusters are fitted to (rows: runs)."""
    runs, calls = traces.runs, traces.calls
    median_out = calls.groupby("run_id", sort=False)["output"].median()
    text_share = calls.groupby("run_id", sort=False)["text"].mean()
    ids = runs["run_id"]
    cost = runs["cost"].to_numpy(float)
    rate = np.where(np.isfinite(cost), cost / np.maximum(runs["prompt"].to_numpy(float), 1.0)
                    * 1e6, 0.0)
    cols = [np.log(np.maximum(runs["first_prompt"].to_numpy(float), 1.0)),
            np.log(np.maximum(runs["h"].to_numpy(float), 1.0)),
            np.log(np.maximum(median_out.reindex(ids).to_numpy(float), 1.0)),
            text_share.reindex(ids).to_numpy(float),
            np.log(np.maximum(runs["steps"].to_numpy(float), 1.0)),
            rate]
    return _finite(np.column_stack(cols))


def _finite(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with each missing value (a run with no model call has no
    median output or text share) replaced by its column's median over the runs
    that have one (0 when none has)."""
    out = matrix.copy()
    for j in range(out.shape[1]):
        column = out[:, j]
        missing = ~np.isfinite(column)
        if missing.any():
            known = column[~missing]
            column[missing] = float(np.median(known)) if known.size else 0.0
    return out


def assign(traces: Traces, *, classes: int | str = "auto", by: str | None = None,
           seed: int = 0, fit_on: np.ndarray | None = None) -> np.ndarray:
    """The class name of each run of ``traces`` (array of strings, run order).

    Clusters are fitted to the runs ``fit_on`` marks (None: every run; the
    calibration's sample, :mod:`sim.calibration.sample`, so the fit takes a
    time that does not grow with the traces): the features standardised by
    those runs' mean and standard deviation, the mixture fitted to them, and
    every run given its most probable component. When ``fit_on`` is every
    run this is the mixture fitted to all of them, as without it."""
    if by == "model":
        return _by_model(traces)
    if by is not None:
        raise InputError(f"--by must be 'model', got {by!r}")
    x = features(traces)
    fit = x if fit_on is None or fit_on.all() else x[fit_on]
    scale = fit.std(axis=0)
    centre, scale = fit.mean(axis=0), np.where(scale > 0, scale, 1.0)
    z = (fit - centre) / scale
    if classes == "auto":
        best = None
        for k in range(1, min(MAX_AUTO, max(1, len(z) // MIN_CLASS_RUNS)) + 1):
            mixture, bic = _gmm(z, k, seed)
            if best is None or bic < best[1]:
                best = (mixture, bic)
        assert best is not None  # k = 1 at least
        mixture = best[0]
    else:
        k = int(classes)
        if k < 1:
            raise InputError(f"--classes must be a positive integer or 'auto', got {classes}")
        if k > len(z):
            raise InputError(f"--classes {k} exceeds the {len(z)} runs fitted")
        mixture, _ = _gmm(z, k, seed)
    log_p = _log_p(z, mixture, None, scale) if fit is x else _log_p(x, mixture, centre, scale)
    return _names(log_p.argmax(axis=1))


def _by_model(traces: Traces) -> np.ndarray:
    models = traces.runs["model"].replace("", "unknown").to_numpy(object)
    counts = pd.Series(models).value_counts()
    rare = set(counts.index[counts < MIN_MODEL_RUNS])
    if len(rare) == 1:  # a lone rare model is its own class rather than "other"
        rare = set()
    labels = np.array(["other" if m in rare else str(m) for m in models], dtype=object)
    calls = traces.calls
    if "cache_read_tokens" not in calls:  # no cache column: nothing to split by
        return labels
    reads = calls["cache_read_tokens"].to_numpy(float) > 0
    read_runs = set(calls["run_id"].to_numpy(object)[reads])
    cached = np.array([r in read_runs for r in traces.runs["run_id"].to_numpy(object)],
                      dtype=bool)
    for label in sorted(set(labels) - {"other"}):
        mine = labels == label
        on, off = int((mine & cached).sum()), int((mine & ~cached).sum())
        if on >= MIN_SPLIT_RUNS and off >= MIN_SPLIT_RUNS:
            labels[mine & ~cached] = UNCACHED.format(label)
    if "text" in calls and "last" in calls:
        _split_solo(traces, labels)
    return labels


def silent_beyond_chance(calls_per_run: np.ndarray, messages: np.ndarray,
                         alpha: float = SOLO_ALPHA) -> bool:
    """Whether more runs send no message than a constant message rate leaves
    silent by chance. ``calls_per_run``: each run's calls before its last
    (the calls that could be messages); ``messages``: each run's messages
    among them. With the pooled rate ``p`` (messages / such calls), a run of
    ``n`` such calls is silent with probability ``(1 - p)^n``; the count of
    silent runs is then a sum of independent Bernoullis of mean ``lambda``,
    whose upper tail at a count ``k >= lambda + 1`` is at most the binomial's
    of the same mean (Hoeffding 1956) and so at most the Poisson's (Anderson
    and Samuels 1967). The test rejects when the count is at least
    ``lambda + 1`` and the Poisson tail there is under ``alpha`` (so its level
    is at most ``alpha``)."""
    from scipy import stats

    n = np.asarray(calls_per_run, dtype=float)
    m = np.asarray(messages, dtype=float)
    total = float(n.sum())
    if total <= 0 or m.sum() <= 0:
        return False
    p = float(m.sum()) / total
    expected = float(((1.0 - p) ** n).sum())
    silent = int((m == 0).sum())
    if silent < expected + 1:  # where the Poisson bound is not proved
        return False
    return float(stats.poisson.sf(silent - 1, expected)) < alpha


def _split_solo(traces: Traces, labels: np.ndarray) -> None:
    """Give each class's silent runs a class of their own, in place (see the
    module docstring)."""
    calls = traces.calls
    message = calls["text"].to_numpy(bool) & ~calls["last"].to_numpy(bool)
    by_run = pd.DataFrame({"run": calls["run_id"].to_numpy(object), "m": message}).groupby(
        "run", sort=False)["m"].agg(["sum", "size"])
    ids = traces.runs["run_id"].to_numpy(object)
    msgs = by_run["sum"].reindex(ids).fillna(0).to_numpy(float)
    before_last = np.maximum(by_run["size"].reindex(ids).fillna(0).to_numpy(float) - 1, 0)
    for label in sorted(set(labels) - {"other"}):
        mine = labels == label
        silent = mine & (msgs == 0) & (before_last > 0)
        talking = mine & (msgs > 0)
        if int(silent.sum()) < MIN_SPLIT_RUNS or int(talking.sum()) < MIN_SPLIT_RUNS:
            continue
        if silent_beyond_chance(before_last[mine & (before_last > 0)],
                                msgs[mine & (before_last > 0)]):
            labels[silent] = SOLO.format(label)


def _names(labels: np.ndarray) -> np.ndarray:
    counts = pd.Series(labels).value_counts(sort=False)
    order = sorted(counts.index, key=lambda k: (-counts[k], k))
    names = {k: f"c{i + 1}" for i, k in enumerate(order)}
    return np.array([names[k] for k in labels], dtype=object)


Mixture = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A diagonal Gaussian mixture: weights (k), means (k x d), variances (k x d)."""


def _log_p(x: np.ndarray, mixture: Mixture, centre: np.ndarray | None,
           scale: np.ndarray) -> np.ndarray:
    """Log weight + log density of each row of ``x`` under each component
    (rows standardised by ``centre`` and ``scale`` first, unless ``centre``
    is None: already standardised)."""
    w, mu, var = mixture
    z = x if centre is None else (x - centre) / scale
    return (np.log(w)[None, :]
            - 0.5 * (np.log(2 * np.pi * var)[None, :, :]
                     + (z[:, None, :] - mu[None, :, :]) ** 2 / var[None, :, :]).sum(axis=2))


def _gmm(z: np.ndarray, k: int, seed: int, iterations: int = 300) -> tuple[Mixture, float]:
    """A k-component diagonal Gaussian mixture fitted to ``z`` by EM, and its BIC."""
    n, d = z.shape
    rng = np.random.default_rng(seed)
    centres = [z[rng.integers(n)]]
    for _ in range(1, k):  # k-means++ seeding
        d2 = np.min([((z - c) ** 2).sum(axis=1) for c in centres], axis=0)
        total = d2.sum()
        centres.append(z[rng.choice(n, p=d2 / total)] if total > 0 else z[rng.integers(n)])
    mu = np.array(centres)
    var = np.full((k, d), 1.0)
    w = np.full(k, 1.0 / k)
    floor = 1e-3
    previous = -np.inf
    log_total = np.zeros((n, 1))
    for _ in range(iterations):
        log_p = (np.log(w)[None, :]
                 - 0.5 * (np.log(2 * np.pi * var)[None, :, :]
                          + (z[:, None, :] - mu[None, :, :]) ** 2 / var[None, :, :]).sum(axis=2))
        top = log_p.max(axis=1, keepdims=True)
        log_total = top + np.log(np.exp(log_p - top).sum(axis=1, keepdims=True))
        r = np.exp(log_p - log_total)
        nk = r.sum(axis=0) + 1e-12
        w = nk / n
        mu = (r.T @ z) / nk[:, None]
        var = np.maximum((r.T @ (z ** 2)) / nk[:, None] - mu ** 2, floor)
        loglik = float(log_total.sum())
        if loglik - previous < 1e-8 * max(1.0, abs(loglik)):
            break
        previous = loglik
    params = k * 2 * d + (k - 1)
    bic = -2 * float(log_total.sum()) + params * math.log(n)
    return (w, mu, var), bic
