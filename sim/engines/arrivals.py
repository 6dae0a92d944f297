"""When the tasks of a DES cell arrive: Poisson per tenant, a batch at time 0,
bursts of a given size at a fixed interval, Poisson with one spike, or the
rows of a CSV file (:func:`arrival_schedule`)."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.bad_input import InputError
from sim.engines.des_params import DesParams

ARRIVAL_KEY = 2**63  # spawn-key prefix of the arrival streams (never a task index)


@dataclass(frozen=True, slots=True)
class Arrival:
    """When task ``index`` arrives (seconds), for which tenant and agent type."""

    index: int
    time_s: float
    tenant: str
    agent_type: str

    @property
    def scopes(self) -> frozenset[str]:
        """The operator scopes this task falls in."""
        return frozenset(("all", f"tenant:{self.tenant}", f"agent_type:{self.agent_type}"))


def arrival_schedule(des: DesParams, tasks: int, seed: int, base_dir: Path | None = None
                     ) -> list[Arrival]:
    """The arrivals, in time order, indexed 0..n-1 in that order.

    Poisson: each tenant's inter-arrival times are exponential at its rate,
    drawn from its own stream ``SeedSequence(seed, spawn_key=(2**63, t))``;
    the first ``tasks`` arrivals over all tenants are kept. Batch: ``tasks``
    arrivals at time 0, tenants assigned in proportion to their weights.
    Burst: as a batch, but task i arrives at ``(i // size) * every_s``
    seconds (bursts of ``size`` tasks, the last one perhaps smaller). Spike:
    the Poisson arrivals (the same draws as kind poisson) and ``size`` more
    at ``at_s`` seconds, tenants assigned in proportion to their weights as
    in a batch; the first ``tasks`` of them in time order are kept (a
    Poisson arrival at the spike's instant comes first). CSV: the file's
    rows (at most ``tasks``).
    """
    tenants = des.tenants
    arrivals = des.arrivals
    if arrivals.kind == "csv":
        return _csv_arrivals(des, tasks, base_dir)
    if arrivals.kind in ("batch", "burst"):
        size, every = arrivals.size or tasks, arrivals.every_s or 0.0
        out = []
        for i, k in enumerate(_by_weight(des, tasks)):
            time_s = (i // size) * every if arrivals.kind == "burst" else 0.0
            out.append(Arrival(i, time_s, tenants[k].name, tenants[k].agent_type))
        return out
    times: list[tuple[float, int, int]] = []  # (time, 0 Poisson / 1 spike, tenant)
    for k, tenant in enumerate(tenants):
        rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence(seed, spawn_key=(ARRIVAL_KEY, k))))
        gaps = rng.exponential(3600.0 / tenant.rate_per_hour, size=tasks)
        times.extend((float(t), 0, k) for t in np.cumsum(gaps))
    if arrivals.kind == "spike" and arrivals.size and arrivals.at_s is not None:
        at = float(arrivals.at_s)
        times.extend((at, 1, k) for k in _by_weight(des, arrivals.size))
    times.sort()
    return [Arrival(i, t, tenants[k].name, tenants[k].agent_type)
            for i, (t, _, k) in enumerate(times[:tasks])]


def _by_weight(des: DesParams, count: int) -> list[int]:
    """The tenant (its index) of each of ``count`` tasks arriving together,
    in proportion to the tenants' weights (task i at quantile (i + 0.5) /
    count of the weights' cumulative shares)."""
    tenants = des.tenants
    weights = np.array([t.weight for t in tenants], dtype=float)
    edges = np.cumsum(weights / weights.sum())
    return [min(int(np.searchsorted(edges, (i + 0.5) / count)), len(tenants) - 1)
            for i in range(count)]


def _csv_arrivals(des: DesParams, tasks: int, base_dir: Path | None) -> list[Arrival]:
    if des.arrivals.path is None:
        raise InputError("arrivals of kind csv need a path", path="des.arrivals.path")
    path = Path(des.arrivals.path)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    by_name = {t.name: t for t in des.tenants}
    rows = []
    try:
        # utf-8-sig: a spreadsheet's CSV opens with a byte-order mark, which
        # would otherwise be part of the first column's name
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or "arrival_s" not in reader.fieldnames:
                found = ", ".join(map(repr, reader.fieldnames or [])) or "none"
                raise InputError(f"needs a column named arrival_s (columns: {found})",
                                 source=str(path))
            for line, row in enumerate(reader, start=2):
                try:
                    time_s = float(row["arrival_s"])
                except (TypeError, ValueError):
                    raise InputError(f"line {line}: arrival_s {row['arrival_s']!r} is not a "
                                     f"number", source=str(path)) from None
                if not math.isfinite(time_s) or time_s < 0:
                    raise InputError(f"line {line}: arrival_s must be >= 0, got {time_s}",
                                     source=str(path))
                name = row.get("tenant") or des.tenants[0].name
                if name not in by_name:
                    raise InputError(f"line {line}: unknown tenant {name!r}", source=str(path))
                agent_type = row.get("agent_type") or by_name[name].agent_type
                rows.append((time_s, line, name, agent_type))
    except FileNotFoundError:
        raise InputError("arrivals file not found", source=str(path),
                         path="des.arrivals.path") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"cannot read the arrivals file ({error.__class__.__name__}: "
                         f"{getattr(error, 'strerror', None) or error})", source=str(path),
                         path="des.arrivals.path") from None
    rows.sort()
    return [Arrival(i, t, name, agent) for i, (t, _, name, agent) in enumerate(rows[:tasks])]
