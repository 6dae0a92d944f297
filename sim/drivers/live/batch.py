"""A small batch of live runs: tasks in, harness runs against a provider, records out.

:class:`LiveBatch` runs the tasks of a tasks file one after another through
the harness of a scenario (its budgets, retry policy, detector, context
settings and prices), with the model and provider given, each task's own tools
and instruction, and its ``check`` as the verifier. Every run is driven by a
:class:`~sim.drivers.live.driver.LiveDriver` on one asyncio loop sharing one
SDK client, checkpointed after each step when a store is given, recorded call
by call in the trace model (:class:`sim.traces.simulated.RunRecorder`, the
recorder of simulated runs: a live run's trace has the same shape, source
``sim``, its ``file`` the tasks file) and, when a span recorder is given, as
OpenTelemetry spans.

A run whose driver raises (a bug, a tool that crashes the process's
assumptions, an odd reply nothing else caught) ends as ``failed:driver_error``
with the error in its detail and its calls so far recorded; the batch goes
on. ``on_run`` is called with the results so far after every run, so the
caller can write them as they finish.

A cancellation (:meth:`LiveBatch.cancel`, or Ctrl-C when the batch installs
its signal handler) ends the run in progress as ``cancelled`` and starts no
further task.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from sim.bad_input import InputError
from sim.drivers.live.approval import Approver, terminal_prompt
from sim.drivers.live.calls import PROVIDERS, ModelClient, check_provider
from sim.drivers.live.driver import (
    MAX_WAIT_PER_RUN_S,
    RETRY_AFTER_CAP_S,
    CommandCheck,
    LiveDriver,
)
from sim.drivers.live.otel import SpanObserver, SpanRecorder, server_of
from sim.drivers.live.tasks import LiveTask, TasksFile
from sim.drivers.live.tools import Toolbox, builtin
from sim.harness.checkpoint import CheckpointStore
from sim.harness.detector import Detector
from sim.harness.events import Event
from sim.harness.messages import estimate_tokens
from sim.harness.params import HarnessParams, ParameterError, VerifierParams
from sim.harness.pump import Observer as PumpObserver
from sim.harness.state import FAILED, SUCCEEDED, HarnessState, end_run, new_state
from sim.task_record import TaskRecord
from sim.traces.model import RunRecord
from sim.traces.simulated import SOURCE, RunRecorder
from sim.traces.writer import TraceWriter, atomic_folder


def make_model(provider: str, *, api_key: str | None = None, base_url: str | None = None,
               timeout_s: float = 120.0, stream: bool = True) -> ModelClient:
    """The SDK client of ``provider`` (``anthropic`` or ``openai``), retries
    off; ``stream`` False makes OpenAI calls return whole completions
    (Anthropic calls are always streamed)."""
    try:
        if provider == "anthropic":
            from sim.drivers.live.anthropic_api import AnthropicModel

            return AnthropicModel(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
        if provider == "openai":
            from sim.drivers.live.openai_api import OpenAIModel

            return OpenAIModel(api_key=api_key, base_url=base_url, timeout_s=timeout_s,
                               stream=stream)
    except ImportError as error:
        raise InputError(f"the {provider} SDK is not installed ({error.name}): "
                         f"pip install 'sim[live]'") from None
    except Exception as error:  # the SDK refuses its configuration (no API key, bad URL)
        raise InputError(f"cannot set up the {provider} client: {error}") from None
    raise InputError(f"unknown provider {provider!r}: expected one of {', '.join(PROVIDERS)}")


def task_params(base: HarnessParams, task: LiveTask, toolbox: Toolbox, *, provider: str,
                model: str, system_prompt: str) -> HarnessParams:
    """``base`` (a scenario's harness) for one live task: its model and
    provider, the system prompt (sized with the harness's estimate), the
    task's tools and its check as the verifier; validated with the provider's
    rules (an :class:`InputError` naming the ``harness.`` field otherwise)."""
    try:
        return check_provider(replace(
            base, model=model, provider=provider, system_prompt=system_prompt,
            system_prompt_tokens=estimate_tokens(system_prompt) if system_prompt else 0,
            tools=toolbox.specs(),
            verifier=VerifierParams(enabled=task.check is not None,
                                    name="command" if task.check else "none")))
    except ParameterError as error:
        path, message = error.problems[0]
        raise InputError(message, path=f"harness.{path}") from None


def crashed(state: HarnessState, error: Exception) -> HarnessState:
    """``state`` ended as ``failed:driver_error`` with the error in its detail
    (a run that had already ended keeps its end)."""
    if not state.terminal:
        message = f"{type(error).__name__}: {error}"
        end_run(state, FAILED, "driver_error", {"error": message[:500]})
    return state


def outcome(state: HarnessState) -> str:
    """The outcome label of a live run: ``succeeded`` for a verified success,
    else ``state:reason`` (an unverified success stays ``succeeded:model_complete``:
    nothing checked it)."""
    if state.status == SUCCEEDED and state.reason == "verified":
        return SUCCEEDED
    return f"{state.status}:{state.reason}"


def task_record(batch: str, index: int, state: HarnessState, resolved: bool | None
                ) -> TaskRecord:
    """The flat record of one live run (no hidden ground truth: 0; truly done
    is what the check said)."""
    s = state
    return TaskRecord(
        cell=batch, task=index, state=s.status, reason=s.reason, outcome=outcome(s),
        steps=s.turns, tool_calls=s.tool_calls, input_tokens=s.input_tokens,
        output_tokens=s.output_tokens, cache_read_tokens=s.cache_read_tokens,
        cache_write_tokens=s.cache_write_tokens, thinking_tokens=s.thinking_tokens,
        cost_usd=s.money_usd, active_s=s.active_s, wall_s=s.wall_s, retries=s.retries,
        nudges=s.nudges, verifier_rejections=s.verifier_rejections, compactions=s.compactions,
        ground_truth=0, truly_done=bool(resolved), end_s=s.wall_s)


@dataclass
class BatchResult:
    """What a batch did: per task run (in order) its final state, its trace
    record and its flat record; ``cancelled`` if the batch was cancelled."""

    states: list[HarnessState] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    records: list[TaskRecord] = field(default_factory=list)
    cancelled: bool = False


class LiveBatch:
    """Runs ``tasks`` live (see the module docstring). ``model`` is a client
    from :func:`make_model` (closed when the batch ends); ``store`` keeps
    checkpoints (run id ``<batch>-<task id>``); ``progress`` gets one line per
    event worth telling (task start and end, each model step); ``make_detector``
    builds each run's no-progress detector from its parameters (None: the
    harness's own); ``max_wait_s`` and ``retry_after_cap_s`` bound each run's
    provider back-offs (:class:`~sim.drivers.live.driver.LiveDriver`), and
    ``warn`` hears when they bind (default: a line on stderr, even when
    ``progress`` is quiet)."""

    def __init__(self, tasks: TasksFile, base: HarnessParams, model: ModelClient, *,
                 model_id: str, name: str = "live", approver: Approver = terminal_prompt,
                 store: CheckpointStore | None = None, spans: SpanRecorder | None = None,
                 progress: Callable[[str], None] | None = None,
                 handle_sigint: bool = False, batch_id: str | None = None,
                 file: str = "",
                 make_detector: Callable[[HarnessParams], Detector] | None = None,
                 on_run: Callable[[BatchResult], None] | None = None,
                 max_wait_s: float | None = MAX_WAIT_PER_RUN_S,
                 retry_after_cap_s: float = RETRY_AFTER_CAP_S,
                 warn: Callable[[str], None] | None = None) -> None:
        self.tasks = tasks
        self.max_wait_s = max_wait_s
        self.retry_after_cap_s = retry_after_cap_s
        self.warn = warn if warn is not None else _stderr
        self.on_run = on_run
        self.make_detector = make_detector
        self.model = model
        self.model_id = model_id
        self.name = name
        self.approver = approver
        self.store = store
        self.spans = spans
        self.progress = progress
        self.handle_sigint = handle_sigint
        self.file = file
        self.batch_id = batch_id or (datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-"
                                     + os.urandom(2).hex())
        self._cancelled = False
        self._driver: LiveDriver | None = None
        # every task's parameters are checked before the first call is made
        self.plans = []
        for task in tasks.tasks:
            toolbox = Toolbox(builtin(t.name, t.timeout_s) for t in task.tools)
            params = task_params(base, task, toolbox, provider=model.provider, model=model_id,
                                 system_prompt=tasks.system_prompt)
            self.plans.append((task, toolbox, params))

    def cancel(self) -> None:
        """Cancel the run in progress and start no other (any thread)."""
        self._cancelled = True
        driver = self._driver
        if driver is not None:
            driver.cancel()

    def run(self) -> BatchResult:
        """Run every task; return what happened."""
        return asyncio.run(self.arun())

    async def arun(self) -> BatchResult:
        """:meth:`run`, on the running event loop."""
        loop = asyncio.get_running_loop()
        if self.handle_sigint:
            loop.add_signal_handler(signal.SIGINT, self.cancel)
        result = BatchResult()
        try:
            for index, (task, toolbox, params) in enumerate(self.plans):
                if self._cancelled:
                    result.cancelled = True
                    break
                await self._one(index, task, toolbox, params, result)
            result.cancelled = result.cancelled or self._cancelled
        finally:
            if self.handle_sigint:
                loop.remove_signal_handler(signal.SIGINT)
            await self.model.aclose()
        return result

    async def _one(self, index: int, task: LiveTask, toolbox: Toolbox, params: HarnessParams,
                   result: BatchResult) -> None:
        run_id = f"{self.batch_id}-{task.id}"
        self._say(f"{task.id}: started ({len(toolbox)} tools, run {run_id})")
        with contextlib.ExitStack() as stack:
            workdir = task.workdir or stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"sim-live-{task.id}-"))
            verifier = (CommandCheck(task.check, task.check_timeout_s) if task.check else None)
            driver = LiveDriver(
                self.model, toolbox, workdir=Path(workdir), approver=self.approver,
                verifier=verifier, store=self.store,
                observers=[self._observer(task.id)], max_wait_s=self.max_wait_s,
                retry_after_cap_s=self.retry_after_cap_s, warn=self.warn)
            observers: list[PumpObserver] = []
            if self.spans is not None:
                observers.append(SpanObserver(self.spans.run(
                    run_id, task.id, params.provider, params.model,
                    stream=getattr(self.model, "stream", True), server=server_of(self.model)),
                    driver.elapsed_s, driver.answer_to))
            self._driver = driver
            if self._cancelled:
                driver.cancel()
            started = datetime.now(UTC)
            state = new_state(params.prefix_tokens, params.model, task.instruction)
            recorder = RunRecorder(state, time.monotonic)
            try:
                detector = None if self.make_detector is None else self.make_detector(params)
                final = await driver.run(params, state, run_id, recorders=(recorder, *observers),
                                         detector=detector)
            except Exception as error:  # this run's failure, not the batch's: it is recorded
                final = crashed(state, error)
            finally:
                self._driver = None
        resolved = (final.status == SUCCEEDED and final.reason == "verified"
                    if task.check else None)
        result.states.append(final)
        result.runs.append(RunRecord(
            run_id=run_id, source=SOURCE, file=self.file, calls=recorder.calls, task_id=task.id,
            model=params.model, cost_usd=final.money_usd, exit=f"{final.status}:{final.reason}",
            resolved=resolved, started_at=started, duration_s=final.wall_s,
            step_limit=params.budgets.steps, cost_limit_usd=params.budgets.money_usd))
        result.records.append(task_record(self.name, index, final, resolved))
        if self.on_run is not None:  # written as it finishes: a later crash loses nothing
            self.on_run(result)
        self._say(f"{task.id}: {outcome(final)} after {final.turns} steps, "
                  f"${final.money_usd:.4f}, {final.wall_s:.1f} s")

    def _observer(self, task_id: str):
        def observe(event: Event) -> None:
            if event.kind == "model_response":
                d = event.data
                self._say(f"{task_id}: step {event.turn}: {d['stop_reason']}, "
                          f"{d['input_tokens']} prompt tokens, {d['tool_calls']} tool calls")
            elif event.kind == "retry" and event.data.get("target") == "model":
                self._say(f"{task_id}: retrying the model ({event.data['kind']}, wait "
                          f"{event.data['delay_s']:.1f} s)")
        return observe

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def write_traces(folder: str | os.PathLike, runs: list[RunRecord], *, force: bool = False
                 ) -> None:
    """Write ``runs`` as a trace folder (``runs.parquet``, ``calls.parquet``),
    atomically; an existing non-empty folder is an InputError unless ``force``."""
    with atomic_folder(folder, force=force) as tmp:
        writer = TraceWriter(tmp)
        try:
            for run in runs:
                writer.add(run)
            writer.close()
        except BaseException:
            writer.abort()
            raise
