"""Forked agents in Claude Code 2.1.x transcripts (sim/traces/claude_code.py):
a fork's transcript (``<session>/subagents/agent-a<label>-<hex>.jsonl``)
starts with a copy of the conversation it was forked from, then holds its own
request's reply. The compaction request is such a fork (``agentId``
``acompact-<hex>``): it is a compaction call of the run, not a subagent.

The transcripts are written here in the shape Claude Code 2.1.x gives them
(tests/cc_lines.py: the copied lines keep the original's uuid, message and
timestamp, and carry the fork's ``agentId``); counts are worked out by hand.
"""

from __future__ import annotations

import json

from cc_lines import SESSION, assistant, collected, stamp, text, usage, user, write

from sim.traces.claude_code import COMPACTION
from sim.traces.model import sha256_text

COMPACT = "acompact-1f2e3d4c5b6a7988"
SUGGEST = "aprompt_suggestion-0a1b2c3d4e5f6071"
SUMMARY = "<analysis>Two greetings.</analysis>\n<summary>The user greeted twice.</summary>"


def _main():
    """The main thread: two replies, the compaction boundary and summary, a third reply."""
    return [
        user("u1", None, 0.0, "hi"),
        assistant("a1", "u1", 1.0, "msg_A", text("Hello."), usage(100, 5, cache_write=2000),
                  stop="end_turn"),
        user("u2", "a1", 10.0, "hi again"),
        assistant("a2", "u2", 11.0, "msg_B", text("Hello again."),
                  usage(20, 6, cache_read=2000, cache_write=100), stop="end_turn"),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
         "sessionId": SESSION, "uuid": "s1", "parentUuid": None, "timestamp": stamp(30.0),
         "isSidechain": False, "compactMetadata": {"trigger": "manual", "preTokens": 2231}},
        user("u3", "s1", 30.1, "This session is being continued from a previous conversation. "
             + SUMMARY, isCompactSummary=True, isVisibleInTranscriptOnly=True),
        user("u4", "u3", 40.0, "and now?"),
        assistant("a3", "u4", 41.0, "msg_C", text("Now this."), usage(400, 7), stop="end_turn"),
    ]


def _fork(agent: str, prompt: str, message_id: str, reply: str, counts: dict, at: float):
    """A fork's transcript: the main thread's first four lines copied, its own
    prompt, and its reply."""
    copies = [{**line, "isSidechain": True, "agentId": agent} for line in _main()[:4]]
    return [*copies,
            user("f-" + message_id, "a2", at, prompt, agent=agent),
            assistant("r-" + message_id, "f-" + message_id, at + 5.0, message_id, text(reply),
                      counts, stop="end_turn", agent=agent)]


def _folder(tmp_path):
    project = tmp_path / "project"
    main = write(project / f"{SESSION}.jsonl", _main())
    subagents = project / SESSION / "subagents"
    compact = write(subagents / f"agent-{COMPACT}.jsonl", _fork(
        COMPACT, "Your task is to create a detailed summary of the conversation so far.",
        "msg_K", SUMMARY, usage(6, 300, cache_read=2100), at=20.0))
    suggest = write(subagents / f"agent-{SUGGEST}.jsonl", _fork(
        SUGGEST, "Suggest what the user might type next.", "msg_S", "say hi", usage(9, 3),
        at=12.0))
    return main, compact, suggest


def test_the_compaction_fork_is_a_compaction_call_and_its_copies_are_not_calls(tmp_path):
    """Main replies A, B, C; the compaction fork's reply K (purpose
    compaction, agent null) and the prompt-suggestion fork's reply S (a
    subagent's call, agent its agentId): five calls in time order, each
    message once though both forks copied A and B."""
    main, compact, suggest = _folder(tmp_path)
    (run,) = collected(main, compact, suggest)
    assert [(c.usage.input_tokens, c.usage.output_tokens) for c in run.calls] == [
        (100, 5), (20, 6), (9, 3), (6, 300), (400, 7)]
    assert [c.purpose for c in run.calls] == [None, None, None, COMPACTION, None]
    assert [c.agent for c in run.calls] == [None, None, SUGGEST, None, None]
    assert run.model == "claude-sonnet-4-5"
    assert sum(c.usage.cache_read_tokens for c in run.calls) == 2000 + 2100
    # the compaction call starts at its prompt's line (20.0 s) and ends at its reply (25.0 s)
    compaction = run.calls[3]
    assert (compaction.started_s, compaction.latency_s) == (20.0, 5.0)


def test_copies_are_not_calls_whatever_the_order_files_are_read_in(tmp_path):
    """Read forks first: the copied messages are still the main agent's calls
    (a copy has the original's time; on a tie, the main thread's is the call),
    with the main thread's observations."""
    main, compact, suggest = _folder(tmp_path)
    (run,) = collected(compact, suggest, main)
    assert [c.agent for c in run.calls] == [None, None, SUGGEST, None, None]
    assert [c.purpose for c in run.calls] == [None, None, None, COMPACTION, None]
    (first,) = collected(main, compact, suggest)
    assert [c.observation_sha256 for c in run.calls] == [
        c.observation_sha256 for c in first.calls]
    # the summary's text is an observation of the main agent's reply B (before it)
    assert run.calls[1].observation_tokens > 0


def test_a_line_written_again_in_its_thread_is_read_once(tmp_path):
    """The fork's file holding its lines twice (a transcript appended to
    again with the same lines): each line is read once, the reply K one call
    with one text block."""
    main, compact, _ = _folder(tmp_path)
    lines = [json.loads(x) for x in compact.read_text().splitlines()]
    write(compact, lines + lines)
    (run,) = collected(main, compact)
    assert [(c.usage.input_tokens, c.purpose) for c in run.calls] == [
        (100, None), (20, None), (6, COMPACTION), (400, None)]
    assert run.calls[2].text_sha256 == sha256_text(SUMMARY)
