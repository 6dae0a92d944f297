"""Mutable state of one run: history, counters, error counters, status.

Everything the loop needs to resume lives here (including the detector's
memory), so a checkpoint is this object serialised with :func:`to_dict` and
restored with :func:`from_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sim.harness.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    make_message,
    text_block,
)

RUNNING = "running"
WAITING_APPROVAL = "waiting_approval"
SUCCEEDED = "succeeded"
NEEDS_HUMAN = "needs_human"
BUDGET_EXHAUSTED = "budget_exhausted"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL_STATES: tuple[str, ...] = (SUCCEEDED, NEEDS_HUMAN, BUDGET_EXHAUSTED, FAILED, CANCELLED)


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
    nudges: int = 0


@dataclass(slots=True)
class HarnessState:
    """The run's mutable state (seed 000).

    Token counters are cumulative over all model calls (including compaction
    calls); ``context_tokens`` is the size of the next prompt (prefix plus
    history), kept up to date on every append. ``money_usd`` is spend in USD;
    ``active_s`` and ``parked_s`` are seconds (parked = waiting for a human).
    ``status`` is ``running``, ``waiting_approval`` or one of the terminal
    states; ``reason`` says why a terminal state was reached.
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
    nudges: int = 0
    verifier_rejections: int = 0
    compactions: int = 0
    alerts: int = 0
    consecutive_errors: dict[str, int] = field(default_factory=dict)
    tool_failures: dict[str, int] = field(default_factory=dict)
    detector: DetectorMemory = field(default_factory=DetectorMemory)
    abort_requested: bool = False
    status: str = RUNNING
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    next_call_id: int = 0

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens sent so far, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def wall_s(self) -> float:
        """Seconds since the run started: active plus parked."""
        return self.active_s + self.parked_s

    @property
    def terminal(self) -> bool:
        """True once the run has reached a terminal state."""
        return self.status in TERMINAL_STATES

    def append(self, message: Message) -> None:
        """Append a message keeping user/assistant alternation: a user message
        after a user message is merged into it (seed 000's normalisation)."""
        if self.messages and message.role == "user" and self.messages[-1].role == "user":
            last = self.messages[-1]
            last.content.extend(message.content)
            last.tokens += message.tokens
        else:
            self.messages.append(message)
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


def resume(state: HarnessState, *, reset_detector: bool = True) -> HarnessState:
    """Make a stopped run runnable again (a person extended its budget or
    redirected it). Only ``budget_exhausted``, ``needs_human`` and non-terminal
    states can be resumed. The detector's memory is cleared by default: a
    human looked at the run, so earlier detections no longer count."""
    if state.terminal and state.status not in (BUDGET_EXHAUSTED, NEEDS_HUMAN):
        raise ValueError(f"a run that ended as {state.status} cannot be resumed")
    state.status, state.reason, state.detail = RUNNING, "", {}
    if reset_detector:
        state.detector = DetectorMemory()
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
