"""How one recorded run is set up for replay: the options, the constants the
driver and the results share, the stop reason of a recorded finish reason and
the candidate's parameters for the run (:func:`run_params`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from sim.drivers.replay.pricing import ModelPricing, call_model
from sim.harness.params import HarnessParams, Prices, ToolSpec, VerifierParams
from sim.traces.model import RunRecord

REPLY_TOOL = "reply_to_user"
"""The synthetic tool standing for a text-only message in the middle of a run."""

AFTER_INTERVENTION: tuple[str, ...] = ("continue", "stop")
TOOL_ERROR_KINDS: tuple[str, ...] = ("validation", "not_found", "permission", "transient",
                                     "timeout", "rate_limit", "fatal")

ENDED = "ended"
DIVERGED = "diverged"
UNVERIFIED = "unverified"
"""The reason of an answer the candidate's verifier checked and the source
gives no verdict for: accepted (as when recorded), but not verified
(``succeeded:unverified``; the harness's own reason would say ``verified``)."""

# intervention kinds
NUDGE = "nudge"
TOOL_RETRY = "tool_retry"
VERIFIER_REJECTION = "verifier_rejection"
COMPACTION = "compaction"
INJECTED = {"nudge": NUDGE, "tool_disabled": "tool_disabled", "verifier": None,
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



def run_params(template: HarnessParams, run: RunRecord, prices: Prices | None = None,
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
    recorded one). A recorded call of the candidate's subagent tool
    (``subagents.tool``: sim's own traces of a run with subagents, a Claude
    Code ``Task`` call) is a recorded tool like any other: the run is
    replayed without ``subagents`` (its children, if recorded, are replayed
    as runs of their own: :mod:`sim.drivers.replay.session`)."""
    options = options or ReplayOptions()
    longest: dict[str, float] = {}
    for call in run.calls:
        for tool in call.tool_calls:
            longest[tool.name] = max(longest.get(tool.name, 0.0), tool.duration_s or 0.0)
    reply = reply_tool_name(run)
    polling = options.polling | {reply}
    specs = [ToolSpec(name, "read", max(seconds, 1e-3), name in polling, 0)
             for name, seconds in longest.items()]
    specs.append(ToolSpec(reply, "read", 1e-3, True, 0))
    verifier = _free(template.verifier)
    model = call_model(run.calls[0], run, template) if run.calls else (run.model
                                                                       or template.model)
    others: tuple[tuple[str, Prices], ...] = ()
    if pricing is not None:
        prices = pricing.prices.get(model, prices)
        names = dict.fromkeys(call_model(c, run, template) for c in run.calls)
        others = tuple((name, pricing.prices[name]) for name in names
                       if name != model and name in pricing.prices)
    subagents = template.subagents
    if subagents is not None and subagents.tool in longest:  # the recorded spawns
        subagents = None
    return replace(template, system_prompt_tokens=0, tools=tuple(specs), subagents=subagents,
                   model=model, verifier=verifier,
                   prices=template.prices if prices is None else prices,
                   model_prices=others or template.model_prices)


@lru_cache(maxsize=16)
def _free(verifier: VerifierParams) -> VerifierParams:
    """``verifier`` at no cost: its verdict is the recorded one."""
    return replace(verifier, max_prompt_tokens=0, max_output_tokens=0, max_duration_s=0.0)


def reply_tool_name(run: RunRecord) -> str:
    """``reply_to_user``, or a variant when the run has a real tool of that name."""
    names = {t.name for c in run.calls for t in c.tool_calls}
    name = REPLY_TOOL
    while name in names:
        name = f"_{name}"
    return name
