"""Harbor trials of mini-swe-agent (sim/traces/harbor.py, importer): the
agent's own trajectory is read, not Harbor's lossy ATIF copy.

Harbor's mini-swe-agent agent (``harbor/agents/installed/mini_swe_agent.py``)
keeps mini-swe-agent's trajectory as ``TRIAL/agent/mini-swe-agent.trajectory.json``
and writes its ATIF conversion beside it as ``trajectory.json``; the converter
skips the ``user`` messages of format errors (each a billed call: its
``extra.response`` holds the reply and usage) and writes the tool results
without ``source_call_id``. The trial's ``result.json`` holds the task, the
verdict and the times. Below, trimmed from a job written with Harbor 0.26.0
and its converter on a mini-swe-agent 2.4.6 trajectory: 3 calls (one a format
error) where the ATIF shows 2."""

from __future__ import annotations

import json
from pathlib import Path

from sim.traces import import_traces, read_traces

CREATED = 1767268900  # 2026-01-01T12:01:40Z: the first response's creation time


def response(n: int, text: str, prompt: int, cached: int, completion: int,
             tool: str | None, finish: str) -> dict:
    calls = None if tool is None else [{"function": {"arguments": json.dumps({"command": tool}),
                                                     "name": "bash"},
                                        "id": f"call_{n}_0", "type": "function"}]
    return {"id": f"chatcmpl-{n}", "created": CREATED + n, "model": "fake-model",
            "object": "chat.completion",
            "choices": [{"finish_reason": finish, "index": 0,
                         "message": {"content": text, "role": "assistant", "tool_calls": calls,
                                     "function_call": None}, "provider_specific_fields": {}}],
            "usage": {"completion_tokens": completion, "prompt_tokens": prompt,
                      "total_tokens": prompt + completion,
                      "completion_tokens_details": {"reasoning_tokens": 0},
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def assistant(n: int, text: str, prompt: int, cached: int, completion: int, tool: str) -> dict:
    reply = response(n, text, prompt, cached, completion, tool, "tool_calls")
    message = reply["choices"][0]["message"]
    return {"content": text, "role": "assistant", "tool_calls": message["tool_calls"],
            "function_call": None, "provider_specific_fields": None,
            "extra": {"actions": [{"command": tool, "tool_call_id": f"call_{n}_0"}],
                      "response": reply, "cost": 0.001, "timestamp": CREATED + n + 0.5}}


def native() -> dict:
    """A reply without a tool call (FormatError), ls (answered), then the
    submit: the FormatError's message bears no timestamp, so only the submit,
    which follows the stamped ls result, has a known start."""
    return {"info": {"model_stats": {"instance_cost": 0.003, "api_calls": 3},
                     "config": {"agent": {"step_limit": 0, "cost_limit": 3.0},
                                "model": {"model_name": "openai/fake-model"}},
                     "mini_version": "2.4.6", "exit_status": "Submitted", "submission": ""},
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Please solve this issue: Print hello"},
                {"role": "user", "content": "Tool call error:\n\n<error>\nNo tool calls found "
                 "in the response.\n</error>",
                 "extra": {"interrupt_type": "FormatError", "cost": 0.0005,
                           "response": response(0, "oops no tool", 1000, 0, 100, None,
                                                "stop")}},
                assistant(1, "listing", 1200, 800, 50, "ls /"),
                {"content": '{\n  "returncode": 0,\n  "output": "bin\\n"\n}',
                 "extra": {"raw_output": "bin\n", "returncode": 0,
                           "timestamp": CREATED + 1.6, "exception_info": ""},
                 "tool_call_id": "call_1_0", "role": "tool"},
                assistant(2, "done", 1500, 1100, 80,
                          "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")],
            "trajectory_format": "mini-swe-agent-1.1"}


def atif() -> dict:
    """Harbor's conversion: the two assistant messages only, results unlinked."""
    def step(i: int, text: str, tool: str, prompt: int, cached: int, completion: int,
             result: str | None) -> dict:
        return {"step_id": i, "timestamp": f"2026-01-01T12:01:4{i}Z", "source": "agent",
                "model_name": "openai/fake-model", "message": text, "reasoning_content": text,
                "tool_calls": [{"tool_call_id": f"call_{i}", "function_name": "bash",
                                "arguments": {"command": tool}}],
                **({"observation": {"results": [{"content": result}]}} if result else {}),
                "metrics": {"prompt_tokens": prompt, "completion_tokens": completion,
                            "cached_tokens": cached, "cost_usd": 0.0015},
                "llm_call_count": 1}
    return {"schema_version": "ATIF-v1.7", "session_id": "s-A",
            "agent": {"name": "mini-swe-agent", "version": "2.4.6",
                      "model_name": "openai/fake-model"},
            "steps": [{"step_id": 1, "source": "system", "message": "You are helpful."},
                      {"step_id": 2, "source": "user", "message": "Print hello"},
                      step(3, "listing", "ls /", 1000, 0, 100, "bin"),
                      step(4, "done", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
                           1500, 1100, 80, None)],
            "final_metrics": {"total_prompt_tokens": 2500, "total_completion_tokens": 180,
                              "total_cached_tokens": 1100, "total_cost_usd": 0.003}}


def result(task: str, reward: float | None, steps: list[dict] | None = None,
           exception: str | None = None) -> dict:
    return {"schema_version": 1, "id": "f584", "task_name": task, "trial_name": "t",
            "trial_uri": "file://job/t", "task_id": {"path": f"tasks/{task}"},
            "task_checksum": "abc", "config": {},
            "agent_info": {"name": "mini-swe-agent", "version": "2.4.6", "model_info": None},
            "agent_result": None if steps else {"n_input_tokens": 3700, "n_cache_tokens": 1900,
                                                "n_output_tokens": 230, "cost_usd": 0.003},
            "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
            "exception_info": None if exception is None else {
                "exception_type": exception, "exception_message": "", "exception_traceback": "",
                "occurred_at": "2026-01-01T12:04:00Z"},
            "started_at": "2026-01-01T12:00:00Z", "finished_at": "2026-01-01T12:05:00Z",
            "step_results": steps}


def agent_folder(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "mini-swe-agent.trajectory.json").write_text(json.dumps(native()))
    (folder / "trajectory.json").write_text(json.dumps(atif(), indent=2))


def test_the_native_trajectory_gives_the_calls_and_the_trial_the_run_fields(tmp_path):
    """3 calls (the ATIF has 2), input 1000+400+400 = 1800, cache read 1900,
    output 230, its tool result linked; run_id the trial, task and verdict
    (reward 1) from result.json, start 12:00:00 and 300 s from the trial (a
    call's start, known for the submit only, counts from the trial's start:
    past 100 s, not the response's 1.6 s); the ATIF copy skipped as a duplicate."""
    job = tmp_path / "job"
    agent_folder(job / "single__A" / "agent")
    (job / "single__A" / "result.json").write_text(json.dumps(result("task-a", 1.0)))
    report = import_traces([job], tmp_path / "out")
    assert report.runs == 1 and dict(report.runs_by_source) == {"mini-swe-agent": 1}
    assert [(s.reason, Path(s.file).name) for s in report.skips] == [
        ("duplicate run_id", "trajectory.json")]
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (run["run_id"], run["task_id"], bool(run["resolved"]), run["exit"]) == (
        "single__A", "task-a", True, "Submitted")
    assert (str(run["started_at"]), run["duration_s"]) == ("2026-01-01 12:00:00+00:00", 300.0)
    assert len(calls) == 3
    assert (int(run["input_tokens"]), int(run["cache_read_tokens"]),
            int(run["output_tokens"])) == (1800, 1900, 230)
    assert run["cost_usd"] == 0.003
    assert float(calls["started_s"].dropna().iloc[0]) >= 100.0


def test_a_step_trials_native_runs_take_the_step_and_an_exception_is_the_exit(tmp_path):
    """Multi-step: TRIAL/steps/STEP/agent/ holds both files; the run is
    TRIAL/STEP from the native file with the step's verdict (0: False); a
    trial-level AgentTimeoutError is the last step's exit."""
    job = tmp_path / "job"
    agent_folder(job / "multi__B" / "steps" / "build" / "agent")
    step = {"step_name": "build", "agent_result": {"cost_usd": 0.003},
            "verifier_result": {"rewards": {"reward": 0.0}}, "exception_info": None,
            "agent_execution": {"started_at": "2026-01-01T12:00:10Z",
                                "finished_at": "2026-01-01T12:01:40Z"}, "verifier": None}
    (job / "multi__B" / "result.json").write_text(json.dumps(
        result("task-b", 0.0, [step], exception="AgentTimeoutError")))
    report = import_traces([job], tmp_path / "out")
    assert report.runs == 1
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (run["run_id"], run["source"], run["task_id"], bool(run["resolved"])) == (
        "multi__B/build", "mini-swe-agent", "task-b", False)
    assert run["exit"] == "AgentTimeoutError" and run["duration_s"] == 90.0
    assert len(calls) == 3


def test_an_atif_run_without_a_native_file_is_still_read(tmp_path):
    """Only the ATIF (another agent, or the native file gone): it is the run."""
    job = tmp_path / "job"
    (job / "single__A" / "agent").mkdir(parents=True)
    (job / "single__A" / "agent" / "trajectory.json").write_text(json.dumps(atif()))
    (job / "single__A" / "result.json").write_text(json.dumps(result("task-a", 1.0)))
    report = import_traces([job], tmp_path / "out")
    assert dict(report.runs_by_source) == {"harbor": 1} and report.calls == 2


def test_the_atif_run_is_kept_when_the_native_file_gives_none(tmp_path):
    """The ATIF copy is dropped only once the native file gave the trial's
    run: a truncated native file (skipped as invalid JSON), an empty one, or
    a native file not among the inputs (the ATIF file imported alone, or a
    glob of agent/trajectory.json) leave the ATIF run in, with the trial's
    fields (2 calls, resolved)."""
    job = tmp_path / "job"
    agent_folder(job / "single__A" / "agent")
    (job / "single__A" / "result.json").write_text(json.dumps(result("task-a", 1.0)))
    native_file = job / "single__A" / "agent" / "mini-swe-agent.trajectory.json"
    atif_file = job / "single__A" / "agent" / "trajectory.json"

    alone = import_traces([atif_file], tmp_path / "alone")
    assert (alone.runs, alone.calls, dict(alone.runs_by_source)) == (1, 2, {"harbor": 1})
    assert not [s for s in alone.skips if s.reason == "duplicate run_id"]

    for n, text in enumerate((native_file.read_text()[:200], "")):
        native_file.write_text(text)
        report = import_traces([job], tmp_path / f"broken{n}")
        assert (report.runs, report.calls, dict(report.runs_by_source)) == (1, 2, {"harbor": 1})
        assert not [s for s in report.skips if s.reason == "duplicate run_id"]
        runs, _ = read_traces(tmp_path / f"broken{n}")
        assert (runs.iloc[0]["run_id"], bool(runs.iloc[0]["resolved"])) == ("single__A", True)
