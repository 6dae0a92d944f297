"""``--fork-session`` sessions, Agent tool results and attachment lines in
Claude Code transcripts (sim/traces/claude_code.py).

Shapes as Claude Code 2.1.197 and 2.0.77 wrote them against a fake Messages
API (trimmed): ``claude --resume <parent> --fork-session`` writes a new file
``<fork>.jsonl`` that opens with a ``queue-operation`` line stamped at the
fork, then a copy of the parent's conversation (same ``uuid``, message and
``timestamp``; ``sessionId`` the fork's, in 2.0.77 the parent's on the first
line), then the fork's own lines. A subagent's lines carry the parent's
``sessionId``, in ``<parent>/subagents/agent-<id>.jsonl`` (2.1.x) or
``agent-<id>.jsonl`` beside the session files (2.0.x), written with the
stream's ``message_start`` usage (``output_tokens`` 1, ``stop_reason``
null); the Agent tool result's ``toolUseResult.usage`` has the final usage of
the subagent's last request. ``--max-turns`` and ``--max-budget-usd`` are
written as ``attachment`` lines.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from cc_lines import (
    SESSION,
    assistant,
    collected,
    result,
    stamp,
    text,
    tool_use,
    usage,
    user,
    write,
)

from sim.traces.claude_code import MAX_TURNS_EXIT
from sim.traces.model import EXACT

FORK = "aa872c61-07ce-4446-851b-4bdba09919b4"
AGENT = "aa2fdd48231e65ff4"
OPUS = "claude-opus-4-8[1m]"


def _queue(at: float, session: str) -> dict:
    return {"type": "queue-operation", "operation": "enqueue", "timestamp": stamp(at),
            "sessionId": session, "content": "go"}


def _parent(session: str = SESSION) -> list[dict]:
    """The parent: an Agent call, its result (toolUseResult with the
    subagent's final usage 1006/10006/506/306), a final reply."""
    outcome = {"status": "completed", "agentId": AGENT, "agentType": "general-purpose",
               "content": [text("Subagent report.")], "resolvedModel": OPUS,
               "usage": usage(1006, 306, cache_read=10006, cache_write=506)}
    return [
        _queue(0.0, session),
        user("p1", None, 0.1, "do the task", session=session),
        assistant("p2", "p1", 1.0, "msg_4", tool_use("toolu_agent", "Agent", {"prompt": "sub"}),
                  usage(1004, 304, cache_read=10004, cache_write=504), stop="tool_use",
                  session=session),
        user("p3", "p2", 3.0, result("toolu_agent", "Subagent report."), session=session,
             toolUseResult=outcome),
        assistant("p4", "p3", 5.0, "msg_11", text("All done."),
                  usage(1011, 311, cache_read=10011, cache_write=511), stop="end_turn",
                  session=session),
    ]


def _subagent() -> list[dict]:
    """The subagent's two requests, written with start-of-stream usage."""
    return [
        user("s1", None, 1.1, "sub", agent=AGENT),
        assistant("s2", "s1", 1.2, "msg_5", tool_use("toolu_s", "Bash", {"command": "echo"}),
                  usage(1005, 1, cache_read=10005, cache_write=505), agent=AGENT, model=OPUS),
        user("s3", "s2", 1.5, result("toolu_s", "sub"), agent=AGENT),
        assistant("s4", "s3", 1.8, "msg_6", text("Subagent report."),
                  usage(1006, 1, cache_read=10006, cache_write=506), agent=AGENT, model=OPUS),
    ]


def _fork(first_line_session: str) -> list[dict]:
    """The fork, 100 s later: the parent's lines copied, then its own two calls."""
    copies = [{**line, "sessionId": FORK} for line in _parent()[1:]]
    copies[0]["sessionId"] = first_line_session
    return [
        _queue(100.0, FORK), *copies,
        user("f1", "p4", 100.1, "forked", session=FORK),
        assistant("f2", "f1", 100.2, "msg_f5", tool_use("toolu_f", "Bash", {"command": "ls"}),
                  usage(1005, 305, cache_read=10005, cache_write=505), stop="tool_use",
                  session=FORK),
        user("f3", "f2", 100.3, result("toolu_f", "out"), session=FORK),
        assistant("f4", "f3", 100.4, "msg_f6", text("Done."),
                  usage(1006, 306, cache_read=10006, cache_write=506), stop="end_turn",
                  session=FORK),
    ]


def _counts(run) -> list[tuple[int, int, int, int]]:
    return [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.cache_write_tokens,
             c.usage.output_tokens) for c in run.calls]


@pytest.mark.parametrize("layout", ["2.1", "2.0"])
@pytest.mark.parametrize("fork_first", [False, True])
def test_a_fork_session_is_its_own_calls_and_times(tmp_path, layout, fork_first):
    """Parent (2 calls, its subagent's 2 in their own file) and its fork.
    The fork made 2 requests (2011 input, 20011 cache read, 1011 cache write,
    611 output): the copied Agent tool result gives it no subagent call and no
    "file absent" note; its run starts at its own first line (100.1 s) and
    lasts 0.3 s, its first call at 0.0 s. The parent keeps its 4 calls
    whichever file is read first; its run spans 0.1 s to 5.0 s."""
    project = tmp_path / ("b" if fork_first else "a")
    write(project / f"{SESSION}.jsonl", _parent())
    sub = (project / SESSION / "subagents" / f"agent-{AGENT}.jsonl" if layout == "2.1"
           else project / f"agent-{AGENT}.jsonl")
    write(sub, _subagent())
    fork = write(tmp_path / ("a" if fork_first else "b") / f"{FORK}.jsonl",
                 _fork(SESSION if layout == "2.0" else FORK))
    runs = {r.run_id: r for r in collected(*((fork, project) if fork_first
                                             else (project, fork)))}
    forked = runs[FORK]
    assert _counts(forked) == [(1005, 10005, 505, 305), (1006, 10006, 506, 306)]
    assert [c.agent for c in forked.calls] == [None, None]
    assert forked.conventions == {}
    assert forked.started_at == datetime(2026, 1, 5, 10, 1, 40, 100000, tzinfo=UTC)
    assert forked.duration_s == pytest.approx(0.3)
    assert forked.calls[0].started_s == 0.0
    main = runs[SESSION]
    assert [c.agent for c in main.calls] == [None, AGENT, AGENT, None]
    assert main.duration_s == pytest.approx(4.9)


def test_the_agent_tool_result_settles_the_subagents_last_output(tmp_path):
    """The subagent's last request is written with output 1 and no stop
    reason; the Agent tool result's usage (same input and cache counts) gives
    its final output, 306, exact. Its first request (output 1, no such
    result) stays estimated from its content."""
    project = tmp_path / "project"
    write(project / f"{SESSION}.jsonl", _parent())
    write(project / SESSION / "subagents" / f"agent-{AGENT}.jsonl", _subagent())
    (run,) = collected(project)
    last = run.calls[2]
    assert (last.agent, last.usage.output_tokens) == (AGENT, 306)
    assert last.provenance["output_tokens"] == EXACT
    assert run.calls[1].provenance["output_tokens"] != EXACT


def _attachment(uuid: str, at: float, body: dict) -> dict:
    return {"parentUuid": None, "isSidechain": False, "attachment": body,
            "type": "attachment", "uuid": uuid, "timestamp": stamp(at),
            "userType": "external", "entrypoint": "sdk-cli", "cwd": "/work",
            "sessionId": SESSION, "version": "2.1.197"}


def test_max_turns_and_budget_attachments_give_the_exit_and_limits(tmp_path):
    """``--max-turns 1`` writes {"type": "max_turns_reached", "maxTurns": 1,
    "turnCount": 2} after the first reply; ``--max-budget-usd 0.01`` writes
    {"type": "budget_usd", "total": 0.01}: the run's exit is the step-limit
    stop, step_limit 1, cost_limit_usd 0.01. A fork that copies them does not
    take them."""
    lines = [
        user("u1", None, 0.0, "go"),
        _attachment("b1", 0.0, {"type": "budget_usd", "used": 0, "total": 0.01,
                                "remaining": 0.01}),
        assistant("a1", "u1", 1.0, "msg_1", tool_use("toolu_1", "Bash", {"command": "ls"}),
                  usage(10, 5), stop="tool_use"),
        user("u2", "a1", 2.0, result("toolu_1", "out")),
        _attachment("m1", 2.1, {"type": "max_turns_reached", "maxTurns": 1, "turnCount": 2}),
    ]
    main = write(tmp_path / "p" / f"{SESSION}.jsonl", lines)
    (run,) = collected(main)
    assert (run.exit, run.step_limit, run.cost_limit_usd) == (MAX_TURNS_EXIT, 1, 0.01)
    from sim.calibration.exits import category
    assert category(run.exit) == "steps"
    fork = [_queue(50.0, FORK), *[{**line, "sessionId": FORK} for line in lines],
            user("f1", "m1", 50.1, "more", session=FORK),
            assistant("f2", "f1", 51.0, "msg_f", text("ok"), usage(11, 3), stop="end_turn",
                      session=FORK)]
    runs = {r.run_id: r for r in collected(main, write(tmp_path / "q" / f"{FORK}.jsonl", fork))}
    assert (runs[FORK].exit, runs[FORK].step_limit, runs[FORK].cost_limit_usd) == (
        None, None, None)
    assert runs[SESSION].step_limit == 1


def test_bad_attachments_are_passed_over(tmp_path):
    """Attachments without usable values (maxTurns a string, total negative,
    no attachment object) set nothing and raise nothing."""
    lines = [
        user("u1", None, 0.0, "go"),
        _attachment("b1", 0.0, {"type": "budget_usd", "total": -1}),
        {**_attachment("b2", 0.0, {}), "attachment": "x"},
        assistant("a1", "u1", 1.0, "msg_1", text("hi"), usage(10, 5), stop="end_turn"),
        _attachment("m1", 2.1, {"type": "max_turns_reached", "maxTurns": "1"}),
    ]
    (run,) = collected(write(tmp_path / f"{SESSION}.jsonl", lines))
    assert (run.exit, run.step_limit, run.cost_limit_usd) == (MAX_TURNS_EXIT, None, None)
