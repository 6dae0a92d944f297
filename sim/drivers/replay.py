"""What-if replay: the real harness loop, its effects answered from a recorded run.

:func:`replay_run` drives :func:`sim.harness.loop.agent_loop` (unchanged) with
candidate harness parameters and answers each effect from one
:class:`~sim.drivers.recorded_runs.RecordedRun`:

- a **model request** (a loop step) gets the next recorded call's response: a
  text block of the recorded text size, one tool_use block per recorded tool
  call (its real name and arguments), the recorded usage (input, cache read,
  cache write, output, reasoning as thinking), the finish reason mapped to a
  stop_reason and the recorded latency;
- a **tool request** gets the recorded result (a :class:`ToolResult` of the
  recorded size and duration, its output the result's SHA-256 so the
  no-progress detector sees when results repeat) or, for a result flagged as
  an error, a :class:`ToolError` of ``tool_error_kind`` (traces do not record
  the kind; the default ``validation`` is passed to the model, as the old
  harness did; ``transient`` asks what a harness that retries them would do);
- a **verification** gets the recorded ``resolved`` (a run the source does not
  judge passes, as it did when it was recorded); approvals are granted, waits
  and checkpoints need no answer.

**Prompt sizes are the recorded ones.** The replayed history starts with call
0's whole prompt as the first message, and the tokens entering between call k
and call k+1 (call k's output and reasoning, which the harness appends itself,
plus the tool results and the non-tool messages such as a user's reply) are
sized so that the harness's own count of call k+1's prompt equals the
recorded one: what the recorded growth holds beyond the output and the
recorded result sizes travels on the step's last tool result, and recorded
result sizes larger than the growth (an approximate count) are scaled down to
fit. So every budget sees the recorded numbers. A growth smaller than the
previous call's output cannot be expressed (the source compacted, or dropped
reasoning from the history): the harness then counts more than the recording
for that call, the replay counts it per run (``prompt_mismatches``) and the
next step's growth is sized to return to the recorded count.

**Text turns.** In a conversational source (tau2) the agent sends text-only
messages to a simulated user and the conversation continues; the harness
would take a response without tool calls as a final answer. So a text-only
response that is not the run's last call is given to the harness as a call of
the synthetic tool ``reply_to_user`` whose result is the user's reply (the
call's ``observation_tokens``). Its arguments are derived from the text
(``text_sha256`` when the source records it, else the call's index, so only
identical messages can repeat), and it is a polling tool for the detector:
keyed on the message *and* the reply, so answering a changing conversation is
never a repetition. The run's last call, when it has no tool calls, is the
final answer the harness verifies or accepts.

**Divergence is stated, never hidden.** The recording can be followed while
the candidate does what the old harness did:

- the candidate *stops* a run earlier (a budget, a detector stop, a spent retry
  budget, a fatal error): exact; the run ends there in the harness's terminal
  state, with the cost of the calls made;
- the candidate *intervenes* in a way the recording cannot answer (a nudge or
  another injected message, a retry of a tool error the old harness passed on,
  a rejected claim, a compaction): with ``after_intervention="continue"`` the
  run goes on as recorded (an upper bound on its cost; the run is flagged
  ``diverged``), with ``"stop"`` it ends there as ``diverged:<kind>`` (a lower
  bound). A compaction call the recording does not hold is answered with its
  worst case (the request's prompt and its output cap, priced at the run's
  prices) and the following steps are sized toward the recorded prompts again
  (the harness's count after a compaction is not checked);
- the recording ends while the harness would go on (the user or the old
  harness ended the conversation): the run ends as recorded. A nudge (or
  another injected message) after the last recorded call is never read, so it
  is not a divergence (a detector firing there still counts as a firing); a
  rejected final answer is, since the model might have repaired it.

**Outcomes.** A run the candidate stops: its harness outcome
(``budget_exhausted:tokens``, ``needs_human:no_progress``...). A run it lets
finish: ``succeeded`` when the source says it was resolved; ``false_success``
when the harness accepted a final answer of an unresolved run;
``succeeded:<reason>`` for an accepted answer the source does not judge;
``ended:<exit>`` (the source's exit label) when the recording ended without an
accepted answer of a resolved run. ``diverged:<kind>`` in stop mode.

**Calls that are not steps.** sim's own recorded runs hold compaction and
model-grader calls too (``purpose``): a compaction the candidate asks for where
the recording made one is answered with it, a verification with the recorded
grader call's usage; recorded ones the candidate does not ask for are passed
over (and counted).

**Cost** is the recorded per-call cost where recorded, so savings are in
recorded dollars; a call without a recorded cost (and a worst-case compaction)
is priced at the run's prices (:func:`run_params`).

**Prices are the call-level model's** (:func:`price_models`): each call is
charged by the harness (the money budget) and priced at the prices of the
model that answered it (``calls.model``; the run's model only when the call
names none), looked up in the catalogue. A model the catalogue does not know is
never priced silently at the scenario's prices: it is priced from the recorded
costs of its calls (the scenario's price ratios, scaled so that its recorded
calls cost in total what was recorded), and listed; only a model without any
recorded cost falls back to the scenario's prices, listed as such.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sim.bad_input import InputError
from sim.drivers.recorded_runs import RecordedCall, RecordedRun, RecordedTool
from sim.harness import events as ev
from sim.harness.detector import Detector
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    ModelRequest,
    ModelResponse,
    ToolError,
    ToolRequest,
    ToolResult,
    Verdict,
    VerifyRequest,
    Wait,
)
from sim.harness.loop import agent_loop
from sim.harness.messages import Block, TextBlock, ToolUseBlock, Usage
from sim.harness.params import HarnessParams, ParameterError, Prices, ToolSpec
from sim.harness.state import SUCCEEDED, HarnessState, new_state
from sim.task_record import FALSE_SUCCESS, TaskRecord

REPLY_TOOL = "reply_to_user"
"""The synthetic tool standing for a text-only message in the middle of a run."""

AFTER_INTERVENTION: tuple[str, ...] = ("continue", "stop")
TOOL_ERROR_KINDS: tuple[str, ...] = ("validation", "not_found", "permission", "transient",
                                     "timeout", "rate_limit", "fatal")

ENDED = "ended"
DIVERGED = "diverged"

# intervention kinds
NUDGE = "nudge"
TOOL_RETRY = "tool_retry"
VERIFIER_REJECTION = "verifier_rejection"
COMPACTION = "compaction"
_INJECTED = {"nudge": NUDGE, "tool_disabled": "tool_disabled", "verifier": None,
             "continuation": "continuation", "denied": "denied", "summary": None}
"""Origins of harness-injected text and the intervention each stands for (None:
already reported by the effect that caused it)."""

_STOP_REASONS = {
    "end_turn": "end_turn", "stop": "end_turn", "eos": "end_turn", "content_filter": "end_turn",
    "refusal": "end_turn", "pause_turn": "end_turn", "tool_use": "tool_use",
    "tool_calls": "tool_use", "function_call": "tool_use", "max_tokens": "max_tokens",
    "length": "max_tokens", "model_length": "max_tokens", "stop_sequence": "stop_sequence",
}


def stop_reason(finish_reason: str | None, has_tool_calls: bool) -> str:
    """The harness's stop_reason for a recorded finish reason: Anthropic's
    names kept, OpenAI's mapped (``stop`` -> ``end_turn``, ``tool_calls`` ->
    ``tool_use``, ``length`` -> ``max_tokens``); an unknown or missing reason
    is ``tool_use`` when the response made tool calls, else ``end_turn``.

    >>> stop_reason("length", False), stop_reason(None, True), stop_reason("stop", False)
    ('max_tokens', 'tool_use', 'end_turn')
    """
    mapped = _STOP_REASONS.get((finish_reason or "").lower())
    if mapped is None:
        return "tool_use" if has_tool_calls else "end_turn"
    return mapped


@dataclass(frozen=True)
class ReplayOptions:
    """How the replay answers what the recording cannot: ``after_intervention``
    (``continue``: follow the recording, an upper bound; ``stop``: end the run
    there, a lower bound), ``tool_error_kind`` (the kind the candidate's error
    classifier sees for a recorded tool error) and ``polling`` (tool names the
    detector keys on call and result, besides ``reply_to_user``)."""

    after_intervention: str = "continue"
    tool_error_kind: str = "validation"
    polling: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.after_intervention not in AFTER_INTERVENTION:
            raise ValueError(f"after_intervention must be one of {AFTER_INTERVENTION}, "
                             f"got {self.after_intervention!r}")
        if self.tool_error_kind not in TOOL_ERROR_KINDS:
            raise ValueError(f"tool_error_kind must be one of {TOOL_ERROR_KINDS}, "
                             f"got {self.tool_error_kind!r}")


@dataclass
class Replay:
    """What the candidate did to one recorded run.

    ``state`` is the harness's state when the replay ended; ``ended_by`` is
    ``harness`` (a terminal state), ``recording`` (no recorded call left) or
    ``intervention`` (stop mode); ``outcome``, ``status`` and ``reason`` are
    the run's result (see the module docstring). ``calls`` and ``cost_usd``
    count the model calls answered (a worst-case compaction included) and their
    cost (USD, recorded where recorded), ``priced_usd`` their cost at the run's
    prices; ``recorded_calls_usd`` and ``recorded_priced_usd`` are the same for
    every recorded call; ``tools_run`` counts tool requests answered (first
    attempts). ``stopped_at`` is the index of the recorded call at which the
    candidate stopped the run (None: it did not); ``interventions`` and
    ``firings`` list ``(call index, kind or detector signal)``.

    Fidelity: ``prompt_counts`` is the harness's own count of each step's
    prompt, in order; ``prompt_mismatches`` counts the calls whose count
    differs from the recording (up to the first intervention, which changes the
    history itself) and ``prompt_max_deviation`` is the largest difference
    (tokens); ``resized`` counts steps whose recorded result sizes were scaled
    down to the recorded growth; ``text_turns`` the mid-run text-only calls
    replayed as ``reply_to_user``; ``unrecorded_arguments`` the tool calls
    without recorded arguments (each made distinct, so never a repetition);
    ``verdict_unknown`` whether a verifier checked an answer the source does
    not judge; ``passed_over`` the recorded compaction or verifier calls (sim's
    own runs) the candidate did not ask for (their cost is saved)."""

    run: RecordedRun
    state: HarnessState
    ended_by: str
    outcome: str
    status: str
    reason: str
    calls: int
    tools_run: int
    cost_usd: float
    stopped_at: int | None = None
    interventions: list[tuple[int, str]] = field(default_factory=list)
    firings: list[tuple[int, str]] = field(default_factory=list)
    prompt_mismatches: int = 0
    prompt_max_deviation: int = 0
    resized: int = 0
    text_turns: int = 0
    unrecorded_arguments: int = 0
    verdict_unknown: bool = False
    priced_usd: float = 0.0
    recorded_calls_usd: float = 0.0
    recorded_priced_usd: float = 0.0
    prompt_counts: list[int] = field(default_factory=list)
    passed_over: int = 0

    @property
    def stopped(self) -> bool:
        """Whether the candidate ended the run before the recording did."""
        return self.stopped_at is not None

    @property
    def diverged(self) -> bool:
        """Whether the candidate intervened where the recording cannot answer."""
        return bool(self.interventions)

    @property
    def saved_usd(self) -> float:
        """Cost of the recorded calls (``recorded_calls_usd``) minus the cost of
        the calls replayed (``cost_usd``): 0.0 exactly for a run replayed whole."""
        return self.recorded_calls_usd - self.cost_usd

    @property
    def saved_priced_usd(self) -> float:
        """The same saving at the run's prices."""
        return self.recorded_priced_usd - self.priced_usd


@dataclass(frozen=True)
class ModelPricing:
    """How a replay prices each model its recorded calls name (:func:`price_models`).

    ``prices`` by model name; ``catalogue``: the models priced from the price
    catalogue; ``recorded``: the models the catalogue does not know, priced
    from their recorded costs, each ``{"calls", "recorded_usd", "scale"}``
    (the scenario's prices times ``scale``); ``default``: the models neither
    the catalogue nor a recorded cost prices, priced at the scenario's prices."""

    prices: dict[str, Prices]
    catalogue: tuple[str, ...] = ()
    recorded: dict[str, dict[str, float]] = field(default_factory=dict)
    default: tuple[str, ...] = ()

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The models not in the catalogue (priced from recorded costs or by default)."""
        return tuple(sorted({*self.recorded, *self.default}))

    def notes(self) -> list[str]:
        """What a user must be told: one line per way a model was not catalogue-priced."""
        out = []
        for model, entry in sorted(self.recorded.items()):
            out.append(f"warning: model {model!r} is not in the price catalogue: priced from "
                       f"the recorded cost of its {int(entry['calls']):,} calls "
                       f"(${entry['recorded_usd']:,.4f}; the scenario's prices times "
                       f"{entry['scale']:.4g})")
        for model in self.default:
            out.append(f"warning: model {model!r} is not in the price catalogue and no call "
                       "of it records a cost: priced at the scenario's prices")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"catalogue": sorted(self.catalogue),
                "from_recorded_cost": {m: dict(e) for m, e in sorted(self.recorded.items())},
                "scenario_prices": sorted(self.default)}


def call_model(call: RecordedCall, run: RecordedRun, template: HarnessParams) -> str:
    """The model that answered ``call``: its own, else the run's, else the template's."""
    return call.model or run.model or template.model


def price_models(runs: list[RecordedRun], template: HarnessParams,
                 prices_for: Callable[[str | None], Prices | None] | None = None
                 ) -> ModelPricing:
    """Prices for every model the recorded calls name (see the module):
    ``prices_for(model)`` (the catalogue; None: unknown), else from the
    recorded costs of that model's calls, else the template's prices."""
    recorded_usd: dict[str, list[float]] = {}
    at_template: dict[str, list[float]] = {}
    names: dict[str, None] = {}
    for run in runs:
        for call in run.calls:
            name = call_model(call, run, template)
            names.setdefault(name, None)
            if call.cost_usd is not None:
                recorded_usd.setdefault(name, []).append(call.cost_usd)
                at_template.setdefault(name, []).append(_priced(template.prices, call))
    prices: dict[str, Prices] = {}
    catalogue, default = [], []
    recorded: dict[str, dict[str, float]] = {}
    for name in names:
        found = prices_for(name) if prices_for is not None else template.prices
        if found is not None:
            prices[name] = found
            catalogue.append(name)
            continue
        paid, priced = math.fsum(recorded_usd.get(name, ())), math.fsum(at_template.get(name, ()))
        scale = paid / priced if priced > 0 else math.nan
        if math.isfinite(scale) and scale > 0:
            base = template.prices.base
            prices[name] = replace(base, input=base.input * scale, output=base.output * scale,
                                   cache_read=base.cache_read * scale,
                                   cache_write=base.cache_write * scale,
                                   thinking=None if base.thinking is None
                                   else base.thinking * scale)
            recorded[name] = {"calls": float(len(recorded_usd[name])), "recorded_usd": paid,
                              "scale": scale}
        else:
            prices[name] = template.prices
            default.append(name)
    return ModelPricing(prices, tuple(catalogue), recorded, tuple(default))


def run_params(template: HarnessParams, run: RecordedRun, prices: Prices | None = None,
               options: ReplayOptions | None = None,
               pricing: ModelPricing | None = None) -> HarnessParams:
    """The candidate's parameters for one recorded run: ``template`` (the
    scenario's harness settings) with the run's own tools (every recorded tool
    name, plus ``reply_to_user``; effect ``read``; no definition tokens, since
    call 0's prompt already holds them; timeout = the tool's longest recorded
    duration, the worst case the time budgets check before a call), no prompt
    prefix of its own (call 0's prompt is the first message), the model of its
    first call (else the run's), ``prices`` (None: the template's) or, with
    ``pricing``, that model's prices and those of the run's other call-level
    models (``model_prices``), and a free verifier (its verdict is the
    recorded one)."""
    options = options or ReplayOptions()
    longest: dict[str, float] = {}
    for call in run.calls:
        for tool in call.tools:
            longest[tool.name] = max(longest.get(tool.name, 0.0), tool.duration_s or 0.0)
    reply = reply_tool_name(run)
    polling = options.polling | {reply}
    specs = [ToolSpec(name, "read", max(seconds, 1e-3), name in polling, 0)
             for name, seconds in longest.items()]
    specs.append(ToolSpec(reply, "read", 1e-3, True, 0))
    verifier = replace(template.verifier, max_prompt_tokens=0, max_output_tokens=0,
                       max_duration_s=0.0)
    model = call_model(run.calls[0], run, template) if run.calls else (run.model
                                                                       or template.model)
    others: tuple[tuple[str, Prices], ...] = ()
    if pricing is not None:
        prices = pricing.prices.get(model, prices)
        names = dict.fromkeys(call_model(c, run, template) for c in run.calls)
        others = tuple((name, pricing.prices[name]) for name in names
                       if name != model and name in pricing.prices)
    return replace(template, system_prompt_tokens=0, tools=tuple(specs),
                   model=model, verifier=verifier,
                   prices=template.prices if prices is None else prices,
                   model_prices=others or template.model_prices)


def reply_tool_name(run: RecordedRun) -> str:
    """``reply_to_user``, or a variant when the run has a real tool of that name."""
    names = {t.name for c in run.calls for t in c.tools}
    name = REPLY_TOOL
    while name in names:
        name = f"_{name}"
    return name


def replay_run(run: RecordedRun, params: HarnessParams, options: ReplayOptions | None = None,
               detector: Detector | None = None) -> Replay:
    """Drive the harness over ``run`` with ``params`` (see :func:`run_params`);
    return what happened (:class:`Replay`). Deterministic."""
    return _Driver(run, params, options or ReplayOptions()).drive(detector)


# ------------------------------------------------------------------ driver
class _Driver:
    """Answers one run's effects from its recording (one instance per run)."""

    def __init__(self, run: RecordedRun, params: HarnessParams, options: ReplayOptions) -> None:
        self.run = run
        self.params = params
        self.options = options
        self.reply = reply_tool_name(run)
        calls = run.calls
        self.steps = [i for i, c in enumerate(calls) if c.purpose == "step"]
        self.next_step = {a: b for a, b in zip(self.steps, self.steps[1:], strict=False)}
        self.last_step = self.steps[-1] if self.steps else -1
        self.next_call = 0  # index of the next recorded call not yet answered or passed over
        self.passed_over = 0  # recorded compaction or verifier calls the candidate did not make
        self.answered: dict[str, ToolResult | ToolError] = {}
        self.prompt_counts: list[int] = []
        self.costs: list[float] = []  # recorded (priced where unrecorded), per call answered
        self.priced: list[float] = []  # at the run's prices, per call answered
        self.tools_run = 0
        self.tools_due = 0  # tool calls of the answered responses
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

    # -------------------------------------------------------------- loop
    def drive(self, detector: Detector | None) -> Replay:
        first = self.run.calls[self.steps[0]].usage.prompt_tokens if self.steps else 0
        state = new_state(self.params.prefix_tokens, self.params.model, "recorded run",
                          task_tokens=first)
        loop = agent_loop(self.params, state, detector=detector, observers=(self._observe,))
        stop = self.options.after_intervention == "stop"
        result: Any = None
        try:
            while True:
                effect = loop.send(result)
                if type(effect) is ModelRequest:
                    if effect.purpose != "step":
                        recorded = self._extra("compaction")
                        if recorded is not None:  # the old harness compacted here too
                            result = self._recorded_response(recorded, [TextBlock(
                                "", recorded.usage.output_tokens)], "end_turn")
                            continue
                        self._intervene(COMPACTION)
                        if stop:
                            return self._finish(loop, state, "intervention")
                        result = self._worst_case(effect)
                        continue
                    self._pass_over_extras()
                    if self.next_call >= len(self.run.calls):  # what the harness added
                        return self._finish(loop, state, "recording")  # last is not read
                    self._look_back(state, effect)
                    if stop and self.interventions:
                        return self._finish(loop, state, "intervention")
                    result = self._respond(effect)
                elif type(effect) is ToolRequest:
                    if effect.attempt > 0:
                        self._intervene(TOOL_RETRY)
                        if stop:
                            return self._finish(loop, state, "intervention")
                    else:
                        self.tools_run += 1
                    result = self.answered[effect.call.id]
                elif type(effect) is VerifyRequest:
                    result = self._verdict()
                    if stop and self.interventions:
                        return self._finish(loop, state, "intervention")
                elif type(effect) is ApprovalRequest:
                    result = ApprovalDecision(True)  # the recorded call ran
                elif type(effect) is Checkpoint or type(effect) is Wait:
                    result = None
                else:
                    raise TypeError(f"unknown effect {effect!r}")
        except StopIteration:
            return self._finish(None, state, "harness")

    def _observe(self, event: ev.Event) -> None:
        signal = event.data.get("signal")
        if signal is not None and event.kind in (ev.NUDGE, ev.TERMINAL):
            self.firings.append((max(event.turn - 1, 0), str(signal)))

    def _intervene(self, kind: str) -> None:
        self.interventions.append((max(self.next_call - 1, 0), kind))

    def _extra(self, purpose: str) -> RecordedCall | None:
        """The next recorded call if it is a ``purpose`` call (taken), else None."""
        calls = self.run.calls
        if self.next_call < len(calls) and calls[self.next_call].purpose == purpose:
            self.next_call += 1
            return calls[self.next_call - 1]
        return None

    def _pass_over_extras(self) -> None:
        """Skip recorded compaction and verifier calls the candidate did not ask for."""
        calls = self.run.calls
        while self.next_call < len(calls) and calls[self.next_call].purpose != "step":
            self.next_call += 1
            self.passed_over += 1

    def _recorded_response(self, call: RecordedCall, content: list[Block], reason: str
                           ) -> ModelResponse:
        """The response of a recorded call, its cost counted."""
        priced = _priced(_prices_of(self.params, call.model), call)
        self.costs.append(priced if call.cost_usd is None else call.cost_usd)
        self.priced.append(priced)
        return ModelResponse(content, call.usage, reason, call.latency_s or 0.0,
                             call.model or self.run.model or self.params.model)

    # ------------------------------------------------------ model calls
    def _look_back(self, state: HarnessState, request: ModelRequest) -> None:
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
                kind = _INJECTED.get(origin, origin)
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

    def _respond(self, request: ModelRequest) -> ModelResponse:
        self.prompt_counts.append(request.prompt_tokens)
        k = self.next_call
        calls = self.run.calls
        call = calls[k]
        self.next_call += 1
        content: list[Block] = []
        if call.text_tokens:
            content.append(TextBlock(call.text_sha256 or "", call.text_tokens))
        results: list[tuple[ToolUseBlock, RecordedTool | None]] = []
        for i, tool in enumerate(call.tools):
            arguments = tool.input()
            if arguments is None:
                self.unrecorded += 1
                arguments = {"unrecorded_arguments": f"{k}.{i}"}
            results.append((ToolUseBlock(f"c{k}.{i}", tool.name, arguments), tool))
        if not call.tools and k != self.last_step:  # a text turn: the conversation goes on
            self.text_turns += 1
            message = call.text_sha256 or f"call {k}"
            results.append((ToolUseBlock(f"c{k}.reply", self.reply, {"message": message}), None))
        reason = stop_reason(call.finish_reason, bool(results))
        if reason != "max_tokens":  # a truncated response's tool calls are not run
            self.tools_due += len(results)
        sizes = self._sizes(k, request, results)
        for (block, answered), tokens in zip(results, sizes, strict=True):
            self.answered[block.id] = self._result(k, block, answered, tokens)
        content.extend(block for block, _ in results)
        return self._recorded_response(call, content, reason)

    def _sizes(self, k: int, request: ModelRequest,
               results: list[tuple[ToolUseBlock, RecordedTool | None]]) -> list[int]:
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

    def _result(self, k: int, block: ToolUseBlock, tool: RecordedTool | None, tokens: int
                ) -> ToolResult | ToolError:
        if tool is None:  # the reply to a text turn
            reply = self.run.calls[k].observation_sha256 or f"reply after call {k}"
            return ToolResult(reply, tokens, 0.0)
        duration = tool.duration_s or 0.0
        if tool.error:
            return ToolError(self.options.tool_error_kind, f"recorded error of {tool.name}",
                             tokens, duration)
        output = tool.result_sha256 or f"unrecorded result of {block.id}"
        return ToolResult(output, tokens, duration)

    def _worst_case(self, request: ModelRequest) -> ModelResponse:
        """A call the recording does not hold (a compaction): the worst case of
        the request, priced at the run's prices."""
        usage = Usage(input_tokens=request.prompt_tokens, output_tokens=request.max_output_tokens)
        prices = self.params.prices.at(usage.prompt_tokens)
        cost = prices.cost(usage.input_tokens, usage.output_tokens)
        self.costs.append(cost)
        self.priced.append(cost)
        self.check_prompt = False  # the history was rewritten: the next count differs
        return ModelResponse([TextBlock("", request.max_output_tokens)], usage, "end_turn")

    def _verdict(self) -> Verdict:
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
            return Verdict(True, usage=usage)
        if not resolved:
            self._intervene(VERIFIER_REJECTION)
        return Verdict(bool(resolved), usage=usage,
                       duration_s=graded.latency_s or 0.0 if graded is not None else 0.0)

    # ------------------------------------------------------------ ending
    def _finish(self, loop: Any, state: HarnessState, ended_by: str) -> Replay:
        if loop is not None:
            loop.close()
        run = self.run
        priced = [_priced(_prices_of(self.params, c.model), c) for c in run.calls]
        steps_made = state.turns
        mid_step = self.tools_run < self.tools_due
        stopped_at = None
        if (ended_by == "harness" and state.status != SUCCEEDED
                and (steps_made < len(self.steps) or mid_step)):
            stopped_at = self.steps[steps_made - 1 if mid_step else steps_made]
        if stopped_at is not None:
            status, reason = state.status, state.reason
            outcome = f"{status}:{reason}"
        elif ended_by == "intervention":
            status, reason = DIVERGED, self.interventions[0][1]
            outcome = f"{status}:{reason}"
        elif ended_by == "harness" and state.status == SUCCEEDED:
            status, reason = state.status, state.reason
            outcome = (f"{status}:{reason}" if run.resolved is None
                       else SUCCEEDED if run.resolved else FALSE_SUCCESS)
        else:  # the recording ended (or the harness ended with it)
            status, reason = ENDED, run.exit or "unknown"
            outcome = SUCCEEDED if run.resolved else f"{ENDED}:{reason}"
        return Replay(
            run=run, state=state, ended_by=ended_by, outcome=outcome, status=status,
            reason=reason, calls=len(self.costs), tools_run=self.tools_run,
            cost_usd=math.fsum(self.costs), stopped_at=stopped_at,
            interventions=self.interventions, firings=self.firings,
            prompt_mismatches=self.mismatches, prompt_max_deviation=self.max_deviation,
            resized=self.resized, text_turns=self.text_turns,
            unrecorded_arguments=self.unrecorded, verdict_unknown=self.verdict_unknown,
            priced_usd=math.fsum(self.priced), recorded_calls_usd=math.fsum(
                p if c.cost_usd is None else c.cost_usd
                for c, p in zip(run.calls, priced, strict=True)),
            recorded_priced_usd=math.fsum(priced), prompt_counts=self.prompt_counts,
            passed_over=self.passed_over)


def _prices_of(params: HarnessParams, model: str | None) -> Prices:
    """The prices the harness charges ``model`` at: its ``model_prices``
    entry, else the run's prices."""
    if model and model != params.model:
        for name, prices in params.model_prices:
            if name == model:
                return prices
    return params.prices


def _priced(prices: Prices, call: RecordedCall) -> float:
    """The cost in USD of a recorded call's usage at ``prices``."""
    u = call.usage
    return prices.at(u.prompt_tokens).cost(u.input_tokens, u.output_tokens, u.cache_read_tokens,
                                           u.cache_write_tokens, u.thinking_tokens)


# ----------------------------------------------------------------- records
def task_record(replay: Replay, cell: str, index: int) -> TaskRecord:
    """The :class:`TaskRecord` of a replayed run (the columns every results
    folder has). ``ground_truth`` is -1 (a recording has no hidden ground
    truth) and ``truly_done`` is the recorded ``resolved`` (False when unknown)."""
    s = replay.state
    return TaskRecord(
        cell=cell, task=index, state=replay.status, reason=replay.reason,
        outcome=replay.outcome, steps=s.turns, tool_calls=s.tool_calls,
        input_tokens=s.input_tokens, output_tokens=s.output_tokens,
        cache_read_tokens=s.cache_read_tokens, cache_write_tokens=s.cache_write_tokens,
        thinking_tokens=s.thinking_tokens, cost_usd=replay.cost_usd, active_s=s.active_s,
        wall_s=s.wall_s, retries=s.retries, nudges=s.nudges,
        verifier_rejections=s.verifier_rejections, compactions=s.compactions,
        ground_truth=-1, truly_done=bool(replay.run.resolved), end_s=s.wall_s)


@dataclass(frozen=True)
class RunReplay:
    """One run replayed: ``chosen`` under the requested ``after_intervention``
    mode, and the run under each mode: ``lower`` (stop: the run ends at its
    first intervention) and ``upper`` (continue: it goes on as recorded). For a
    run without an intervention all three are the same replay."""

    chosen: Replay
    lower: Replay
    upper: Replay


def _pairs(items: list[tuple[int, str]]) -> str:
    return ";".join(f"{kind}@{k}" for k, kind in items)


def replay_row(item: RunReplay) -> dict[str, Any]:
    """The replay's own columns of a run's row in results.parquet (beside the
    :class:`TaskRecord` columns): the run's identity and recording (exit,
    resolved, steps, tool calls, prompt and output tokens, recorded cost and
    its price at the run's prices; ``saved_usd``: the recorded cost of the
    calls the candidate did not make, and ``saved_priced_usd`` at the run's
    prices), what the candidate did (stopped and at
    which call, diverged and where and how, detector firings, who ended the
    replay), the two bounds (cost and outcome if the run stops at its first
    intervention and if it continues as recorded) and fidelity (prompt counts
    that differ from the recording, text turns, unrecorded arguments)."""
    r = item.chosen
    run = r.run
    first = r.interventions[0] if r.interventions else None
    return {
        "run_id": run.run_id, "source": run.source, "task_id": run.task_id or "",
        "model": run.model or "", "recorded_exit": run.exit or "",
        "recorded_resolved": run.resolved, "recorded_steps": len(run.calls),
        "recorded_tool_calls": run.tool_calls,
        "recorded_prompt_tokens": run.prompt_tokens,
        "recorded_output_tokens": sum(c.usage.output_tokens + c.usage.thinking_tokens
                                      for c in run.calls),
        "recorded_cost_usd": run.recorded_cost_usd,
        "cost_recorded": all(c.cost_usd is not None for c in run.calls),
        "recorded_calls_usd": r.recorded_calls_usd, "saved_usd": r.saved_usd,
        "recorded_priced_usd": r.recorded_priced_usd, "priced_usd": r.priced_usd,
        "saved_priced_usd": r.saved_priced_usd,
        "ended_by": r.ended_by, "stopped": r.stopped, "stopped_at": r.stopped_at,
        "diverged": r.diverged, "diverged_at": None if first is None else first[0],
        "divergence": "" if first is None else first[1],
        "interventions": _pairs(r.interventions), "detector_signals": _pairs(r.firings),
        "firings": len(r.firings),
        "cost_lower_usd": item.lower.cost_usd, "cost_upper_usd": item.upper.cost_usd,
        "prompt_tokens_lower": item.lower.state.prompt_tokens,
        "prompt_tokens_upper": item.upper.state.prompt_tokens,
        "outcome_if_stop": item.lower.outcome, "outcome_if_continue": item.upper.outcome,
        "prompt_exact": r.prompt_mismatches == 0, "prompt_mismatches": r.prompt_mismatches,
        "prompt_max_deviation": r.prompt_max_deviation, "resized_steps": r.resized,
        "text_turns": r.text_turns, "unrecorded_arguments": r.unrecorded_arguments,
        "passed_over_calls": r.passed_over,
        "verdict_unknown": r.verdict_unknown,
    }


REPLAY_DTYPES: dict[str, str] = {
    "run_id": "string", "source": "string", "task_id": "string", "model": "string",
    "recorded_exit": "string", "recorded_resolved": "boolean", "recorded_steps": "int64",
    "recorded_tool_calls": "int64", "recorded_prompt_tokens": "int64",
    "recorded_output_tokens": "int64", "recorded_cost_usd": "Float64",
    "cost_recorded": "bool", "recorded_calls_usd": "float64", "saved_usd": "float64",
    "recorded_priced_usd": "float64", "priced_usd": "float64", "saved_priced_usd": "float64",
    "ended_by": "string",
    "stopped": "bool", "stopped_at": "Int64", "diverged": "bool", "diverged_at": "Int64",
    "divergence": "string", "interventions": "string", "detector_signals": "string",
    "firings": "int64", "cost_lower_usd": "float64", "cost_upper_usd": "float64",
    "prompt_tokens_lower": "int64", "prompt_tokens_upper": "int64",
    "outcome_if_stop": "string", "outcome_if_continue": "string", "prompt_exact": "bool",
    "prompt_mismatches": "int64", "prompt_max_deviation": "int64", "resized_steps": "int64",
    "text_turns": "int64", "unrecorded_arguments": "int64", "passed_over_calls": "int64",
    "verdict_unknown": "bool",
}
"""pandas dtype of every column of :func:`replay_row` (nullable where a value may be
missing: a run the source does not judge, an unrecorded cost, a run not stopped)."""


def replay_runs(runs: list[RecordedRun], template: HarnessParams, *,
                prices_for: Callable[[str | None], Prices | None] | None = None,
                options: ReplayOptions | None = None,
                make_detector: Callable[[HarnessParams], Detector] | None = None,
                progress: Callable[[int], None] | None = None,
                pricing: ModelPricing | None = None) -> list[RunReplay]:
    """Replay every run (in order) under ``template``: each in the requested
    mode and, when it diverged, in the other mode too (for the bounds).
    Calls are priced by their own model (``pricing``, else
    :func:`price_models` with ``prices_for(model)``: a model's catalogue
    prices, None when unknown; without ``prices_for`` every model takes the
    template's prices), ``make_detector`` builds the candidate's detector from
    a run's parameters, ``progress(done)`` is called after each run.
    Parameters the candidate cannot run a recording with are an InputError
    naming the run."""
    options = options or ReplayOptions()
    if pricing is None:
        pricing = price_models(runs, template, prices_for)
    other = replace(options, after_intervention="stop" if options.after_intervention ==
                    "continue" else "continue")
    out = []
    for i, run in enumerate(runs):
        try:
            params = run_params(template, run, None, options, pricing).validate()
        except ParameterError as error:
            path, message = error.problems[0]
            raise InputError(f"the candidate cannot replay run {run.run_id!r}: {message}",
                             path=f"harness.{path}") from None
        chosen = replay_run(run, params, options, _detector(make_detector, params))
        if chosen.diverged:
            second = replay_run(run, params, other, _detector(make_detector, params))
            lower, upper = ((chosen, second) if options.after_intervention == "stop"
                            else (second, chosen))
        else:
            lower = upper = chosen
        out.append(RunReplay(chosen, lower, upper))
        if progress is not None:
            progress(i + 1)
    return out


def _detector(make: Callable[[HarnessParams], Detector] | None, params: HarnessParams
              ) -> Detector | None:
    """A fresh detector for one replay (None: the harness's default)."""
    return make(params) if make is not None else None
