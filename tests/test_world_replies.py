"""The world's commonest answers, built field by field, equal the
constructors' (every field set: an unset slot would raise on reading it).

:meth:`SimulatedTask.respond` builds a reply whose prompt is all uncached
input, and :meth:`SimulatedTask.execute` a tool's result, with
``object.__new__`` and one store per field; each answer of a few runs is
checked against the same answer made by its constructor.
"""

from __future__ import annotations

import dataclasses

import pytest

from sim.engines.direct import run_task_with_world
from sim.harness import effects as fx
from sim.harness.effects import ModelResponse, ToolError, ToolResult
from sim.harness.messages import Usage
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from sim.world.task import SimulatedTask


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        assert getattr(a, f.name) == getattr(b, f.name), f.name
    assert a == b


class _Checked(SimulatedTask):
    """Checks each reply and tool result against its constructor's."""

    __slots__ = ("seen",)

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.seen = 0  # answers checked

    def respond(self, request: fx.ModelRequest, now: float = 0.0
                ) -> ModelResponse | fx.ModelError:
        reply = super().respond(request, now)
        if type(reply) is ModelResponse and request.purpose == "step" and self.cache is None:
            u = reply.usage
            usage = Usage(request.prompt_tokens, u.output_tokens, 0, 0, u.thinking_tokens)
            _same(u, usage)
            _same(reply, ModelResponse(reply.content, usage, reply.stop_reason,
                                       reply.latency_s, request.model))
            if reply.stop_reason != "max_tokens":
                assert u.output_tokens + u.thinking_tokens == sum(b.tokens
                                                                  for b in reply.content)
            self.seen += 1
        return reply

    def execute(self, request: fx.ToolRequest, now: float = 0.0) -> ToolResult | ToolError:
        result = super().execute(request, now)
        if type(result) is ToolResult:
            call = request.call
            _same(result, ToolResult(result.output, result.tokens, result.duration_s))
            assert result.output in (f"{call.name} {call.input['target']}: ok",
                                     f"{call.name} {call.input['target']}: same as before")
            self.seen += 1
        return result


@pytest.mark.parametrize("scenario", ["scenarios/bounded.yaml", "scenarios/tau2.yaml"])
def test_replies_and_results_are_the_constructed_ones(scenario: str) -> None:
    cell = build_cell(cells_of(load_scenario(scenario))[0])
    checked = 0
    for index in range(4):
        _, task = run_task_with_world(cell, index, task_type=_Checked)
        assert isinstance(task, _Checked)
        checked += task.seen
    assert checked > 8
