"""mini-swe-agent formats beyond the tool-calling samples (sim/traces/miniswe.py):
1.x text actions (``mini-swe-agent-1``: the command in a fenced ```bash block of
the assistant's text, parsed as mini-swe-agent's ``DefaultAgent.parse_action``
does), 2.x text-based models (``-1.1`` without ``tool_calls``, with
``extra.actions`` and format-error calls), trajectories that failed before their
first reply, and SWE-bench reports applied per run (sb-cli's
``sb-cli-reports/`` layout, never merged across runs). Small files written here,
shaped like the real ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim.traces import import_traces, read_traces
from sim.traces.miniswe import V1_ACTION_REGEX, Reports, _action_pattern, text_actions
from sim.traces.model import sha256_text

USAGE = {"prompt_tokens": 100, "completion_tokens": 20,
         "prompt_tokens_details": {"cached_tokens": 0}}


def response(created: int = 1_700_000_000, **usage) -> dict:
    return {"id": "r", "created": created, "model": "deepseek-chat",
            "usage": {**USAGE, **usage},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "..."}}]}


def v1_assistant(content: str, t: float, **usage) -> dict:
    """A 1.x assistant message: content, top-level timestamp, extra.response."""
    return {"role": "assistant", "content": content, "timestamp": t,
            "extra": {"response": response(**usage)}}


def v1_user(content: str, t: float) -> dict:
    return {"role": "user", "content": content, "timestamp": t}


def v1_trajectory(messages: list[dict], *, exit_status: str = "Submitted",
                  agent: dict | None = None) -> dict:
    return {"trajectory_format": "mini-swe-agent-1",
            "info": {"exit_status": exit_status, "submission": "",
                     "model_stats": {"instance_cost": 0.01, "api_calls": 3},
                     "config": {"agent": agent or {"step_limit": 250, "cost_limit": 3.0},
                                "model": {"model_name": "deepseek/deepseek-chat"}}},
            "messages": [{"role": "system", "content": "sys", "timestamp": 0.0},
                         {"role": "user", "content": "task", "timestamp": 0.0}, *messages]}


ONE = "THOUGHT: look around.\n\n```bash\nls -la\n```"
TWO = "First:\n```bash\nls\n```\nthen\n```bash\npwd\n```"
NONE = "I think the fix is done."
SUBMIT = "Done.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"


def write(root: Path, run: str, instance: str, doc: dict) -> Path:
    folder = root / run / instance
    folder.mkdir(parents=True)
    path = folder / f"{instance}.traj.json"
    path.write_text(json.dumps(doc))
    return path


def imported(tmp_path: Path, *sources: Path):
    report = import_traces(list(sources), tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    return report, runs, calls


def test_the_v1_default_regex_is_mini_swe_agents_and_parses_as_it_does():
    """``re.findall(r"```bash\\s*\\n(.*?)\\n```", content, re.DOTALL)``, stripped."""
    assert V1_ACTION_REGEX == r"```bash\s*\n(.*?)\n```"
    pattern = _action_pattern(None, V1_ACTION_REGEX)
    assert text_actions(ONE, pattern) == ["ls -la"]
    assert text_actions(TWO, pattern) == ["ls", "pwd"]
    assert text_actions(NONE, pattern) == []
    assert text_actions("```bash\n  cd /x && make  \n```", pattern) == ["cd /x && make"]


def test_v1_text_actions_are_one_bash_tool_call_each_answered_by_the_observation(tmp_path):
    """One fenced block: one ``bash`` call with {"command": ...}, answered by
    the next user message (its returncode from the observation's text); zero
    or two blocks: the format's error, one ``bash`` call with the actions found
    as arguments, answered (an error) by the format error fed back, so the run
    never reads as a message to the task-giver; the submitting command is
    answered by the final output."""
    messages = [
        v1_assistant(ONE, 2.0),
        v1_user("<returncode>0</returncode>\n<output>\nfile.py\n</output>", 3.5),
        v1_assistant(TWO, 5.0),
        v1_user("Please always provide EXACTLY ONE action in triple backticks.", 5.0),
        v1_assistant("```bash\nfalse\n```", 7.0),
        v1_user("<returncode>1</returncode>\n<output>\n</output>", 7.25),
        v1_assistant(NONE, 9.0),
        v1_user("Please always provide EXACTLY ONE action in triple backticks.", 9.0),
        v1_assistant(SUBMIT, 11.0),
        v1_user("diff --git a/x b/x", 12.0),
    ]
    path = write(tmp_path, "run1", "inst-1", v1_trajectory(messages))
    report, runs, calls = imported(tmp_path, path)
    assert report.skips == [] and runs["steps"].tolist() == [5]
    tools = calls["tool_calls"].tolist()
    assert [len(t) for t in tools] == [1, 1, 1, 1, 1]
    first, two, third, none, last = (t[0] for t in tools)
    assert first["name"] == "bash" and json.loads(first["arguments"]) == {"command": "ls -la"}
    assert (first["error"], third["error"], last["error"]) == (False, True, None)
    assert first["duration_s"] == pytest.approx(1.5)
    assert first["result_tokens"] > 0 and len(first["result_sha256"]) == 64
    format_error = "Please always provide EXACTLY ONE action in triple backticks."
    assert json.loads(two["arguments"]) == {"actions": ["ls", "pwd"]}
    assert json.loads(none["arguments"]) == {"actions": []}
    for rejected in (two, none):
        assert (rejected["name"], rejected["error"]) == ("bash", True)
        assert rejected["result_tokens"] == -(-len(format_error) // 4)
        assert rejected["result_sha256"] == sha256_text(format_error)
    assert calls["observation_tokens"].tolist() == [0] * 5
    assert calls["latency_s"].tolist()[1:] == pytest.approx([1.5, 2.0, 1.75, 2.0])
    row = runs.iloc[0]
    assert (row["run_id"], row["exit"], row["step_limit"]) == ("run1/inst-1", "Submitted", 250)


def test_a_configured_action_regex_is_the_one_used(tmp_path):
    """swebench_xml-style configs name their own action_regex: it is used."""
    xml = r"<bash_code>(.*?)</bash_code>"
    messages = [v1_assistant("Run <bash_code>make test</bash_code> now", 2.0),
                v1_user("<returncode>0</returncode>", 3.0),
                v1_assistant(ONE, 4.0)]  # a ```bash block is no action under this config
    doc = v1_trajectory(messages, agent={"action_regex": xml, "step_limit": 0})
    _, runs, calls = imported(tmp_path, write(tmp_path, "r", "i", doc))
    assert [len(t) for t in calls["tool_calls"]] == [1, 0]
    assert json.loads(calls["tool_calls"].iloc[0][0]["arguments"]) == {"command": "make test"}
    assert pd.isna(runs.iloc[0]["step_limit"])  # 0: mini-swe-agent's "no limit"


def test_a_pathological_configured_regex_does_not_hang_the_import(tmp_path):
    """The pattern comes from the file: a catastrophic one is cut off by the
    search timeout (the call then has no action), never a hang."""
    import time

    import sim.traces.miniswe as miniswe

    doc = v1_trajectory([v1_assistant("a" * 40 + "!", 2.0)],
                        agent={"action_regex": r"(a+)+$"})
    old, miniswe.REGEX_TIMEOUT_S = miniswe.REGEX_TIMEOUT_S, 0.2
    try:
        began = time.perf_counter()
        _, runs, calls = imported(tmp_path, write(tmp_path, "r", "i", doc))
    finally:
        miniswe.REGEX_TIMEOUT_S = old
    assert time.perf_counter() - began < 20
    assert runs["steps"].tolist() == [1] and calls["tool_calls"].iloc[0] == []


def v2_textbased(messages: list[dict]) -> dict:
    return {"trajectory_format": "mini-swe-agent-1.1",
            "info": {"exit_status": "LimitsExceeded", "submission": "",
                     "model_stats": {"instance_cost": 0.02, "api_calls": 3},
                     "config": {"agent": {"step_limit": 3, "cost_limit": 0},
                                "model": {"model_name": "openai/gpt-5-mini",
                                          "action_regex":
                                              r"```mswea_bash_command\s*\n(.*?)\n```"}}},
            "messages": [{"role": "system", "content": "sys"},
                         {"role": "user", "content": "task"}, *messages]}


def test_v2_text_based_calls_use_their_recorded_actions_and_format_errors_are_calls(tmp_path):
    """A 2.x text-based model: the assistant message records ``extra.actions``,
    its observation is a user message with ``extra.returncode``; a response
    that failed to parse is the FormatError user message carrying the billed
    response: a call whose one ``bash`` tool call (the actions found) is
    answered, an error, by the format error."""
    block = "```mswea_bash_command\nls\n```"
    messages = [
        {"role": "assistant", "content": block,
         "extra": {"actions": [{"command": "ls"}], "response": response(), "cost": 0.01,
                   "timestamp": 10.0}},
        {"role": "user", "content": "<returncode>2</returncode>",
         "extra": {"raw_output": "", "returncode": 2, "timestamp": 11.0,
                   "exception_info": None}},
        {"role": "user", "content": "Please always provide EXACTLY ONE action, found 2.",
         "extra": {"interrupt_type": "FormatError", "n_actions": 2,
                   "model_response": "two blocks here", "response": response(),
                   "cost": 0.005}},
        {"role": "exit", "content": "LimitsExceeded",
         "extra": {"exit_status": "LimitsExceeded"}},
    ]
    report, runs, calls = imported(tmp_path, write(tmp_path, "r", "i", v2_textbased(messages)))
    assert report.skips == [] and runs["steps"].tolist() == [2]
    [tool] = calls["tool_calls"].iloc[0]
    assert (tool["name"], json.loads(tool["arguments"]), tool["error"]) == (
        "bash", {"command": "ls"}, True)
    [rejected] = calls["tool_calls"].iloc[1]
    assert (rejected["name"], json.loads(rejected["arguments"]), rejected["error"]) == (
        "bash", {"actions": []}, True)  # "two blocks here" holds no fenced block
    assert rejected["result_tokens"] == 13  # the format error fed back
    assert calls["cost_usd"].tolist() == pytest.approx([0.01, 0.005])
    assert calls["text_tokens"].iloc[1] == 4  # "two blocks here": the model's own text
    assert calls["observation_tokens"].tolist() == [0, 0]


def v2_toolcalling(messages: list[dict]) -> dict:
    doc = v2_textbased(messages)
    doc["info"]["config"]["model"] = {"model_name": "anthropic/claude-sonnet-4-5"}
    return doc


def tool_response(content: str, tool_calls: list[dict] | None = None) -> dict:
    out = response()
    out["choices"][0]["message"] = {"role": "assistant", "content": content,
                                    "tool_calls": tool_calls}
    return out


def test_a_tool_calling_models_format_errors_keep_what_the_model_sent(tmp_path):
    """2.x tool calling: a response with no tool call, or with one the parser
    refuses (an unknown tool, arguments that are not JSON), is the FormatError
    message: its tool call records what the response sent, errors with the
    fed-back text, and its text is the response's own content."""
    bad = {"id": "t1", "type": "function",
           "function": {"name": "python", "arguments": "{not json"}}
    error = "No tool calls found in the response. Every response MUST include one."
    messages = [
        {"role": "user", "content": error,
         "extra": {"interrupt_type": "FormatError", "response": tool_response("thinking"),
                   "cost": 0.001, "timestamp": 10.0}},
        {"role": "user", "content": "Unknown tool 'python'.",
         "extra": {"interrupt_type": "FormatError", "cost": 0.001, "timestamp": 11.0,
                   "response": tool_response("", [bad])}},
    ]
    report, runs, calls = imported(tmp_path,
                                   write(tmp_path, "r", "i", v2_toolcalling(messages)))
    assert report.skips == [] and runs["steps"].tolist() == [2]
    [none], [unknown] = calls["tool_calls"].tolist()
    assert json.loads(none["arguments"]) == {"tool_calls": []}
    assert json.loads(unknown["arguments"]) == {
        "tool_calls": [{"name": "python", "arguments": "{not json"}]}
    assert (none["error"], unknown["error"]) == (True, True)
    assert none["result_tokens"] == -(-len(error) // 4)
    assert calls["text_tokens"].tolist() == [2, 0]  # "thinking"; "" has no tokens
    assert calls["observation_tokens"].tolist() == [0, 0]


def responses_reply(call_id: str | None, command: str = "ls", *, text: str = "",
                    status: str = "completed", created: int = 1_700_000_000) -> dict:
    """A Responses API model's reply as mini-swe-agent 2.x stores it: the
    response itself (``response.model_dump()``: no ``role``), its actions in
    ``extra``."""
    output: list[dict] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    if text:
        output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": status,
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    if call_id is not None:
        output.append({"type": "function_call", "id": "fc_1", "call_id": call_id,
                       "name": "bash", "arguments": json.dumps({"command": command}),
                       "status": "completed"})
    reply = {"id": "resp_1", "created_at": created, "model": "gpt-5-mini-2025-08-07",
             "object": "response", "output": output, "status": status,
             "usage": {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600},
                       "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 200},
                       "total_tokens": 1300}}
    if status == "incomplete":
        reply["incomplete_details"] = {"reason": "max_output_tokens"}
    return reply


def test_a_responses_api_models_replies_are_calls(tmp_path):
    """mini-swe-agent 2.x with a Responses API model (``litellm_response``,
    ``openrouter_response``, ``portkey_response``): each reply is the response
    itself, without a ``role``; its ``function_call`` items are the tool calls,
    answered by ``function_call_output`` messages by ``call_id``; usage is the
    Responses API's (``input_tokens`` with the cache inside, ``output_tokens``
    with the reasoning inside); a reply without a tool call is the FormatError
    message carrying it. Before, every such reply was dropped: the run had no
    calls."""
    def reply(call_id, command="ls", **kw):
        out = responses_reply(call_id, command, **kw)
        out["extra"] = {"actions": [{"command": command, "tool_call_id": call_id}] if call_id
                        else [], "cost": 0.002, "timestamp": 10.0}
        return out

    def output(call_id, code):
        return {"type": "function_call_output", "call_id": call_id,
                "output": f"<returncode>{code}</returncode>\n<output>\nx\n</output>",
                "extra": {"raw_output": "x", "returncode": code, "timestamp": 11.0,
                          "exception_info": ""}}

    error = "No tool calls found in the response. Every response MUST include one."
    messages = [
        reply("call_a", "ls", text="Looking around."),
        output("call_a", 0),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": error}],
         "extra": {"interrupt_type": "FormatError", "cost": 0.001,
                   "response": responses_reply(None, text="I am done.")}},
        reply("call_b", "false", status="incomplete"),
        output("call_b", 1),
    ]
    doc = v2_textbased([{k: v for k, v in m.items()} for m in messages])
    doc["info"]["config"]["model"] = {"model_name": "openai/gpt-5-mini",
                                      "model_class": "litellm_response"}
    doc["messages"][:2] = [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "s"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "t"}]}]
    report, runs, calls = imported(tmp_path, write(tmp_path, "r", "i", doc))
    assert report.skips == [] and runs["steps"].tolist() == [3]
    first, rejected, last = (t[0] for t in calls["tool_calls"])
    assert (first["name"], json.loads(first["arguments"]), first["error"]) == (
        "bash", {"command": "ls"}, False)
    assert first["result_tokens"] > 0 and first["id"] == "call_a"
    assert (rejected["error"], json.loads(rejected["arguments"])) == (True, {"tool_calls": []})
    assert (last["name"], last["error"]) == ("bash", True)  # returncode 1
    row = calls.iloc[0]
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"],
            row["reasoning_tokens"]) == (400, 600, 100, 200)
    assert calls["finish_reason"].tolist() == ["completed", "completed", "length"]
    assert calls["text_tokens"].tolist()[:2] == [4, 3]  # "Looking around."; "I am done."
    assert calls["cost_usd"].tolist() == pytest.approx([0.002, 0.001, 0.002])
    assert calls["model"].tolist() == ["gpt-5-mini-2025-08-07"] * 3
    assert runs["started_at"].iloc[0] == pd.Timestamp(1_700_000_000, unit="s", tz="UTC")


def test_a_text_without_one_action_that_nothing_answers_stays_a_text(tmp_path):
    """The trajectory ends after a text with no action (no format error fed
    back): nothing rejected it, so it is a call without tool calls, as before."""
    messages = [v1_assistant(ONE, 2.0), v1_user("<returncode>0</returncode>", 3.0),
                v1_assistant(NONE, 4.0)]
    _, _, calls = imported(tmp_path, write(tmp_path, "r", "i", v1_trajectory(messages)))
    assert [len(t) for t in calls["tool_calls"]] == [1, 0]


def test_format_errors_are_validation_errors_to_calibration_not_messages(tmp_path):
    """Calibration reads a call without tool calls before a run's last as a
    message to the task-giver (a conversation, and runs without any as a
    class of their own); a format error is the model's rejected attempt at a
    command, so it counts as a tool error (the world's ``validation``)."""
    from sim.calibration.data import load
    from sim.calibration.estimate import estimate

    for i in range(10):
        messages = [v1_assistant(ONE, 2.0), v1_user("<returncode>0</returncode>", 3.0)]
        if i % 2:
            messages += [v1_assistant(TWO, 4.0), v1_user("Please provide EXACTLY ONE.", 4.0)]
        messages += [v1_assistant(SUBMIT, 6.0), v1_user("diff", 7.0)]
        write(tmp_path, "run", f"inst-{i}", v1_trajectory(messages))
    import_traces([tmp_path / "run"], tmp_path / "out")
    traces = load(tmp_path / "out")
    calls = traces.calls
    talk = calls["text"].to_numpy(bool) & ~calls["last"].to_numpy(bool)
    assert not talk.any()
    assert traces.runs["errors"].tolist() == [0, 1] * 5
    assert not estimate(traces, np.array(["c1"] * traces.n, object)).conversation


def test_a_trajectory_that_failed_before_its_first_reply_is_a_run_of_zero_calls(tmp_path):
    doc = v1_trajectory([], exit_status="AuthenticationError")
    doc["info"]["model_stats"] = {"instance_cost": 0.0, "api_calls": 0}
    report, runs, calls = imported(tmp_path, write(tmp_path, "r", "i", doc))
    assert report.skips == [] and len(calls) == 0
    row = runs.iloc[0]
    assert (row["steps"], row["exit"], row["cost_usd"]) == (0, "AuthenticationError", 0.0)


def test_impossible_limits_and_times_are_nulled_and_counted(tmp_path):
    """``step_limit: NaN``, ``cost_limit: -1``, a timestamp of -1e30: nulled,
    counted by field, the run kept and readable."""
    messages = [v1_assistant(ONE, -1e30), v1_user("<returncode>0</returncode>", 3.0),
                v1_assistant(NONE, 4.0)]
    doc = v1_trajectory(messages, agent={"step_limit": float("nan"), "cost_limit": -1})
    path = tmp_path / "r" / "i"
    path.mkdir(parents=True)
    (path / "i.traj.json").write_text(json.dumps(doc))  # NaN as JSON's NaN
    report, runs, _ = imported(tmp_path, path / "i.traj.json")
    repairs = report.repairs_by_field()
    assert repairs["runs.step_limit"] == {"not a finite number: set to null": 1}
    assert repairs["runs.cost_limit_usd"] == {"negative: set to null": 1}
    assert "calls.tool_calls.duration_s" in repairs  # 3.0 - (-1e30): beyond a year
    row = runs.iloc[0]
    assert pd.isna(row["step_limit"]) and pd.isna(row["cost_limit_usd"])


# ---------------------------------------------------------------- reports

def tool_trajectory(instance: str, model: str = "deepseek/deepseek-chat") -> dict:
    doc = v1_trajectory([v1_assistant(NONE, 2.0)])
    doc["instance_id"] = instance
    doc["info"]["config"]["model"]["model_name"] = model
    return doc


def report(resolved: list[str], unresolved: list[str]) -> dict:
    return {"total_instances": 2, "resolved_instances": len(resolved),
            "resolved_ids": resolved, "unresolved_ids": unresolved,
            "submitted_ids": resolved + unresolved}


def test_sb_cli_reports_next_to_the_runs_apply_to_the_run_they_name(tmp_path):
    """Two runs of the same instances; sb-cli saved one report per run in
    sb-cli-reports/ ({subset}__{split}__{run_id}.json, run_id the run folder):
    each run takes its own report's verdict, never the other's."""
    root = tmp_path / "results"
    for run in ("run1", "run2"):
        for instance in ("a__x-1", "b__y-2"):
            write(root, run, instance, tool_trajectory(instance))
    reports = root / "sb-cli-reports"
    reports.mkdir()
    (reports / "swe-bench_verified__test__run1.json").write_text(
        json.dumps(report(["a__x-1"], ["b__y-2"])))
    (reports / "swe-bench_verified__test__run2.json").write_text(
        json.dumps(report(["b__y-2"], ["a__x-1"])))
    (reports / "swe-bench_verified__test__run2.response.json").write_text('{"ok": true}')
    _, runs, _ = imported(tmp_path, root)
    got = dict(zip(runs["run_id"], runs["resolved"].tolist(), strict=True))
    assert got == {"run1/a__x-1": True, "run1/b__y-2": False,
                   "run2/a__x-1": False, "run2/b__y-2": True}


def test_several_reports_in_one_folder_are_never_merged(tmp_path):
    """Reports of run1 and run2 side by side in one folder, and run3 with no
    report of its own: run3 gets null, not another run's verdict; an instance
    resolved in run1's report is not resolved in run2."""
    root = tmp_path / "results"
    for run in ("run1", "run2", "run3"):
        write(root, run, "a__x-1", tool_trajectory("a__x-1"))
    (root / "deepseek__deepseek-chat.run1.json").write_text(
        json.dumps(report(["a__x-1"], [])))
    (root / "deepseek__deepseek-chat.run2.json").write_text(
        json.dumps(report([], ["a__x-1"])))
    _, runs, _ = imported(tmp_path, root)
    got = dict(zip(runs["run_id"], runs["resolved"].tolist(), strict=True))
    assert got["run1/a__x-1"] is True and got["run2/a__x-1"] is False
    assert pd.isna(got["run3/a__x-1"])


def test_a_report_naming_only_the_model_applies_to_that_models_runs(tmp_path):
    root = tmp_path / "results"
    write(root, "ds", "a__x-1", tool_trajectory("a__x-1"))
    write(root, "gpt", "a__x-1", tool_trajectory("a__x-1", model="openai/gpt-4o"))
    (root / "openai__gpt-4o.json").write_text(json.dumps(report(["a__x-1"], [])))
    _, runs, _ = imported(tmp_path, root)
    got = dict(zip(runs["run_id"], runs["resolved"].tolist(), strict=True))
    assert got["gpt/a__x-1"] is True and pd.isna(got["ds/a__x-1"])


def test_a_report_that_names_the_run_wins_over_one_that_names_the_model(tmp_path):
    reports = Reports()
    folder = tmp_path / "results"
    trajectory = folder / "run1" / "a" / "a.traj.json"
    reports.add(report([], ["a"]), folder / "deepseek__deepseek-chat.json")
    reports.add(report(["a"], []), folder / "sb-cli-reports" / "lite__test__run1-1.json")
    assert reports.verdict(trajectory, "a", "run1", "deepseek/deepseek-chat") is True
    assert reports.verdict(trajectory, "a", "run2", "other/model") is None


def test_a_report_in_the_run_folders_own_sb_cli_reports_applies_to_that_run(tmp_path):
    """sb-cli run inside the run folder writes RUN_DIR/sb-cli-reports/; a run
    id given by hand (not the folder's name) still belongs to the only run
    there; a report under another run's folder does not."""
    root = tmp_path / "results"
    for run in ("run1", "run2"):
        write(root, run, "a__x-1", tool_trajectory("a__x-1"))
    reports = root / "run1" / "sb-cli-reports"
    reports.mkdir()
    (reports / "swe-bench_lite__dev__my-custom-id.json").write_text(
        json.dumps(report(["a__x-1"], [])))
    _, runs, _ = imported(tmp_path, root)
    got = dict(zip(runs["run_id"], runs["resolved"].tolist(), strict=True))
    assert got["run1/a__x-1"] is True and pd.isna(got["run2/a__x-1"])
