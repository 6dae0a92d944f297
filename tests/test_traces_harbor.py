"""The Harbor ATIF importer (sim/traces/harbor.py) on trajectories shaped like
Harbor's pydantic models write them (``Trajectory.to_json_dict()``), laid out
as a Harbor job (``JOB/TRIAL/agent/trajectory.json`` beside the trial's
``result.json`` and ``verifier/reward.txt``); every count worked out by hand."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sim.traces import import_traces, read_traces
from sim.traces.harbor import detect, run
from sim.traces.model import DERIVED, ESTIMATED, TOKEN_COLUMNS, UNKNOWN
from tests.fuzz_helpers import check_mutations

T = "2025-10-11T10:30:0"


def claude_trajectory() -> dict:
    """Claude Code through Harbor: prompt = input + cache read + cache
    creation, the creation in ``metrics.extra``; step 3 makes two tool calls,
    step 5 has no metrics."""
    return {
        "schema_version": "ATIF-v1.7", "session_id": "0b7c-session",
        "agent": {"name": "claude-code", "version": "2.0.31",
                  "model_name": "claude-sonnet-4-5-20250929"},
        "steps": [
            {"step_id": 1, "timestamp": T + "0Z", "source": "system",
             "message": "You are Claude Code"},
            {"step_id": 2, "timestamp": T + "1Z", "source": "user",
             "message": "Create hello.txt"},
            {"step_id": 3, "timestamp": T + "3Z", "source": "agent",
             "model_name": "claude-sonnet-4-5-20250929", "message": "I will write it",
             "reasoning_content": "Simple task", "llm_call_count": 1,
             "tool_calls": [
                 {"tool_call_id": "toolu_1", "function_name": "Write",
                  "arguments": {"file_path": "/app/hello.txt", "content": "Hello"}},
                 {"tool_call_id": "toolu_2", "function_name": "Bash",
                  "arguments": {"command": "cat /app/hello.txt"}}],
             "observation": {"results": [
                 {"source_call_id": "toolu_1", "content": "File created"},
                 {"source_call_id": "toolu_2", "content": "Hello",
                  "extra": {"is_error": False}}]},
             "metrics": {"prompt_tokens": 5000, "completion_tokens": 120, "cached_tokens": 3000,
                         "extra": {"cache_creation_input_tokens": 1500,
                                   "cache_read_input_tokens": 3000,
                                   "service_tier": "standard"}}},
            {"step_id": 4, "timestamp": T + "5Z", "source": "user",
             "message": "Also add a newline"},
            {"step_id": 5, "timestamp": T + "8Z", "source": "agent",
             "message": "Done: hello.txt holds Hello", "llm_call_count": 1},
        ],
        "final_metrics": {"total_prompt_tokens": 11000, "total_completion_tokens": 200,
                          "total_cached_tokens": 7000, "total_cost_usd": 0.042,
                          "total_steps": 5,
                          "extra": {"total_cache_creation_input_tokens": 1500}},
    }


def terminus_trajectory() -> dict:
    """Terminus-2: no tool calls; the terminal screen is a result without a
    source_call_id; reasoning in metrics.extra (RFC example)."""
    return {
        "schema_version": "ATIF-v1.5", "session_id": "t2-session",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-5"},
        "steps": [
            {"step_id": 1, "timestamp": T + "0Z", "source": "user", "message": "Fix the build"},
            {"step_id": 2, "timestamp": T + "2Z", "source": "agent", "message": "make",
             "observation": {"results": [{"content": "make: *** Error 1"}]},
             "metrics": {"prompt_tokens": 900, "completion_tokens": 300, "cached_tokens": 0,
                         "cost_usd": 0.004, "extra": {"reasoning_tokens": 250}}},
            {"step_id": 3, "timestamp": T + "4Z", "source": "agent", "message": "copied",
             "is_copied_context": True,
             "metrics": {"prompt_tokens": 10, "completion_tokens": 10}},
            {"step_id": 4, "timestamp": T + "6Z", "source": "agent", "message": "",
             "llm_call_count": 0, "tool_calls": [
                 {"tool_call_id": "d1", "function_name": "dispatch", "arguments": {}}]},
        ],
        "final_metrics": {"total_prompt_tokens": 900, "total_completion_tokens": 300,
                          "total_cost_usd": 0.004},
    }


def trial_result(task: str, reward: float | None, exception: str | None = None) -> dict:
    """A trial's result.json (``TrialResult``), the fields read and a few others."""
    return {"id": "5f0c", "task_name": task, "trial_name": f"{task}__AbC12", "trial_uri": "x",
            "task_id": {"path": f"tasks/{task}"}, "source": "terminal-bench",
            "task_checksum": "abc", "config": {},
            "agent_info": {"name": "claude-code", "version": "2.0.31",
                           "model_info": {"name": "claude-sonnet-4-5", "provider": "anthropic"}},
            "agent_result": {"n_input_tokens": 11000, "n_cache_tokens": 7000,
                             "n_output_tokens": 200, "cost_usd": 0.042},
            "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
            "exception_info": None if exception is None else {
                "exception_type": exception, "exception_message": "timed out",
                "exception_traceback": "", "occurred_at": "2025-10-11T10:40:00Z"},
            "started_at": "2025-10-11T10:29:00Z", "finished_at": "2025-10-11T10:31:30Z"}


def lay_out(root: Path, trial: str, doc: dict, result: dict | None = None,
            reward_txt: str | None = None) -> Path:
    agent = root / "job" / trial / "agent"
    agent.mkdir(parents=True)
    path = agent / "trajectory.json"
    path.write_text(json.dumps(doc, indent=2))
    if result is not None:
        (root / "job" / trial / "result.json").write_text(json.dumps(result))
    if reward_txt is not None:
        (root / "job" / trial / "verifier").mkdir()
        (root / "job" / trial / "verifier" / "reward.txt").write_text(reward_txt)
    return path


def test_atif_trajectories_and_harbor_results_are_recognised():
    assert detect(claude_trajectory()) == "trajectory"
    assert detect(trial_result("t", 1.0)) == "trial-result"
    assert detect({"id": "j", "started_at": "x", "n_total_trials": 2, "stats": {}}) \
        == "job-result"
    assert detect({"schema_version": 1, "task": {}, "trial_name": "t__1", "agent": {},
                   "timeout_multiplier": 1.0}) == "config"
    assert detect({"job_name": "j", "jobs_dir": "jobs", "timeout_multiplier": 1.0}) == "config"
    assert detect({"schema_version": 3, "n_concurrent_trials": 4, "trials": []}) == "config"
    assert detect({"schema_version": "1.0", "steps": []}) is None
    assert detect([claude_trajectory()]) is None


def test_claude_code_steps_split_the_prompt_with_the_cache_write_from_extra(tmp_path: Path):
    """Step 3: 5000 prompt = 500 uncached + 3000 read + 1500 written; 120
    output. Two calls (the agent steps); two tool calls with their results."""
    path = lay_out(tmp_path, "hello__AbC12", claude_trajectory())
    record = run(claude_trajectory(), path, str(path))
    assert len(record.calls) == 2
    first, second = record.calls
    assert (first.usage.input_tokens, first.usage.cache_read_tokens,
            first.usage.cache_write_tokens, first.usage.output_tokens) == (500, 3000, 1500, 120)
    assert first.provenance == {"input_tokens": DERIVED}
    assert [t.name for t in first.tool_calls] == ["Write", "Bash"]
    assert first.tool_calls[0].arguments == '{"content":"Hello","file_path":"/app/hello.txt"}'
    assert [t.result_tokens for t in first.tool_calls] == [3, 2]  # 12 and 5 characters
    assert [t.error for t in first.tool_calls] == [False, False]
    assert first.observation_tokens == 5  # the user's "Also add a newline" (18 characters)
    assert first.started_s == 1.0 and first.latency_s == 2.0
    assert second.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)
    assert second.text_tokens == 7  # 27 characters
    assert record.run_id == "hello__AbC12" and record.model == "claude-sonnet-4-5-20250929"


def test_a_run_with_a_step_without_metrics_keeps_the_final_metrics_as_totals(tmp_path: Path):
    """11000 prompt - 7000 cached - 1500 written = 2500 uncached."""
    path = lay_out(tmp_path, "hello__AbC12", claude_trajectory())
    record = run(claude_trajectory(), path, str(path))
    assert record.totals == {"input_tokens": 2500, "cache_read_tokens": 7000,
                             "cache_write_tokens": 1500, "output_tokens": 200,
                             "reasoning_tokens": 0}
    assert record.cost_usd == 0.042


def test_the_trial_result_gives_task_verdict_times_and_exit(tmp_path: Path):
    doc = claude_trajectory()
    path = lay_out(tmp_path, "hello__AbC12", doc, trial_result("hello", 1.0, "AgentTimeoutError"))
    record = run(doc, path, str(path))
    assert record.task_id == "hello" and record.resolved is True
    assert record.exit == "AgentTimeoutError"
    assert record.duration_s == 150.0
    assert record.started_at is not None and record.started_at.minute == 29


def test_without_a_result_json_the_verdict_comes_from_reward_txt_or_json(tmp_path: Path):
    doc = claude_trajectory()
    passed = run(doc, lay_out(tmp_path, "a__1", doc, reward_txt="1\n"), "a")
    failed = run(doc, lay_out(tmp_path, "b__2", doc, reward_txt="0"), "b")
    unknown = run(doc, lay_out(tmp_path, "c__3", doc), "c")
    json_path = lay_out(tmp_path, "d__4", doc)
    (json_path.parent.parent / "verifier").mkdir()
    (json_path.parent.parent / "verifier" / "reward.json").write_text('{"reward": 1}')
    from_json = run(doc, json_path, "d")
    assert (passed.resolved, failed.resolved, unknown.resolved) == (True, False, None)
    assert from_json.resolved is True
    assert detect({"reward": 1, "partial": 0.5}) == "reward"
    assert passed.duration_s == 8.0  # the steps' first and last timestamps


def test_terminus_reasoning_is_split_and_copied_and_dispatch_steps_are_not_calls(tmp_path):
    """Step 2: 300 completion with 250 reasoning: 50 output (derived); the
    terminal screen is what the model reads next; steps 3 (copied context) and
    4 (llm_call_count 0) are not calls."""
    doc = terminus_trajectory()
    record = run(doc, tmp_path / "t.json", "t.json")
    (call,) = record.calls
    assert (call.usage.input_tokens, call.usage.output_tokens,
            call.usage.thinking_tokens) == (900, 50, 250)
    assert call.provenance == {"output_tokens": DERIVED}
    assert call.cost_usd == 0.004
    assert call.observation_tokens == 5  # "make: *** Error 1": 17 characters
    assert record.run_id == "t2-session" and record.totals is None
    assert "cache_write_tokens" in record.conventions


def openhands_trajectory() -> dict:
    """Harbor's OpenHands converter (events path): one agent step per event;
    a response's second parallel tool call has empty metrics (the difference
    of accumulated usage is 0); observations it could not merge are agent
    steps of their own, without metrics, repeating their tool call."""
    def agent(step_id: int, message: str, **fields: object) -> dict:
        return {"step_id": step_id, "timestamp": f"{T}{step_id}Z", "source": "agent",
                "message": message, **fields}

    def tool(call_id: str, name: str, **arguments: object) -> list[dict]:
        return [{"tool_call_id": call_id, "function_name": name, "arguments": arguments}]

    def result(call_id: str, content: str) -> dict:
        return {"results": [{"source_call_id": call_id, "content": content}]}

    return {
        "schema_version": "ATIF-v1.5", "session_id": "oh-session",
        "agent": {"name": "openhands", "version": "0.62.0", "model_name": "gpt-5"},
        "steps": [
            {"step_id": 1, "timestamp": T + "1Z", "source": "system", "message": "You are"},
            {"step_id": 2, "timestamp": T + "2Z", "source": "user", "message": "Fix the bug"},
            agent(3, "Let me look", tool_calls=tool("a", "execute_bash", command="ls"),
                  metrics={"prompt_tokens": 1000, "completion_tokens": 50,
                           "cached_tokens": 800, "cost_usd": 0.01}),
            agent(4, "Reading", tool_calls=tool("b", "str_replace_editor", path="/a.py"),
                  metrics={}),
            agent(5, "Command finished", tool_calls=tool("a", "execute_bash", command="ls"),
                  observation=result("a", "a.py\nb.py")),
            agent(6, "I read the file", tool_calls=tool("b", "str_replace_editor",
                                                       path="/a.py"),
                  observation=result("b", "print(1)\n")),
            agent(7, "Which version?", metrics={"prompt_tokens": 1200, "completion_tokens": 40,
                                                "cost_usd": 0.02}),
            {"step_id": 8, "timestamp": T + "8Z", "source": "user", "message": "Version 2"},
            agent(9, "Done", tool_calls=tool("c", "finish", message="Done"),
                  metrics={"prompt_tokens": 1300, "completion_tokens": 30,
                           "cached_tokens": 1000}),
        ],
        "final_metrics": {"total_prompt_tokens": 3500, "total_completion_tokens": 120,
                          "total_cached_tokens": 1800, "total_cost_usd": 0.06},
    }


def test_steps_without_metrics_among_steps_with_them_belong_to_the_call_before():
    """Steps 4-6 (empty or no metrics) are part of step 3's call: three calls
    (steps 3, 7, 9); the repeated tool calls count once, and the observation
    steps answer them."""
    record = run(openhands_trajectory(), Path("x.json"), "x.json")
    assert len(record.calls) == 3
    first, message, last = record.calls
    assert [(t.id, t.name) for t in first.tool_calls] == [("a", "execute_bash"),
                                                         ("b", "str_replace_editor")]
    assert [t.result_tokens for t in first.tool_calls] == [3, 3]  # 9 characters each
    assert (first.usage.input_tokens, first.usage.cache_read_tokens,
            first.usage.output_tokens) == (200, 800, 50)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (1200, 40)
    assert message.observation_tokens == 3  # "Version 2"
    assert [len(c.tool_calls) for c in record.calls] == [2, 0, 1]
    assert (last.usage.input_tokens, last.usage.cache_read_tokens) == (300, 1000)
    assert "calls" in record.conventions and record.totals is None


def test_a_trajectory_without_any_metrics_has_one_call_per_agent_step():
    doc = openhands_trajectory()
    for step in doc["steps"]:
        step.pop("metrics", None)
    record = run(doc, Path("x.json"), "x.json")
    assert len(record.calls) == 6  # steps 3 to 7 and 9
    assert all(c.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN) for c in record.calls)
    assert sum(len(c.tool_calls) for c in record.calls) == 3
    assert record.totals == {"input_tokens": 1700, "cache_read_tokens": 1800,
                             "cache_write_tokens": 0, "output_tokens": 120,
                             "reasoning_tokens": 0}


@pytest.mark.parametrize("extra", [{"reasoning_output_tokens": 250},
                                   {"thoughts_tokens": 250, "tool_tokens": 0},
                                   {"completion_tokens_details": {"reasoning_tokens": 250}}])
def test_each_agents_reasoning_count_is_split_from_the_completion(extra):
    """Codex, Gemini CLI and mini-swe-agent name the reasoning count apart."""
    doc = terminus_trajectory()
    doc["steps"][1]["metrics"]["extra"] = extra
    (call,) = run(doc, Path("x.json"), "x.json").calls
    assert (call.usage.output_tokens, call.usage.thinking_tokens) == (50, 250)


def test_mini_swe_agent_step_costs_are_estimated():
    doc = terminus_trajectory()
    doc["agent"]["name"] = "mini-swe-agent"
    (call,) = run(doc, Path("x.json"), "x.json").calls
    assert call.provenance["cost_usd"] == ESTIMATED


def test_a_missing_prompt_count_makes_only_the_prompt_columns_unknown():
    doc = terminus_trajectory()
    del doc["steps"][1]["metrics"]["prompt_tokens"]
    record = run(doc, Path("x.json"), "x.json")
    (call,) = record.calls
    assert call.provenance == {"input_tokens": UNKNOWN, "cache_read_tokens": UNKNOWN,
                               "cache_write_tokens": UNKNOWN, "output_tokens": DERIVED}
    assert call.usage.output_tokens == 50
    assert record.totals is not None and record.totals["input_tokens"] == 900


def test_early_atif_versions_note_how_prompt_tokens_were_read():
    doc = terminus_trajectory()
    doc["schema_version"] = "ATIF-v1.1"
    record = run(doc, Path("x.json"), "x.json")
    assert "input_tokens" in record.conventions


def test_an_embedded_subagent_adds_its_calls_in_time_order():
    doc = terminus_trajectory()
    doc["subagent_trajectories"] = [{
        "trajectory_id": "summary-1", "agent": {"name": "terminus-2", "version": "2"},
        "steps": [{"step_id": 1, "timestamp": T + "1Z", "source": "agent",
                   "message": "summary", "metrics": {"prompt_tokens": 40,
                                                     "completion_tokens": 4}}]}]
    record = run(doc, Path("x.json"), "x.json")
    assert [c.agent for c in record.calls] == ["summary-1", None]
    assert record.calls[0].usage.input_tokens == 40


def test_a_cache_above_the_prompt_is_read_with_the_prompt_apart_for_the_whole_run():
    doc = copy.deepcopy(claude_trajectory())
    doc["steps"][2]["metrics"]["prompt_tokens"] = 500  # Anthropic's input only
    record = run(doc, Path("x.json"), "x.json")
    first = record.calls[0]
    assert (first.usage.input_tokens, first.usage.cache_read_tokens,
            first.usage.cache_write_tokens) == (500, 3000, 1500)
    assert "input_tokens" not in first.provenance
    assert record.repairs


def test_importing_a_harbor_job_folder_reads_trajectories_with_results_as_companions(
        tmp_path: Path):
    lay_out(tmp_path, "hello__AbC12", claude_trajectory(), trial_result("hello", 1.0))
    lay_out(tmp_path, "build__XyZ9", terminus_trajectory(), trial_result("build", 0.0),
            reward_txt="0")
    (tmp_path / "job" / "result.json").write_text(json.dumps(
        {"id": "j", "started_at": "2025-10-11T10:00:00Z", "n_total_trials": 2,
         "stats": {"n_completed_trials": 2}}))
    (tmp_path / "job" / "config.json").write_text(json.dumps(
        {"job_name": "job", "jobs_dir": "jobs", "n_attempts": 1, "timeout_multiplier": 1.0,
         "agents": [{"name": "claude-code"}]}))
    (tmp_path / "job" / "hello__AbC12" / "config.json").write_text(json.dumps(
        {"task": {"path": "tasks/hello"}, "trial_name": "hello__AbC12", "trials_dir": "job",
         "timeout_multiplier": 1.0, "agent": {"name": "claude-code"}}))
    report = import_traces([tmp_path / "job"], tmp_path / "out")
    assert report.runs == 2 and report.calls == 3 and not report.skips
    assert len(report.companions) == 5
    runs_table, _ = read_traces(tmp_path / "out")
    by_id = runs_table.set_index("run_id")
    assert set(runs_table["source"]) == {"harbor"}
    assert bool(by_id.loc["hello__AbC12", "resolved"]) is True
    assert bool(by_id.loc["build__XyZ9", "resolved"]) is False
    assert by_id.loc["hello__AbC12", "cache_write_tokens"] == 1500
    assert by_id.loc["build__XyZ9", "reasoning_tokens"] == 250
    assert by_id.loc["build__XyZ9", "cost_usd"] == pytest.approx(0.004)


SAMPLES = {"harbor-claude-code": claude_trajectory(),
           "harbor-terminus": terminus_trajectory()}
"""Valid files of the format, for the fuzzer's mutations."""


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_mutated_files_import_or_are_refused_never_a_traceback(fmt, tmp_path: Path):
    """The fuzzer's mutations (values replaced, swapped, deleted) of a valid
    file: the CLI exits 0 with tables every reader accepts, or 2 with a
    message; never a traceback or a hang. The file itself imports cleanly."""
    check_mutations(fmt, SAMPLES[fmt], tmp_path)


def test_the_claude_code_session_harbor_converted_is_skipped_as_its_duplicate(tmp_path):
    """Harbor keeps Claude Code's own transcript under TRIAL/agent/sessions/;
    it is the run of TRIAL/agent/trajectory.json, so importing the job reads
    the run once (source harbor, with its verdict) and skips the transcript."""
    lay_out(tmp_path, "hello__AbC12", claude_trajectory(), trial_result("hello", 1.0))
    sessions = tmp_path / "job" / "hello__AbC12" / "agent" / "sessions" / "projects" / "-app"
    sessions.mkdir(parents=True)
    lines = [
        {"type": "user", "sessionId": "cc1", "uuid": "u1", "parentUuid": None,
         "timestamp": T + "1Z", "message": {"role": "user", "content": "Create hello.txt"}},
        {"type": "assistant", "sessionId": "cc1", "uuid": "a1", "parentUuid": "u1",
         "timestamp": T + "3Z", "message": {
             "id": "msg_1", "type": "message", "role": "assistant",
             "model": "claude-sonnet-4-5-20250929", "stop_reason": "end_turn",
             "content": [{"type": "text", "text": "Done"}],
             "usage": {"input_tokens": 500, "cache_read_input_tokens": 3000,
                       "cache_creation_input_tokens": 1500, "output_tokens": 120}}}]
    (sessions / "cc1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = import_traces([tmp_path / "job"], tmp_path / "out")
    assert report.runs == 1 and dict(report.runs_by_source) == {"harbor": 1}
    assert [s.reason for s in report.skips] == ["duplicate run_id"]
    assert "hello__AbC12/agent/trajectory.json" in report.skips[0].detail
