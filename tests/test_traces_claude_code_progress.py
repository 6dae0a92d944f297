"""Subagents of a Claude Code session whose own transcript files are absent
or whose main file is empty (sim/traces/claude_code.py).

Claude Code also records a subagent's messages in the session's main file,
as ``progress`` lines of ``data.type`` ``agent_progress``: a transcript
copied without its ``subagents/`` folder still has them there, and they are
read when (and only when) the subagent's own file is absent. The lines are
written here in the shape Claude Code 2.1.30's source builds them
(tests/cc_lines.py); counts are worked out by hand.
"""

from __future__ import annotations

from cc_lines import (
    SESSION,
    assistant,
    collected,
    progress,
    result,
    text,
    tool_use,
    usage,
    user,
    write,
)

from sim.traces import import_traces, read_traces
from sim.traces.claude_code import MODEL_FROM_SUBAGENTS, SUBAGENTS_FROM_PROGRESS
from sim.traces.model import EXACT, sha256_text

AGENT = "a6047be"
HAIKU = "claude-haiku-4-5-20251001"


def _subagent():
    """The subagent's own lines: its prompt, S1 (a Bash call), S2 (a text
    block and a Bash call, two lines), and its last reply S3 (text only)."""
    def sub(line):
        return {**line, "isSidechain": True, "agentId": AGENT}
    return [
        sub(user("su1", None, 2.0, "Run the tests.")),
        sub(assistant("s1a", "su1", 3.0, "msg_S1", tool_use("toolu_s1", "Bash",
                                                             {"command": "pytest"}),
                      usage(30, 12, cache_write=500), stop="tool_use", model=HAIKU)),
        sub(user("su2", "s1a", 4.0, result("toolu_s1", "3 passed"))),
        sub(assistant("s2a", "su2", 5.0, "msg_S2", text("Checking the log."),
                      usage(20, 15, cache_read=500), stop="tool_use", model=HAIKU)),
        sub(assistant("s2b", "s2a", 6.0, "msg_S2", tool_use("toolu_s2", "Bash",
                                                             {"command": "cat log"}),
                      usage(20, 15, cache_read=500), stop="tool_use", model=HAIKU)),
        sub(user("su3", "s2b", 7.0, result("toolu_s2", "no errors"))),
        sub(assistant("s3a", "su3", 8.0, "msg_S3", text("All 3 tests pass."),
                      usage(40, 9, cache_read=520), stop="end_turn", model=HAIKU)),
    ]


def _main():
    """The main thread: a Task call, the subagent's progress lines (one per
    tool call and result, each with the subagent's messages so far; its last
    reply, without a tool call, has none), the Task result and a last reply."""
    s = {line["uuid"]: line for line in _subagent()}
    return [
        user("u1", None, 0.0, "Run the tests with a subagent."),
        assistant("a1", "u1", 1.0, "msg_M1", tool_use("toolu_task", "Task", {
            "description": "run tests", "prompt": "Run the tests.",
            "subagent_type": "general-purpose"}), usage(50, 20, cache_write=1000),
            stop="tool_use"),
        progress("p1", "a1", 2.0, AGENT, "toolu_task", s["su1"], [s["su1"]]),
        progress("p2", "p1", 3.5, AGENT, "toolu_task", s["s1a"], [s["s1a"]]),
        progress("p3", "p2", 4.0, AGENT, "toolu_task", s["su2"], [s["s1a"], s["su2"]]),
        progress("p4", "p3", 6.0, AGENT, "toolu_task", s["s2b"],
                 [s["s1a"], s["su2"], s["s2a"], s["s2b"]]),
        progress("p5", "p4", 7.0, AGENT, "toolu_task", s["su3"],
                 [s["s1a"], s["su2"], s["s2a"], s["s2b"], s["su3"]]),
        user("u2", "a1", 9.0, result("toolu_task", "All 3 tests pass."), toolUseResult={
            "status": "completed", "prompt": "Run the tests.", "agentId": AGENT,
            "content": [text("All 3 tests pass.")], "totalDurationMs": 7000,
            "totalTokens": 569, "totalToolUseCount": 2,
            "usage": {**usage(40, 9, cache_read=520), "service_tier": "standard"}}),
        assistant("a2", "u2", 10.0, "msg_M2", text("Tests pass."),
                  usage(60, 8, cache_read=1000), stop="end_turn"),
    ]


def test_without_the_subagents_folder_its_calls_are_read_from_progress_lines(tmp_path):
    """Main file alone: the main agent's two calls, the subagent's S1 and S2
    from its progress lines (each message once, though the lines repeat them;
    S2's two lines one call with its text and its Bash call), and its last
    reply S3 (in no progress line: it made no tool call) from the Task tool
    result's usage and content, final, with the model of the subagent's
    calls; all marked with the agentId, and the run notes where they were read."""
    main = write(tmp_path / "project" / f"{SESSION}.jsonl", _main())
    (run,) = collected(main)
    assert [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.output_tokens)
            for c in run.calls] == [(50, 0, 20), (30, 0, 12), (20, 500, 15), (40, 520, 9),
                                    (60, 1000, 8)]
    assert [c.agent for c in run.calls] == [None, AGENT, AGENT, AGENT, None]
    assert [[t.id for t in c.tool_calls] for c in run.calls] == [
        ["toolu_task"], ["toolu_s1"], ["toolu_s2"], [], []]
    assert run.calls[2].text_sha256 == sha256_text("Checking the log.")
    assert run.calls[1].tool_calls[0].result_sha256 == sha256_text("3 passed")
    assert run.calls[1].tool_calls[0].duration_s == 1.0  # 3.0 s to 4.0 s
    last = run.calls[3]
    assert last.text_sha256 == sha256_text("All 3 tests pass.")
    assert (last.model, last.provenance["output_tokens"]) == (HAIKU, EXACT)
    assert (last.started_s, last.latency_s) == (7.0, 2.0)  # its thread's last line to the result
    assert run.conventions == {"subagents": SUBAGENTS_FROM_PROGRESS}
    assert run.model == "claude-sonnet-4-5"


def test_with_the_subagents_folder_progress_lines_are_not_read_again(tmp_path):
    """Main file and the subagent's own file: five calls (S3 included), each
    once, S2 with one tool call; no note."""
    project = tmp_path / "project"
    main = write(project / f"{SESSION}.jsonl", _main())
    own = write(project / SESSION / "subagents" / f"agent-{AGENT}.jsonl", _subagent())
    for order in ((main, own), (own, main)):
        (run,) = collected(*order)
        assert [(c.usage.input_tokens, c.usage.output_tokens) for c in run.calls] == [
            (50, 20), (30, 12), (20, 15), (40, 9), (60, 8)]
        assert [c.agent for c in run.calls] == [None, AGENT, AGENT, AGENT, None]
        assert [len(c.tool_calls) for c in run.calls] == [1, 1, 1, 0, 0]
        assert run.conventions == {}


def test_a_session_whose_main_file_is_empty_takes_its_model_from_its_subagents(tmp_path):
    """An empty main file (no line) beside its subagent's file: the run has
    the subagent's three calls, and its model is theirs, noted as taken from
    them; the import ignores the empty file and writes the model."""
    project = tmp_path / "project"
    (project / f"{SESSION}.jsonl").parent.mkdir(parents=True)
    (project / f"{SESSION}.jsonl").write_text("")
    own = write(project / SESSION / "subagents" / f"agent-{AGENT}.jsonl", _subagent())
    (run,) = collected(own)
    assert len(run.calls) == 3
    assert run.model == HAIKU
    assert run.conventions == {"model": MODEL_FROM_SUBAGENTS}
    report = import_traces([tmp_path / "project"], tmp_path / "traces")
    assert report.runs == 1 and not report.skips
    runs, calls = read_traces(tmp_path / "traces")
    assert runs["model"].tolist() == [HAIKU] and len(calls) == 3
