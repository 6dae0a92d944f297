"""Capacity measurements of a DES cell: Little's law, utilisation, queueing
and the tail's share of sandbox time (seed 001, "What changes at scale").

Definitions (seconds; percentiles as in :mod:`sim.stats`):

* horizon ``T``: from time 0 to the end of the last task (the run drains);
* ``L``: time-average number of tasks in the system over [0, T];
* ``arrival_rate``: tasks / T; ``W``: mean time in system (end - arrival);
* Little's law error: ``|L - arrival_rate * W| / L``;
* utilisation of a pool with ``c`` units: busy unit-seconds / (c T); for an
  unlimited pool, the mean number busy is reported instead;
* queueing: wait for a sandbox (and the tenant's cap) before a task starts,
  and the total wait for model slots per task;
* tail share: the share of all sandbox-seconds held by the longest-holding
  ``tail`` fraction of tasks (default 5%).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.engines.des import DesResult
from sim.engines.monitor import Series
from sim.stats import describe

RESAMPLED_POINTS = 1000


def tail_share(hold_s: list[float] | np.ndarray, tail: float = 0.05) -> float:
    """Share of the total held by the ``ceil(tail * n)`` largest values."""
    values = np.sort(np.asarray(hold_s, dtype=float))[::-1]
    total = values.sum()
    if total <= 0:
        return 0.0
    k = max(1, math.ceil(tail * len(values)))
    return float(values[:k].sum() / total)


def measurements(result: DesResult, capacity: dict[str, int | None]) -> dict[str, Any]:
    """The capacity section of a DES cell's summary (see the module docstring)."""
    records = result.records
    horizon = result.horizon_s
    n = len(records)
    in_system = result.series["tasks_in_system"]
    L = in_system.time_average(horizon)
    rate = n / horizon if horizon > 0 else 0.0
    W = float(np.mean([r.end_s - r.arrival_s for r in records])) if n else 0.0
    little = abs(L - rate * W) / L if L > 0 else 0.0
    return {
        "horizon_s": horizon,
        "tasks": n,
        "arrival_rate_per_s": rate,
        "L": L,
        "W_s": W,
        "littles_law_error": little,
        "peak_in_system": in_system.peak,
        "utilisation": {
            "model_slots": _utilisation(result.series["busy_model_slots"], horizon,
                                        capacity.get("model_slots")),
            "sandboxes": _utilisation(result.series["busy_sandboxes"], horizon,
                                      capacity.get("sandboxes")),
        },
        "mean_busy": {"model_slots": result.series["busy_model_slots"].time_average(horizon),
                      "sandboxes": result.series["busy_sandboxes"].time_average(horizon)},
        "queue_wait_s": describe([r.queue_s for r in records]) if n else {},
        "model_wait_s": describe([r.model_wait_s for r in records]) if n else {},
        "rate_limited_calls": result.rate_limited,
        "tail_share_5pct": tail_share(result.sandbox_hold_s),
    }


def _utilisation(series: Series, horizon: float, units: int | None) -> float | None:
    if not units or horizon <= 0:
        return None
    return series.integral(horizon) / (units * horizon)


def resampled(series: Series, horizon: float, points: int = RESAMPLED_POINTS
              ) -> tuple[np.ndarray, np.ndarray]:
    """The series averaged over ``points`` equal bins of [0, horizon]: bin
    start times (seconds) and time-average values, for plots and files."""
    if horizon <= 0:
        return np.zeros(1), np.array([series.value])
    edges = np.linspace(0.0, horizon, points + 1)
    times = np.asarray(series.times)
    values = np.asarray(series.values)
    # cumulative area at each change point, then at each bin edge
    widths = np.diff(np.append(times, horizon))
    area = np.concatenate([[0.0], np.cumsum(values * widths)])
    idx = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, len(times) - 1)
    at_edges = area[idx] + values[idx] * (edges - times[idx])
    return edges[:-1], np.diff(at_edges) / np.diff(edges)
