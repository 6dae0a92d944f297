"""Capacity measurements of a DES cell: Little's law, utilisation, queueing
and the tail's share of sandbox time (seed 001, "What changes at scale").

Definitions (seconds; percentiles as in :mod:`sim.analysis.stats`):

* horizon ``T``: from time 0 to the end of the last task (the run drains);
* ``L``: time-average number of tasks in the system over [0, T];
* ``arrival_rate``: tasks / T; ``W``: mean time in system (end - arrival);
  over the whole drained run ``L = (n / T) W`` holds by construction (both
  sides are the total time in system over T), so it checks nothing;
* Little's law, checked so that it can fail (:func:`littles_law`): over a
  steady-state window, the arrivals from the 10th to the 90th percentile
  (the empty start and the drain left out), the time-average number in the
  system ``L`` (from the time series of concurrency) against the
  *scenario's* arrival rate ``lambda`` (the tenants' Poisson rates; the rate
  measured in the window for batch or CSV arrivals) times the measured mean
  time in system ``W`` of the tasks arriving in the window, and likewise the
  sandbox queue ``L_q`` against ``lambda W_q``. The relative error ``(L -
  lambda W) / (lambda W)`` is reported with its tolerance ``4 / sqrt(N) +
  E[W^2] / (E[W] window)`` (N arrivals in the window: four standard errors
  of the Poisson noise of their count, against the scenario's rate, plus
  what the tasks straddling the window's two edges can shift, twice their
  mean residual time over the window); the law holds when the error is
  within it. A window whose edge effect passes ``MAX_EDGE`` (25%) is not a
  steady state (too short a run, or a queue without bound) and is reported
  without a verdict. ``littles_law_error`` is the error's absolute value;
* utilisation of a pool with ``c`` units: busy unit-seconds / (c T); for an
  unlimited pool, the mean number busy is reported instead;
* queueing: wait for a sandbox (and the tenant's cap) before a task starts
  (``queue_wait_s``), the wait for a sandbox alone (``sandbox_wait_s``, what
  sizing targets), and the total wait for model slots per task
  (``model_wait_s``);
* peaks: the most units busy (and tasks queued) at any instant;
* rate limits: admitted requests and prompt tokens per minute against the
  limits (their utilisation), and the calls answered 429;
* tail share: the share of all sandbox-seconds held by the longest-holding
  ``tail`` fraction of tasks (default 5%);
* per tenant: tasks, mean time in system, p95 wait before the start and the
  share that succeeded;
* while arriving: over [0, last arrival], the offered arrival rate and the
  mean busy units and utilisation of each pool (the drained horizon's
  averages are diluted by the drain, long when humans resume stopped runs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sim.analysis.stats import describe, percentile
from sim.engines.des_result import DesResult
from sim.engines.monitor import Series

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
    law = littles_law(result)
    series = result.series
    return {
        "horizon_s": horizon,
        "tasks": n,
        "arrival_rate_per_s": rate,
        "L": L,
        "W_s": W,
        "littles_law": law,
        "littles_law_error": None if law is None else abs(law["error"]),
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
        "sandbox_wait_s": describe(result.sandbox_wait_s) if n else {},
        "peak": {name: series[key].peak for name, key in (
            ("model_slots", "busy_model_slots"), ("sandboxes", "busy_sandboxes"),
            ("model_queue", "model_queue"), ("sandbox_queue", "sandbox_queue"),
            ("parked", "parked"))},
        "rate_limited_calls": result.rate_limited,
        "rate_limits": _rate_limits(result, horizon, capacity),
        "tail_share_5pct": tail_share(result.sandbox_hold_s),
        "tenants": _tenants(records),
        "while_arriving": _while_arriving(result, capacity),
        **({"tenant_budgets": result.tenant_budgets} if result.tenant_budgets else {}),
        **({"storm": storm(result)} if result.limiter is not None else {}),
    }


STORM_BIN_S = 1.0
"""The bin of the provider's request rate (seconds): requests per second."""
DIED = "failed:retries_exhausted"
"""The outcome of a run that died of exhausted retries
(:data:`~sim.harness.state.OUTCOMES`)."""
STORM_CAPS = ("model_slots", "sandboxes", "max_concurrency")
"""The concurrency caps a storm report looks for among the swept paths, by
their last name: ``des.capacity.model_slots`` (model calls at once),
``des.capacity.sandboxes`` and a tenant's ``max_concurrency`` (runs at once,
e.g. ``des.tenants.0.max_concurrency``)."""
STORM_FREE_SHARE = 0.01
"""The share of requests answered 429 below which a cell has no storm (with no run dead)."""


def request_rate(result: DesResult, bin_s: float = STORM_BIN_S
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The provider's request rate over [0, horizon]: the start of each bin
    of ``bin_s`` seconds, the requests per second arriving in it (admitted
    or not) and those answered 429 per second. Empty arrays without a rate
    limiter (nothing counts the requests)."""
    limiter = result.limiter
    if limiter is None:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    end = max(result.horizon_s, max(limiter.asked_at, default=0.0))
    bins = math.floor(end / bin_s) + 1  # the last request falls in the last bin
    edges = np.arange(bins + 1) * bin_s
    asked = np.histogram(limiter.asked_at, edges)[0] / bin_s
    rejected = np.histogram(limiter.rejected_at, edges)[0] / bin_s
    return edges[:-1], asked, rejected


def peak_rate(times: Sequence[float], bin_s: float = STORM_BIN_S) -> float:
    """The most events (``times``, seconds) in one bin ``[k bin_s, (k + 1)
    bin_s)``, per second; 0 without events. Counted over the bins that hold
    an event, so a horizon of centuries (a tenant arriving once a year)
    costs nothing (a histogram over every bin of it did not fit in memory)."""
    if not len(times):
        return 0.0
    bins = np.floor(np.asarray(times, dtype=np.float64) / bin_s)
    return float(np.unique(bins, return_counts=True)[1].max()) / bin_s


def storm(result: DesResult, bin_s: float = STORM_BIN_S) -> dict[str, Any]:
    """What a retry storm at the provider's rate limit does to a cell
    (times in seconds): ``requests`` at the provider
    (admitted or answered 429), ``rejected`` and their ``share_429``, the
    ``peak_requests_per_s`` (over bins of ``bin_s`` seconds:
    :func:`peak_rate`) and ``mean_requests_per_s`` (over [0, horizon]), ``retries`` (requests
    that were harness retries), ``amplification`` (requests per first try:
    how much the retries multiply the request rate), ``peak_retries_per_s``,
    ``rejected_prompt_tokens``
    (the prompts of rejected requests: sent, never processed nor billed),
    ``runs_died``: runs ended as ``failed:retries_exhausted`` and their
    ``share_died``, and ``time_to_finish_s`` (end - arrival of every run:
    p50, p95, max, mean)."""
    limiter = result.limiter
    assert limiter is not None, "a storm needs the rate limiter's counts"
    records = result.records
    requests = limiter.admitted + limiter.rejected
    retries = len(limiter.retried_at)
    died = sum(r.outcome == DIED for r in records)
    return {
        "bin_s": bin_s,
        "requests": requests,
        "rejected": limiter.rejected,
        "share_429": limiter.rejected / requests if requests else 0.0,
        "peak_requests_per_s": peak_rate(limiter.asked_at, bin_s),
        "mean_requests_per_s": requests / result.horizon_s if result.horizon_s > 0 else 0.0,
        "retries": retries,
        "amplification": requests / (requests - retries) if requests > retries else 0.0,
        "peak_retries_per_s": peak_rate(limiter.retried_at, bin_s),
        "rejected_prompt_tokens": limiter.rejected_tokens,
        "runs_died": died,
        "share_died": died / len(records) if records else 0.0,
        "time_to_finish_s": describe([r.end_s - r.arrival_s for r in records])
        if records else {},
    }


def storm_knee(cells: Sequence[Mapping[str, Any]], cap: str,
               max_share_429: float = STORM_FREE_SHARE) -> list[dict[str, Any]]:
    """The cap that keeps the storm away, from the summary ``cells`` of a
    sweep over the dotted path ``cap`` (e.g. ``des.capacity.model_slots``):
    the cells grouped by their other swept values (e.g. the retry policy),
    one row per group: ``settings`` (those values); the ``caps`` swept in
    increasing order (None, no cap, last) with each one's ``share_429``,
    ``runs_died`` and ``p95_finish_s`` (time to finish); ``calm``, whether
    each is storm-free (a share of 429s below ``max_share_429`` and no run
    dead); ``knee``: the largest storm-free cap (None: no cap needed) and
    ``ok``: whether any swept cap is storm-free (else ``knee`` means
    nothing); ``storm_from``: the smallest cap above the knee with a storm
    (None: none swept). Cells without a ``storm`` section (no rate limit) are
    left out."""
    groups: dict[str, dict[str, Any]] = {}
    for cell in cells:
        section = cell.get("capacity", {}).get("storm")
        params = cell.get("params", {})
        if section is None or cap not in params:
            continue
        others = {k: v for k, v in sorted(params.items()) if k != cap}
        group = groups.setdefault(repr(others), {"settings": others, "points": []})
        group["points"].append((params[cap], section))
    rows = []
    for group in groups.values():
        points = sorted(group["points"], key=lambda p: (p[0] is None, p[0] or 0))
        caps = [c for c, _ in points]
        calm = [section["share_429"] < max_share_429 and section["runs_died"] == 0
                for _, section in points]
        safe = [c for c, ok in zip(caps, calm, strict=True) if ok]
        knee = safe[-1] if safe else None
        above = caps[caps.index(knee) + 1:] if safe else caps
        rows.append({"settings": group["settings"], "caps": caps,
                     "share_429": [section["share_429"] for _, section in points],
                     "runs_died": [section["runs_died"] for _, section in points],
                     "p95_finish_s": [section["time_to_finish_s"].get("p95")
                                      for _, section in points],
                     "calm": calm, "ok": bool(safe), "knee": knee,
                     "storm_from": next((c for c, ok in zip(caps, calm, strict=True)
                                         if not ok and c in above), None)})
    return rows


WINDOW = (0.10, 0.90)
"""The steady-state window of :func:`littles_law`: arrivals between these quantiles."""
MAX_EDGE = 0.25
"""The largest edge effect (share of the window's area) at which the window
counts as a steady state; beyond it the law is reported, not checked."""


def littles_law(result: DesResult, window: tuple[float, float] = WINDOW
                ) -> dict[str, Any] | None:
    """Little's law over a steady-state window (see the module docstring):
    ``{"window_quantiles", "window_s": [start, end], "tasks", "arrival_rate_per_s", "rate_source"
    ("scenario" or "measured"), "L", "W_s", "lambda_W", "error", "tolerance",
    "holds", "L_q", "W_q_s", "lambda_W_q", "queue_error", "queue_holds",
    "steady"}``, or None when the window is empty (every task arrives at once:
    a batch). When the tasks' times in system are long against the window
    (an edge effect above ``MAX_EDGE``: a run too short, or a queue that
    grows without bound) there is no steady state to check: ``steady`` is
    False and ``holds`` None."""
    records = result.records
    n = len(records)
    if n < 2:
        return None
    arrivals = np.array([r.arrival_s for r in records])
    ordered = np.sort(arrivals)
    start = float(ordered[min(n - 1, math.floor(window[0] * n))])
    end = float(ordered[max(0, math.ceil(window[1] * n) - 1)])
    if end <= start:
        return None
    inside = (arrivals >= start) & (arrivals <= end)
    count = int(inside.sum())
    span = end - start
    rate, source = result.offered_rate_per_s, "scenario"
    if rate is None:
        rate, source = count / span, "measured"
    times = np.array([r.end_s - r.arrival_s for r in records])[inside]
    waits = np.asarray(result.sandbox_wait_s, dtype=float)[inside]
    W, Wq = float(times.mean()), float(waits.mean())
    L = window_average(result.series["tasks_in_system"], end, start)
    Lq = window_average(result.series["sandbox_queue"], end, start)
    noise = 4 / math.sqrt(count) if source == "scenario" else 0.0
    edge = _edge(times, span)
    steady = edge <= MAX_EDGE
    tolerance = noise + edge
    queue_tolerance = noise + _edge(waits, span)
    error, queue_error = _relative(L, rate * W), _relative(Lq, rate * Wq)
    return {"window_quantiles": list(window), "window_s": [start, end], "tasks": count,
            "arrival_rate_per_s": rate, "rate_source": source, "steady": steady,
            "L": L, "W_s": W, "lambda_W": rate * W, "error": error, "tolerance": tolerance,
            "holds": abs(error) <= tolerance if steady else None,
            "L_q": Lq, "W_q_s": Wq, "lambda_W_q": rate * Wq, "queue_error": queue_error,
            "queue_tolerance": queue_tolerance,
            "queue_holds": abs(queue_error) <= queue_tolerance if steady else None}


def _edge(durations: np.ndarray, span: float) -> float:
    """The share of the window's area that tasks straddling its two edges can
    shift: twice the mean residual duration ``E[D^2] / (2 E[D])`` over the
    window's length (``2 W / span`` for exponential durations)."""
    mean = float(durations.mean())
    return float((durations ** 2).mean()) / (mean * span) if mean > 0 else 0.0


def _relative(measured: float, expected: float) -> float:
    """(measured - expected) / expected; 0 when both are 0."""
    if expected == 0:
        return 0.0 if measured == 0 else math.inf
    return (measured - expected) / expected


def areas_until(series: Series, points: np.ndarray) -> np.ndarray:
    """The area under ``series`` over [0, t] for each time t in ``points``
    (value x seconds; one pass over the series, no BLAS)."""
    times = np.asarray(series.times)
    values = np.asarray(series.values)
    at_changes = np.concatenate([[0.0], np.cumsum(values[:-1] * np.diff(times))])
    points = np.asarray(points, dtype=float)
    k = np.clip(np.searchsorted(times, points, side="right") - 1, 0, None)
    return at_changes[k] + values[k] * (points - times[k])


def window_average(series: Series, until: float, since: float = 0.0) -> float:
    """The mean value of ``series`` over [``since``, ``until``] (``until`` > ``since``)."""
    start, end = areas_until(series, np.array([since, until]))
    return float((end - start) / (until - since))


def window_averages(series: Series, edges) -> np.ndarray:
    """The mean value of ``series`` over each window between consecutive
    ``edges`` (increasing times, seconds)."""
    edges = np.asarray(edges, dtype=float)
    return np.diff(areas_until(series, edges)) / np.diff(edges)


def value_at(series: Series, t: float) -> float:
    """The value of ``series`` at time ``t`` (after every change at ``t``)."""
    k = int(np.searchsorted(np.asarray(series.times), t, side="right"))
    return float(series.values[k - 1]) if k else 0.0


def _while_arriving(result: DesResult, capacity: dict[str, int | None]) -> dict[str, Any]:
    """Load while tasks arrive, over [0, last arrival]: the offered arrival
    rate and the mean busy units and utilisation of each pool (the drained
    horizon's averages include the quiet drain at the end)."""
    until = max((r.arrival_s for r in result.records), default=0.0)
    if until <= 0:
        return {}
    busy = {"model_slots": window_average(result.series["busy_model_slots"], until),
            "sandboxes": window_average(result.series["busy_sandboxes"], until)}
    return {"window_s": until, "arrival_rate_per_s": len(result.records) / until,
            "mean_busy": busy,
            "utilisation": {k: busy[k] / cap if (cap := capacity.get(k)) else None
                            for k in busy}}


def _rate_limits(result: DesResult, horizon: float, capacity: dict[str, int | None]
                 ) -> dict[str, dict[str, float]]:
    """Admitted load per minute against each configured limit."""
    limiter = result.limiter
    if limiter is None or horizon <= 0:
        return {}
    out = {}
    minutes = horizon / 60.0
    for key, admitted in (("requests_per_minute", limiter.admitted),
                          ("tokens_per_minute", limiter.admitted_tokens)):
        limit = capacity.get(key)
        if limit:
            per_minute = admitted / minutes
            out[key] = {"limit": float(limit), "admitted_per_minute": per_minute,
                        "utilisation": per_minute / limit}
    return out


def _tenants(records) -> dict[str, dict[str, float]]:
    """Per tenant: tasks, mean time in system, p95 wait before the start,
    share succeeded."""
    by: dict[str, list] = {}
    for r in records:
        by.setdefault(r.tenant, []).append(r)
    return {name: {"tasks": len(rs),
                   "W_s": float(np.mean([r.end_s - r.arrival_s for r in rs])),
                   "queue_wait_p95_s": percentile([r.queue_s for r in rs], 0.95),
                   "succeeded": sum(r.outcome == "succeeded" for r in rs) / len(rs)}
            for name, rs in sorted(by.items())}


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


# ---------------------------------------------------------------- invariants
LITTLE_TOLERANCE = 0.02


def check_drained(result: DesResult, des, arrivals, tolerance: float = LITTLE_TOLERANCE
                  ) -> list[str]:
    """What is wrong with a drained DES run (an empty list when nothing is).

    Checks, for the run of ``arrivals`` under the DES settings ``des``:

    * conservation: every arrival ended exactly once, in a terminal state, and
      every series is back to zero at the end;
    * a monotone clock: series times never decrease; arrival <= start <= end;
    * Little's law (relative error at most ``tolerance``) for the system, the
      sandbox pool, the sandbox queue and the model-slot queue, each time
      average against rate x mean time per task;
    * capacity: peaks of busy model slots, busy sandboxes and each tenant's
      running tasks within their limits;
    * the harness's clock agrees with the engine's: end - start equals the
      task's active plus parked time (except for tasks cancelled by an
      operator, whose aborted backoff waits the harness counts in full).
    """
    return [*_conservation(result, arrivals), *_clock(result, arrivals),
            *_littles_law(result, tolerance), *_capacity_limits(result, des),
            *_harness_clock(result)]


def _conservation(result: DesResult, arrivals: Any) -> list[str]:
    """Every arrival ended exactly once, in a terminal state; every series ends at 0."""
    from sim.harness.state import TERMINAL_STATES

    problems: list[str] = []
    records = result.records
    n = len(records)
    if n != len(arrivals):
        problems.append(f"{len(arrivals)} arrivals but {n} records")
    if [r.task for r in records] != list(range(n)):
        problems.append("records are not one per task index, in order")
    bad = sorted({r.state for r in records} - set(TERMINAL_STATES))
    if bad:
        problems.append(f"non-terminal end states: {bad}")
    for name, s in result.series.items():
        if s.value != 0:
            problems.append(f"series {name} ends at {s.value}, not 0")
        if any(b < a for a, b in itertools.pairwise(s.times)):
            problems.append(f"series {name}: time goes backwards")
    return problems


def _clock(result: DesResult, arrivals: Any) -> list[str]:
    """arrival <= start <= end, and each record matches its arrival (first
    offender of each kind only)."""
    problems: list[str] = []
    for r in result.records:
        if not r.arrival_s <= r.start_s <= r.end_s:
            problems.append(f"task {r.task}: arrival {r.arrival_s}, start {r.start_s}, "
                            f"end {r.end_s} out of order")
            break
    for r, a in zip(result.records, arrivals, strict=False):
        if r.arrival_s != a.time_s or r.tenant != a.tenant:
            problems.append(f"task {r.task}: record does not match its arrival")
            break
    return problems


def _littles_law(result: DesResult, tolerance: float) -> list[str]:
    """Little's law (relative error at most ``tolerance``) for the system, the
    sandbox pool, the sandbox queue and the model-slot queue."""
    problems: list[str] = []
    records, horizon, series = result.records, result.horizon_s, result.series
    n = len(records)
    if not (n and horizon > 0):
        return problems
    rate = n / horizon
    pairs = (("tasks in system", "tasks_in_system", [r.end_s - r.arrival_s for r in records]),
             ("sandboxes", "busy_sandboxes", result.sandbox_hold_s),
             ("sandbox queue", "sandbox_queue", result.sandbox_wait_s),
             ("model-slot queue", "model_queue", [r.model_wait_s for r in records]))
    for label, key, per_task in pairs:
        L = series[key].time_average(horizon)
        lw = rate * float(np.mean(per_task))
        scale = max(abs(L), abs(lw))
        if scale > 1e-12 and abs(L - lw) > tolerance * scale:
            problems.append(f"Little's law fails for the {label}: L {L:.6g}, "
                            f"lambda W {lw:.6g}")
    return problems


def _capacity_limits(result: DesResult, des: Any) -> list[str]:
    """Peaks of busy model slots, busy sandboxes and each tenant's running
    tasks within their limits."""
    problems: list[str] = []
    series, cap = result.series, des.capacity
    for key, limit in (("busy_model_slots", cap.model_slots), ("busy_sandboxes", cap.sandboxes)):
        if limit is not None and series[key].peak > limit:
            problems.append(f"{key} peaked at {series[key].peak} > capacity {limit}")
    for tenant in des.tenants:
        running = series.get(f"running:{tenant.name}")
        if (tenant.max_concurrency is not None and running is not None
                and running.peak > tenant.max_concurrency):
            problems.append(f"tenant {tenant.name}: {running.peak} running > cap "
                            f"{tenant.max_concurrency}")
    return problems


def _harness_clock(result: DesResult) -> list[str]:
    """end - start equals the harness's wall time (active plus parked), except
    for tasks an operator cancelled (first offender only)."""
    for r in result.records:
        if r.outcome == "cancelled:external_signal":
            continue
        if abs((r.end_s - r.start_s) - r.wall_s) > 1e-6 * max(1.0, r.end_s):
            return [f"task {r.task}: engine time {r.end_s - r.start_s} != harness "
                    f"wall time {r.wall_s}"]
    return []
