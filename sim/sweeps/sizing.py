"""Capacity sizing: the fewest sandboxes and model slots that keep queueing
under a target (DESIGN.md "Time and capacity": Little's law used for sizing).

The target is a p95 wait in seconds, met when both

* the p95 over tasks of the wait for a sandbox before the start (not
  counting a tenant's own concurrency cap, which sizing cannot change), and
* the p95 over tasks of the total wait for model slots (all of a task's
  model calls)

are at most the target, over all tasks and over the tasks of every tenant
alone (a small tenant's tail cannot hide in the aggregate). Every probe is a
DES run of the same arrivals and the same tasks (common random numbers), so
probes differ only by capacity.

The search is by coordinates, each a bisection:

1. one run with unlimited sandboxes and model slots; its peak of busy
   sandboxes ``S`` bounds the search from above (with ``S`` sandboxes nobody
   waits for one), and its offered load, the mean number busy while tasks
   arrive (Little's law: arrival rate x mean holding time), is where the
   search looks first: fewer sandboxes than the offered load cannot keep up,
   and the answer is usually a little above it;
2. sandboxes: the smallest ``s`` in [1, S] whose p95 sandbox wait meets the
   target, with model slots unlimited;
3. model slots: the smallest ``m`` in [1, M] meeting the target for both
   waits with ``s`` sandboxes, where ``M`` is the peak of busy model slots of
   the run with ``s`` sandboxes and unlimited slots (and its offered load of
   model calls the first guess); fewer slots lengthen the tasks, so the
   sandbox wait is checked again;
4. the pair ``(s, m)`` is the answer; its run is the one reported.

Bisection assumes that more capacity never makes the waits worse; each
search keeps the smallest passing and the largest failing value it has seen,
and an upper bound that fails is doubled until one passes. With ``workers``
processes, each round probes up to ``workers`` values spread over the open
interval (the first round: the upper bound and the offered load), so the
interval shrinks by ``workers + 1`` per round. Rate limits and tenant caps
stay as the scenario sets them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sim.analysis.capacity import window_average
from sim.analysis.stats import percentile
from sim.bad_input import InputError
from sim.engines.cell import Cell
from sim.engines.des import Arrival, DesEngine, DesResult
from sim.engines.des_params import DesParams
from sim.sweeps.schedulers import make_scheduler

P95 = 0.95


@dataclass(frozen=True)
class Probe:
    """One DES run at a given capacity (None: unlimited) and what it measured:
    p95 waits per task (seconds) over all tasks and per tenant
    (``tenants``: ``{tenant: {"sandbox_wait_p95_s", "model_wait_p95_s"}}``),
    peaks of busy units, and the offered load of each pool (mean busy units
    while tasks arrive; None for a batch)."""

    sandboxes: int | None
    model_slots: int | None
    sandbox_wait_p95_s: float
    model_wait_p95_s: float
    peak_sandboxes: int
    peak_model_slots: int
    load_sandboxes: float | None = None
    load_model_slots: float | None = None
    tenants: dict[str, dict[str, float]] = field(default_factory=dict)

    def worst(self, key: str) -> float:
        """The largest p95 ``key`` (``sandbox_wait_p95_s`` or
        ``model_wait_p95_s``) over all tasks and each tenant."""
        return max([getattr(self, key), *(t[key] for t in self.tenants.values())])

    def meets(self, target_s: float, model: bool = True) -> bool:
        """True if the p95 sandbox wait (and, with ``model``, the p95
        model-slot wait) is at most ``target_s`` over all tasks and for every
        tenant."""
        return self.worst("sandbox_wait_p95_s") <= target_s and (
            not model or self.worst("model_wait_p95_s") <= target_s)


@dataclass
class Sizing:
    """The answer: ``sandboxes`` and ``model_slots`` meeting
    ``target_p95_wait_s``; ``probes`` in the order they ran."""

    target_p95_wait_s: float
    sandboxes: int
    model_slots: int
    probes: list[Probe]

    def as_dict(self) -> dict:
        """Plain data for summary.json and ``--format json``."""
        return {"target_p95_wait_s": self.target_p95_wait_s, "sandboxes": self.sandboxes,
                "model_slots": self.model_slots, "runs": len(self.probes),
                "probes": [asdict(p) for p in self.probes]}


def with_capacity(des: DesParams, sandboxes: int | None, model_slots: int | None
                  ) -> DesParams:
    """``des`` with the given numbers of sandboxes and model slots."""
    capacity = des.capacity.model_copy(update={"sandboxes": sandboxes,
                                               "model_slots": model_slots})
    return des.model_copy(update={"capacity": capacity})


def probe_of(result: DesResult, sandboxes: int | None, model_slots: int | None) -> Probe:
    """The :class:`Probe` of a finished run."""
    until = max((r.arrival_s for r in result.records), default=0.0)
    load = {key: window_average(result.series[key], until) if until > 0 else None
            for key in ("busy_sandboxes", "busy_model_slots")}
    by_tenant: dict[str, tuple[list[float], list[float]]] = {}
    for record, sandbox_wait in zip(result.records, result.sandbox_wait_s, strict=True):
        waits = by_tenant.setdefault(record.tenant, ([], []))
        waits[0].append(sandbox_wait)
        waits[1].append(record.model_wait_s)
    tenants = {name: {"sandbox_wait_p95_s": float(percentile(s, P95)),
                      "model_wait_p95_s": float(percentile(m, P95))}
               for name, (s, m) in sorted(by_tenant.items())} if len(by_tenant) > 1 else {}
    return Probe(sandboxes, model_slots,
                 float(percentile(result.sandbox_wait_s, P95)),
                 float(percentile([r.model_wait_s for r in result.records], P95)),
                 int(result.series["busy_sandboxes"].peak),
                 int(result.series["busy_model_slots"].peak),
                 load["busy_sandboxes"], load["busy_model_slots"], tenants)


# One sizing at a time per process: the forked workers inherit it.
_CONTEXT: tuple[Cell, DesParams, list[Arrival]] | None = None


def _run_probe(capacity: tuple[int | None, int | None]) -> Probe:
    assert _CONTEXT is not None, "size_capacity sets the context first"
    cell, des, arrivals = _CONTEXT
    sandboxes, model_slots = capacity
    result = DesEngine(cell, with_capacity(des, sandboxes, model_slots), arrivals).run()
    return probe_of(result, sandboxes, model_slots)


def check_target(target_p95_wait_s: float | None) -> None:
    """A target p95 wait is a number of seconds >= 0 (None: no sizing)."""
    target = target_p95_wait_s
    if target is not None and not (math.isfinite(target) and target >= 0):
        raise InputError(f"--target-p95-wait must be a number of seconds >= 0, got {target}")


def size_capacity(cell: Cell, des: DesParams, arrivals: list[Arrival], target_p95_wait_s: float,
                  *, workers: int = 1, progress: bool = False) -> Sizing:
    """The fewest sandboxes, then model slots, meeting the target (see the
    module docstring). ``workers`` processes run probes side by side; while
    the waits fall as capacity grows (the premise of bisection), the answer
    does not depend on their number."""
    check_target(target_p95_wait_s)
    if not arrivals:
        raise InputError("no arrivals to size capacity for")
    global _CONTEXT
    _CONTEXT = (cell, des, arrivals)
    probes: list[Probe] = []
    pool = make_scheduler(None, workers)  # the sweeps' job layer: one probe per job
    try:

        def run(capacities: list[tuple[int | None, int | None]]) -> list[Probe]:
            done = dict(pool.run(_run_probe, [(c,) for c in capacities]))
            out = [done[i] for i in range(len(capacities))]
            for p in out:
                probes.append(p)
                if progress:
                    print(f"  probe sandboxes={_show(p.sandboxes)} "
                          f"model_slots={_show(p.model_slots)}: p95 waits (worst tenant) "
                          f"sandbox {p.worst('sandbox_wait_p95_s'):,.1f} s, model slots "
                          f"{p.worst('model_wait_p95_s'):,.1f} s", file=sys.stderr)
            return out

        unlimited = run([(None, None)])[0]
        sandboxes, at_s = _smallest(
            lambda s: (s, None), max(1, unlimited.peak_sandboxes), unlimited.load_sandboxes,
            lambda p: p.meets(target_p95_wait_s, model=False), run, workers)
        model_slots, _ = _smallest(
            lambda m: (sandboxes, m), max(1, at_s.peak_model_slots), at_s.load_model_slots,
            lambda p: p.meets(target_p95_wait_s), run, workers)
    finally:
        _CONTEXT = None
        pool.close()
    return Sizing(target_p95_wait_s, sandboxes, model_slots, probes)


def _smallest(capacity_of: Callable[[int], tuple[int | None, int | None]], upper: int,
              load: float | None, ok: Callable[[Probe], bool],
              run: Callable[[list[tuple[int | None, int | None]]], list[Probe]],
              workers: int) -> tuple[int, Probe]:
    """The smallest k >= 1 whose probe passes ``ok``, by (k-ary) bisection
    from the upper bound ``upper`` (doubled until it passes), probing
    ``ceil(load)`` (the offered load) in the first round."""
    lo = 0  # largest value known to fail (0: none probed; 0 units is never enough)
    hi = upper
    guess = None if load is None else min(max(1, math.ceil(load)), upper)
    first = [upper] if guess is None or guess == upper else [guess, upper]
    results = run([capacity_of(k) for k in first])
    best = results[-1]
    if guess is not None and len(first) == 2:
        if ok(results[0]):
            hi, best = guess, results[0]
        else:
            lo = guess
    while not ok(best):
        lo, hi = hi, 2 * hi
        best = run([capacity_of(hi)])[0]
    while hi - lo > 1:
        count = min(workers, hi - lo - 1)
        points = sorted({lo + max(1, round((hi - lo) * j / (count + 1)))
                         for j in range(1, count + 1)} - {hi})
        results = run([capacity_of(k) for k in points])
        for k, probe in zip(points, results, strict=True):
            if ok(probe):
                hi, best = k, probe
                break
            lo = k
    return hi, best


def _show(value: int | None) -> str:
    return "unlimited" if value is None else str(value)
