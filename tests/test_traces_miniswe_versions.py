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
