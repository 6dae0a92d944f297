"""What the inner loop asks of its driver (effects) and what it gets back (results).

The loop is a generator: it yields an effect and is sent the result. A driver
(the simulation engines, or a real driver around a provider SDK) performs the
effect and sends back exactly one of the result types listed on it. Times are
seconds of the driver's clock, as the driver measured them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.harness.messages import Block, Message, ToolUseBlock, Usage


# ----------------------------------------------------------------- effects
@dataclass(slots=True)
class ModelRequest:
    """Call the model. Answer with :class:`ModelResponse` or :class:`ModelError`.

    ``messages`` is the live history (canonical shape, read-only for the
    driver; put it on the wire with ``normalize(messages, provider)``);
    ``input_tokens`` is the prompt size the harness counted (prefix plus
    history); ``purpose`` is ``"step"`` for a loop step, ``"compaction"`` for
    a summary of ``messages`` (the oldest part of the history).
    ``cache_ttl_s`` is the prompt-cache lifetime the harness asks for with a
    cache breakpoint at the end of the prompt (None: no caching);
    ``thinking_budget`` the extended-thinking budget in tokens (0: off).
    """

    model: str
    messages: list[Message]
    input_tokens: int
    max_output_tokens: int
    purpose: str = "step"
    turn: int = 0
    attempt: int = 0
    cache_ttl_s: float | None = None
    thinking_budget: int = 0


@dataclass(slots=True)
class ToolRequest:
    """Run one tool call. Answer with :class:`ToolResult` or :class:`ToolError`."""

    call: ToolUseBlock
    timeout_s: float
    attempt: int = 0
    turn: int = 0


@dataclass(slots=True)
class Wait:
    """Let ``seconds`` pass (a backoff before a retry). Answer with None, or
    with the seconds that really passed when the wait was cut short (the run
    was cancelled meanwhile)."""

    seconds: float
    reason: str = "backoff"


@dataclass(slots=True)
class ApprovalRequest:
    """Ask a human to approve a tool call. Answer with :class:`ApprovalDecision`.
    The run is in the non-terminal state ``waiting_approval`` meanwhile."""

    call: ToolUseBlock
    effect: str
    timeout_s: float


@dataclass(slots=True)
class VerifyRequest:
    """Check a claimed success with a check the model cannot write (tests,
    schema, a query of the system of record, a model grader). Answer with
    :class:`Verdict`."""

    answer: str
    turn: int


@dataclass(slots=True)
class Checkpoint:
    """Persist the run's state durably before the loop continues. ``turn`` is
    the number of completed steps. Answer with None."""

    turn: int


Effect = ModelRequest | ToolRequest | Wait | ApprovalRequest | VerifyRequest | Checkpoint


# ----------------------------------------------------------------- results
@dataclass(slots=True)
class ModelResponse:
    """A model's answer: content blocks, usage and stop reason
    (``end_turn``, ``tool_use``, ``max_tokens`` or ``stop_sequence``);
    ``latency_s`` is time to first token plus decode time."""

    content: list[Block]
    usage: Usage
    stop_reason: str
    latency_s: float = 0.0
    model: str = ""


@dataclass(slots=True)
class ModelError:
    """A failed model call. ``status`` is the HTTP status when there is one;
    ``kind`` one of ``rate_limit``, ``overloaded``, ``server``, ``timeout``,
    ``connection``, ``malformed``, ``empty``, ``context_overflow``,
    ``invalid_request``, ``auth``; ``retry_after_s`` the server's Retry-After."""

    kind: str
    status: int | None = None
    retry_after_s: float | None = None
    message: str = ""
    latency_s: float = 0.0


@dataclass(slots=True)
class ToolResult:
    """A successful tool call: its output, size in tokens and duration.
    ``metric`` optionally reports a measurable objective (failing tests, open
    items; lower is better) for the no-progress detector."""

    output: str
    tokens: int
    duration_s: float = 0.0
    metric: float | None = None


@dataclass(slots=True)
class ToolError:
    """A failed tool call. ``kind``: ``transient`` (5xx, connection),
    ``timeout``, ``rate_limit``, ``validation``, ``not_found``, ``permission``
    or ``fatal``; ``status`` an HTTP-like status when there is one."""

    kind: str
    message: str
    tokens: int
    duration_s: float = 0.0
    status: int | None = None
    retry_after_s: float | None = None


@dataclass(slots=True)
class ApprovalDecision:
    """A human's decision on an approval request, after ``waited_s`` seconds
    (parked time). ``timed_out`` means nobody answered in time."""

    approved: bool
    waited_s: float = 0.0
    timed_out: bool = False
    reason: str = ""


@dataclass(slots=True)
class Verdict:
    """The verifier's decision on a claimed success. A rejection's
    ``feedback`` (``feedback_tokens`` long) goes back to the model. ``usage``
    is set when the verifier is a model grader, so its call is priced."""

    passed: bool
    feedback: str = ""
    feedback_tokens: int = 0
    duration_s: float = 0.0
    usage: Usage | None = None
    details: dict[str, Any] | None = None


Result = (ModelResponse | ModelError | ToolResult | ToolError | ApprovalDecision | Verdict
          | None)
