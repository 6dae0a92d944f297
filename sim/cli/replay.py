"""``python -m sim replay TRACES_DIR SCENARIO``: what the scenario's harness
would have done to recorded runs.

The scenario's ``harness`` section is the candidate (a ``sweep`` over harness
settings gives one cell per setting); its ``world`` is not used. Every run of
the trace folder is replayed through the real harness loop by
:mod:`sim.drivers.replay`, and the results folder (``results.parquet``,
``summary.json``, ``report.md``, ``report.html``; see :mod:`sim.output.replay`)
has a sweep's contract, so ``python -m sim compare`` takes two replays, or a
replay and a simulation. Example, a 100,000 prompt-token budget on tau2::

    python -m sim replay traces/tau2 scenarios/replay.yaml \\
        --set harness.budgets.tokens=100000 --out reports/replay_tokens
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sim.bad_input import InputError
from sim.cli.common import add_plugin_option, default_out
from sim.cli.flags import bounded_int
from sim.drivers.catalogue_prices import CataloguePrices
from sim.drivers.replay import AFTER_INTERVENTION, TOOL_ERROR_KINDS
from sim.scenario.limits import MAX_WORKERS

if TYPE_CHECKING:
    from sim.scenario.model import HarnessConfig

_DESCRIPTION = (
    "Replay recorded runs (a trace folder) through the scenario's harness: which runs it would "
    "have stopped and why, how many of them had succeeded, the tokens and dollars it would have "
    "saved, and what its detector fires on. Writes results.parquet, summary.json, report.md "
    "and report.html to --out, comparable with 'compare'.")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``replay`` command."""
    parser = subparsers.add_parser(
        "replay", help="what a harness setting would have done to recorded runs",
        description=_DESCRIPTION)
    parser.add_argument("traces", help="trace folder (runs.parquet and calls.parquet)")
    parser.add_argument("scenario", help="scenario YAML: its harness section is the candidate")
    parser.add_argument("--out", help="results folder (default: reports/replay_<scenario>); "
                                      "checked before anything runs, written whole, never "
                                      "holding another run's results unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace a results folder that holds another run's results")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a field, e.g. "
                                                   "harness.budgets.tokens=100000 (repeatable)")
    parser.add_argument("--after-intervention", choices=AFTER_INTERVENTION, default="continue",
                        help="when the candidate nudges, retries a tool error the old harness "
                             "passed on, or rejects a claim: continue as recorded (default; an "
                             "upper bound on cost) or stop the run there (a lower bound)")
    parser.add_argument("--tool-error-kind", choices=TOOL_ERROR_KINDS, default="validation",
                        help="the kind the candidate's error classifier sees for a recorded "
                             "tool error (traces do not record it; default validation: the "
                             "model sees it, as it did when recorded)")
    parser.add_argument("--polling", action="append", default=[], metavar="TOOL",
                        help="a recorded tool the detector treats as polling (repeatable)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: tables (default) or the summary as JSON")
    add_plugin_option(parser)
    parser.add_argument("--workers", type=bounded_int(1, MAX_WORKERS), default=1,
                        help=f"processes, 1 to {MAX_WORKERS} (default 1): runs are replayed in "
                             "chunks and put back in order; results are identical for any "
                             "number")
    parser.add_argument("--scheduler", metavar="WHERE",
                        help="where chunks run: local (default: --workers processes here), "
                             "dask (a Dask LocalCluster of --workers processes) or the address "
                             "of a running Dask scheduler, tcp://HOST:PORT (see README)")
    parser.add_argument("--quiet", action="store_true", help="no progress or notes on stderr")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load the candidate and the traces, replay, write the results folder, print."""
    from sim.drivers.replay import ReplayOptions
    from sim.drivers.replay.rows import folder_runs
    from sim.output import folder
    from sim.output.provenance import folder_record, run_provenance
    from sim.output.replay import write_replay_results

    scenario, notes = _candidate(args)
    runs = folder_runs(args.traces)  # forked workers inherit it
    if not runs:
        raise InputError("the trace folder holds no runs to replay", source=args.traces)
    out = default_out(args, f"replay_{scenario.name}")
    provenance = {**run_provenance(scenario, command="replay", overrides=args.overrides),
                  "traces": folder_record(args.traces)}
    folder.prepare(out, provenance, force=args.force)
    options = ReplayOptions(args.after_intervention, args.tool_error_kind,
                            frozenset(args.polling))
    if sum(r.tool_calls for r in runs) == 0 and scenario.harness.detector.enabled:
        notes.append(f"note: {args.traces} records no tool calls: the detector cannot be "
                     "judged (budgets are)")
    if not args.quiet:
        for note in notes:
            print(note, file=sys.stderr)
    rows_by_cell, params_by_cell, blocks = _replay_cells(args, scenario, runs, options)
    with folder.replace(out) as staging:
        summary = write_replay_results(
            staging, rows_by_cell, params_by_cell, blocks,
            title=f"Replay: {scenario.name} over {len(runs):,} recorded runs",
            description=scenario.description, provenance=provenance)
    _print(args, summary, out)
    return 0


def _candidate(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """The scenario whose harness section is the candidate, and the notes on
    what of it replay does not use; an InputError for a scenario replay cannot
    run (no harness section, a sweep over world settings)."""
    from sim.scenario.model import load_scenario, read_yaml

    raw = read_yaml(args.scenario)
    if "world" in raw and "harness" not in raw:
        raise InputError("has a world section and no harness section: replay needs the "
                         "candidate harness (a harness section); a world is not used by "
                         "replay, which answers from the recorded runs",
                         source=args.scenario, path="harness")
    scenario = load_scenario(args.scenario, args.overrides, allow_plugins=args.allow_plugins)
    notes = []
    if "world" in raw:
        notes.append(f"note: the world section of {args.scenario} is not used by replay")
    if scenario.harness.conversation.enabled:
        notes.append("note: harness.conversation is not used by replay: recorded text turns "
                     "are replayed as reply_to_user calls")
    if "des" in raw or scenario.engine != "direct":
        notes.append("note: replay answers from the recording; the DES engine's capacity "
                     "settings are not used")
    for key in scenario.sweep:
        if not key.startswith("harness."):
            raise InputError("replay sweeps harness settings only (the world is not used)",
                             source=args.scenario, path=f"sweep.{key}")
    return scenario, notes


def _replay_cells(args: argparse.Namespace, scenario: Any, runs: list[Any], options: Any
                  ) -> tuple[dict[str, Any], dict[str, dict], dict[str, dict]]:
    """Replay every run under each cell's harness: the rows, the swept values
    and the replay block of each cell, by cell name."""
    from sim.drivers.replay import price_models
    from sim.scenario.model import expand, harness_params, resolve_detector
    from sim.world.params import WorldParams

    text_hashes = any(c.text_sha256 for r in runs for c in r.calls)
    said: set[str] = set()
    rows_by_cell: dict[str, Any] = {}
    params_by_cell: dict[str, dict] = {}
    blocks: dict[str, dict] = {}
    for name, cell, values in expand(scenario):
        h = cell.harness
        if h.conversation.enabled:  # replay answers text turns itself (reply_to_user)
            h = h.model_copy(update={"conversation": h.conversation.model_copy(
                update={"enabled": False})})
        template = harness_params(h, WorldParams())
        pricing = price_models(runs, template, _prices_for(h))
        for note in pricing.notes():  # an unknown model is never priced silently
            if note not in said:
                said.add(note)
                print(note, file=sys.stderr)
        rows_by_cell[name] = _replay_cell(args, name, runs, (
            template, options, pricing, resolve_detector(h.detector.name)))
        params_by_cell[name] = dict(values)
        blocks[name] = _block(rows_by_cell[name], args, h, text_hashes, set(pricing.default))
        blocks[name]["pricing"] = pricing.to_dict()
    return rows_by_cell, params_by_cell, blocks


def _replay_cell(args: argparse.Namespace, name: str, runs: list[Any], setting: tuple) -> Any:
    """One cell's rows (records, then the replay's columns), the runs replayed
    in chunks on ``--scheduler`` / ``--workers`` and put back in order: the
    same rows for any number of workers. A chunk is sent as the folder and a
    range of runs: a forked worker has the runs already, a Dask worker reads
    the folder (on a shared file system) once."""
    import pandas as pd
    from tqdm import tqdm

    from sim.drivers.replay import REPLAY_DTYPES
    from sim.drivers.replay.rows import replay_slice
    from sim.output.results import records_frame
    from sim.sweeps.schedulers import make_scheduler

    size = chunk_size(len(runs), args.workers)
    jobs = [(str(args.traces), start, min(start + size, len(runs)), *setting, name)
            for start in range(0, len(runs), size)]
    parts: list[Any] = [None] * len(jobs)
    with tqdm(total=len(runs), desc=f"replay {name}", unit="run", file=sys.stderr,
              disable=args.quiet, leave=False) as bar, \
            make_scheduler(args.scheduler, args.workers) as scheduler:
        for i, part in scheduler.run(replay_slice, jobs):
            parts[i] = part
            bar.update(len(part[0]))
    records = records_frame([record for part in parts for record in part[0]])
    extras = pd.DataFrame([row for part in parts for row in part[1]]).astype(REPLAY_DTYPES)
    return pd.concat([records, extras], axis=1)


MAX_CHUNK = 2_000
"""The most runs one chunk of a replay holds (a worker's memory and the
progress bar's step)."""


def chunk_size(runs: int, workers: int) -> int:
    """Runs per chunk: about four chunks per worker (so a slow chunk does not
    leave the others idle), at most :data:`MAX_CHUNK`; all runs in one chunk
    for one worker."""
    if workers <= 1:
        return max(1, min(runs, MAX_CHUNK))
    return max(1, min(MAX_CHUNK, -(-runs // (4 * workers))))


def _print(args: argparse.Namespace, summary: dict, out: Any) -> None:
    """The summary on stdout: JSON, or each cell's table and replay figures."""
    from sim.output.results import format_table

    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2, sort_keys=True, allow_nan=False)
        sys.stdout.write("\n")
        return
    for cell in summary["cells"]:
        print(format_table(cell))
        print(_lead_lines(cell["replay"]))
        print()
    print(f"results in {out}/ (results.parquet, summary.json, report.md, report.html)")


def _block(rows: Any, args: argparse.Namespace, h: HarnessConfig, text_hashes: bool,
           unpriced: set[str]) -> dict:
    from sim.output.replay import replay_block

    return replay_block(rows, traces=str(args.traces), after_intervention=args.after_intervention,
                        tool_error_kind=args.tool_error_kind, detector_enabled=h.detector.enabled,
                        text_hashes=text_hashes, unpriced_models=tuple(sorted(unpriced)))


def _prices_for(h: HarnessConfig) -> CataloguePrices:
    return CataloguePrices(h)


def _lead_lines(block: dict) -> str:
    """The replay figures under a cell's terminal table."""
    from sim.output.replay import usd

    st, sv, det = block["stopped"], block["saved"], block["detector"]
    lines = [f"  stopped        {st['runs']:,} runs: {st['resolved']:,} resolved, "
             f"{st['unresolved']:,} unresolved, {st['unknown']:,} not judged"]
    lines += [f"    {outcome:<26}{c['runs']:>6}  ({c['resolved']:,} resolved)"
              for outcome, c in st["by_outcome"].items()]
    lines.append(f"  saved          {sv['prompt_tokens']:,} prompt tokens, "
                 f"{usd(sv['cost_usd'])} recorded ({usd(sv['cost_usd_on_resolved'])} on "
                 f"resolved runs), {usd(sv['priced_usd'])} at the runs' prices")
    if not det["judgeable"]:
        lines.append(f"  detector       not judged: {det['note']}")
    else:
        for signal, e in det["signals"].items():
            lines.append(f"  detector       {signal}: {e['firings']:,} firings on {e['runs']:,} "
                         f"runs, {100 * e['resolved_share']:.1f}% of them resolved")
    iv = block["interventions"]
    if iv["runs"]:
        lines.append(f"  diverged       {iv['runs']:,} runs; total cost "
                     f"{usd(iv['cost_usd']['lower'])} (stop) to "
                     f"{usd(iv['cost_usd']['upper'])} (continue)")
    fi = block["fidelity"]
    if fi["prompt_mismatch_runs"]:
        lines.append(f"  fidelity       {fi['prompt_mismatch_runs']:,} runs with "
                     f"{fi['prompt_mismatch_calls']:,} prompt counts off the recording")
    return "\n".join(lines)
