"""The live driver: the real harness loop, its effects performed for real.

:class:`LiveDriver` runs :func:`sim.harness.loop.agent_loop` (the same
generator the simulation engines drive) and performs each effect it yields:

* :class:`ModelRequest`: one call through the provider's SDK
  (:mod:`~sim.drivers.live.anthropic_api`, :mod:`~sim.drivers.live.openai_api`),
  bounded by ``params.model_timeout_s`` (the worst case the time budgets
  assume); failures come back as :class:`ModelError`, which the harness
  classifies and retries;
* :class:`ToolRequest`: the registered tool, with the request's timeout;
* :class:`ApprovalRequest`: the approver callback (a terminal prompt by
  default), for at most the request's timeout;
* :class:`VerifyRequest`: the verifier (for example :class:`CommandCheck`, a
  command the model cannot write, run in the working directory);
* :class:`Wait`: a real sleep (at most the harness's ``MAX_WAIT_S``, 5 minutes),
  within the run's wait budget (below);
* :class:`Checkpoint`: the state saved in the checkpoint store (SQLite for
  real use).

:meth:`LiveDriver.cancel` (from any thread, or a signal handler) aborts the
effect in flight: the model stream is closed, a shell command is killed, a
sleep or an approval wait ends. The harness then sees the abort flag and ends
the run as ``cancelled:external_signal``.

Provider back-offs are bounded twice. A Retry-After longer than
``retry_after_cap_s`` (:data:`RETRY_AFTER_CAP_S`, 2 minutes) is clamped to it
before the harness sees it (said once per driver through ``warn``): a server
answering ``Retry-After: 1000000000`` gets a retry after 2 minutes, not 5. And
the seconds a run sleeps on back-offs are summed: a wait that would take the
sum past ``max_wait_s`` (:data:`MAX_WAIT_PER_RUN_S`, 10 minutes; None: no
budget) is not slept; the run ends there as ``failed:retries_exhausted`` with
``why`` :data:`WAIT_BUDGET_EXHAUSTED` in its detail (the seconds waited, the
wait refused and the budget), also said through ``warn``.

The pump's observers (:mod:`sim.harness.pump`) see every effect, its result
and the run's end (a run the wait budget ended too): the trace recorder of
:mod:`sim.traces.simulated` records live runs exactly as it records simulated
ones, and the OpenTelemetry spans of :mod:`~sim.drivers.live.otel` are one.
What a span needs and the harness's results do not carry (the provider's
response id, finish reason, time to first event) stays with the driver: its
:meth:`LiveDriver.answer_to` gives the provider's whole :class:`Answer` to the
model call last performed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from sim.drivers.live.approval import Approver, terminal_prompt
from sim.drivers.live.calls import Answer, ModelClient
from sim.drivers.live.tools import ShellTool, Toolbox, ToolContext, in_daemon_thread, run_tool
from sim.engines.perform import EFFECTS, answers
from sim.harness.checkpoint import CheckpointStore
from sim.harness.classifier import MAX_WAIT_S
from sim.harness.detector import Detector
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    ModelError,
    ModelRequest,
    ToolError,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifyRequest,
    Wait,
)
from sim.harness.events import Observer
from sim.harness.loop import agent_loop
from sim.harness.messages import estimate_tokens
from sim.harness.params import HarnessParams
from sim.harness.pump import Observer as PumpObserver
from sim.harness.pump import steps
from sim.harness.state import FAILED, HarnessState, end_run, request_abort

CHECK_OUTPUT_CHARS = 4_000

RETRY_AFTER_CAP_S = 120.0
"""The longest wait a provider's Retry-After gets for one retry, in seconds
(a longer one is clamped to it)."""
MAX_WAIT_PER_RUN_S = 600.0
"""The default budget of the seconds one run may sleep on back-offs."""
WAIT_BUDGET_EXHAUSTED = "retry wait budget exhausted"
"""The ``why`` of a run ended because its next back-off would pass the budget."""


class _WaitBudget(Exception):
    """The run's next back-off would pass its wait budget: it ends there."""


Verifier = Callable[[VerifyRequest, ToolContext], "Verdict | bool | Awaitable[Verdict | bool]"]


@dataclass(frozen=True, slots=True)
class CommandCheck:
    """A verifier: ``command`` run by ``/bin/sh`` in the working directory;
    exit status 0 passes. A failure's feedback is the status and the end of
    its output, which goes back to the model."""

    command: str
    timeout_s: float = 120.0

    async def __call__(self, request: VerifyRequest, context: ToolContext) -> Verdict:
        """Run the check and judge by its exit status."""
        start = time.monotonic()
        result = await run_tool(ShellTool("check", timeout_s=self.timeout_s), "check",
                                {"command": self.command}, context, self.timeout_s)
        duration = time.monotonic() - start
        if isinstance(result, ToolError):
            text = f"Verification could not run ({self.command!r}): {result.message}"
            return Verdict(False, text, estimate_tokens(text), duration)
        if result.output.startswith("exit status 0\n"):
            return Verdict(True, "", 0, duration)
        tail = result.output[-CHECK_OUTPUT_CHARS:]
        text = f"Verification failed: {self.command!r} says the task is not done.\n{tail}"
        return Verdict(False, text, estimate_tokens(text), duration)


class LiveDriver:
    """Performs the effects of live runs, one run at a time (see the module
    docstring). ``workdir`` is where tools and checks run; ``max_wait_s``
    (seconds, None: unbounded) and ``retry_after_cap_s`` bound back-offs,
    ``warn`` hears when they bind (one line each)."""

    def __init__(self, model: ModelClient, toolbox: Toolbox, *,
                 workdir: str | Path, approver: Approver = terminal_prompt,
                 verifier: Verifier | None = None, store: CheckpointStore | None = None,
                 observers: Sequence[Observer] = (),
                 max_wait_s: float | None = MAX_WAIT_PER_RUN_S,
                 retry_after_cap_s: float = RETRY_AFTER_CAP_S,
                 warn: Callable[[str], None] | None = None) -> None:
        self.model = model
        self.toolbox = toolbox
        self.context = ToolContext(Path(workdir))
        self.approver = approver
        self.verifier = verifier
        self.store = store
        self.observers = list(observers)
        self._requested = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._start = 0.0
        self._params: HarnessParams | None = None  # the run in progress's
        self._state: HarnessState | None = None
        self._run_id = ""
        self._answered: tuple[ModelRequest, Answer] | None = None  # the last model call's
        self.max_wait_s = max_wait_s
        self.retry_after_cap_s = retry_after_cap_s
        self.warn = warn
        self._clamp_said = False
        self._waited = 0.0  # seconds the run in progress slept on back-offs
        self._exhausted: dict[str, Any] | None = None  # why the wait budget ended it

    # ------------------------------------------------------------ control
    def cancel(self) -> None:
        """Cancel the run in progress (or the next one), from any thread."""
        self._requested.set()
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                loop.call_soon_threadsafe(event.set)

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._requested.is_set()

    # ---------------------------------------------------------------- run
    async def run(self, params: HarnessParams, state: HarnessState, run_id: str, *,
                  recorders: Sequence[PumpObserver] = (),
                  detector: Detector | None = None) -> HarnessState:
        """Drive the loop for ``state`` until it returns its final state,
        through the one pump (:func:`sim.harness.pump.steps`: each effect
        answered by awaiting this driver's method for it). ``recorders`` are
        the pump's observers (a trace recorder,
        :class:`sim.traces.simulated.RunRecorder`, sees every effect and
        result); ``detector`` replaces the harness's no-progress detector
        (None: its own)."""
        if params.verifier.enabled and self.verifier is None:
            raise ValueError("the harness verifies claimed successes but the driver has no "
                             "verifier")
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        if self._requested.is_set():
            self._event.set()
        self._start = time.monotonic()
        loop = agent_loop(params, state, detector=detector, observers=self.observers)
        self._params, self._state, self._run_id = params, state, run_id
        self._waited, self._exhausted = 0.0, None
        answer = cast(dict[type, Callable[[LiveDriver, Any, float], Awaitable[Any]]],
                      answers(LiveDriver))
        event = self._event

        def perform(effect: Any) -> Generator[Awaitable[Any], Any, Any]:
            # the awaitable goes out of the pump to be awaited below; its result comes back
            result = yield answer[type(effect)](self, effect, self.elapsed_s())
            if self._exhausted is not None:  # the next back-off would pass the budget
                raise _WaitBudget
            if event.is_set():  # cancelled: the harness sees the abort flag next
                request_abort(state)
            return result

        if event.is_set():
            request_abort(state)
        pump = steps(loop, perform, recorders)
        value: Any = None
        try:
            while True:
                try:
                    awaitable = pump.send(value)
                except StopIteration as stop:
                    final: HarnessState = stop.value
                    break
                value = await awaitable
        except _WaitBudget:
            loop.close()
            end_run(state, FAILED, "retries_exhausted", self._exhausted)
            final = state
            for recorder in recorders:  # the pump was left by the exception: told here
                recorder.end(final)
        finally:
            self._loop = self._event = None
            self._params = self._state = None
            self._answered = None
        return final

    def elapsed_s(self) -> float:
        """Seconds of wall clock since the run started (time.monotonic)."""
        return time.monotonic() - self._start

    # ------------------------------------------- effects (the engines' table)
    # Each is called as ``method(effect, now)`` through
    # :func:`sim.engines.perform.answers` (``now``: seconds since the run started).

    async def respond(self, request: ModelRequest, now: float) -> Any:
        """A model call; the provider's whole answer is kept for
        :meth:`answer_to` (failed or cancelled calls too)."""
        params = self._params
        assert params is not None
        answer = await self._unless_cancelled(request, self._model(request,
                                                                    params.model_timeout_s))
        if not isinstance(answer, Answer):  # cancelled
            answer = Answer(answer)
        self._answered = (request, answer)
        return self._capped(answer.result)

    def answer_to(self, request: ModelRequest) -> Answer | None:
        """The provider's :class:`Answer` to ``request`` (its result before a
        Retry-After was clamped, with the finish reason, time to first event
        and response id the harness's result has no field for) when
        ``request`` is the model call this driver last performed, else None."""
        answered = self._answered
        if answered is None or answered[0] is not request:
            return None
        return answered[1]

    def _capped(self, result: Any) -> Any:
        """``result``, a Retry-After beyond :attr:`retry_after_cap_s` clamped to it."""
        asked = getattr(result, "retry_after_s", None)
        if (not isinstance(result, ModelError) or not isinstance(asked, int | float)
                or asked <= self.retry_after_cap_s):
            return result
        if not self._clamp_said:
            self._clamp_said = True
            self._say(f"the provider asked to wait {asked:.6g} s before a retry; waiting "
                      f"{self.retry_after_cap_s:g} s, the longest one retry waits "
                      "(said once)")
        return replace(result, retry_after_s=self.retry_after_cap_s)

    def _say(self, line: str) -> None:
        if self.warn is not None:
            self.warn(line)

    async def execute(self, request: ToolRequest, now: float) -> ToolResult | ToolError:
        """The registered tool, with the request's timeout."""
        call = request.call
        return await self._unless_cancelled(request, run_tool(  # type: ignore[no-any-return]
            self.toolbox.get(call.name), call.name, call.input, self.context, request.timeout_s))

    async def wait(self, request: Wait, now: float) -> Any:
        """A backoff wait: a real sleep (:meth:`_sleep`); cut short, the
        seconds really waited. A wait that would take the run's back-offs past
        :attr:`max_wait_s` is not slept: the run is marked to end (see the
        module docstring)."""
        seconds = min(max(0.0, request.seconds), MAX_WAIT_S)
        budget = self.max_wait_s
        if budget is not None and self._waited + seconds > budget:
            self._exhausted = {"why": WAIT_BUDGET_EXHAUSTED, "waited_s": round(self._waited, 3),
                               "wait_s": seconds, "max_wait_s": budget}
            self._say(f"run {self._run_id}: {WAIT_BUDGET_EXHAUSTED}: slept {self._waited:.1f} s "
                      f"on back-offs, the next asks {seconds:g} s, the budget is {budget:g} s; "
                      "the run ends as failed:retries_exhausted")
            return 0.0
        start = time.monotonic()
        result = await self._unless_cancelled(request, self._sleep(seconds))
        self._waited += time.monotonic() - start
        return result

    async def approve(self, request: ApprovalRequest, now: float) -> ApprovalDecision:
        """The approver's decision (:meth:`_approve`)."""
        return await self._unless_cancelled(  # type: ignore[no-any-return]
            request, self._approve(request))

    async def verify(self, request: VerifyRequest, now: float) -> Verdict:
        """The verifier's verdict (:meth:`_verify`)."""
        return await self._unless_cancelled(  # type: ignore[no-any-return]
            request, self._verify(request))

    async def checkpoint(self, effect: Checkpoint, now: float) -> None:
        """The state saved in the checkpoint store (nothing without one)."""
        if self.store is not None:
            assert self._state is not None
            self.store.save(self._run_id, effect.turn, self._state)

    async def _unless_cancelled(self, effect: Any, work: Awaitable[Any]) -> Any:
        """``work``'s result, or, when :meth:`cancel` comes first, ``work``
        aborted (a stream closed, a command killed), the run's abort flag set
        and the effect answered as cancelled
        (:attr:`sim.engines.perform.EffectKind.cancelled`)."""
        start = self.elapsed_s()
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._event.wait())  # type: ignore[union-attr]
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert self._state is not None
        request_abort(self._state)
        return EFFECTS[type(effect)].cancelled(self.elapsed_s() - start)

    async def _sleep(self, seconds: float) -> None:
        """A backoff wait: never longer than the harness's longest wait
        (:data:`~sim.harness.classifier.MAX_WAIT_S`), whatever a Wait asks."""
        await asyncio.sleep(min(max(0.0, seconds), MAX_WAIT_S))

    async def _model(self, request: ModelRequest, deadline_s: float) -> Answer:
        start = time.monotonic()
        try:
            return await asyncio.wait_for(self.model.call(request), deadline_s)
        except TimeoutError:
            return Answer(ModelError("timeout", None, None, f"no complete response within "
                                                            f"{deadline_s:g} s",
                                     time.monotonic() - start))

    async def _approve(self, request: ApprovalRequest) -> ApprovalDecision:
        start = time.monotonic()
        try:
            answer = await asyncio.wait_for(
                in_daemon_thread(self.approver, request), request.timeout_s)
        except TimeoutError:
            return ApprovalDecision(False, time.monotonic() - start, True, "no answer in time")
        except Exception as error:  # a broken approver refuses, it does not crash the run
            return ApprovalDecision(False, time.monotonic() - start,
                                    reason=f"approver failed: {error}")
        waited = time.monotonic() - start
        if isinstance(answer, ApprovalDecision):
            return ApprovalDecision(answer.approved, waited, answer.timed_out, answer.reason)
        return ApprovalDecision(bool(answer), waited)

    async def _verify(self, request: VerifyRequest) -> Verdict:
        start = time.monotonic()
        verifier = self.verifier
        assert verifier is not None
        try:
            if _is_async(verifier):
                verdict = await verifier(request, self.context)  # type: ignore[misc]
            else:
                verdict = await in_daemon_thread(verifier, request, self.context)
        except Exception as error:
            text = f"Verification could not run: {error}"
            return Verdict(False, text, estimate_tokens(text), time.monotonic() - start)
        if isinstance(verdict, Verdict):
            return verdict
        return Verdict(bool(verdict), duration_s=time.monotonic() - start)


def _is_async(function: object) -> bool:
    """Whether calling ``function`` gives a coroutine (a coroutine function,
    or an object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__ if not inspect.isfunction(function) else None)
