"""Capacity from the API: the scenario's base cell run in the DES engine
(whatever its ``engine`` says; a sweep is set aside), measured, and with a
target p95 wait first sized (:mod:`sim.sweeps.capacity`), its results folder
written as ``python -m sim capacity`` writes it (results.parquet, summary.json
with a ``capacity`` section and, when sizing, a ``sizing`` section, report.md,
report.html, timeseries.parquet). Times in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.api.simulating import results_folder
from sim.scenario.model import Scenario
from sim.sweeps.sizing import check_target  # the one home of the rule; the command checks first

__all__ = ["Capacity", "capacity_text", "check_target", "format_capacity", "format_sizing",
           "write_capacity"]


@dataclass(frozen=True)
class Capacity:
    """A capacity run written to ``out``: the ``summary`` written to its
    summary.json, the run's ``capacity`` measurements, the ``limits`` it ran
    with (``des.capacity``: sandboxes, model slots; None unlimited), the
    ``sizing`` answer (None without a target; see
    :meth:`sim.sweeps.sizing.Sizing.as_dict`), each tenant's own concurrency
    cap (``caps``) and the engine invariants the run breaks (``problems``;
    empty unless an engine bug)."""

    out: Path
    summary: dict[str, Any]
    capacity: dict[str, Any]
    limits: dict[str, Any]
    sizing: dict[str, Any] | None
    caps: dict[str, int | None]
    problems: list[str]


def write_capacity(scenario: Scenario, out: str | os.PathLike | None = None, *,
                   target_p95_wait_s: float | None = None, overrides: Sequence[str] = (),
                   force: bool = False, workers: int | None = None, progress: bool = False,
                   cost_ceiling: float | None = None) -> Capacity:
    """Run ``scenario``'s base cell in the DES engine (sized for
    ``target_p95_wait_s`` when given: a number of seconds >= 0) and write its
    results folder whole to ``out`` (default :func:`results_folder` of the
    scenario, ``capacity`` and ``overrides``; checked before anything runs,
    another run's results replaced only with ``force``). ``cost_ceiling``
    (USD) rings cells in report.html."""
    from sim.output import folder
    from sim.output.provenance import run_provenance
    from sim.output.results import timeseries_frame, write_results
    from sim.sweeps.capacity import run_capacity
    from sim.sweeps.cells import default_workers

    target = target_p95_wait_s
    check_target(target)
    base = scenario.model_copy(update={"sweep": {}, "engine": "des"})
    where = results_folder(scenario.name, "capacity", overrides, out)
    provenance = run_provenance(base, command="capacity", overrides=overrides)
    if target is not None:
        provenance["target_p95_wait_s"] = target
    folder.prepare(where, provenance, force=force)
    run = run_capacity(base, target, workers=workers or default_workers(), progress=progress)
    extras: dict[str, Any] = {"capacity": run.capacity}
    params: dict[str, Any] = {}
    sizing = run.sizing.as_dict() if run.sizing is not None else None
    if run.sizing is not None:
        extras["sizing"] = sizing
        params = {"des.capacity.sandboxes": run.sizing.sandboxes,
                  "des.capacity.model_slots": run.sizing.model_slots}
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    with folder.replace(where) as staging:
        summary = write_results(staging, {run.name: run.records}, {run.name: params},
                                title=f"Capacity: {scenario.name}",
                                extras_by_cell={run.name: extras},
                                timeseries=timeseries_frame({run.name: run.series}),
                                seed=scenario.seed, description=scenario.description,
                                provenance=provenance)
        write_sweep_html(staging, summary, {run.name: run.records},
                         title=f"Capacity: {scenario.name}", ceiling=cost_ceiling)
    caps = {t.name: t.max_concurrency for t in run.des.tenants}
    return Capacity(where, summary, run.capacity, run.des.capacity.model_dump(), sizing, caps,
                    run.problems)


def capacity_text(run: Capacity) -> str:
    """What ``capacity`` prints: the cell's table, the capacity table, the
    sizing (when sized) and the line naming the folder and its files."""
    from sim.output.results import format_table
    from sim.output.safe_text import printable

    lines = [format_table(run.summary["cells"][0]), "", format_capacity(run.capacity, run.limits)]
    if run.sizing is not None:
        lines += ["", format_sizing(run.sizing, run.capacity, run.caps)]
    lines += ["", f"results in {printable(run.out)}/ (results.parquet, summary.json, report.md, "
                  f"report.html, timeseries.parquet)"]
    return "\n".join(lines)


def format_capacity(c: dict[str, Any], limits: dict[str, Any]) -> str:
    """The terminal capacity table of one DES run (see :mod:`sim.analysis.capacity`)."""
    lines = ["== capacity",
             f"  L (mean tasks in system)     {c['L']:>10.2f}   over the whole horizon",
             f"  tasks / horizon              {c['arrival_rate_per_s']:>10.4f} /s"
             f"  ({3600 * c['arrival_rate_per_s']:,.0f} /h; below the arrival rate: the "
             f"horizon includes the drain)",
             f"  W (mean time in system)      {c['W_s']:>10,.1f} s",
             f"  horizon                      {c['horizon_s']:>10,.0f} s   first arrival to "
             f"the last task's end",
             *_littles_law_lines(c.get("littles_law")),
             "  resource        limit   utilisation   mean busy   peak"]
    for pool in ("sandboxes", "model_slots"):
        limit = limits.get(pool)
        util = c["utilisation"][pool]
        lines.append(f"  {pool.replace('_', ' '):<14}{_show(limit):>7}   "
                     f"{'-' if util is None else f'{100 * util:.1f} %':>11}   "
                     f"{c['mean_busy'][pool]:>9.2f}   {c['peak'][pool]:>4.0f}")
    arriving = c.get("while_arriving") or {}
    if arriving:
        lines.append(f"  while arriving (first {arriving['window_s']:,.0f} s, "
                     f"{3600 * arriving['arrival_rate_per_s']:,.0f} tasks/h):")
        for pool in ("sandboxes", "model_slots"):
            util = arriving["utilisation"][pool]
            lines.append(f"  {pool.replace('_', ' '):<14}{_show(limits.get(pool)):>7}   "
                         f"{'-' if util is None else f'{100 * util:.1f} %':>11}   "
                         f"{arriving['mean_busy'][pool]:>9.2f}")
    for key, label in (("requests_per_minute", "requests/min"),
                       ("tokens_per_minute", "tokens/min")):
        rl = c.get("rate_limits", {}).get(key)
        if rl:
            lines.append(f"  {label:<14}{rl['limit']:>7,.0f}   {100 * rl['utilisation']:>9.1f} %"
                         f"   {rl['admitted_per_minute']:>9,.0f}   (admitted per minute)")
    lines.append("  waits per task (s)       p50        p95        max       mean")
    for key, label in (("sandbox_wait_s", "sandbox"), ("queue_wait_s", "before start"),
                       ("model_wait_s", "model slots")):
        d = c.get(key) or {}
        if d:
            lines.append(f"  {label:<18}{d['p50']:>10,.1f} {d['p95']:>10,.1f} "
                         f"{d['max']:>10,.1f} {d['mean']:>10,.1f}")
    lines.append(f"  calls answered 429           {c['rate_limited_calls']:>10,}")
    lines.append(f"  tail share (longest 5%)      {100 * c['tail_share_5pct']:>10.1f} %"
                 f" of sandbox time")
    tenants = c.get("tenants") or {}
    if len(tenants) > 1:
        lines.append("  tenant              tasks        W (s)   p95 wait (s)   succeeded")
        for name, t in tenants.items():
            lines.append(f"  {name:<16}{t['tasks']:>9,} {t['W_s']:>12,.1f} "
                         f"{t['queue_wait_p95_s']:>14,.1f} {100 * t['succeeded']:>10.1f} %")
    return "\n".join(lines)


def _littles_law_lines(law: dict[str, Any] | None) -> list[str]:
    """Little's law over the steady window (sim.analysis.capacity.littles_law)."""
    if not law:
        return ["  Little's law                 no steady-state window (a batch)"]
    low, high = law["window_quantiles"]
    words = {True: "holds", False: "FAILS",
             None: "not checked: no steady state (the window is short against W, or the "
                   "queue grows through it)"}
    verdict, queue = words[law["holds"]], words[law["queue_holds"]]
    return [f"  Little's law over the steady window, arrivals {100 * low:g}th-{100 * high:g}th "
            f"percentile "
            f"({law['tasks']:,} tasks, {law['window_s'][0]:,.0f} to "
            f"{law['window_s'][1]:,.0f} s), {law['rate_source']} rate "
            f"{3600 * law['arrival_rate_per_s']:,.1f} /h:",
            f"    L   {law['L']:>9.3f}  vs lambda W   {law['lambda_W']:>9.3f}  error "
            f"{100 * law['error']:+7.2f} %  (tolerance {100 * law['tolerance']:.2f} %: {verdict})",
            f"    L_q {law['L_q']:>9.3f}  vs lambda W_q {law['lambda_W_q']:>9.3f}  error "
            f"{100 * law['queue_error']:+7.2f} %  (tolerance {100 * law['queue_tolerance']:.2f} "
            f"%: {queue}); W_q {law['W_q_s']:,.1f} s"]


def format_sizing(s: dict[str, Any], capacity: dict[str, Any] | None = None,
                  caps: dict[str, int | None] | None = None) -> str:
    """The sizing answer, the probes that found it (worst tenant's p95 waits),
    and per tenant the p95 waits at the sized capacity, with a note for a
    tenant whose own concurrency cap (``caps``: tenant -> max_concurrency)
    keeps it waiting beyond the target."""
    target = s["target_p95_wait_s"]
    lines = [f"== sizing for a p95 wait of at most {target:g} s (over all tasks and for "
             f"every tenant): {s['sandboxes']} sandboxes, {s['model_slots']} model slots "
             f"({s['runs']} runs)",
             "  sandboxes   model slots   p95 sandbox wait (s)   p95 model wait (s)"]
    for p in s["probes"]:
        worst = {key: max([p[key], *(t[key] for t in p.get("tenants", {}).values())])
                 for key in ("sandbox_wait_p95_s", "model_wait_p95_s")}
        lines.append(f"  {_show(p['sandboxes']):>9}   {_show(p['model_slots']):>11}   "
                     f"{worst['sandbox_wait_p95_s']:>20,.1f}   "
                     f"{worst['model_wait_p95_s']:>18,.1f}")
    sized = next((p for p in reversed(s["probes"]) if (p["sandboxes"], p["model_slots"])
                  == (s["sandboxes"], s["model_slots"])), None)
    if sized and sized.get("tenants"):
        before = (capacity or {}).get("tenants", {})
        lines.append("  at the sized capacity, per tenant:  p95 sandbox wait (s)   p95 model "
                     "wait (s)   p95 wait before start (s)")
        for name, t in sized["tenants"].items():
            start = before.get(name, {}).get("queue_wait_p95_s", float("nan"))
            lines.append(f"  {name:<34}{t['sandbox_wait_p95_s']:>20,.1f}   "
                         f"{t['model_wait_p95_s']:>18,.1f}   {start:>25,.1f}")
        for name, values in before.items():
            cap = (caps or {}).get(name)
            if values.get("queue_wait_p95_s", 0) > target and cap:
                lines.append(f"  note: {name} waits {values['queue_wait_p95_s']:,.0f} s (p95) "
                             f"before starting, for its own concurrency cap of {cap} "
                             f"(des.tenants max_concurrency), which sizing does not change")
    return "\n".join(lines)


def _show(value: Any) -> str:
    return "unlimited" if value is None else f"{value:,}" if isinstance(value, int) else str(
        value)
