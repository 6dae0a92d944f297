"""Mutable state of one run (history, counters, status) and its outcomes.

The counters are the run's usage: a model call's usage adds itself to them
(:meth:`HarnessState.add_usage`), and :class:`~sim.harness.budgets.Limits`
holds them to the run's budgets.

Everything the loop needs to resume lives here (including the detector's
memory), so a checkpoint is this object serialised with :func:`to_dict` and
restored with :func:`from_dict`.

:data:`OUTCOMES` is the one table of terminal states and the reasons each may
have; :func:`end_run` records a run's end and refuses anything not in it.
Drivers touch a state only through :func:`request_abort`, :func:`park` and
:func:`resume` (and by driving the loop); the loop owns every other field.
:class:`Stop` is the one signal that ends a run, raised (:func:`stop`)
wherever it must end and caught once in :func:`sim.harness.loop.agent_loop`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn

from sim.harness.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    make_message,
    prompt_tokens_of,
    text_block,
)
from sim.harness.prices import Prices

RUNNING = "running"
WAITING_APPROVAL = "waiting_approval"
SUCCEEDED = "succeeded"
NEEDS_HUMAN = "needs_human"
BUDGET_EXHAUSTED = "budget_exhausted"
FAILED = "failed"
CANCELLED = "cancelled"

OUTCOMES: dict[str, frozenset[str]] = {
    # a claimed success checked by the verifier, or accepted unverified; in a
    # conversation, the task-giver ended it (tau2-bench's user_stop)
    # "finalized": the answer of the one tool-free call made when a limit was
    # reached (visibility.on_limit: finalize), accepted (verified, or unverified)
    SUCCEEDED: frozenset({"verified", "model_complete", "user_stop", "finalized"}),
    # the no-progress detector fired again after its nudges; "limit": a human
    # said no (or nothing in time) to extending a reached limit (on_limit: ask)
    NEEDS_HUMAN: frozenset({"no_progress", "limit"}),
    # the budget a call would overshoot (checked before it) or that a reported
    # usage overshot (checked after it); "retries" is the run's retry budget,
    # "errors" its limit on tool errors shown to the model; "session" a budget
    # a parent shares with its descendants, "tenant" a tenant's budget of a
    # window (sim.harness.scopes; a hard one: a soft one only alerts)
    BUDGET_EXHAUSTED: frozenset({"steps", "tokens", "output_tokens", "money", "active_time",
                                 "wall_time", "retries", "errors", "session", "tenant"}),
    # a server error after its retry, a fatal model or tool error, transient
    # errors past max_attempts, a context that cannot be made to fit, a result
    # with impossible values (negative or non-finite usage or durations), or
    # a driver that crashed while performing an effect (the run is recorded)
    FAILED: frozenset({"model_error", "tool_fatal", "retries_exhausted", "context_overflow",
                       "invalid_response", "driver_error"}),
    # the abort flag (an operator or user), or an approval nobody gave in time;
    # "parent_ended": a child run whose parent ended before it (a session ends
    # with its parent)
    CANCELLED: frozenset({"external_signal", "approval_timeout", "parent_ended"}),
}
"""Every terminal status and the reasons it may be reached for (the outcome
``status:reason``). A run ends in exactly one of them."""

TERMINAL_STATES: tuple[str, ...] = tuple(OUTCOMES)


class Stop(Exception):
    """The stop signal: raised where a run must end as ``status:reason``
    (with ``detail``), caught once in agent_loop. A spent budget raises its
    subclass :class:`~sim.harness.budgets.LimitExceeded`."""

    def __init__(self, status: str, reason: str, detail: dict[str, Any]) -> None:
        # no message: it is never shown (caught in agent_loop), and cheap to raise
        self.status = status
        self.reason = reason
        self.detail = detail


def stop(status: str, reason: str, **detail: Any) -> NoReturn:
    """End the run as ``status:reason`` (with ``detail``) from wherever it is."""
    raise Stop(status, reason, detail)

RESUMABLE: frozenset[str] = frozenset({BUDGET_EXHAUSTED, NEEDS_HUMAN})
"""Terminal states a person may resume (with :func:`resume`): the loop saves a
checkpoint when a run ends in one of them in the middle of a step."""


@dataclass(slots=True)
class DetectorMemory:
    """What the no-progress detector remembers: recent canonical call keys
    (newest last), hashes of observations seen, steps since the objective
    metric last improved, the best metric seen, detections so far, and the
    nudges the loop gave since the memory was last cleared (so a resumed run
    gets its nudges again)."""

    calls: list[str] = field(default_factory=list)
    seen_observations: list[str] = field(default_factory=list)
    stale_streak: int = 0
    best_metric: float | None = None
    steps_without_improvement: int = 0
    detections: int = 0
    nudges_before: int = 0


@dataclass(slots=True)
class HarnessState:
    """The run's mutable state (seed 000).

    Token counters are cumulative over all model calls (including compaction
    calls); ``context_tokens`` is the size of the next prompt (prefix plus
    history), kept up to date on every append. ``money_usd`` is spend in USD;
    ``active_s`` and ``parked_s`` are seconds (parked = waiting for a human).
    ``status`` is ``running``, ``waiting_approval`` or one of the terminal
    states; ``reason`` says why a terminal state was reached (see
    :data:`OUTCOMES`) and ``detail`` holds its particulars (a diagnostic, the
    tool that failed, ...). ``tool_failures`` counts consecutive failures per
    tool; ``nudges`` all nudges the run was given; ``tool_errors`` the error
    observations the model was shown.

    Subagents (:mod:`sim.harness.subagents`): ``depth`` is the run's depth
    below its root run (0: a root); ``children`` the child runs it started,
    ``children_failed`` those that ended in any state but succeeded;
    ``descendants`` every run below it (children and theirs);
    ``children_tokens`` and ``children_cost_usd`` what its descendants used
    (tokens: prompt plus output and thinking; USD), not counted in its own
    token and money counters; ``children_outcomes`` its children's endings
    (``status:reason``, or ``succeeded``) and how many ended so;
    ``pending_children`` those started without waiting whose results have
    not come back yet.
    """

    messages: list[Message] = field(default_factory=list)
    prefix_tokens: int = 0
    context_tokens: int = 0
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    thinking_tokens: int = 0
    money_usd: float = 0.0
    active_s: float = 0.0
    parked_s: float = 0.0
    turns: int = 0
    tool_calls: int = 0
    retries: int = 0
    rate_limit_retries: int = 0
    tool_errors: int = 0
    nudges: int = 0
    verifier_rejections: int = 0
    compactions: int = 0
    alerts: int = 0
    depth: int = 0
    children: int = 0
    children_failed: int = 0
    descendants: int = 0
    children_tokens: int = 0
    children_cost_usd: float = 0.0
    children_outcomes: dict[str, int] = field(default_factory=dict)
    pending_children: int = 0
    tool_failures: dict[str, int] = field(default_factory=dict)
    detector: DetectorMemory = field(default_factory=DetectorMemory)
    abort_requested: bool = False
    status: str = RUNNING
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens sent so far, cached or not."""
        return prompt_tokens_of(self)

    @property
    def total_tokens(self) -> int:
        """Tokens the run used itself: prompt (cached or not) plus output and
        thinking."""
        return prompt_tokens_of(self) + self.output_tokens + self.thinking_tokens

    @property
    def wall_s(self) -> float:
        """Seconds since the run started: active plus parked."""
        return self.active_s + self.parked_s

    @property
    def terminal(self) -> bool:
        """True once the run has reached a terminal state."""
        return self.status in TERMINAL_STATES

    def add_usage(self, usage: Usage, prices: Prices) -> None:
        """Add one model call's usage to the token counters and its cost at
        ``prices`` (:meth:`~sim.harness.prices.Prices.call_cost`, USD) to
        ``money_usd``."""
        uncached = usage.input_tokens  # one name at a time: a 5-tuple unpacking builds a tuple
        output = usage.output_tokens
        read = usage.cache_read_tokens
        write = usage.cache_write_tokens
        thinking = usage.thinking_tokens
        self.input_tokens += uncached
        self.output_tokens += output
        if read or write or thinking:  # most calls have neither cache nor thinking tokens
            self.cache_read_tokens += read
            self.cache_write_tokens += write
            self.thinking_tokens += thinking
        self.money_usd += prices.call_cost(uncached, output, read, write, thinking)

    def append(self, message: Message) -> None:
        """Append a message keeping user/assistant alternation: a user message
        after a user message is merged into it (seed 000's normalisation)."""
        messages = self.messages
        if messages and message.role == "user" and messages[-1].role == "user":
            last = messages[-1]
            last.content.extend(message.content)
            last.tokens += message.tokens
        else:
            messages.append(message)
        self.context_tokens += message.tokens

    def recount(self) -> None:
        """Recompute ``context_tokens`` from the prefix and the history."""
        self.context_tokens = self.prefix_tokens + sum(m.tokens for m in self.messages)


def new_state(prefix_tokens: int, model: str, task: str, task_tokens: int | None = None
              ) -> HarnessState:
    """A fresh state whose history is the task statement as the first user message."""
    state = HarnessState(prefix_tokens=prefix_tokens, context_tokens=prefix_tokens, model=model)
    state.append(make_message("user", [text_block(task, tokens=task_tokens)]))
    return state


def end_run(state: HarnessState, status: str, reason: str,
            detail: dict[str, Any] | None = None) -> None:
    """Record the run's end as ``status:reason`` with ``detail``. Raises
    ValueError for an outcome not in :data:`OUTCOMES` (a bug in the caller)
    and RuntimeError if the run has already ended (it ends exactly once)."""
    if reason not in OUTCOMES.get(status, ()):
        raise ValueError(f"unknown outcome {status}:{reason}; see sim.harness.state.OUTCOMES")
    if state.terminal:
        raise RuntimeError(f"run already ended as {state.status}:{state.reason}")
    state.status, state.reason = status, reason
    state.detail = {} if detail is None else detail


def request_abort(state: HarnessState) -> None:
    """Ask the run to stop (an operator's or user's cancel). The loop ends it as
    ``cancelled:external_signal`` at its next check: before the next effect,
    or as soon as the effect in flight is answered (a driver that aborts the
    call answers it after the seconds it ran). A run whose loop is not being
    driven is ended with :func:`sim.harness.loop.cancel`."""
    state.abort_requested = True


def park(state: HarnessState, seconds: float) -> None:
    """Count ``seconds`` the driver kept the run parked outside any effect (an
    operator's pause, the wait for a person to resume it or for capacity
    again): wall time, not active time. Raises ValueError unless ``seconds``
    is finite and >= 0."""
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(f"parked seconds must be finite and >= 0, got {seconds!r}")
    state.parked_s += seconds


def resume(state: HarnessState, *, reset_detector: bool = True) -> HarnessState:
    """Make a stopped run runnable again (a person extended its budget or
    redirected it). Only :data:`RESUMABLE` and non-terminal states can be
    resumed. The detector's memory is cleared by default: a human looked at
    the run, so earlier detections (and nudges) no longer count."""
    if state.terminal and state.status not in RESUMABLE:
        raise ValueError(f"a run that ended as {state.status} cannot be resumed")
    state.status, state.reason, state.detail = RUNNING, "", {}
    if reset_detector:
        state.detector = DetectorMemory(nudges_before=state.nudges)
    return state


_BLOCK_TYPES = {"text": TextBlock, "thinking": ThinkingBlock, "tool_use": ToolUseBlock,
                "tool_result": ToolResultBlock}


def to_dict(state: HarnessState) -> dict[str, Any]:
    """The state as JSON-compatible data (for checkpoints)."""
    return asdict(state)


def from_dict(data: dict[str, Any]) -> HarnessState:
    """Rebuild a state saved with :func:`to_dict`."""
    data = dict(data)
    messages = []
    for m in data.pop("messages"):
        blocks = [_BLOCK_TYPES[b["type"]](**b) for b in m["content"]]
        messages.append(Message(m["role"], blocks, m["tokens"]))
    detector = DetectorMemory(**data.pop("detector"))
    return HarnessState(messages=messages, detector=detector, **data)
