"""Rows whose bootstrap intervals are drawn at the end
(:func:`sim.tuning.evidence.fill_intervals`) when the process already
remembers as many intervals as it keeps (``_KEPT``, the oldest out first): a
row whose intervals were remembered long ago (a second tune of the same
folder in one session: its harness in force) gets them, however many new
ones are drawn beside it."""

from __future__ import annotations

import numpy as np
import pytest

from sim.tuning import evidence

N = 60


def _args(share: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    base_cost = rng.lognormal(size=N)
    return {"base_success": np.ones(N, dtype=bool), "success": np.ones(N, dtype=bool),
            "cost": base_cost * share, "base_cost": base_cost,
            "time_s": rng.lognormal(size=N), "outcomes": [], "method": "replayed"}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_remembered_row_keeps_its_intervals_when_new_ones_fill_the_memory(monkeypatch,
                                                                             workers):
    """Memory of 6 intervals. The first row's 4 are remembered first (the
    oldest). A later fill of that row and two new rows (8 intervals to
    draw: more than the memory holds beside the 4) gives each row the
    intervals a row made with them has, the remembered row's included (on
    main: a KeyError, the remembered ones dropped while the new ones were
    drawn in this process)."""
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    monkeypatch.setattr(evidence, "_KEPT", 6)
    args = [_args(1.0, 1), _args(0.5, 2), _args(0.7, 3)]
    whole = [evidence.row(**a) for a in args]  # each row's own intervals
    monkeypatch.setattr(evidence, "_INTERVALS", {})
    evidence.row(**args[0])  # remembered first: the oldest
    later = [evidence.row(**a, intervals=False) for a in args]
    evidence.fill_intervals(later, workers)
    assert later == whole
    assert len(evidence._INTERVALS) <= 6
