"""SWE-agent stopping on an error (sim/traces/sweagent.py): the step it adds is
not a model call.

SWE-agent 1.x (``sweagent/agent/agents.py``, ``forward_with_handling``):
``handle_error_with_retry`` adds each output that failed to parse to the
trajectory as a step (action empty, thought = response = the output: one
counted call each); ``handle_error_with_autosubmission(exit_status, message)``
returns ``StepOutput(thought=message, output=message, exit_status)`` which
``step()`` appends as the last step without querying the model (the context
window check and the time limit raise before the request is counted). So
``api_calls`` is the steps minus one. SWE-agent 0.x's
``forward_with_error_check`` returns ``("Exit due to context window",
"exit_context", "Exit due to context window")`` as (thought, action, output)
and ``_run_step`` records it as a step, again without a call. The fixtures are
built field by field as ``add_step_to_trajectory`` writes them."""

from __future__ import annotations

import json
from pathlib import Path

from sim.traces import sweagent
from sim.traces.assemble import text_fields


def step(action: str, observation: str, response: str, thought: str,
         seconds: float = 0.5) -> dict:
    """A 1.x TrajectoryStep, keys in add_step_to_trajectory's order."""
    return {"action": action, "observation": observation, "response": response,
            "thought": thought, "execution_time": seconds,
            "state": {"working_dir": "/testbed"},
            "query": [{"role": "system", "content": "..."}], "extra_info": {}}


def autosubmit(message: str, observation: str = "") -> dict:
    """handle_error_with_autosubmission's step: thought = output = message, no
    action; the forced submission's observation is the (empty) patch."""
    return step("", observation, message, message, 0.0)


def v1(steps: list[dict], exit_status: str, api_calls: int) -> dict:
    config = {"agent": {"model": {"name": "gpt-4o", "per_instance_cost_limit": 3.0,
                                  "per_instance_call_limit": 0}},
              "problem_statement": {"id": "inst", "type": "text"}}
    return {"trajectory": steps,
            "history": [{"role": "system", "content": "...", "agent": "main",
                         "message_type": "system_prompt"}],
            "info": {"swe_agent_version": "1.1.0", "swe_rex_version": "1.2.0",
                     "submission": None, "exit_status": exit_status,
                     "model_stats": {"instance_cost": 0.01 * api_calls,
                                     "tokens_sent": 1000 * api_calls,
                                     "tokens_received": 50 * api_calls,
                                     "api_calls": api_calls}},
            "replay_config": json.dumps(config), "environment": "main"}


def calls_of(tmp_path: Path, doc: dict) -> list:
    path = tmp_path / "run1" / "inst" / "inst.traj"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return sweagent.run(doc, path, str(path)).calls


def test_exit_format_the_requeries_are_calls_and_the_autosubmission_is_not(tmp_path):
    """1 good step, 3 format failures (3 steps, 3 counted calls), then the
    autosubmission step: 5 steps, api_calls 4 -> 4 calls (was 5, one per
    step), the last three without tool calls, none carrying the harness's
    message."""
    fails = [f"I will not use a code block ({k})" for k in range(3)]
    steps = ([step("ls -la", "file1\nfile2", "Let me look.\n```\nls -la\n```", "Let me look.")]
             + [step("", "", text, text) for text in fails]
             + [autosubmit("Exit due to repeated format/blocklist/bash syntax errors")])
    calls = calls_of(tmp_path, v1(steps, "exit_format", 4))
    assert len(calls) == 4
    assert [len(c.tool_calls) for c in calls] == [1, 0, 0, 0]
    assert [c.text_sha256 for c in calls[1:]] == [
        text_fields(text)["text_sha256"] for text in fails]


def test_exit_context_and_time_make_no_call_for_their_last_step(tmp_path):
    """exit_context after 2 steps (api_calls 2, 3 steps) -> 2 calls (was 3);
    exit_total_execution_time after 1 step (api_calls 1, 2 steps) -> 1 (was
    2); a "submitted (exit_api)" whose autosubmission found a patch (the
    observation "Exited (autosubmitted)") -> the 1 real call."""
    ctx = [step("ls", "a", "look\n```\nls\n```", "look"),
           step("cat a", "x", "read\n```\ncat a\n```", "read"),
           autosubmit("Exit due to context window")]
    assert [c.tool_calls[0].name for c in calls_of(tmp_path, v1(ctx, "exit_context", 2))] \
        == ["ls", "cat"]
    slow = [step("sleep 100", "", "wait\n```\nsleep 100\n```", "wait", 1800.0),
            autosubmit("Exit due to total execution time exceeded")]
    assert len(calls_of(tmp_path, v1(slow, "exit_total_execution_time", 1))) == 1
    api = [step("ls", "a", "look\n```\nls\n```", "look"),
           autosubmit("Exit due to retry error: RetryError[<Future state=finished>]",
                      "Exited (autosubmitted)")]
    assert len(calls_of(tmp_path, v1(api, "submitted (exit_api)", 1))) == 1


def test_exit_cost_counts_the_reply_that_passed_the_limit(tmp_path):
    """exit_cost: _update_stats counts the call, then raises; its reply is not
    a step, the autosubmission is: 2 steps, api_calls 2 -> the step's call
    and one more without tool calls."""
    steps = [step("ls", "a", "look\n```\nls\n```", "look"),
             autosubmit("Exit due to cost limit")]
    calls = calls_of(tmp_path, v1(steps, "exit_cost", 2))
    assert [len(c.tool_calls) for c in calls] == [1, 0]


def test_a_v0_exit_step_is_not_a_call_but_its_exit_format_step_is(tmp_path):
    """0.x: ("Exit due to context window", "exit_context", same) is no call
    and no tool call named exit_context: 3 steps, api_calls 2 -> 2 calls. Its
    exit_format step carries the last malformed reply (a call): kept."""
    def v0(steps: list[dict], exit_status: str, api_calls: int) -> dict:
        return {"environment": "swe_main", "trajectory": steps,
                "history": [{"role": "system", "content": "SETTING", "agent": "primary"}],
                "info": {"exit_status": exit_status, "submission": None,
                         "model_stats": {"instance_cost": 0.1, "tokens_sent": 9000,
                                         "tokens_received": 120, "api_calls": api_calls}}}
    def step0(thought: str, action: str, output: str) -> dict:
        return {"action": action, "observation": "", "response": output,
                "state": '{"open_file": "n/a"}', "thought": thought}
    good = [step0("look", "ls\n", "look\n```\nls\n```"), step0("read", "cat a\n", "read")]
    calls = calls_of(tmp_path, v0(
        [*good, step0("Exit due to context window", "exit_context",
                      "Exit due to context window")], "exit_context", 2))
    assert [c.tool_calls[0].name for c in calls] == ["ls", "cat"]
    calls = calls_of(tmp_path, v0(
        [*good, step0("Exit due to format error", "exit_format", "no block")],
        "exit_format", 5))
    assert len(calls) == 5 and calls[2].tool_calls[0].name == "exit_format"


def test_a_step_that_only_looks_like_an_exit_is_a_call(tmp_path):
    """The message alone is not enough: with exit_status "submitted" a last
    step reading "Exit due to context window" is the model's (2 calls)."""
    steps = [step("ls", "a", "look", "look"),
             step("", "", "Exit due to context window", "Exit due to context window")]
    assert len(calls_of(tmp_path, v1(steps, "submitted", 2))) == 2
