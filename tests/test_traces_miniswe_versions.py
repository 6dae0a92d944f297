"""mini-swe-agent trajectories as each version writes them (sim/traces/miniswe.py):
1.0-1.3 (no ``trajectory_format``, no ``info.config``, the action parse
written into the code), 1.17 (every message stamped with ``timestamp``),
2.0-2.3 (a format error's response not saved), 2.x (a format error's message
not stamped). The files are trimmed copies of ones the versions wrote against
a scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.traces import import_traces, read_traces
from sim.traces.miniswe import V1_ACTION_REGEX, V1_LEGACY_ACTION_REGEX, _v1_default

FORMAT_ERROR_V1 = ("Please always provide EXACTLY ONE action in triple backticks, found 2 "
                   "actions.")


def write(root: Path, instance: str, doc: dict) -> Path:
    folder = root / "run1" / instance
    folder.mkdir(parents=True)
    path = folder / f"{instance}.traj.json"
    path.write_text(json.dumps(doc))
    return path


def imported(tmp_path: Path, path: Path):
    report = import_traces([path], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    return report, runs, calls


def v1_0_trajectory() -> dict:
    """mini-swe-agent 1.1.0's ``save_traj``: ``info`` holds only exit_status,
    submission and model_stats; messages are bare ``{"role", "content"}``."""
    return {
        "info": {"exit_status": "Submitted", "submission": "",
                 "model_stats": {"instance_cost": 0.00295, "api_calls": 4}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Please solve this issue: Print hello"},
            {"role": "assistant", "content": "first\n```bash\nls /\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nbin\n</output>"},
            {"role": "assistant",
             "content": "two actions\n```bash\necho a\n```\n```bash\necho b\n```"},
            {"role": "user", "content": FORMAT_ERROR_V1},
            {"role": "assistant", "content": "ok\n```bash\nexit 3\n```"},
            {"role": "user", "content": "<returncode>3</returncode>\n<output>\n</output>"},
            {"role": "assistant",
             "content": "done\n```bash\necho MINI_SWE_AGENT_FINAL_OUTPUT\n```"},
            {"role": "user", "content": ""},
        ]}


def test_a_trajectory_without_format_is_read_with_1_0s_bash_parse(tmp_path):
    """mini-swe-agent 1.0-1.3 write no ``trajectory_format`` and no
    ``info.config``; their parse is ``re.findall(r"```bash\\n(.*?)\\n```")``.
    The 1.1.0 file (4 calls: three single actions, one with two) imports as
    4 calls whose actions are ``ls /``, the rejected ``{"actions": ["echo a",
    "echo b"]}``, ``exit 3`` (an error: returncode 3) and the submission.
    Before, the 2.x ``mswea_bash_command`` parse was used: every call was a
    format error with ``{"actions": []}``."""
    report, runs, calls = imported(tmp_path, write(tmp_path, "v0a", v1_0_trajectory()))
    assert report.skips == [] and runs["steps"].tolist() == [4]  # = api_calls
    tools = [t[0] for t in calls["tool_calls"]]
    assert [json.loads(t["arguments"]) for t in tools] == [
        {"command": "ls /"}, {"actions": ["echo a", "echo b"]}, {"command": "exit 3"},
        {"command": "echo MINI_SWE_AGENT_FINAL_OUTPUT"}]
    assert [t["error"] for t in tools] == [False, True, True, None]
    assert tools[1]["result_tokens"] == -(-len(FORMAT_ERROR_V1) // 4)
    assert calls["input_tokens"].isna().all()  # 1.0-1.3 keep no response
    row = runs.iloc[0]
    assert (row["exit"], row["cost_usd"]) == ("Submitted", pytest.approx(0.00295))


@pytest.mark.parametrize(("version", "expected"), [
    (None, V1_LEGACY_ACTION_REGEX), ("1.9.1", V1_LEGACY_ACTION_REGEX),
    ("1.11.1", V1_LEGACY_ACTION_REGEX), ("1.12.0", V1_ACTION_REGEX),
    ("1.15.0", V1_ACTION_REGEX), ("1.17.5", V1_ACTION_REGEX), ("x", V1_LEGACY_ACTION_REGEX),
    (3, V1_LEGACY_ACTION_REGEX)])
def test_a_1x_trajectory_without_a_configured_regex_gets_its_versions_parse(version,
                                                                           expected):
    """1.0-1.11 parse ``r"```bash\\n(.*?)\\n```"`` (1.4 records no
    ``mini_version``, 1.5-1.15 no ``action_regex``); 1.12 on allow whitespace
    after ``bash`` (``r"```bash\\s*\\n(.*?)\\n```"``, recorded from 1.16)."""
    assert _v1_default(version) == expected


def test_a_1_11_file_reads_bash_with_trailing_space_as_no_action(tmp_path):
    """1.11 (``mini_version`` 1.11.1, format ``mini-swe-agent-1``, no
    ``action_regex`` in its config) rejects "```bash \\n": 0 actions, so the
    call is a format error; the same text from 1.17.5 is one action."""
    def doc(version: str) -> dict:
        return {"trajectory_format": "mini-swe-agent-1",
                "info": {"exit_status": "Submitted", "mini_version": version,
                         "model_stats": {"instance_cost": 0.0, "api_calls": 1},
                         "config": {"agent": {"step_limit": 0}, "model": {"model_name": "m"}}},
                "messages": [{"role": "assistant", "content": "x\n```bash \nls\n```"},
                             {"role": "user", "content": "Please always provide ONE action"}]}
    for version, arguments in (("1.11.1", {"actions": []}), ("1.17.5", {"command": "ls"})):
        folder = tmp_path / version
        _, _, calls = imported(folder, write(folder, "i", doc(version)))
        assert json.loads(calls["tool_calls"].iloc[0][0]["arguments"]) == arguments


def chat_response(n: int, created: int, prompt: int, completion: int, cached: int,
                  content: str, tool_calls: list[dict] | None = None) -> dict:
    """``response.model_dump()`` of a litellm chat completion."""
    return {"id": f"chatcmpl-{n}", "created": created, "model": "fake-model",
            "object": "chat.completion",
            "choices": [{"finish_reason": "tool_calls" if tool_calls else "stop", "index": 0,
                         "message": {"content": content, "role": "assistant",
                                     "tool_calls": tool_calls, "function_call": None}}],
            "usage": {"completion_tokens": completion, "prompt_tokens": prompt,
                      "total_tokens": prompt + completion,
                      "completion_tokens_details": {"reasoning_tokens": 0},
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def tool_reply(n: int, t: float, prompt: int, cached: int, commands: list[str],
               cost: float) -> dict:
    """A 2.x tool-calling model's reply (``LitellmModel.query``)."""
    calls = [{"function": {"arguments": json.dumps({"command": c}), "name": "bash"},
              "id": f"call_{n}_{i}", "type": "function"} for i, c in enumerate(commands)]
    return {"content": f"reply {n}", "role": "assistant", "tool_calls": calls,
            "function_call": None, "provider_specific_fields": None,
            "extra": {"actions": [{"command": c, "tool_call_id": f"call_{n}_{i}"}
                                  for i, c in enumerate(commands)],
                      "response": chat_response(n, int(t), prompt, 50, cached,
                                                f"reply {n}", calls),
                      "cost": cost, "timestamp": t}}


def tool_output(n: int, i: int, code: int, t: float) -> dict:
    return {"content": json.dumps({"returncode": code, "output": ""}), "role": "tool",
            "tool_call_id": f"call_{n}_{i}",
            "extra": {"raw_output": "", "returncode": code, "timestamp": t,
                      "exception_info": ""}}


NO_TOOL = "Tool call error:\n\n<error>\nNo tool calls found in the response.\n</error>"


def v2_trajectory(version: str, messages: list[dict], api_calls: int) -> dict:
    return {"info": {"model_stats": {"instance_cost": 0.00245, "api_calls": api_calls},
                     "config": {"agent": {"step_limit": 0, "cost_limit": 3.0},
                                "model": {"model_name": "openai/fake-model"}},
                     "mini_version": version, "exit_status": "Submitted", "submission": ""},
            "messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "Please solve this issue: Print hello"},
                         *messages,
                         {"role": "exit", "content": "",
                          "extra": {"exit_status": "Submitted", "submission": ""}}],
            "trajectory_format": "mini-swe-agent-1.1"}


def test_a_2_3_format_error_without_its_response_is_a_call_of_unknown_usage(tmp_path):
    """mini-swe-agent 2.0-2.3 (tool calling) save a format error as
    ``{"role": "user", "content": ..., "extra": {"interrupt_type":
    "FormatError"}}`` only, but the request was made (``api_calls`` 3). The
    import has 3 calls, the middle one with unknown usage and a ``bash`` tool
    call with unrecorded arguments, an error answered by the fed-back text;
    the known calls' counts are kept (input 1000 + 300 uncached). Before, the
    format error was dropped: 2 calls."""
    messages = [tool_reply(0, 100.5, 1000, 0, ["ls /"], 0.0012),
                tool_output(0, 0, 0, 100.6),
                {"role": "user", "content": NO_TOOL, "extra": {"interrupt_type": "FormatError"}},
                tool_reply(2, 101.8, 1500, 1200, ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
                           0.0006)]
    report, runs, calls = imported(tmp_path, write(tmp_path, "tc23",
                                                   v2_trajectory("2.3.0", messages, 3)))
    assert report.skips == [] and runs["steps"].tolist() == [3]  # = api_calls
    assert calls["input_tokens"].tolist()[::2] == [1000, 300]
    assert calls[["input_tokens", "output_tokens", "cost_usd"]].iloc[1].isna().all()
    [rejected] = calls["tool_calls"].iloc[1]
    assert (rejected["name"], rejected["arguments"], rejected["error"]) == ("bash", None, True)
    assert rejected["result_tokens"] == -(-len(NO_TOOL) // 4)
    assert runs.iloc[0]["input_tokens"] == 1300  # the known calls' (no total recorded)


def test_a_2_3_text_based_format_errors_are_calls_with_their_actions(tmp_path):
    """2.0-2.3 text-based: the format error's message keeps ``n_actions`` and
    ``model_response`` (the model's text) but no response. Two format errors
    in a row (2 actions, then none) between two valid replies: 4 calls
    (``api_calls`` 4), the rejected ones ``{"actions": ["echo a", "echo b"]}``
    and ``{"actions": []}`` with text from ``model_response``."""
    def reply(n, t, command):
        content = f"ok\n```mswea_bash_command\n{command}\n```"
        return {"role": "assistant", "content": content,
                "extra": {"actions": [{"command": command}],
                          "response": chat_response(n, int(t), 1000, 50, 0, content),
                          "cost": 0.001, "timestamp": t}}

    def output(code, t):
        return {"role": "user", "content": f"<returncode>{code}</returncode>\n<output>\n</output>",
                "extra": {"raw_output": "", "returncode": code, "timestamp": t,
                          "exception_info": ""}}

    two = "two actions\n```mswea_bash_command\necho a\n```\n```mswea_bash_command\necho b\n```"
    messages = [
        reply(0, 10.5, "ls /"), output(0, 10.6),
        {"role": "user", "content": "Format error: Expected exactly 1 action, found 2.",
         "extra": {"interrupt_type": "FormatError", "n_actions": 2, "model_response": two}},
        {"role": "user", "content": "Format error: Expected exactly 1 action, found 0.",
         "extra": {"interrupt_type": "FormatError", "n_actions": 0,
                   "model_response": "none at all"}},
        reply(3, 11.9, "exit 3"), output(3, 12.0)]
    doc = v2_trajectory("2.3.0", messages, 4)
    doc["info"]["config"]["model"]["action_regex"] = r"```mswea_bash_command\s*\n(.*?)\n```"
    report, runs, calls = imported(tmp_path, write(tmp_path, "tb23", doc))
    assert report.skips == [] and runs["steps"].tolist() == [4]
    tools = [t[0] for t in calls["tool_calls"]]
    assert [json.loads(t["arguments"]) for t in tools] == [
        {"command": "ls /"}, {"actions": ["echo a", "echo b"]}, {"actions": []},
        {"command": "exit 3"}]
    assert [t["error"] for t in tools] == [False, True, True, True]
    assert calls["text_tokens"].tolist()[1:3] == [-(-len(two) // 4), 3]  # "none at all"
    assert calls["input_tokens"].isna().tolist() == [False, True, True, False]


def test_the_call_after_an_unstamped_format_error_has_an_unknown_start(tmp_path):
    """2.x does not stamp a format error's message (2.4 keeps its response,
    with usage and cost, but no ``timestamp``): the next call began when it
    was recorded, which is unknown, so that call's ``started_s`` and
    ``latency_s`` are null. Before, they ran from the tool output before the
    format error: latency 1.3 s for a 0.3 s call (hunter's case tc1s). A call
    after a stamped tool output keeps its times (0.25 s from 101.0)."""
    error_response = chat_response(1, 100, 1200, 50, 800, "oops no tool")
    messages = [tool_reply(0, 100.6, 1000, 0, ["ls /"], 0.0012),
                tool_output(0, 0, 0, 100.63),
                {"role": "user", "content": NO_TOOL,
                 "extra": {"interrupt_type": "FormatError", "cost": 0.00058,
                           "response": error_response}},
                tool_reply(2, 101.97, 1500, 1100, ["echo a"], 0.0007),
                tool_output(2, 0, 0, 102.0),
                tool_reply(3, 102.25, 1900, 1400, ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"],
                           0.0006)]
    doc = v2_trajectory("2.4.6", messages, 4)
    report, runs, calls = imported(tmp_path, write(tmp_path, "tc1s", doc))
    assert report.skips == [] and runs["steps"].tolist() == [4]
    assert calls["latency_s"].isna().tolist() == [True, True, True, False]
    assert calls["started_s"].isna().tolist() == [True, True, True, False]
    assert calls["latency_s"].iloc[3] == pytest.approx(0.25)
    assert calls["input_tokens"].iloc[1] == 400  # 2.4 keeps the response: known usage
    row = runs.iloc[0]  # from the first response's created (100) to the last stamp
    assert row["duration_s"] == pytest.approx(2.25)


def test_a_1_17_run_starts_at_its_first_message_stamp(tmp_path):
    """mini-swe-agent 1.17 stamps every message (``timestamp``, system and task
    included). The run starts at the system message's stamp (35.347), not at
    the first response's whole-second ``created`` (35), and lasts to the last
    stamp: 0.710 s; the first call starts 0.002 s in (the task's stamp) with
    latency 0.625 s. Before: 1.057 s, the first call's start unknown."""
    base = 1_796_610_600

    def assistant(content, t, created):
        return {"role": "assistant", "content": content, "timestamp": base + t,
                "extra": {"response": chat_response(0, base + created, 1000, 100, 0,
                                                    content)}}

    messages = [
        {"role": "system", "content": "You are a helpful assistant.", "timestamp": base + 35.347},
        {"role": "user", "content": "Please solve this issue", "timestamp": base + 35.349},
        assistant("first\n```bash\nls /\n```", 35.974, 35),
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nbin\n</output>",
         "timestamp": base + 35.989},
        assistant("done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```", 36.023, 36),
        {"role": "user", "content": "", "timestamp": base + 36.057}]
    doc = {"trajectory_format": "mini-swe-agent-1",
           "info": {"exit_status": "Submitted", "submission": "", "mini_version": "1.17.5",
                    "model_stats": {"instance_cost": 0.002, "api_calls": 2},
                    "config": {"agent": {"action_regex": r"```bash\s*\n(.*?)\n```"},
                               "model": {"model_name": "openai/fake-model"}}},
           "messages": messages}
    report, runs, calls = imported(tmp_path, write(tmp_path, "v1a", doc))
    row = runs.iloc[0]
    assert row["duration_s"] == pytest.approx(0.710)
    assert row["started_at"].timestamp() == pytest.approx(base + 35.347, abs=1e-3)
    assert calls["started_s"].tolist() == pytest.approx([0.002, 0.642], abs=1e-6)
    assert calls["latency_s"].tolist() == pytest.approx([0.625, 0.034], abs=1e-6)
    assert not report.repairs  # no start before the run's
