"""Replaying a Claude Code session with subagents under a session budget
(sim/drivers/replay/session.py): the parent's calls and each subagent's run
through their own harness loops, charging one session ledger, in the
recorded order of the calls.

The session is written here in the shape Claude Code writes it (the main
file and ``subagents/agent-<id>.jsonl``, lines built by tests/cc_lines.py)
and imported with ``sim traces import``. Its calls, in recorded order
(tokens: prompt + output, every prompt uncached input):

====  =====  ======  ======  ===========
call  agent  prompt  output  running sum
====  =====  ======  ======  ===========
0     main   100     10      110
1     a1     50      5       165
2     b2     60      6       231
3     a1     70      7       308
4     b2     80      8       396
5     main   200     20      616
====  =====  ======  ======  ===========
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from cc_lines import SESSION, assistant, result, text, tool_use, usage, user, write
from recordings import conversation, recorded, tool, write_traces

from sim.cli import main
from sim.drivers.replay import REPLAY_DTYPES
from sim.drivers.replay.session import PARENT, concurrency, scheduled
from sim.task_record import RECORD_FIELDS

A, B = "a1", "b2"
TOKENS = [110, 55, 66, 77, 88, 220]
PROMPTS = [100, 50, 60, 70, 80, 200]
AGENTS = ["", A, B, A, B, ""]
MAX_OUTPUT = 50


def _child(agent: str, start: float, step: int, first: tuple[int, int],
           last: tuple[int, int]) -> list[dict]:
    """A subagent: its prompt, a Bash call, the result, a last text reply."""
    def sub(line):
        return {**line, "isSidechain": True, "agentId": agent}
    tid = f"toolu_{agent}"
    return [
        sub(user(f"{agent}u1", None, start, "Do part of it.")),
        sub(assistant(f"{agent}a1", f"{agent}u1", start + 0.1, f"msg_{agent}1",
                      tool_use(tid, "Bash", {"command": f"echo {agent}"}), usage(*first),
                      stop="tool_use")),
        sub(user(f"{agent}u2", f"{agent}a1", start + step, result(tid, agent))),
        sub(assistant(f"{agent}a2", f"{agent}u2", start + step + 0.1, f"msg_{agent}2",
                      text(f"{agent} done."), usage(*last), stop="end_turn")),
    ]


def _main() -> list[dict]:
    """The main thread: one message with two Task calls, their results, a last reply."""
    return [
        user("u1", None, 0.0, "Do it with two subagents."),
        assistant("m1", "u1", 1.0, "msg_M1", tool_use("toolu_ta", "Task", {
            "description": "part a", "prompt": "Do part of it.",
            "subagent_type": "general-purpose"}), usage(100, 10), stop="tool_use"),
        assistant("m1b", "m1", 1.0, "msg_M1", tool_use("toolu_tb", "Task", {
            "description": "part b", "prompt": "Do part of it.",
            "subagent_type": "general-purpose"}), usage(100, 10), stop="tool_use"),
        user("u2", "m1b", 8.0, result("toolu_ta", "a1 done.") + result("toolu_tb", "b2 done."),
             toolUseResult={"status": "completed", "agentId": A,
                            "content": [text("a1 done.")]}),
        assistant("m2", "u2", 9.0, "msg_M2", text("Both done."), usage(200, 20),
                  stop="end_turn"),
    ]


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cc")
    project = root / "projects" / "proj"
    write(project / f"{SESSION}.jsonl", _main())
    write(project / SESSION / "subagents" / f"agent-{A}.jsonl",
          _child(A, 2.0, 2, (50, 5), (70, 7)))
    write(project / SESSION / "subagents" / f"agent-{B}.jsonl",
          _child(B, 2.5, 2, (60, 6), (80, 8)))
    out = root / "traces"
    assert main(["traces", "import", str(root / "projects"),
                 "--out", str(out), "--quiet"]) == 0
    return out


SCENARIO = """\
name: cand
description: replay with subagents
harness:
  model: claude-sonnet-4-5
  prices_date: 2026-01-01
  context_window: 1000000
  tool_failure_limit: 1000000
  max_output_tokens: {cap}
{extra}
"""


def replay(tmp: Path, traces: Path, extra: str = "", cap: int = MAX_OUTPUT
           ) -> tuple[pd.Series, dict, str]:
    """Replay ``traces`` under the scenario with ``extra`` harness lines;
    return the one row of results.parquet, the cell's replay block and the report."""
    path = tmp / "cand.yaml"
    path.write_text(SCENARIO.format(cap=cap, extra=extra))
    out = tmp / "out"
    assert main(["replay", str(traces), str(path), "--out", str(out), "--quiet"]) == 0
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 1
    block = json.loads((out / "summary.json").read_text())["cells"][0]["replay"]
    return rows.iloc[0], block, (out / "report.md").read_text()


def session_budget(tokens: int, check: str = "before_call") -> str:
    return f"  shared_budgets: [{{scope: session, tokens: {tokens}, check: {check}}}]"


def test_the_import_interleaves_parent_and_subagent_calls_in_recorded_order(traces):
    """The fixture as the replay reads it: six calls, agents and tokens as in
    the table of the module docstring."""
    calls = pd.read_parquet(traces / "calls.parquet")
    assert [a if isinstance(a, str) else "" for a in calls["agent"]] == AGENTS
    assert list(calls["input_tokens"] + calls["output_tokens"]) == TOKENS
    assert list(calls["input_tokens"]) == PROMPTS


# before_call (the default rule) refuses call j when the tokens spent before
# it plus its worst case (its prompt plus the output cap, 50) pass N:
#   spent before j: 0, 110, 165, 231, 308, 396
#   worst case:     150, 100, 110, 120, 130, 250
#   sum:            150, 210, 275, 351, 438, 646
@pytest.mark.parametrize(("limit", "call", "agent", "agent_call", "states", "steps"), [
    # 150 > 140: the parent's first call; the children never start
    (140, 0, "parent", 0, f"{A}=cancelled:parent_ended;{B}=cancelled:parent_ended", 0),
    # 210 <= 210 admits call 1 and 275 > 210 refuses call 2 (b2's first); a1's
    # next (351) and the parent's (646) are refused too
    (210, 2, B, 0, f"{A}=budget_exhausted:session;{B}=budget_exhausted:session", 2),
    # 275 <= 300, 351 > 300: a1's second call, after b2's first
    (300, 3, A, 1, f"{A}=budget_exhausted:session;{B}=budget_exhausted:session", 3),
    # 351 <= 400, 438 > 400: b2's second call; a1 ended as recorded
    (400, 4, B, 1, f"{A}=succeeded:model_complete;{B}=budget_exhausted:session", 4),
    # 438 <= 600, 646 > 600: the parent's last call; both children ended
    (600, 5, "parent", 1, f"{A}=succeeded:model_complete;{B}=succeeded:model_complete", 5),
])
def test_a_session_budget_stops_the_first_call_its_running_sum_refuses(
        tmp_path, traces, limit, call, agent, agent_call, states, steps):
    """Under a session token budget (before_call) the replay stops at the
    first call, in recorded order over parent and children, whose worst case
    added to what the session spent passes the limit; the row names that call
    and its agent, the children's terminal states, and the tokens made are
    those of the calls before it (each agent's own loop stops at its own next
    call: the ledger is full for all)."""
    row, block, report = replay(tmp_path, traces, session_budget(limit))
    assert row["stopped"] and row["stopped_at"] == call
    assert (row["session_stopped_by"], row["session_stopped_call"],
            row["session_agent_call"]) == (agent, call, agent_call)
    assert row["children_states"] == states
    assert row["steps"] == steps
    assert row["input_tokens"] == sum(PROMPTS[:steps])
    assert row["input_tokens"] + row["output_tokens"] == sum(TOKENS[:steps])
    running = sum(TOKENS[:call + 1])
    assert row["session_running_tokens"] == running
    assert row["outcome"] == "budget_exhausted:session"
    saved = block["saved"]
    assert saved["prompt_tokens"] == sum(PROMPTS) - sum(PROMPTS[:steps])
    assert block["session"]["stopped"] == 1
    assert block["session"]["saved_tokens"] == sum(TOKENS) - sum(TOKENS[:steps])
    assert block["session"]["saved_usd"] == pytest.approx(row["saved_usd"])
    assert f"saving {sum(TOKENS) - sum(TOKENS[:steps]):,} tokens" in report
    who = "the parent" if agent == "parent" else f"child {agent}"
    assert f"stopped by the session budget at {who}'s call {agent_call}" in report
    assert row["saved_usd"] > 0


def test_the_report_gives_the_running_sum_that_passed_the_limit(tmp_path, traces):
    """N = 300: the session had spent 231 (calls 0-2) and a1's call 3 would
    bring it to 308: the report says so."""
    _, block, report = replay(tmp_path, traces, session_budget(300))
    where = "stopped by the session budget at child a1's call 1 (running sum 308 > 300)"
    assert block["session"]["stops"][0]["where"] == where
    assert where in report


# between_turns stops a run before a call once what the session spent has
# reached N: call j is refused when the running sum through call j - 1
# (110, 165, 231, 308, 396) is >= N
@pytest.mark.parametrize(("limit", "call"), [(110, 1), (111, 2), (231, 3), (232, 4), (396, 5),
                                             (397, None)])
def test_between_turns_stops_once_the_running_sum_has_reached_the_limit(
        tmp_path, traces, limit, call):
    """A between_turns session budget: the first call refused is the one
    after the running sum over parent and children first reaches N."""
    row, _, _ = replay(tmp_path, traces, session_budget(limit, "between_turns"))
    if call is None:
        assert not row["stopped"] and row["session_stopped_by"] == ""
    else:
        assert row["session_stopped_call"] == call and row["stopped_at"] == call
        assert row["input_tokens"] + row["output_tokens"] == sum(TOKENS[:call])


def test_without_a_budget_nothing_stops_and_the_totals_equal_the_recording(tmp_path, traces):
    """No shared budget: the session replays whole; steps, tool calls and
    tokens are the recording's (parent and children), nothing is saved, and
    both children end as recorded."""
    row, block, report = replay(tmp_path, traces)
    assert not row["stopped"] and row["outcome"] == "succeeded:model_complete"
    assert (row["steps"], row["tool_calls"]) == (6, 4)  # two Task calls, two Bash calls
    assert (row["input_tokens"], row["output_tokens"]) == (sum(PROMPTS), 56)
    assert row["recorded_steps"] == 6 and row["saved_usd"] == 0.0
    assert row["cost_usd"] == pytest.approx(row["recorded_calls_usd"])
    assert row["children"] == 2 and row["session_stopped_by"] == ""
    assert row["children_states"] == f"{A}=succeeded:model_complete;{B}=succeeded:model_complete"
    assert block["session"]["children_states"] == {"succeeded:model_complete": 2}
    assert block["saved"]["prompt_tokens"] == 0
    assert "Subagents and the session budget" in report


def test_a_child_started_past_the_concurrency_cap_waits_for_a_slot(tmp_path, traces):
    """a1 runs from call 1 to call 3 and b2 from call 2 to call 4: with
    max_concurrent 1, b2 waits until a1's last call, so the calls are made
    in the order 0, 1, 3, 2, 4, 5 and the session budget (N = 300,
    before_call, cap 50) sees 0 + 110 + 55 + 77 = 242 spent before b2's first
    call, whose worst case 242 + 60 + 50 = 352 passes 300: it stops b2's call
    0 (running sum 242 + 66 = 308), where without the cap it stopped a1's
    call 1 (test above). a1 ends as recorded; 3 steps, 242 tokens made."""
    extra = "  subagents: {max_concurrent: 1}\n" + session_budget(300)
    row, block, report = replay(tmp_path, traces, extra)
    assert (row["max_running_children"], row["children_delayed"]) == (2, 1)
    assert (row["session_stopped_by"], row["session_stopped_call"],
            row["session_agent_call"], row["session_running_tokens"]) == (B, 2, 0, 308)
    assert row["children_states"] == f"{A}=succeeded:model_complete;{B}=budget_exhausted:session"
    assert (row["steps"], row["input_tokens"] + row["output_tokens"]) == (3, 242)
    assert block["session"]["children_delayed"] == 1
    assert "child b2's call 0 (running sum 308 > 300)" in report
    assert "1 were delayed by the concurrency cap" in report


def test_a_delayed_child_without_a_budget_replays_whole(tmp_path, traces):
    """max_concurrent 1 and no budget: b2 is delayed, nothing stops, and the
    totals are the recording's; with max_concurrent 2 nothing is delayed."""
    for cap, delayed in ((1, 1), (2, 0)):
        (tmp_path / str(cap)).mkdir()
        row, _, _ = replay(tmp_path / str(cap), traces, f"  subagents: {{max_concurrent: {cap}}}")
        assert (row["max_running_children"], row["children_delayed"]) == (2, delayed)
        assert not row["stopped"] and row["steps"] == 6
        assert row["input_tokens"] + row["output_tokens"] == sum(TOKENS)


def test_the_cap_delays_a_child_until_a_slot_frees_or_its_parent_goes_on():
    """Recorded order: parent, x, y, x, y, parent (the fixture's): with a cap
    of 1, y's calls move after x's last call; with 2 or none, nothing moves.
    Parent, x, y, x, parent, x: x's last call comes after the parent's, so y
    waits only until the parent's next call (the parent waits for its
    children)."""
    fixture = [(PARENT, 0), ("x", 0), ("y", 0), ("x", 1), ("y", 1), (PARENT, 1)]
    assert scheduled(fixture, 1) == ([0, 1, 3, 2, 4, 5], 1)
    assert scheduled(fixture, 2) == ([0, 1, 2, 3, 4, 5], 0)
    assert scheduled(fixture, None) == ([0, 1, 2, 3, 4, 5], 0)
    background = [(PARENT, 0), ("x", 0), ("y", 0), ("x", 1), (PARENT, 1), ("x", 2)]
    assert scheduled(background, 1) == ([0, 1, 3, 2, 4, 5], 1)


def test_concurrency_counts_the_children_running_when_each_starts():
    """Spans in call order: x 1-2, y 3-7, z 4-6, w 5-8: at most three run at
    once (y, z and w when w starts)."""
    order = [(PARENT, 0), ("x", 0), ("x", 1), ("y", 0), ("z", 0), ("w", 0), ("z", 1),
             ("y", 1), ("w", 1)]
    assert concurrency(order) == 3
    assert concurrency(order[:3]) == 1
    assert concurrency([(PARENT, 0)]) == 0


def _plain(folder: Path) -> Path:
    runs = [recorded(f"run{i}", conversation([[tool("search", q=k)] for k in range(i + 1)]
                                             + [[]], first=500 + 10 * i), resolved=i % 2 == 0)
            for i in range(3)]
    return write_traces(folder, runs)


def test_a_folder_without_subagents_keeps_its_columns_and_rows(tmp_path):
    """Traces without an ``agent``: results.parquet has the columns it always
    had (task records and the replay's own, no session column), summary.json
    no session block, and the rows are the same whether calls.parquet has an
    all-null ``agent`` column or none."""
    traces = _plain(tmp_path / "plain")
    calls = pq.read_table(traces / "calls.parquet")
    other = tmp_path / "without"
    other.mkdir()
    (other / "runs.parquet").write_bytes((traces / "runs.parquet").read_bytes())
    names = [n for n in calls.column_names if n != "agent"]
    assert "agent" in calls.column_names
    pq.write_table(calls.select(names), other / "calls.parquet")
    outs = []
    for folder in (traces, other):
        path = tmp_path / "cand.yaml"
        path.write_text(SCENARIO.format(cap=MAX_OUTPUT, extra=session_budget(1000)))
        out = tmp_path / f"out-{folder.name}"
        assert main(["replay", str(folder), str(path), "--out", str(out), "--quiet"]) == 0
        outs.append(out)
    rows = pd.read_parquet(outs[0] / "results.parquet")
    assert list(rows.columns) == [*RECORD_FIELDS, *REPLAY_DTYPES]
    block = json.loads((outs[0] / "summary.json").read_text())["cells"][0]["replay"]
    assert "session" not in block
    pd.testing.assert_frame_equal(rows, pd.read_parquet(outs[1] / "results.parquet"))


def test_every_reader_of_a_trace_folder_gives_each_call_its_agent(traces, tmp_path):
    """The two ways the one reader builds calls (the whole folder, by row
    range) give each call its subagent's id (None: the parent's); a folder
    written before ``calls.agent`` existed reads as all parent."""
    from sim.drivers.replay.reading import TraceTables, streamed_runs

    expected = [a or None for a in AGENTS]
    whole = TraceTables.load(traces).recorded(0, 1)[0]
    ranged = streamed_runs(str(traces), 0, 1)[0]
    for run in (whole, ranged):
        assert [c.agent for c in run.calls] == expected
    old = _plain(tmp_path / "plain")
    calls = pq.read_table(old / "calls.parquet")
    pq.write_table(calls.drop_columns(["agent"]), old / "calls.parquet")
    assert all(c.agent is None for run in TraceTables.load(old).recorded(0, 3)
               for c in run.calls)


def test_a_session_whose_main_file_is_empty_replays_its_children(tmp_path):
    """An empty main file beside two subagents' files: the run has only the
    children's four calls; they replay whole (no budget), the parent, which
    recorded no call, ends with the recording, and the totals are the
    children's: prompts 50 + 70 + 60 + 80, outputs 5 + 7 + 6 + 8."""
    project = tmp_path / "projects" / "proj"
    (project / f"{SESSION}.jsonl").parent.mkdir(parents=True)
    (project / f"{SESSION}.jsonl").write_text("")
    write(project / SESSION / "subagents" / f"agent-{A}.jsonl",
          _child(A, 2.0, 2, (50, 5), (70, 7)))
    write(project / SESSION / "subagents" / f"agent-{B}.jsonl",
          _child(B, 2.5, 2, (60, 6), (80, 8)))
    traces = tmp_path / "traces"
    assert main(["traces", "import", str(tmp_path / "projects"), "--out", str(traces),
                 "--quiet"]) == 0
    row, _, _ = replay(tmp_path, traces)
    assert (row["steps"], row["input_tokens"], row["output_tokens"]) == (4, 260, 26)
    assert row["children"] == 2 and not row["stopped"] and row["saved_usd"] == 0.0
    assert row["children_states"] == f"{A}=succeeded:model_complete;{B}=succeeded:model_complete"
    assert row["state"] == "ended"


def _agent_traces(folder: Path, agents: list[str | None], tools: list[bool]) -> Path:
    """One run written with the trace model's own writer: call k by
    ``agents[k]`` (None: the parent), with a search call when ``tools[k]``;
    prompts 500, 600, ... (uncached), outputs 40."""
    from sim.harness.messages import Usage
    from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
    from sim.traces.writer import write_runs

    calls = [CallRecord(usage=Usage(input_tokens=500 + 100 * k, output_tokens=40),
                        model="claude-sonnet-4-5", agent=agent,
                        tool_calls=[ToolCallRecord(name="search", id=f"t{k}",
                                                   arguments=json.dumps({"q": k}),
                                                   result_tokens=10)] if tool else [])
             for k, (agent, tool) in enumerate(zip(agents, tools, strict=True))]
    folder.mkdir(parents=True)
    write_runs(folder, [RunRecord(run_id="s", source="sim", file="s.json",
                                  model="claude-sonnet-4-5", calls=calls)])
    return folder


def test_a_child_recorded_after_its_parent_ended_is_cancelled(tmp_path):
    """The parent's only call is its final answer (call 0); its child's two
    calls are recorded after it: the session ended with the parent, so the
    child is cancelled (cancelled:parent_ended), its 600 + 40 + 700 + 40
    tokens saved, and no budget is involved (nothing stopped by it)."""
    traces = _agent_traces(tmp_path / "t", [None, "k1", "k1"], [False, True, False])
    row, block, _ = replay(tmp_path, traces)
    assert row["children_states"] == "k1=cancelled:parent_ended"
    assert (row["steps"], row["input_tokens"], row["output_tokens"]) == (1, 500, 40)
    assert row["session_stopped_by"] == "" and block["session"]["saved_tokens"] == 1380


def test_a_run_recording_spawn_calls_but_no_childs_call_replays_as_recorded():
    """A run whose calls of the candidate's subagent tool (``agent``) left
    no child's call in the trace (every spawn refused, as sim records a
    spawn past ``max_total``) is replayed like any run: the spawn call is a
    recorded tool (no clash with ``harness.subagents.tool``, no exit 2), and
    the replay makes every recorded call: 3 calls, 2 tool calls."""
    from recordings import loose

    from sim.drivers.replay.runs import replay_runs
    from sim.harness.params import SubagentParams

    calls = conversation([[tool("agent", error=True, tasks=["a", "b"])], [tool("search")], []])
    run = recorded("spawned", calls)
    [replayed] = replay_runs([run], loose(subagents=SubagentParams(tool="agent")))
    chosen = replayed.chosen
    assert chosen.session is None and not chosen.stopped
    assert (chosen.calls, chosen.tools_run) == (3, 2)
