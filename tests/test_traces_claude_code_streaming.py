"""Claude Code writes a streamed reply as one transcript line per content
block, each written when its block ends (sim/traces/claude_code.py): the
output count of lines written before the stream ended, and the time a tool
started, are read from those lines.

The transcripts are written here in the shape Claude Code 2.1.x gives them
(tests/cc_lines.py); counts are worked out by hand in each test.
"""

from __future__ import annotations

import json

from cc_lines import assistant, collected, result, text, tool_use, usage, user, write

from sim.traces.claude_code import ESTIMATED_OUTPUT
from sim.traces.model import ESTIMATED, EXACT, TOKEN_COLUMNS, UNKNOWN

WRITTEN = "x" * 400  # the file the tool call writes


def _session(tmp_path):
    """A session of four replies. msg_01: a text block and a Write call, both
    lines with the stream's start counts (stop_reason null, output 1); the
    tool's result is written at 9.6 s, before the reply's third block (12.0 s).
    msg_02: one line with a stop reason (final counts). msg_03: two lines whose
    output counts differ (1, then 57). msg_04: one line, stop_reason null,
    output 9, and a 4-character text."""
    lines = [
        user("u1", None, 0.0, "Write the file, then check it."),
        assistant("a1", "u1", 2.0, "msg_01", text("I'll write it."),
                  usage(12, 1, cache_write=3000)),
        assistant("a2", "a1", 9.0, "msg_01",
                  tool_use("toolu_01", "Write", {"file_path": "/w/a.py", "content": WRITTEN}),
                  usage(12, 1, cache_write=3000)),
        user("u2", "a2", 9.6, result("toolu_01", "File created successfully at: /w/a.py")),
        assistant("a3", "a2", 12.0, "msg_01", text("Now checking."),
                  usage(12, 1, cache_write=3000)),
        assistant("a4", "u2", 13.0, "msg_02",
                  tool_use("toolu_02", "Bash", {"command": "python /w/a.py"}),
                  usage(8, 31, cache_read=3000, cache_write=150), stop="tool_use"),
        user("u3", "a4", 13.5, result("toolu_02", "ok")),
        assistant("a5", "u3", 14.0, "msg_03", text("It ran."), usage(5, 1, cache_read=3150)),
        assistant("a6", "a5", 15.0, "msg_03", text(" All good."), usage(5, 57, cache_read=3150)),
        user("u4", "a6", 20.0, "Sure?"),
        assistant("a7", "u4", 21.0, "msg_04", text("Yes."), usage(3, 9, cache_read=3200)),
    ]
    return write(tmp_path / "project" / "4c05ebd0-6641-431c-a6ab-81619fc5df8e.jsonl", lines)


def test_output_counts_of_lines_written_before_the_stream_ended_are_estimated(tmp_path):
    """A reply none of whose lines has a stop reason or a second output count
    (msg_01, msg_04) has its output estimated from its content, at least the
    partial count, marked estimated, and the run says so; a reply with a stop
    reason (msg_02) or lines of different counts (msg_03, the largest) keeps
    its count, exact. Input and cache counts are kept as recorded."""
    (run,) = collected(_session(tmp_path))
    assert [c.usage.output_tokens for c in run.calls] == [
        # msg_01: ceil(len("I'll write it." + "Write" + canonical input + "Now checking.") / 4)
        # = ceil((14 + 5 + 436 + 13) / 4) = 117
        117, 31, 57,
        9]  # msg_04: the partial count 9 is more than ceil(len("Yes.") / 4) = 1
    arguments = json.dumps({"content": WRITTEN, "file_path": "/w/a.py"}, separators=(",", ":"),
                           sort_keys=True)
    assert len(arguments) == 436
    assert [c.provenance["output_tokens"] for c in run.calls] == [
        ESTIMATED, EXACT, EXACT, ESTIMATED]
    for call in run.calls:
        assert {k: v for k, v in call.provenance.items() if k != "output_tokens"} == {
            **dict.fromkeys(set(TOKEN_COLUMNS) - {"output_tokens"}, EXACT),
            "cost_usd": UNKNOWN}
    assert [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.cache_write_tokens)
            for c in run.calls] == [(12, 0, 3000), (8, 3000, 150), (5, 3150, 0), (3, 3200, 0)]
    assert [c.finish_reason for c in run.calls] == [None, "tool_use", None, None]
    assert run.conventions == {"output_tokens": ESTIMATED_OUTPUT}


def test_a_tools_duration_runs_from_the_line_of_its_call_to_its_result(tmp_path):
    """The Write call's line was written at 9.0 s and its result at 9.6 s:
    0.6 s, though the reply's last line (12.0 s) came after the result; the
    Bash call: 13.0 s to 13.5 s. The reply's own latency still runs to its
    last line."""
    (run,) = collected(_session(tmp_path))
    first, second = run.calls[0], run.calls[1]
    assert [t.name for t in first.tool_calls] == ["Write"]
    assert abs(first.tool_calls[0].duration_s - 0.6) < 1e-9
    assert abs(second.tool_calls[0].duration_s - 0.5) < 1e-9
    assert first.latency_s == 12.0  # from the prompt's line (0.0 s) to the reply's last
    assert first.started_s == 0.0


def test_a_session_of_final_counts_is_exact_throughout(tmp_path):
    """When every reply has a line with its stop reason, no count is
    estimated and the run notes no convention."""
    lines = [user("u1", None, 0.0, "hi"),
             assistant("a1", "u1", 1.0, "msg_01", text("Hello there, how can I help?"),
                       usage(10, 2), stop=None),
             assistant("a2", "a1", 1.5, "msg_01", text(" Ask away."), usage(10, 12),
                       stop="end_turn")]
    (run,) = collected(write(tmp_path / "p" / "s.jsonl", lines))
    (call,) = run.calls
    assert call.usage.output_tokens == 12
    assert call.provenance["output_tokens"] == EXACT
    assert run.conventions == {}
