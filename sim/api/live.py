"""Live runs from the API (``python -m sim live``): the tasks of a tasks file
run through a scenario's harness against a provider's official SDK, with real
tools in each task's working directory, written as a trace folder (rewritten
after every run: a crash loses no finished run), with checkpoints in SQLite
and, if asked, OpenTelemetry GenAI spans. Costs are USD; times seconds.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.bad_input import InputError

__all__ = ["API_KEYS", "APPROVERS", "EXIT_ALL_FAILED", "LiveRun", "PROVIDERS",
           "PROVIDER_FAILURES", "base_params", "check_api_key", "live_dict", "live_text",
           "run_live", "unreachable"]

APPROVERS = ("ask", "all", "none")
"""How tool calls that need approval are answered: asked at the terminal,
all approved, all refused."""
PROVIDERS = ("anthropic", "openai")
"""The providers whose SDKs live runs call."""


def base_params(scenario_file: str | None, overrides: Sequence[str], model: str,
                allow_plugins: bool = False) -> tuple[str, Any, Any]:
    """The scenario's harness (or the defaults) with ``overrides`` (``--set``)
    applied, for ``model``: its name, its harness parameters and the factory
    of its no-progress detector (a plugin named by import path only with
    ``allow_plugins``)."""
    from sim.scenario import model as scenario_model

    overrides = [*overrides, f"harness.model={json.dumps(model)}"]
    allow = allow_plugins
    source = scenario_file or "--set"
    if scenario_file:
        scenario = scenario_model.load_scenario(scenario_file, overrides, allow_plugins=allow)
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


@dataclass(frozen=True)
class LiveRun:
    """A live batch run by :func:`run_live`: the batch's ``result`` (its runs,
    records, states, whether it was ``cancelled``), its ``name``, the trace
    folder ``out``, the ``checkpoints`` store, the ``otel`` file (None: none
    asked for), and the ``provider`` and ``model`` it ran."""

    result: Any
    name: str
    out: Path
    checkpoints: Path
    otel: str | None
    provider: str
    model: str

    def failure(self) -> str | None:
        """:func:`unreachable` of the batch's runs: what went wrong when every
        run failed at the provider, else None."""
        return unreachable(self.result.runs, self.result.states)


def run_live(tasks_file: str, provider: str, model: str, *, scenario: str | None = None,
             overrides: Sequence[str] = (), allow_plugins: bool = False,
             out: str | os.PathLike | None = None, force: bool = False,
             otel: str | None = None, checkpoints: str | None = None, approve: str = "ask",
             stream: bool = True, base_url: str | None = None, max_wait_s: float | None = None,
             progress: bool = False) -> LiveRun:
    """Validate everything (the tasks, the scenario, the API key, ``out``, the
    ``otel`` and ``checkpoints`` targets) before any run, then run the batch
    (``approve``: one of :data:`APPROVERS`; Ctrl-C cancels the run in
    progress), writing the trace folder after every run and the spans last
    (a failure writing them keeps the traces and says so). ``progress``
    prints a line per event on stderr."""
    from sim.api.simulating import results_folder
    from sim.drivers.live import approval
    from sim.drivers.live.batch import LiveBatch, make_model, write_traces
    from sim.drivers.live.tasks import load_tasks
    from sim.harness.checkpoint import SQLiteStore
    from sim.output.folder import check_file_target, secondary_output
    from sim.output.safe_text import printable

    tasks, _ = load_tasks(tasks_file)
    name, params, make_detector = base_params(scenario, overrides, model, allow_plugins)
    check_api_key(provider)  # inputs checked; nothing written or contacted yet
    approvers: dict[str, approval.Approver] = {
        "ask": approval.terminal_prompt, "all": approval.approve_all, "none": approval.refuse_all}
    approver = approvers[approve]
    spans = None
    if otel:
        from sim.drivers.live.otel import SpanRecorder

        spans = SpanRecorder()
    client = make_model(provider, base_url=base_url, timeout_s=params.model_timeout_s,
                        stream=stream)
    report = None if not progress else (lambda line: print(line, file=sys.stderr, flush=True))
    label = f"live {name}" if scenario else "live"
    wait: dict[str, Any] = {} if max_wait_s is None else {"max_wait_s": max_wait_s}
    batch = LiveBatch(tasks, params, client, model_id=model, name=label,
                      approver=approver, spans=spans,
                      progress=report, handle_sigint=True, file=str(tasks_file),
                      make_detector=make_detector, **wait)
    target = results_folder(f"live-{batch.batch_id}", out=out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not force:
        raise InputError("folder exists and is not empty (use --force to replace it)",
                         source=str(target))
    if otel:  # before any run, not after them all
        check_file_target(otel, "--otel", results=(target,))
    written: list[int] = []

    def write_so_far(so_far) -> None:
        """The trace folder rewritten after every run: a crash loses nothing."""
        write_traces(target, so_far.runs, force=force or bool(written))
        written.append(len(so_far.runs))

    batch.on_run = write_so_far
    store_path = Path(checkpoints) if checkpoints else target.with_name(
        f"{target.name}.checkpoints.sqlite")
    check_file_target(store_path, "--checkpoints", replaced=False)  # before any run
    import sqlite3

    try:
        store = SQLiteStore(str(store_path))
    except sqlite3.Error as error:
        raise InputError(f"--checkpoints {store_path}: cannot open it ({error})") from None
    batch.store = store
    try:
        result = batch.run()
    finally:
        store.close()
    if result.runs and written[-1:] != [len(result.runs)]:
        write_traces(target, result.runs, force=force or bool(written))
    if spans is not None and otel:
        with secondary_output(otel, "--otel", f"the runs' traces are in {printable(target)}/"):
            spans.write(otel)
    return LiveRun(result, batch.name, target, store_path, otel, provider, model)


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


def live_dict(run: LiveRun) -> dict[str, Any]:
    """What ``live --format json`` prints: the cell ``summary`` (None before
    any task ran), one row per run, whether the batch was ``cancelled``, and
    where the traces, spans and checkpoints are."""
    summary, runs = _summary(run)
    return {"summary": summary, "runs": runs, "cancelled": run.result.cancelled,
            "traces": str(run.out) if run.result.runs else None, "otel": run.otel,
            "checkpoints": str(run.checkpoints)}


def live_text(run: LiveRun) -> str:
    """What ``live`` prints: the outcomes table of ``run``, a line per run,
    where the traces, spans and checkpoints are, and whether it was cancelled."""
    from sim.output.results import format_table
    from sim.output.safe_text import printable

    summary, runs = _summary(run)
    if summary is None:
        return "cancelled before any task ran: nothing written"
    lines = [format_table(summary), ""]
    lines += [f"  {r['task_id']:<24} {r['exit']:<32} {r['steps']:>3} calls  "
              f"${r['cost_usd']:.4f}" for r in runs]
    extra = f", spans in {run.otel}" if run.otel else ""
    lines.append(f"traces in {printable(run.out)}/ (runs.parquet, calls.parquet){extra}; "
                 f"checkpoints in {run.checkpoints}")
    if run.result.cancelled:
        lines.append("cancelled: the run in progress ended as cancelled; later tasks did not run")
    return "\n".join(lines)


def _summary(run: LiveRun) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The batch's cell summary (None before any task ran) and one row per run."""
    from sim.output.results import cell_summary, records_frame

    result = run.result
    summary = None
    if result.records:
        summary = cell_summary(run.name, {"provider": run.provider, "model": run.model},
                               records_frame(result.records))
    runs = [{"task_id": r.task_id, "run_id": r.run_id, "exit": r.exit, "resolved": r.resolved,
             "steps": len(r.calls), "cost_usd": r.cost_usd} for r in result.runs]
    return summary, runs
