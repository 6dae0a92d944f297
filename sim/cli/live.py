"""``python -m sim live TASKS.yaml --provider P --model M``: real runs, written as traces."""

from __future__ import annotations

import argparse
import json
import sys

from sim.api.live import APPROVERS, PROVIDERS  # a light module: the standard library only
from sim.cli.common import add_format_option, add_plugin_option, finite_float, folder_path


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
    parser.add_argument("--provider", required=True, choices=PROVIDERS)
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
    add_format_option(parser, "stdout: the outcomes table (default) or JSON")
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


def run(args: argparse.Namespace) -> int:
    """Run the batch (:func:`sim.api.live.run_live`), print the outcomes;
    130 when cancelled, 1 when every run failed at the provider."""
    from sim.api.live import EXIT_ALL_FAILED, live_dict, live_text, run_live

    done = run_live(args.tasks, args.provider, args.model, scenario=args.scenario,
                    overrides=args.overrides, allow_plugins=args.allow_plugins, out=args.out,
                    force=args.force, otel=args.otel, checkpoints=args.checkpoints,
                    approve=args.approve, stream=not args.no_stream, base_url=args.base_url,
                    max_wait_s=args.max_wait, progress=not args.quiet)
    if args.format == "json":
        json.dump(live_dict(done), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(live_text(done))
    if done.result.cancelled:
        return 130
    failed = done.failure()
    if failed is not None:
        from sim.output.safe_text import printable

        print(f"error: {failed}; traces of the failed runs are in {printable(done.out)}/",
              file=sys.stderr)
        return EXIT_ALL_FAILED
    return 0
