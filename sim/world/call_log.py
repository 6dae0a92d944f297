"""A simulated task that keeps a log of its model calls, for comparing
simulated runs with recorded ones call by call (calibration, tests).

Each loop step's model response adds one :class:`CallLog`: its usage (token
counts as :class:`~sim.harness.messages.Usage` has them), how many tool calls
it made, its stop reason and latency; the tool results that answered it (tool
name, tokens, error flag of the final attempt, by call id) and the task-giver's
replies after it are added as they come. Compaction summaries and failed calls
are not logged (a recorded trace has no row for them either).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.harness import effects as fx
from sim.harness.effects import ModelResponse, ToolError
from sim.harness.messages import prompt_tokens_of
from sim.world.streams import Draws
from sim.world.task import SimulatedTask
from sim.world.world import World


@dataclass(slots=True)
class CallLog:
    """One model call of a simulated run (tokens; seconds)."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    thinking_tokens: int
    tool_calls: int
    stop_reason: str
    latency_s: float
    results: dict[str, tuple[str, int, bool]] = field(default_factory=dict)
    observation_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """``input + cache_read + cache_write``."""
        return prompt_tokens_of(self)


class RecordingTask(SimulatedTask):
    """A :class:`SimulatedTask` whose ``log`` lists its model calls."""

    __slots__ = ("log",)

    def __init__(self, world: World, streams: tuple[Draws, ...]) -> None:
        super().__init__(world, streams)
        self.log: list[CallLog] = []

    def respond(self, request: fx.ModelRequest, now: float = 0.0) -> ModelResponse | fx.ModelError:
        """The model's answer, logged when it is a step's response."""
        result = super().respond(request, now)
        if request.purpose == "step" and isinstance(result, ModelResponse):
            u = result.usage
            tools = sum(1 for b in result.content if b.type == "tool_use")
            self.log.append(CallLog(u.input_tokens, u.cache_read_tokens, u.cache_write_tokens,
                                    u.output_tokens, u.thinking_tokens, tools,
                                    result.stop_reason, result.latency_s))
        return result

    def execute(self, request: fx.ToolRequest, now: float = 0.0) -> fx.ToolResult | ToolError:
        """The tool's result; its size and error flag kept on the latest call."""
        result = super().execute(request, now)
        if self.log:
            self.log[-1].results[request.call.id] = (request.call.name, result.tokens,
                                                     isinstance(result, ToolError))
        return result

    def reply(self, request: fx.UserTurn, now: float = 0.0) -> fx.UserReply:
        """The task-giver's reply; its size counted as an observation of the latest call."""
        result = super().reply(request, now)
        if self.log and not result.ended:
            self.log[-1].observation_tokens += result.tokens
        return result
