"""Where a replay reads a stop made right after a step whose tool call the
harness refused (:attr:`sim.drivers.replay.driver.RunDriver.mid_step`).

Hand-made run: five calls of gpt-4o (prompts of 1,000 to 5,000 tokens, 100
output tokens, recorded cost $0.001 per 1,000 prompt tokens); call 1 asks for
a tool with arguments nested 71 levels deep, past the harness's 64, so the
harness rejects it with a message and never runs the tool; calls 0, 2 and 3
call a tool that runs; call 4 answers. A cap of ``k`` steps lets calls 0 to
``k - 1`` be made and refuses before call ``k``: the recorded call it did not
make is call ``k``, and the run spent the recorded costs of calls 0 to
``k - 1``.
"""

from __future__ import annotations

import pytest

from sim.drivers.replay import replay_runs
from sim.harness.messages import Usage
from sim.scenario.model import HarnessConfig, harness_params
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.world.params import WorldParams

DEEP = '{"q": ' + '{"a": ' * 70 + "1" + "}" * 70 + "}"


def _call(prompt: int, arguments: str | None = None, tool: bool = True) -> CallRecord:
    tools = [ToolCallRecord("search", arguments=arguments or f'{{"q": {prompt}}}',
                            result_tokens=50)] if tool else []
    return CallRecord(usage=Usage(input_tokens=prompt, output_tokens=100),
                      cost_usd=prompt / 1e6, tool_calls=tools, text_tokens=0 if tool else 100)


RUN = RunRecord("refused", "sim", "", [_call(1000), _call(2000, DEEP), _call(3000), _call(4000),
                                     _call(5000, tool=False)],
                model="gpt-4o", resolved=True, exit="done")


@pytest.mark.parametrize("cap", [1, 2, 3, 4])
def test_a_step_cap_stops_at_the_call_it_did_not_make_also_right_after_a_refused_tool_call(
        cap):
    """A cap of ``k`` steps: ``stopped_at`` is call ``k`` and the cost is that
    of calls 0 to ``k - 1`` ($0.001 k(k+1)/2). Cap 2 stops the run right
    after step 1, whose only tool call was refused (never run): the step was
    over, so the stop is not mid-step (before, it read as ``stopped_at`` 1,
    a call the replay made and charged)."""
    h = HarnessConfig.model_validate({"max_output_tokens": 600, "detector": {"enabled": False},
                                      "budgets": {"steps": cap}})
    [done] = replay_runs([RUN], harness_params(h, WorldParams()))
    r = done.chosen
    assert (r.outcome, r.stopped_at, r.calls) == ("budget_exhausted:steps", cap, cap)
    assert r.cost_usd == pytest.approx(0.001 * cap * (cap + 1) / 2)
