"""What the inner loop asks of its driver (effects) and what it gets back (results).

The loop is a generator: it yields an effect and is sent the result. A driver
(the simulation engines, the replay driver, or a live driver around a provider
SDK) performs the effect and sends back exactly one of the result types listed
on it (:data:`sim.harness.protocol.ANSWERS`); any other type is a
:class:`~sim.harness.protocol.ProtocolError`. Times are seconds of the
driver's clock, as the driver measured them; token counts are integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.harness.messages import Block, Message, ToolUseBlock, Usage
from sim.harness.params import ToolDefinition


# ----------------------------------------------------------------- effects
@dataclass(slots=True)
class ModelRequest:
    """Call the model. Answer with :class:`ModelResponse` or :class:`ModelError`.

    Everything a live driver needs to build the provider call is here:

    - ``model``: the model id to call (the fallback model after a switch);
    - ``provider``: ``"anthropic"`` or ``"openai"``, the wire format;
    - ``system_prompt``: the instructions (Anthropic ``system=``; OpenAI a
      first ``system`` message), ``system_prompt_tokens`` of the prefix;
    - ``messages``: the live history in the canonical shape (read-only for the
      driver); put it on the wire with ``normalize(messages, provider)``;
    - ``tools``: the tool definitions (:class:`~sim.harness.params.ToolDefinition`:
      name, description, input schema) for ``tools=``;
    - ``tool_choice``: ``"auto"``, ``"any"`` (Anthropic ``{"type": "any"}``,
      OpenAI ``"required"``), ``"none"`` or ``"tool:<name>"`` (one tool
      forced); a compaction call asks for ``"none"`` (a summary is text);
    - ``max_output_tokens``: the output cap, thinking included (``max_tokens``);
    - ``temperature`` and ``top_p`` (None: leave the provider's default);
    - ``thinking_budget``: the extended-thinking budget in tokens (0: off;
      Anthropic ``thinking={"type": "enabled", "budget_tokens": ...}``);
    - ``cache_ttl_s``: the prompt-cache lifetime asked for with a cache
      breakpoint at the end of the prompt (None: no caching; 300 is
      Anthropic's ``"5m"``, 3600 its ``"1h"``).

    ``prompt_tokens`` is the prompt size the harness counted (prefix plus
    history), which its budgets were checked against; ``purpose`` is
    ``"step"`` for a loop step, ``"compaction"`` for a summary of
    ``messages`` (the oldest part of the history) or ``"finalize"`` for the
    one tool-free call for a final answer once a limit is reached; ``turn`` the steps
    completed so far and ``attempt`` the retry number of this call (0 first).
    """

    model: str
    messages: list[Message]
    prompt_tokens: int
    max_output_tokens: int
    purpose: str = "step"
    turn: int = 0
    attempt: int = 0
    cache_ttl_s: float | None = None
    thinking_budget: int = 0
    system_prompt: str = ""
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: str = "auto"
    temperature: float = 0.0
    top_p: float | None = None
    provider: str = "anthropic"


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
    with the seconds that really passed (a float) when the wait was cut short
    (the run was cancelled meanwhile)."""

    seconds: float


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
class UserTurn:
    """Hand the model's message to the task-giver (a user in a conversation,
    see ``HarnessParams.end_marker``). Answer with :class:`UserReply`."""

    message: str
    turn: int


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One child run a spawn call asks for: its task statement (``task``,
    ``task_tokens`` long, the arguments of the call) and its depth below the
    root run (1 for a root's children)."""

    task: str
    task_tokens: int
    depth: int


@dataclass(slots=True)
class SpawnRequest:
    """Start the child runs ``children`` (the subagent tool call ``call``)
    and wait for them all; at most ``max_concurrent`` run at once, the rest
    queued. The driver runs each child with the SAME loop
    (:func:`~sim.harness.loop.agent_loop`) and the parent's parameters
    (its own limits, its own detector), from a fresh state at the child's
    depth (:func:`~sim.harness.subagents.child_state`), sharing the parent's
    session ledgers (``ledgers``: pass them as ``agent_loop``'s ``ledgers``)
    and starting at ``now_s`` on the driver's clock (its ``started_s``).
    Answer with :class:`ChildResults`, one result per child in order; with
    ``wait`` false, start them and answer at once with no results (they are
    collected later: :class:`CollectChildren`)."""

    call: ToolUseBlock
    children: tuple[ChildSpec, ...]
    max_concurrent: int
    turn: int = 0
    ledgers: tuple[Any, ...] = ()
    now_s: float = 0.0
    wait: bool = True


@dataclass(slots=True)
class CollectChildren:
    """Hand over the results of the run's children started without waiting
    that have ended by now (``wait`` false), or wait for all of them
    (``wait`` true). Answer with :class:`ChildResults` (in the order they
    ended; its ``duration_s`` the seconds waited)."""

    wait: bool
    turn: int = 0


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Persist the run's state durably before the loop continues. ``turn`` is
    the number of completed steps. Answer with None. Immutable, so the loop
    shares one instance per turn (:func:`checkpoint`)."""

    turn: int


CHECKPOINTS: tuple[Checkpoint, ...] = tuple(Checkpoint(turn) for turn in range(1024))
"""``CHECKPOINTS[turn]`` is the shared :class:`Checkpoint` of ``turn``
completed steps, for the first 1024 turns (see :func:`checkpoint`)."""


def checkpoint(turn: int) -> Checkpoint:
    """The :class:`Checkpoint` of ``turn`` completed steps: a shared instance
    for the first 1024 turns, so a step's checkpoint costs no allocation."""
    return CHECKPOINTS[turn] if 0 <= turn < len(CHECKPOINTS) else Checkpoint(turn)


Effect = (ModelRequest | ToolRequest | Wait | ApprovalRequest | VerifyRequest | UserTurn
          | Checkpoint | SpawnRequest | CollectChildren)


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


@dataclass(slots=True)
class UserReply:
    """The task-giver's answer to a :class:`UserTurn`: its ``text`` (``tokens``
    long), which goes back to the model, or ``ended``: the task-giver ends the
    run (tau2-bench's ``user_stop``). ``duration_s`` is the time it took."""

    text: str = ""
    tokens: int = 0
    ended: bool = False
    duration_s: float = 0.0


@dataclass(slots=True)
class ChildResult:
    """How one child run ended: its terminal ``status`` and ``reason`` (an
    outcome of :data:`~sim.harness.state.OUTCOMES`), the tokens of its final
    answer (``answer_tokens``, the tool result the parent sees on success),
    ``tokens`` it used in all (prompt plus output and thinking, its own
    descendants included), ``cost_usd`` (USD, descendants included),
    ``duration_s`` (its wall seconds) and ``runs`` (1 plus its descendants)."""

    status: str
    reason: str
    answer_tokens: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    runs: int = 1


@dataclass(slots=True)
class ChildResults:
    """The answer to a :class:`SpawnRequest`: one :class:`ChildResult` per
    child, in the order asked, and ``duration_s``, the seconds the parent
    waited for them all."""

    results: list[ChildResult]
    duration_s: float = 0.0


Result = (ModelResponse | ModelError | ToolResult | ToolError | ApprovalDecision | Verdict
          | UserReply | ChildResults | float | None)
"""What a driver may send back; which result answers which effect is
:data:`sim.harness.protocol.ANSWERS`."""
