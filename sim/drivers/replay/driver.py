"""The replay driver: the real harness loop, each effect answered from one
recorded run (:func:`replay_run`; the rules are in :mod:`sim.drivers.replay`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any

from sim.cost.recorded import (
    CATALOGUE,
    RECORDED,
    UNPRICED,
    ModelPrice,
    call_cost,
    call_prices,
    run_basis,
)
from sim.drivers.replay.options import (
    COMPACTION,
    DIVERGED,
    ENDED,
    INJECTED,
    TOOL_RETRY,
    UNVERIFIED,
    VERIFIER_REJECTION,
    ReplayOptions,
    reply_tool_name,
    stop_reason,
)
from sim.drivers.replay.pricing import priced_calls
from sim.drivers.replay.replayed import Replay
from sim.engines.perform import answers
from sim.harness import effects as fx
from sim.harness import events as ev
from sim.harness.detector import Detector
from sim.harness.loop import agent_loop
from sim.harness.messages import Block, TextBlock, ToolUseBlock, Usage
from sim.harness.params import HarnessParams
from sim.harness.pump import Observer, steps
from sim.harness.scopes import Ledger
from sim.harness.state import CANCELLED, SUCCEEDED, HarnessState, new_state
from sim.task_record import FALSE_SUCCESS
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord

PARENT_ENDED = "parent_ended"
"""How a child replay ends when its parent ended first (its remaining
recorded calls are not made)."""


class _Ended(Exception):
    """Raised by an answering method to end the replay before the harness
    ends: ``by`` is ``recording`` (no recorded call left) or ``intervention``
    (stop mode)."""

    def __init__(self, by: str) -> None:
        super().__init__(by)
        self.by = by


def replay_run(run: RunRecord, params: HarnessParams, options: ReplayOptions | None = None,
               detector: Detector | None = None,
               fill: Mapping[str, ModelPrice] | None = None,
               observe: Callable[[RunDriver], Sequence[Observer]] | None = None) -> Replay:
    """Drive the harness over ``run`` with ``params`` (see :func:`run_params`);
    return what happened (:class:`Replay`). Deterministic. Each recorded
    call's cost is its one price (:func:`sim.cost.recorded.call_prices`): its
    recorded cost where trustworthy (a share of the run's recorded total when
    only the run records one), else its tokens at ``fill[model]``
    (:attr:`~sim.drivers.replay.pricing.ModelPricing.fill`; a model not in
    it: at the run's prices, basis ``catalogue``). ``observe(driver)``: pump
    observers of the replay (:class:`~sim.harness.pump.Observer`), made with
    the run's driver so that they may read its counters as the run goes."""
    driver = RunDriver(run, params, options or ReplayOptions(), fill)
    return driver.drive(detector, recorders=observe(driver) if observe is not None else ())


def step_calls(run: RunRecord) -> list[int]:
    """The indices of the run's recorded step calls (``purpose`` step), in order."""
    return [i for i, c in enumerate(run.calls) if c.is_step]


def ending(run: RunRecord, steps: Sequence[int], interventions: Sequence[tuple[int, str]],
           ended_by: str, status: str, reason: str, turns: int, mid_step: bool,
           verdict_unknown: bool = False) -> tuple[int | None, str, str, str]:
    """How a replay of ``run`` that ended so reads: ``(stopped_at, status,
    reason, outcome)``. ``steps``: :func:`step_calls`; ``ended_by``:
    ``harness``, ``recording``, ``intervention`` or :data:`PARENT_ENDED`;
    ``status``/``reason``: the harness state's; ``turns``: the steps it made;
    ``mid_step``: whether tool calls of the last answered step were not run;
    ``verdict_unknown``: whether a verifier checked an answer the source gives
    no verdict for (accepted: ``succeeded:unverified``, never ``verified``).
    The harness stopped the run (``stopped_at``: the recorded call it did not
    make) when it ended it unsucceeded before the recording's last step;
    otherwise a run the recording ended reads as recorded."""
    stopped_at = None
    if (ended_by == "harness" and status != SUCCEEDED
            and (turns < len(steps) or mid_step)):
        stopped_at = steps[turns - 1 if mid_step else turns]
    if stopped_at is not None:
        outcome = f"{status}:{reason}"
    elif ended_by == PARENT_ENDED:
        status, reason = CANCELLED, PARENT_ENDED
        outcome = f"{status}:{reason}"
    elif ended_by == "intervention":
        status, reason = DIVERGED, interventions[0][1]
        outcome = f"{status}:{reason}"
    elif ended_by == "harness" and status == SUCCEEDED:
        if run.resolved is None and verdict_unknown and reason == "verified":
            reason = UNVERIFIED
        outcome = (f"{status}:{reason}" if run.resolved is None
                   else SUCCEEDED if run.resolved else FALSE_SUCCESS)
    else:  # the recording ended (or the harness ended with it)
        status, reason = ENDED, run.exit or "unknown"
        outcome = SUCCEEDED if run.resolved else f"{ENDED}:{reason}"
    return stopped_at, status, reason, outcome


class RunDriver:
    """Answers one run's effects from its recording (one instance per run)."""

    def __init__(self, run: RunRecord, params: HarnessParams, options: ReplayOptions,
                 fill: Mapping[str, ModelPrice] | None = None) -> None:
        self.run = run
        self.params = params
        self.options = options
        self.reply = reply_tool_name(run)
        calls = run.calls
        self.steps = step_calls(run)
        self.next_step = {a: b for a, b in zip(self.steps, self.steps[1:], strict=False)}
        self.last_step = self.steps[-1] if self.steps else -1
        self.next_call = 0  # index of the next recorded call not yet answered or passed over
        self.passed_over = 0  # recorded compaction or verifier calls the candidate did not make
        self.answered: dict[str, fx.ToolResult | fx.ToolError] = {}
        self.prompt_counts: list[int] = []
        self.costs: list[float] = []  # recorded (priced where unrecorded), per call answered
        self.priced: list[float] = []  # at the run's prices, per call answered
        self.tools_run = 0
        self.step_run = 0  # tool requests of the last answered response run (first tries)
        self.step_due = 0  # tool calls of the last answered response
        self.interventions: list[tuple[int, str]] = []
        self.firings: list[tuple[int, str]] = []
        self.mismatches = 0
        self.max_deviation = 0
        self.resized = 0
        self.text_turns = 0
        self.unrecorded = 0
        self.verdict_unknown = False
        self.reported: dict[int, Block] = {}  # injected blocks already reported, by id
        self.check_prompt = True
        self.stop = options.after_intervention == "stop"
        self.priced_calls = priced_calls(params, run)
        """Each recorded call's cost at the run's prices (USD)."""
        one = call_prices([(c.cost_usd, c.usage, self._fill(fill, c.model or params.model))
                           for c in calls], run.cost_usd)
        self.one_price = [usd for usd, _ in one]
        """Each recorded call's one price (USD, :mod:`sim.cost.recorded`)."""
        self.bases = [basis for _, basis in one]
        first = calls[self.steps[0]].usage.prompt_tokens if self.steps else 0
        self.state = new_state(params.prefix_tokens, params.model, "recorded run",
                               task_tokens=first)

    def _fill(self, fill: Mapping[str, ModelPrice] | None, model: str) -> ModelPrice:
        found = fill.get(model) if fill is not None else None
        return found or ModelPrice(model, self.params.prices_for(model), CATALOGUE)

    # -------------------------------------------------------------- loop
    def drive(self, detector: Detector | None, recorders: Sequence[Observer] = ()) -> Replay:
        """Run the harness loop to its end (:meth:`stepwise` without pauses)."""
        stepped = self.stepwise(detector, recorders=recorders)
        try:
            while True:
                next(stepped)
        except StopIteration as done:
            replay: Replay = done.value
            return replay

    def stepwise(self, detector: Detector | None, ledgers: Sequence[Ledger] | None = None,
                 recorders: Sequence[Observer] = ()) -> Generator[None, None, Replay]:
        """Run the harness loop through the one pump
        (:func:`sim.harness.pump.steps`, telling ``recorders``; charging
        ``ledgers``: the shared budgets' ledgers of the run's session; None:
        its own), each effect answered through the engines' table
        (:func:`sim.engines.perform.answers`: ``respond``, ``execute``,
        ``verify``, ``approve``; checkpoints and
        waits need no answer); return what happened. It pauses (yields)
        before the loop's first effect and after each recorded step call is
        answered and charged, so each next step call, and the budget checks
        made before it, wait until the caller resumes it: its turn in the
        session's recorded order (:mod:`sim.drivers.replay.session`). A
        method that ends the replay early raises :class:`_Ended`."""
        state = self.state
        loop = agent_loop(self.params, state, detector=detector, observers=(self._observe,),
                          ledgers=ledgers)
        answer = answers(RunDriver)
        after_step = False  # the last effect answered was a step call

        def perform(effect: Any) -> Generator[None, None, Any]:
            nonlocal after_step
            if after_step:  # the step call was answered and charged: wait for the turn
                yield
            after_step = type(effect) is fx.ModelRequest and effect.purpose == "step"
            return answer[type(effect)](self, effect, 0.0)

        try:
            yield
            yield from steps(loop, perform, recorders)
        except _Ended as ended:
            return self._finish(loop, state, ended.by)
        except GeneratorExit:  # the session ended before this run did
            loop.close()
            raise
        return self._finish(None, state, "harness")

    def cancel(self, steps: Generator[None, None, Replay]) -> Replay:
        """End a run paused in :meth:`stepwise` because the session ended
        (its parent ended): status ``cancelled``, reason ``parent_ended``."""
        steps.close()
        return self._finish(None, self.state, PARENT_ENDED)

    def respond(self, request: fx.ModelRequest, now: float) -> fx.ModelResponse:
        """A model request: a step gets the next recorded step's response; a
        compaction the recorded one where the old harness compacted too, else
        its worst case (an intervention)."""
        if request.purpose != "step":
            recorded = self._extra("compaction")
            if recorded is not None:  # the old harness compacted here too
                return self._recorded_response(recorded, [TextBlock(
                    "", recorded.usage.output_tokens)], "end_turn")
            self._intervene(COMPACTION)
            self._stop_on_intervention()
            return self._worst_case(request)
        self._pass_over_extras()
        if self.next_call >= len(self.run.calls):  # what the harness added
            raise _Ended("recording")  # last is not read
        self._look_back(self.state, request)
        if self.interventions:
            self._stop_on_intervention()
        return self._respond(request)

    @property
    def mid_step(self) -> bool:
        """Whether tool calls of the last answered response were not run and
        its step's checkpoint did not pass (the run stopped inside that step).
        Per step: a tool call the harness refused (it asks the driver nothing)
        does not make a later stop read as mid-step, once the step's
        checkpoint passed (:meth:`checkpoint`)."""
        return self.step_run < self.step_due

    def checkpoint(self, effect: fx.Checkpoint, now: float) -> None:
        """The loop's checkpoint after a step: every tool call of the last
        answered response was taken (run, or refused by the harness, which
        asks the driver nothing), so a stop from here on is not mid-step.
        The checkpoint a run stopped mid-step leaves once it has ended
        changes nothing."""
        if not self.state.terminal:
            self.step_due = self.step_run

    def execute(self, request: fx.ToolRequest, now: float) -> fx.ToolResult | fx.ToolError:
        """A tool request: the result sized when its call was answered; a
        retry the old harness did not make is an intervention."""
        if request.attempt > 0:
            self._intervene(TOOL_RETRY)
            self._stop_on_intervention()
        else:
            self.tools_run += 1
            self.step_run += 1
        return self.answered[request.call.id]

    def verify(self, request: fx.VerifyRequest, now: float) -> fx.Verdict:
        """A verification: the recorded resolved (:meth:`_verdict`)."""
        verdict = self._verdict()
        if self.interventions:
            self._stop_on_intervention()
        return verdict

    def approve(self, request: fx.ApprovalRequest, now: float) -> fx.ApprovalDecision:
        """An approval: granted (the recorded call ran)."""
        return fx.ApprovalDecision(True)

    def _stop_on_intervention(self) -> None:
        """In stop mode, end the replay at the intervention just noted."""
        if self.stop:
            raise _Ended("intervention")

    def _observe(self, event: ev.Event) -> None:
        signal = event.data.get("signal")
        if signal is not None and event.kind in (ev.NUDGE, ev.TERMINAL):
            self.firings.append((max(event.turn - 1, 0), str(signal)))

    def _intervene(self, kind: str) -> None:
        self.interventions.append((max(self.next_call - 1, 0), kind))

    def _extra(self, purpose: str) -> CallRecord | None:
        """The next recorded call if it is a ``purpose`` call (taken), else None."""
        calls = self.run.calls
        if self.next_call < len(calls) and calls[self.next_call].purpose == purpose:
            self.next_call += 1
            return calls[self.next_call - 1]
        return None

    def _pass_over_extras(self) -> None:
        """Skip recorded compaction and verifier calls the candidate did not ask for."""
        calls = self.run.calls
        while self.next_call < len(calls) and not calls[self.next_call].is_step:
            self.next_call += 1
            self.passed_over += 1

    def _recorded_response(self, call: CallRecord, content: list[Block], reason: str
                           ) -> fx.ModelResponse:
        """The response of a recorded call (the one just taken: number
        ``next_call - 1``), its cost counted."""
        self.costs.append(self.one_price[self.next_call - 1])
        self.priced.append(self.priced_calls[self.next_call - 1])
        return fx.ModelResponse(content, call.usage, reason, call.latency_s or 0.0,
                             call.model or self.run.model or self.params.model)

    # ------------------------------------------------------ model calls
    def _look_back(self, state: HarnessState, request: fx.ModelRequest) -> None:
        """Before answering a step: note what the harness injected since the
        last step (interventions) and compare its prompt count with the
        recording (up to the first intervention).

        What the harness injects (a nudge, a 'do without it' message, verifier
        feedback, a continuation request) joins the user message after the
        last model response, so that message is where to look; blocks already
        reported are remembered (and kept alive, so their ids stay unique)."""
        injected = False
        last = state.messages[-1] if state.messages else None
        if last is not None and last.role == "user":
            for block in last.content:
                origin = getattr(block, "origin", "")
                if not origin or id(block) in self.reported:
                    continue
                self.reported[id(block)] = block
                injected = True
                kind = INJECTED.get(origin, origin)
                if kind is not None:
                    self._intervene(kind)
        k = self.next_call
        if (self.check_prompt and not injected and not self.interventions
                and k < len(self.run.calls)):
            deviation = request.prompt_tokens - self.run.calls[k].usage.prompt_tokens
            if deviation:
                self.mismatches += 1
                self.max_deviation = max(self.max_deviation, abs(deviation))
        self.check_prompt = True

    def _respond(self, request: fx.ModelRequest) -> fx.ModelResponse:
        self.prompt_counts.append(request.prompt_tokens)
        k = self.next_call
        calls = self.run.calls
        call = calls[k]
        self.next_call += 1
        content: list[Block] = []
        if call.text_tokens:
            content.append(TextBlock(call.text_sha256 or "", call.text_tokens))
        results: list[tuple[ToolUseBlock, ToolCallRecord | None]] = []
        for i, tool in enumerate(call.tool_calls):
            arguments = tool.input()
            if arguments is None:
                self.unrecorded += 1
                arguments = {"unrecorded_arguments": f"{k}.{i}"}
            results.append((ToolUseBlock(f"c{k}.{i}", tool.name, arguments), tool))
        if not call.tool_calls and k != self.last_step:  # a text turn: the conversation goes on
            self.text_turns += 1
            message = call.text_sha256 or f"call {k}"
            results.append((ToolUseBlock(f"c{k}.reply", self.reply, {"message": message}), None))
        reason = stop_reason(call.finish_reason, bool(results))
        self.step_run = 0
        self.step_due = 0 if reason == "max_tokens" else len(results)  # truncated: none run
        sizes = self._sizes(k, request, results)
        for (block, answered), tokens in zip(results, sizes, strict=True):
            self.answered[block.id] = self._result(k, block, answered, tokens)
        content.extend(block for block, _ in results)
        return self._recorded_response(call, content, reason)

    def _sizes(self, k: int, request: fx.ModelRequest,
               results: list[tuple[ToolUseBlock, ToolCallRecord | None]]) -> list[int]:
        """Token sizes of the step's results so that the next prompt the harness
        counts is the next recorded one (see the module docstring)."""
        base = [(tool.result_tokens or 0) if tool is not None else 0 for _, tool in results]
        calls = self.run.calls
        following = self.next_step.get(k)
        if not results or following is None:
            return base
        call = calls[k]
        growth = (calls[following].usage.prompt_tokens - request.prompt_tokens
                  - call.usage.output_tokens - call.usage.thinking_tokens)
        total = sum(base)
        if growth >= total:
            base[-1] += growth - total
            return base
        if growth < 0:  # inexpressible: counted when the next request comes
            return [0] * len(base)
        self.resized += 1
        sizes = [b * growth // total for b in base]
        sizes[-1] += growth - sum(sizes)
        return sizes

    def _result(self, k: int, block: ToolUseBlock, tool: ToolCallRecord | None, tokens: int
                ) -> fx.ToolResult | fx.ToolError:
        if tool is None:  # the reply to a text turn
            reply = self.run.calls[k].observation_sha256 or f"reply after call {k}"
            return fx.ToolResult(reply, tokens, 0.0)
        duration = tool.duration_s or 0.0
        if tool.error:
            return fx.ToolError(self.options.tool_error_kind, f"recorded error of {tool.name}",
                             tokens, duration)
        output = tool.result_sha256 or f"unrecorded result of {block.id}"
        return fx.ToolResult(output, tokens, duration)

    def _worst_case(self, request: fx.ModelRequest) -> fx.ModelResponse:
        """A call the recording does not hold (a compaction): the worst case of
        the request, priced at the run's prices."""
        usage = Usage(input_tokens=request.prompt_tokens, output_tokens=request.max_output_tokens)
        cost = call_cost(self.params.prices, usage)
        self.costs.append(cost)
        self.priced.append(cost)
        self.check_prompt = False  # the history was rewritten: the next count differs
        return fx.ModelResponse([TextBlock("", request.max_output_tokens)], usage, "end_turn")

    def _verdict(self) -> fx.Verdict:
        """The recorded resolved as the verdict, with the usage of a recorded
        verifier call (a model grader) when the next recorded call is one."""
        graded = self._extra("verifier")
        usage = None
        if graded is not None:
            self._recorded_response(graded, [], "end_turn")  # counts its cost
            usage = graded.usage
        resolved = self.run.resolved
        if resolved is None:
            self.verdict_unknown = True
            return fx.Verdict(True, usage=usage)
        if not resolved:
            self._intervene(VERIFIER_REJECTION)
        return fx.Verdict(bool(resolved), usage=usage,
                       duration_s=graded.latency_s or 0.0 if graded is not None else 0.0)

    # ------------------------------------------------------------ ending
    def _finish(self, loop: Any, state: HarnessState, ended_by: str) -> Replay:
        if loop is not None:
            loop.close()
        run = self.run
        priced = self.priced_calls
        stopped_at, status, reason, outcome = ending(
            run, self.steps, self.interventions, ended_by, state.status, state.reason,
            state.turns, self.mid_step, self.verdict_unknown)
        return Replay(
            run=run, state=state, ended_by=ended_by, outcome=outcome, status=status,
            reason=reason, calls=len(self.costs), tools_run=self.tools_run,
            cost_usd=math.fsum(self.costs), stopped_at=stopped_at,
            interventions=self.interventions, firings=self.firings,
            prompt_mismatches=self.mismatches, prompt_max_deviation=self.max_deviation,
            resized=self.resized, text_turns=self.text_turns,
            unrecorded_arguments=self.unrecorded, verdict_unknown=self.verdict_unknown,
            priced_usd=math.fsum(self.priced), recorded_calls_usd=math.fsum(self.one_price),
            recorded_priced_usd=math.fsum(priced), prompt_counts=self.prompt_counts,
            passed_over=self.passed_over, basis=run_basis(self.bases) if self.bases
            else RECORDED if run.cost_usd is not None else UNPRICED)
