"""``python -m sim live TASKS.yaml --provider P --model M``: real runs, written as traces."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sim.bad_input import InputError
from sim.cli.common import add_plugin_option, default_out
from sim.cli.flags import finite_float, folder_path
from sim.output.folder import secondary_output
from sim.output.safe_text import printable

APPROVERS = ("ask", "all", "none")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``live`` command."""
    parser = subparsers.add_parser(
        "live", help="run a few tasks live against a provider's API; write traces",
        description="Run the tasks of TASKS.yaml (instructions and the tools each may use) "
                    "through the harness of a scenario against the provider's official SDK, "
                    "with real tools in each task's working directory. Prints the outcomes "
                    "table of 'run' and writes the runs as a trace folder (and, with --otel, "
                    "as OpenTelemetry GenAI spans). Needs the 'live' extra and the provider's "
                    "API key in its usual environment variable (ANTHROPIC_API_KEY, "
                    "OPENAI_API_KEY). Ctrl-C cancels the run in progress.")
    parser.add_argument("tasks", metavar="TASKS.yaml", help="tasks file")
    parser.add_argument("--provider", required=True, choices=("anthropic", "openai"))
    parser.add_argument("--model", required=True, help="model id, e.g. claude-sonnet-4-20250514")
    parser.add_argument("--base-url", help="API base URL (default: the SDK's)")
    parser.add_argument("--scenario", help="scenario YAML whose harness settings (budgets, "
                                           "retries, detector, context, prices) run the tasks "
                                           "(default: the harness defaults)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="PATH=VALUE", help="override a scenario field, e.g. "
                                                   "harness.budgets.money_usd=0.5 (repeatable)")
    parser.add_argument("--out", type=folder_path,
                        help="trace folder to write (default: reports/live-<batch>); rewritten "
                             "after every run, so a crash loses no finished run")
    parser.add_argument("--force", action="store_true", help="replace --out if it is not empty")
    parser.add_argument("--otel", metavar="FILE", type=folder_path,
                        help="also write the runs as OpenTelemetry GenAI spans (OTLP JSON) to "
                             "FILE (checked before any run)")
    parser.add_argument("--checkpoints", metavar="FILE", type=folder_path,
                        help="SQLite checkpoint store (default: <out>.checkpoints.sqlite)")
    parser.add_argument("--approve", choices=APPROVERS, default="ask",
                        help="tool calls that need approval: ask at the terminal (default), "
                             "approve all, or refuse all")
    parser.add_argument("--no-stream", action="store_true",
                        help="OpenAI: ask for whole completions instead of streams")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="stdout: the outcomes table (default) or JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--max-wait", metavar="SECONDS", type=finite_float(low=0.0, unit=" s"),
                        help="the most seconds one run may sleep on the provider's back-offs "
                             "(default 600: sim.drivers.live.driver.MAX_WAIT_PER_RUN_S); a "
                             "back-off that would pass it ends the run as "
                             "failed:retries_exhausted instead of sleeping. A Retry-After "
                             "beyond 120 s (RETRY_AFTER_CAP_S) is clamped to it, said once "
                             "on stderr")
    add_plugin_option(parser)
    parser.set_defaults(handler=run)


def base_params(args: argparse.Namespace):
    """The scenario's harness (or the defaults) with ``--set`` applied, for
    ``--model``: its name, its harness parameters and the factory of its
    no-progress detector (a plugin named by import path only with
    ``--allow-plugins``)."""
    from sim.scenario import model as scenario_model

    overrides = [*args.overrides, f"harness.model={json.dumps(args.model)}"]
    allow = args.allow_plugins
    source = args.scenario or "--set"
    if args.scenario:
        scenario = scenario_model.load_scenario(args.scenario, overrides, allow_plugins=allow)
    else:
        raw: dict[str, Any] = {"name": "live"}
        for item in overrides:
            key, value = scenario_model.parse_override(item, "--set")
            scenario_model.set_dotted(raw, key, value, "--set")
        scenario = scenario_model.validate(raw, "--set", allow_plugins=allow)
    if scenario.harness.conversation.enabled:
        raise InputError("a live run has no task-giver to converse with: set "
                         "harness.conversation.enabled to false", source=source,
                         path="harness.conversation.enabled")
    if ":" in scenario.harness.verifier.name:
        raise InputError("a live run verifies a claimed success with its task's check "
                         "(the tasks file): a verifier plugin has nothing to run on",
                         source=source, path="harness.verifier.name")
    return (scenario.name, scenario_model.harness_params(scenario.harness, scenario.world),
            scenario_model.resolve_detector(scenario.harness.detector.name))


API_KEYS = {"anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
            "openai": ("OPENAI_API_KEY",)}
"""The environment variables each provider's SDK reads its credentials from."""


def check_api_key(provider: str) -> None:
    """An InputError (exit 2, one line) when the provider's key is not set."""
    names = API_KEYS.get(provider, ())
    if names and not any(os.environ.get(n, "").strip() for n in names):
        raise InputError(f"cannot set up the {provider} client: {names[0]} is not set "
                         f"(export {names[0]}=<your API key>, then run again)")


def run(args: argparse.Namespace) -> int:
    """Validate everything, run the batch, write traces, print the outcomes."""
    from sim.drivers.live import approval
    from sim.drivers.live.batch import LiveBatch, make_model, write_traces
    from sim.drivers.live.tasks import load_tasks
    from sim.harness.checkpoint import SQLiteStore
    from sim.output.folder import check_file_target

    tasks, _ = load_tasks(args.tasks)
    name, params, make_detector = base_params(args)
    check_api_key(args.provider)  # inputs checked; nothing written or contacted yet
    approvers: dict[str, approval.Approver] = {
        "ask": approval.terminal_prompt, "all": approval.approve_all, "none": approval.refuse_all}
    approver = approvers[args.approve]
    spans = None
    if args.otel:
        from sim.drivers.live.otel import SpanRecorder

        spans = SpanRecorder()
    model = make_model(args.provider, base_url=args.base_url, timeout_s=params.model_timeout_s,
                       stream=not args.no_stream)
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    label = f"live {name}" if args.scenario else "live"
    batch = LiveBatch(tasks, params, model, model_id=args.model, name=label,
                      approver=approver, spans=spans,
                      progress=progress, handle_sigint=True, file=str(args.tasks),
                      make_detector=make_detector,
                      **({} if args.max_wait is None else {"max_wait_s": args.max_wait}))
    out = default_out(args, f"live-{batch.batch_id}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.force:
        raise InputError("folder exists and is not empty (use --force to replace it)",
                         source=str(out))
    if args.otel:  # before any run, not after them all
        check_file_target(args.otel, "--otel", results=(out,))
    written: list[int] = []

    def write_so_far(so_far) -> None:
        """The trace folder rewritten after every run: a crash loses nothing."""
        write_traces(out, so_far.runs, force=args.force or bool(written))
        written.append(len(so_far.runs))

    batch.on_run = write_so_far
    checkpoints = Path(args.checkpoints) if args.checkpoints else out.with_name(
        f"{out.name}.checkpoints.sqlite")
    check_file_target(checkpoints, "--checkpoints", replaced=False)  # before any run
    import sqlite3

    try:
        store = SQLiteStore(str(checkpoints))
    except sqlite3.Error as error:
        raise InputError(f"--checkpoints {checkpoints}: cannot open it ({error})") from None
    batch.store = store
    try:
        result = batch.run()
    finally:
        store.close()
    if result.runs and written[-1:] != [len(result.runs)]:
        write_traces(out, result.runs, force=args.force or bool(written))
    if spans is not None:
        with secondary_output(args.otel, "--otel", f"the runs' traces are in {printable(out)}/"):
            spans.write(args.otel)
    _report(args, result, batch, out, checkpoints)
    if result.cancelled:
        return 130
    failed = unreachable(result.runs, result.states)
    if failed is not None:
        print(f"error: {failed}; traces of the failed runs are in {printable(out)}/",
              file=sys.stderr)
        return EXIT_ALL_FAILED
    return 0


PROVIDER_FAILURES = frozenset({"failed:model_error", "failed:retries_exhausted"})
"""Exits of a run that ended because the provider could not be reached or
refused the calls (the connection, a timeout, auth, a server error), not
because of what the model did."""

EXIT_ALL_FAILED = 1
"""Exit status of a live batch whose every run failed at the provider."""


def unreachable(runs: list[Any], states: list[Any]) -> str | None:
    """What went wrong when every run of the batch (at least one) ended in
    :data:`PROVIDER_FAILURES` (then the batch measured nothing but the
    network: exit :data:`EXIT_ALL_FAILED`), naming the last provider error a
    run recorded; None when any run ended otherwise."""
    if not runs or any(r.exit not in PROVIDER_FAILURES for r in runs):
        return None
    last = ""
    for state in states:
        diagnostic = state.detail.get("diagnostic") if isinstance(state.detail, dict) else None
        errors = diagnostic.get("errors") if isinstance(diagnostic, dict) else None
        if errors:
            last = str(errors[-1])
    exits = ", ".join(sorted({str(r.exit) for r in runs}))
    return (f"every run ({len(runs)} of {len(runs)}) failed at the provider ({exits}"
            f"{'; last error: ' + last[:200] if last else ''}): check the network, "
            f"--base-url and the API key")


def _report(args: argparse.Namespace, result, batch, out: Path, checkpoints: Path) -> None:
    from sim.output.results import cell_summary, format_table, records_frame

    summary = None
    if result.records:
        summary = cell_summary(batch.name, {"provider": args.provider, "model": args.model},
                               records_frame(result.records))
    runs = [{"task_id": r.task_id, "run_id": r.run_id, "exit": r.exit, "resolved": r.resolved,
             "steps": len(r.calls), "cost_usd": r.cost_usd} for r in result.runs]
    if args.format == "json":
        json.dump({"summary": summary, "runs": runs, "cancelled": result.cancelled,
                   "traces": str(out) if result.runs else None, "otel": args.otel,
                   "checkpoints": str(checkpoints)}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    if summary is None:
        print("cancelled before any task ran: nothing written")
        return
    print(format_table(summary))
    print()
    for r in runs:
        print(f"  {r['task_id']:<24} {r['exit']:<32} {r['steps']:>3} calls  "
              f"${r['cost_usd']:.4f}")
    extra = f", spans in {args.otel}" if args.otel else ""
    print(f"traces in {printable(out)}/ (runs.parquet, calls.parquet){extra}; checkpoints in "
          f"{checkpoints}")
    if result.cancelled:
        print("cancelled: the run in progress ended as cancelled; later tasks did not run")
