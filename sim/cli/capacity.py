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
capacity.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from sim.cli.common import add_simulation_options, load
from sim.errors import InputError


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
    """Load, (size,) simulate, write the results, print."""
    from sim.analysis.capacity import check_drained, measurements, resampled
    from sim.analysis.sizing import size_capacity, with_capacity
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.output.results import format_table, timeseries_frame, write_results
    from sim.runner import CellRun, build_cell, default_workers

    target = args.target_p95_wait
    if target is not None and not (math.isfinite(target) and target >= 0):
        raise InputError(f"--target-p95-wait must be a number of seconds >= 0, got {target}")
    scenario = load(args)
    if scenario.sweep and not args.quiet:
        print(f"note: ignoring the sweep of {scenario.name} (capacity runs the base cell)",
              file=sys.stderr)
    base = scenario.model_copy(update={"sweep": {}, "engine": "des"})
    cell_run = CellRun(scenario.name, base, ())
    cell = build_cell(cell_run)
    des = base.des
    arrivals = arrival_schedule(des, base.tasks, cell.seed)
    sizing = None
    if target is not None:
        if not args.quiet:
            print(f"sizing for a p95 wait of {target:g} s ...", file=sys.stderr)
        sizing = size_capacity(cell, des, arrivals, target,
                               workers=args.workers or default_workers(),
                               progress=not args.quiet)
        des = with_capacity(des, sizing.sandboxes, sizing.model_slots)
    result = DesEngine(cell, des, arrivals).run()
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
    out = Path(args.out) if args.out else Path("reports") / scenario.name
    series = {name: resampled(s, result.horizon_s) for name, s in result.series.items()}
    summary = write_results(out, {cell.name: result.records}, {cell.name: params},
                            title=f"Capacity: {scenario.name}",
                            extras_by_cell={cell.name: extras},
                            timeseries=timeseries_frame({cell.name: series}),
                            seed=scenario.seed)
    from sim.output.html import write_sweep_html  # matplotlib: only when a report is written

    write_sweep_html(out, summary, {cell.name: result.records},
                     title=f"Capacity: {scenario.name}", ceiling=args.cost_ceiling)
    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    cell_summary = summary["cells"][0]
    print(format_table(cell_summary))
    print()
    print(format_capacity(capacity, des.capacity.model_dump()))
    if sizing is not None:
        print()
        print(format_sizing(sizing.as_dict()))
    print()
    print(f"results in {out}/ (results.parquet, summary.json, report.md, report.html, "
          f"timeseries.parquet)")
    return 0


def format_capacity(c: dict[str, Any], limits: dict[str, Any]) -> str:
    """The terminal capacity table of one DES run (see :mod:`sim.analysis.capacity`)."""
    lines = ["== capacity",
             f"  L (mean tasks in system)     {c['L']:>10.2f}",
             f"  arrival rate                 {c['arrival_rate_per_s']:>10.4f} /s"
             f"  ({3600 * c['arrival_rate_per_s']:,.0f} /h)",
             f"  W (mean time in system)      {c['W_s']:>10,.1f} s",
             f"  Little's law |L - rate W|/L  {100 * c['littles_law_error']:>10.3f} %",
             f"  horizon                      {c['horizon_s']:>10,.0f} s",
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


def format_sizing(s: dict[str, Any]) -> str:
    """The sizing answer and the probes that found it."""
    lines = [f"== sizing for a p95 wait of at most {s['target_p95_wait_s']:g} s: "
             f"{s['sandboxes']} sandboxes, {s['model_slots']} model slots "
             f"({s['runs']} runs)",
             "  sandboxes   model slots   p95 sandbox wait (s)   p95 model wait (s)"]
    for p in s["probes"]:
        lines.append(f"  {_show(p['sandboxes']):>9}   {_show(p['model_slots']):>11}   "
                     f"{p['sandbox_wait_p95_s']:>20,.1f}   {p['model_wait_p95_s']:>18,.1f}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    return "unlimited" if value is None else f"{value:,}" if isinstance(value, int) else str(
        value)
