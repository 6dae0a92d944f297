"""A scripted driver for the harness loop: lists in, effects and events out.

The harness's tests drive :func:`sim.harness.agent_loop` with no simulation at
all: a :class:`ScriptedDriver` answers each effect from a list given by the
test (model replies and errors, tool outcomes, verdicts, approval decisions),
records every effect it was asked to perform (model requests with a snapshot of
their messages) and every event the loop emitted, and returns the final state.

Conventions of the scripted model (a well-behaved provider):

* a :class:`Reply` becomes a :class:`ModelResponse` whose prompt usage equals
  the prompt size the harness counted (``request.prompt_tokens``, optionally
  split into uncached and cache-read tokens) and whose output plus thinking is
  clipped to the request's ``max_output_tokens``;
* tool_use blocks with an empty id get ids ``toolu_000``, ``toolu_001``, ... in
  the order the driver answers them (deterministic, per driver);
* compaction requests are answered from ``summaries`` or by a short default
  summary, so step scripts only list step replies;
* a spent model script raises :class:`ScriptExhausted` unless ``default_reply``
  is given; spent tool outcomes use ``default_tool`` (an echo of the call);
  spent verdicts pass; spent approvals and task-giver replies (``users``) raise.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import settings

from sim.harness import (
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    CheckpointStore,
    Event,
    HarnessParams,
    HarnessState,
    Message,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ThinkingBlock,
    ToolError,
    ToolRequest,
    ToolResult,
    ToolSpec,
    ToolUseBlock,
    Usage,
    UserReply,
    UserTurn,
    Verdict,
    VerifyRequest,
    Wait,
    agent_loop,
    new_state,
)

FAST = settings(max_examples=50, deadline=None)
"""Hypothesis settings for the harness suite: modest example counts, no deadline."""

READ = ToolSpec("read_file", "read", timeout_s=5.0, required_args=("path",))
SEARCH = ToolSpec("search", "read", timeout_s=15.0)
WRITE = ToolSpec("write_file", "reversible_write", timeout_s=5.0)
DEPLOY = ToolSpec("deploy", "irreversible", timeout_s=60.0)
POLL = ToolSpec("build_status", "read", timeout_s=5.0, polling=True)
TOOLS = (READ, SEARCH, WRITE, DEPLOY, POLL)
TASK = "Fix the failing test in report.py and say when it passes."


class ScriptExhausted(AssertionError):
    """The loop asked for more than the test scripted."""


# ------------------------------------------------------------ script items
@dataclass(frozen=True)
class Reply:
    """One scripted model reply (see the module docstring for how it is priced)."""

    content: tuple[Any, ...]
    stop_reason: str = "end_turn"
    output_tokens: int = 50
    thinking_tokens: int = 0
    latency_s: float = 1.0
    cache_read_share: float = 0.0
    model: str = ""


def use(name: str, /, **args: Any) -> ToolUseBlock:
    """A tool_use block (its id is assigned by the driver)."""
    return ToolUseBlock("", name, args, 10)


def tool_call(name: str, /, **args: Any) -> Reply:
    """A reply that calls one tool."""
    return Reply((use(name, **args),), "tool_use")


def calls(*blocks: ToolUseBlock, **kw: Any) -> Reply:
    """A reply that calls several tools."""
    return Reply(tuple(blocks), "tool_use", **kw)


def final(text: str = "Done: the test passes.", **kw: Any) -> Reply:
    """A final answer (no tool call)."""
    return Reply((TextBlock(text, 10),), "end_turn", **kw)


def truncated(*blocks: Any, **kw: Any) -> Reply:
    """A reply cut off at the output cap (stop_reason max_tokens)."""
    content = blocks or (TextBlock("I will now edit the file and", 10),)
    return Reply(tuple(content), "max_tokens", **kw)


def echo_tool(call: ToolUseBlock) -> ToolResult:
    """The default tool: the same call always returns the same short output."""
    args = json.dumps(call.input, sort_keys=True)
    return ToolResult(f"{call.name}({args}) -> ok", 10, 0.5)


# ---------------------------------------------------------------- params
def make_params(**changes: Any) -> HarnessParams:
    """Small, valid parameters for tests (prefix 100 + 5 tools x 200 tokens)."""
    base: dict[str, Any] = dict(system_prompt_tokens=100, tools=TOOLS, max_output_tokens=1_000,
                                context_window=50_000, model_timeout_s=30.0)
    base.update(changes)
    return HarnessParams(**base)


def make_state(params: HarnessParams, task: str = TASK, task_tokens: int = 50) -> HarnessState:
    """A fresh state for ``params`` whose history is the task statement."""
    return new_state(params.prefix_tokens, params.model, task, task_tokens)


# ----------------------------------------------------------------- driver
@dataclass
class ScriptedDriver:
    """Answers the loop's effects from scripted lists and records what happened.

    ``on_effect(effect, state)`` is called before each effect is answered (to
    set the abort flag, inspect the status, ...). With a ``store``, each
    Checkpoint is saved under ``run_id``. The lists are consumed, so a second
    :meth:`drive` continues the script where the first stopped.
    """

    model: Iterable[Any] = ()
    tools: Iterable[Any] = ()
    verdicts: Iterable[Verdict] = ()
    approvals: Iterable[ApprovalDecision] = ()
    users: Iterable[UserReply] = ()
    summaries: Iterable[Any] = ()
    default_reply: Reply | None = None
    default_tool: Callable[[ToolUseBlock], ToolResult | ToolError] = echo_tool
    on_effect: Callable[[Any, HarnessState], None] | None = None
    store: CheckpointStore | None = None
    run_id: str = "run"
    effects: list[Any] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    state: HarnessState | None = None
    stopped: bool = False
    _ids: int = 0

    def __post_init__(self) -> None:
        self.model = deque(self.model)
        self.tools = deque(self.tools)
        self.verdicts = deque(self.verdicts)
        self.approvals = deque(self.approvals)
        self.users = deque(self.users)
        self.summaries = deque(self.summaries)

    # --------------------------------------------------------------- run
    def drive(self, params: HarnessParams, state: HarnessState, *,
              stop_at_checkpoint: int | None = None, detector: Any = None) -> HarnessState:
        """Run the loop to its end (or until the ``stop_at_checkpoint``-th
        Checkpoint, after saving it) and return the state."""
        self.stopped = False
        gen = agent_loop(params, state, detector=detector, observers=(self.events.append,))
        checkpoints = 0
        try:
            effect = next(gen)
            while True:
                self._record(effect, state)
                if self.on_effect is not None:
                    self.on_effect(effect, state)
                if isinstance(effect, Checkpoint):
                    checkpoints += 1
                    if self.store is not None:
                        self.store.save(self.run_id, effect.turn, state)
                    if checkpoints == stop_at_checkpoint:
                        gen.close()
                        self.stopped = True
                        self.state = state
                        return state
                effect = gen.send(self._answer(effect))
        except StopIteration as stop:
            self.state = stop.value
            return stop.value

    def _record(self, effect: Any, state: HarnessState) -> None:
        if isinstance(effect, ModelRequest):  # snapshot: the live history grows later
            effect = replace(effect, messages=[Message(m.role, list(m.content), m.tokens)
                                               for m in effect.messages])
        self.effects.append(effect)
        self.statuses.append(state.status)

    # ----------------------------------------------------------- answers
    def _answer(self, effect: Any) -> Any:
        if isinstance(effect, ModelRequest):
            if effect.purpose == "compaction":
                item = self.summaries.popleft() if self.summaries else summary_reply()
            elif self.model:
                item = self.model.popleft()
            elif self.default_reply is not None:
                item = self.default_reply
            else:
                raise ScriptExhausted(f"no scripted reply for {effect.purpose} request")
            if callable(item):
                item = item(effect)
            return self.respond(item, effect) if isinstance(item, Reply) else item
        if isinstance(effect, ToolRequest):
            item = self.tools.popleft() if self.tools else self.default_tool
            if callable(item):
                item = item(effect.call)
            if isinstance(item, str):
                item = ToolResult(item, max(1, len(item) // 4), 0.5)
            return item
        if isinstance(effect, ApprovalRequest):
            if not self.approvals:
                raise ScriptExhausted("no scripted approval decision")
            return self.approvals.popleft()
        if isinstance(effect, VerifyRequest):
            return self.verdicts.popleft() if self.verdicts else Verdict(True)
        if isinstance(effect, UserTurn):
            if not self.users:
                raise ScriptExhausted("no scripted task-giver reply")
            return self.users.popleft()
        if isinstance(effect, Wait | Checkpoint):
            return None
        raise AssertionError(f"unknown effect {effect!r}")

    def respond(self, reply: Reply, request: ModelRequest) -> ModelResponse:
        """The ModelResponse a well-behaved provider gives for ``reply``."""
        prompt = request.prompt_tokens
        read = int(prompt * reply.cache_read_share)
        out = min(reply.output_tokens, request.max_output_tokens)
        think = min(reply.thinking_tokens, request.max_output_tokens - out)
        content = []
        for block in reply.content:
            if isinstance(block, ToolUseBlock) and not block.id:
                block = replace(block, id=f"toolu_{self._ids:03d}", input=dict(block.input))
                self._ids += 1
            content.append(block)
        return ModelResponse(content, Usage(prompt - read, out, read, 0, think), reply.stop_reason,
                             reply.latency_s, reply.model)

    # --------------------------------------------------------- queries
    def of(self, kind: type) -> list[Any]:
        """The recorded effects of one type, in order."""
        return [e for e in self.effects if isinstance(e, kind)]

    @property
    def step_requests(self) -> list[ModelRequest]:
        """Model requests that are loop steps (not compaction calls)."""
        return [e for e in self.of(ModelRequest) if e.purpose != "compaction"]

    @property
    def compaction_requests(self) -> list[ModelRequest]:
        """Model requests that summarise old history."""
        return [e for e in self.of(ModelRequest) if e.purpose == "compaction"]

    def events_of(self, kind: str) -> list[Event]:
        """The emitted events of one kind, in order."""
        return [e for e in self.events if e.kind == kind]


def summary_reply(text: str = "the agent read files and ran tests", tokens: int = 20) -> Reply:
    """A compaction summary of ``tokens`` output tokens."""
    return Reply((TextBlock(text, tokens),), "end_turn", output_tokens=tokens)


def run_script(params: HarnessParams | None = None, state: HarnessState | None = None,
               **script: Any) -> ScriptedDriver:
    """Drive one run to its end; return the driver (``.state`` is the final state)."""
    params = params if params is not None else make_params()
    state = state if state is not None else make_state(params)
    driver = ScriptedDriver(**script)
    driver.drive(params, state)
    return driver


def last_user_blocks(state: HarnessState) -> list[Any]:
    """The content blocks of the newest user message."""
    for message in reversed(state.messages):
        if message.role == "user":
            return list(message.content)
    return []


def thinking(text: str = "let me think", tokens: int = 30) -> ThinkingBlock:
    """A thinking block for scripted replies."""
    return ThinkingBlock(text, tokens, "sig")


__all__ = [
    "DEPLOY", "FAST", "POLL", "READ", "SEARCH", "TASK", "TOOLS", "WRITE", "Reply",
    "ScriptExhausted", "ScriptedDriver", "calls", "echo_tool", "final", "last_user_blocks",
    "make_params", "make_state", "run_script", "summary_reply", "thinking", "tool_call",
    "truncated", "use",
]
