"""k-fold cross-validation folds for calibration.

:func:`assign` gives every run of a trace folder a fold, ``0..k-1``, so that
each run is held out exactly once. Folds are stratified by the run's model and
exit category (:mod:`sim.calibration.exits`): within each stratum the runs are
shuffled and dealt round-robin, the deal continuing where the previous stratum
stopped, so every fold has about the same number of runs (sizes differ by at
most one) and about the same mix of models and exits. The shuffle is
``numpy.random.default_rng(seed)``: the same traces and seed give the same folds.

:func:`seed_for` derives an independent integer seed from the root seed and a
path of keys (candidate structure, fold, purpose), so folds and candidate fits
can run in any order, or in parallel, and give the same results.
"""

from __future__ import annotations

import numpy as np

from sim.bad_input import InputError
from sim.calibration.data import Traces

MIN_FOLD_RUNS = 2
"""Fewest runs a held-out fold may have."""


def assign(traces: Traces, k: int, seed: int) -> np.ndarray:
    """The fold (``0..k-1``) of each run of ``traces``, in run order."""
    n = traces.n
    if k < 2:
        raise InputError(f"--folds must be at least 2, got {k}")
    if n < k * MIN_FOLD_RUNS:
        raise InputError(f"--folds {k} needs at least {k * MIN_FOLD_RUNS} runs "
                         f"({MIN_FOLD_RUNS} held out per fold); the traces have {n}")
    rng = np.random.default_rng(seed_for(seed, "folds"))
    strata = (traces.runs["model"].astype(str) + "\x00"
              + traces.runs["category"].astype(str)).to_numpy(object)
    folds = np.empty(n, dtype=np.int64)
    offset = 0
    for stratum in sorted(set(strata)):
        members = np.flatnonzero(strata == stratum)
        members = members[rng.permutation(members.size)]
        folds[members] = (offset + np.arange(members.size)) % k
        offset = (offset + members.size) % k
    return folds


def seed_for(root: int, *keys: int | str) -> int:
    """A 32-bit seed derived from ``root`` and ``keys`` (strings hashed by
    their UTF-8 bytes, so the derivation does not depend on Python's hash
    randomisation)."""
    words: list[int] = [int(root)]
    for key in keys:
        if isinstance(key, str):
            words.extend(key.encode("utf-8"))
            words.append(256)
        else:
            words.append(int(key))
    return int(np.random.SeedSequence(words).generate_state(1)[0])
