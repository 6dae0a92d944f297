"""``python -m sim capacity SCENARIO``: the capacity of the scenario's DES cell,
and with ``--target-p95-wait`` the fewest sandboxes and model slots that
meet a queueing target (:mod:`sim.analysis.sizing`).

The scenario runs in the DES engine whatever its ``engine`` says; a sweep
section is ignored (the base cell runs). The capacity table gives L, the
arrival rate and W with Little's-law error, utilisation and peaks per
resource, queueing p50/p95, rate-limit load and the tail's share of sandbox
time; the results folder is the usual one (results.parquet, summary.json with
a ``capacity`` section and, when sizing, a ``sizing`` section, report.md,
report.html, timeseries.parquet). With sizing, the run reported is the one at the sized
capacity; sizing meets the target over all tasks and for every tenant. The
DES run shows its progress (tasks ended) on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from sim.bad_input import InputError
from sim.cli.common import add_simulation_options, default_out, load, overrides_of, print_json
from sim.output.safe_text import printable


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``capacity`` command."""
    parser = subparsers.add_parser(
        "capacity", help="capacity of the scenario in the DES engine; size it for a target",
        description="Run the scenario's base cell in the discrete-event engine and print "
                    "its capacity table (Little's law, utilisation, queueing, tail share). "
                    "With --target-p95-wait, find the fewest sandboxes and model slots "
                    "whose p95 queueing waits meet the target.")
    add_simulation_options(parser)
    parser.add_argument("--target-p95-wait", type=float, metavar="SECONDS",
                        help="size sandboxes and model slots so that the p95 wait for a "
                             "sandbox and the p95 total wait for model slots per task are at "
                             "most SECONDS")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load, check --out, (size,) simulate with progress, write the results, print."""
    from sim.analysis.capacity import check_drained, measurements, resampled
    from sim.analysis.sizing import size_capacity, with_capacity
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.output import folder
    from sim.output.progress import progress_bar
    from sim.output.provenance import run_provenance
    from sim.output.results import format_table, timeseries_frame, write_results
    from sim.sweeps.cells import CellRun, build_cell, default_workers

    target = args.target_p95_wait
    if target is not None and not (math.isfinite(target) and target >= 0):
        raise InputError(f"--target-p95-wait must be a number of seconds >= 0, got {target}")
    scenario = load(args)
    if scenario.sweep and not args.quiet:
        print(f"note: ignoring the sweep of {scenario.name} (capacity runs the base cell)",
              file=sys.stderr)
    base = scenario.model_copy(update={"sweep": {}, "engine": "des"})
    out = default_out(args, scenario.name, "capacity")
    provenance = run_provenance(base, command="capacity", overrides=overrides_of(args))
    if target is not None:
        provenance["target_p95_wait_s"] = target
    folder.prepare(out, provenance, force=args.force)
    cell_run = CellRun(scenario.name, base, ())
    cell = build_cell(cell_run)
    des = base.des
    arrivals = arrival_schedule(des, base.tasks, cell.seed)
    sizing = None
    if target is not None:
        if not args.quiet:
            print(f"sizing for a p95 wait of {target:g} s (every tenant) ...", file=sys.stderr)
        sizing = size_capacity(cell, des, arrivals, target,
                               workers=args.workers or default_workers(),
                               progress=not args.quiet)
        des = with_capacity(des, sizing.sandboxes, sizing.model_slots)
    bar = progress_bar(total=len(arrivals), unit="task", file=sys.stderr, disable=args.quiet,
               desc="simulating (des)", mininterval=0.5)

    def task_done() -> None:
        bar.update(1)

    try:
        result = DesEngine(cell, des, arrivals, on_task_end=task_done).run()
    finally:
        bar.close()
    capacity = measurements(result, des.capacity.model_dump())
    problems = check_drained(result, des, arrivals)
    if problems:  # pragma: no cover - an engine bug, reported rather than hidden
        print("warning: the run breaks engine invariants:\n  " + "\n  ".join(problems),
              file=sys.stderr)
    extras: dict[str, Any] = {"capacity": capacity}
    params: dict[str, Any] = {}
    if sizing is not None:
        extras["sizing"] = sizing.as_dict()
        params = {"des.capacity.sandboxes": sizing.sandboxes,
                  "des.capacity.model_slots": sizing.model_slots}
    series = {name: resampled(s, result.horizon_s) for name, s in result.series.items()}
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    with folder.replace(out) as staging:
        summary = write_results(staging, {cell.name: result.records}, {cell.name: params},
                                title=f"Capacity: {scenario.name}",
                                extras_by_cell={cell.name: extras},
                                timeseries=timeseries_frame({cell.name: series}),
                                seed=scenario.seed, description=scenario.description,
                                provenance=provenance)
        write_sweep_html(staging, summary, {cell.name: result.records},
                         title=f"Capacity: {scenario.name}", ceiling=args.cost_ceiling)
    if args.format == "json":
        print_json(summary)
        return 0
    cell_summary = summary["cells"][0]
    print(format_table(cell_summary))
    print()
    print(format_capacity(capacity, des.capacity.model_dump()))
    if sizing is not None:
        print()
        print(format_sizing(sizing.as_dict(), capacity, des))
    print()
    print(f"results in {printable(out)}/ (results.parquet, summary.json, report.md, report.html, "
          f"timeseries.parquet)")
    return 0


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
                  des: Any = None) -> str:
    """The sizing answer, the probes that found it (worst tenant's p95 waits),
    and per tenant the p95 waits at the sized capacity, with a note for a
    tenant whose own concurrency cap keeps it waiting beyond the target."""
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
        caps = {t.name: t.max_concurrency for t in getattr(des, "tenants", ())}
        for name, values in before.items():
            if values.get("queue_wait_p95_s", 0) > target and caps.get(name):
                lines.append(f"  note: {name} waits {values['queue_wait_p95_s']:,.0f} s (p95) "
                             f"before starting, for its own concurrency cap of {caps[name]} "
                             f"(des.tenants max_concurrency), which sizing does not change")
    return "\n".join(lines)


def _show(value: Any) -> str:
    return "unlimited" if value is None else f"{value:,}" if isinstance(value, int) else str(
        value)
