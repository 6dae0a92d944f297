"""The Claude Code transcript importer (sim/traces/claude_code.py) on sessions
the real ``@anthropic-ai/claude-code`` CLI writes in the test: run headless
(``claude -p``) from a temporary HOME against the local fake Anthropic server
(tests/fake_providers.py), which scripts a tool call, a subagent (the
``Agent`` tool) that runs a tool of its own, and a final answer.

The CLI is looked up in ``$SIM_NODE_PREFIX`` (where ``.ci/run`` installs it;
without it, a temporary folder of the test run: tests/conftest.py) and
installed there with npm when absent, never in the home folder; the tests
skip, naming what is missing, where node or npm is not installed or npm
cannot install it (no network).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from cc_lines import collected
from fake_providers import FakeProvider, Reply
from roundtrip import imported, round_trip

from sim.drivers.replay.reading import read_trace_folder
from sim.traces import read_traces
from sim.traces.claude_code import COMPACTION, ESTIMATED_OUTPUT, SUBAGENTS_FROM_PROGRESS
from sim.traces.model import (
    ESTIMATED,
    EXACT,
    TOKEN_COLUMNS,
    UNKNOWN,
    approx_tokens,
    canonical_json,
    parse_utc,
    sha256_text,
)

PACKAGE = "@anthropic-ai/claude-code"
MODEL = "claude-sonnet-4-5"
PARTIAL_VERSION = "2.1.90"
"""A version that writes streaming start counts and the compaction fork's transcript."""


def claude_binary(version: str | None = None) -> Path:
    """The ``claude`` CLI, installed with npm into the cache folder if needed:
    the latest, or ``version`` (in a folder of its own, beside it)."""
    prefix = Path(os.environ.get("SIM_NODE_PREFIX") or tempfile.mkdtemp(prefix="sim-node-"))
    package, flags = PACKAGE, []
    if version is not None:
        prefix, package, flags = prefix / f"claude-code-{version}", f"{PACKAGE}@{version}", [
            "--omit=optional"]
    binary = prefix / "node_modules" / ".bin" / "claude"
    if binary.exists():
        return binary
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"node and npm are needed to install {package} (not found on PATH): "
                    f"install them, or set SIM_NODE_PREFIX to a folder where npm installed it "
                    f"(looked in {prefix})")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", *flags, "--prefix",
                           str(prefix), package], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        pytest.skip(f"npm could not install {package} into {prefix}: {last}")
    assert binary.exists(), f"npm installed {package} but {binary} is missing"
    return binary


SCRIPT = [
    # the main agent: a text block and a tool call (two transcript lines, one message)
    Reply([("text", "Let me run it."),
           ("tool_use", "toolu_main_1", "Bash", {"command": "echo hello",
                                                 "description": "say hello"})],
          stop_reason="tool_use", input_tokens=120, output_tokens=31, cache_read=1000,
          cache_write=200),
    # the main agent delegates to a subagent
    Reply([("tool_use", "toolu_main_2", "Agent", {"description": "echo sub",
                                                  "prompt": "Run `echo sub` with Bash.",
                                                  "subagent_type": "general-purpose"})],
          stop_reason="tool_use", input_tokens=90, output_tokens=22, cache_read=1300,
          cache_write=40),
    # the subagent's two calls
    Reply([("tool_use", "toolu_sub_1", "Bash", {"command": "echo sub",
                                                "description": "say sub"})],
          stop_reason="tool_use", input_tokens=70, output_tokens=11, cache_write=400),
    Reply([("text", "The command printed: sub")], input_tokens=25, output_tokens=9,
          cache_read=400),
    # the main agent's answer
    Reply([("text", "All done: hello and sub.")], input_tokens=33, output_tokens=8,
          cache_read=1400, cache_write=12),
]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """``(transcripts folder, server requests, server answers, CLI result)``."""
    binary = claude_binary()
    home = tmp_path_factory.mktemp("home")
    work = Path(tempfile.mkdtemp(prefix="ccwork", dir=tmp_path_factory.mktemp("work")))
    with FakeProvider(list(SCRIPT), lifetime_s=120) as server:
        done = subprocess.run(
            [str(binary), "-p", "Say hello with Bash, then have a subagent say sub.",
             "--output-format", "json", "--model", MODEL, "--allowedTools", "Bash"],
            cwd=work, env=_env(home, server), capture_output=True, text=True,
            timeout=180)
        requests, answers = list(server.requests), list(server.answers)
    assert done.returncode == 0, done.stderr[-2000:]
    return home / ".claude" / "projects", requests, answers, json.loads(done.stdout)


def test_a_session_imports_with_the_calls_tokens_and_tools_the_server_saw(session, tmp_path):
    """One run (the session, its subagent's calls included and marked): as many
    calls as the server answered, each with the server's four token counts
    and tool calls (name, id, canonical arguments), in the server's order;
    the streamed message split over two lines counts once."""
    projects, requests, answers, result = session
    assert len(requests) == len(SCRIPT) and all(isinstance(a, Reply) for a in answers)
    files = sorted(projects.rglob("*.jsonl"))
    assert len(files) == 2  # the session and its subagent
    imported([projects], tmp_path / "traces", source="claude-code", runs=1)
    runs, calls = read_traces(tmp_path / "traces")
    assert runs["run_id"].tolist() == [result["session_id"]]
    assert len(calls) == len(answers)
    for row, answer in zip(calls.itertuples(), answers, strict=True):
        assert (row.input_tokens, row.cache_read_tokens, row.cache_write_tokens,
                row.output_tokens, row.reasoning_tokens) == (
            answer.input_tokens, answer.cache_read, answer.cache_write,
            answer.output_tokens, 0)
        assert [(t["name"], t["id"], t["arguments"]) for t in row.tool_calls] == [
            (c[2], c[1], canonical_json(c[3])) for c in answer.content if c[0] == "tool_use"]
        text = "".join(c[1] for c in answer.content if c[0] == "text")
        assert row.text_sha256 == sha256_text(text)
        assert row.model == MODEL
    assert runs["steps"].iloc[0] == len(SCRIPT)
    # the CLI's own result counts the main agent's calls: they agree
    main_agent = calls[calls["agent"].isna()]
    usage = result["usage"]
    assert (int(main_agent["input_tokens"].sum()), int(main_agent["cache_read_tokens"].sum()),
            int(main_agent["cache_write_tokens"].sum()),
            int(main_agent["output_tokens"].sum())) == (
        usage["input_tokens"], usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"], usage["output_tokens"])


def test_subagent_calls_belong_to_the_parent_run_and_are_marked(session, tmp_path):
    """The subagent's two calls carry its agentId (the name of its transcript
    file); the main agent's have none; tool results come back with their text."""
    projects = session[0]
    imported([projects], tmp_path / "traces", source="claude-code", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    agent_file = next(projects.rglob("agent-*.jsonl"))
    agent_id = agent_file.stem.removeprefix("agent-")
    agents = [None if pd.isna(a) else a for a in calls["agent"]]
    assert agents == [None, None, agent_id, agent_id, None]
    first = calls["tool_calls"].iloc[0][0]
    assert first["error"] is False and first["result_sha256"] == sha256_text("hello")
    sub = calls["tool_calls"].iloc[2][0]
    assert sub["result_sha256"] == sha256_text("sub")
    # every result is the tool's output the CLI sent the server in its next request
    # (the CLI appends its reminders to a result as it sends it; the trace keeps the output)
    sent = _sent_results(session[1])
    recorded = _transcript_results(projects)
    tools = [t for row in calls["tool_calls"] for t in row]
    assert {t["id"] for t in tools} == set(sent) == set(recorded)
    for tool in tools:
        assert sent[tool["id"]].startswith(recorded[tool["id"]]), tool["name"]
        assert tool["result_sha256"] == sha256_text(recorded[tool["id"]]), tool["name"]


def test_a_session_copied_without_its_subagents_folder_keeps_the_subagents_last_reply(
        session, tmp_path):
    """The session's main file alone (its ``subagents/`` folder not copied):
    the CLI wrote no progress line for the subagent, but its Agent tool result
    holds the subagent's last reply (content, usage, model): the run has the
    main agent's three calls and that reply, with the server's counts, marked
    with the agentId, and notes where it was read. With the folder, the same
    reply is not added again (the other tests: five calls)."""
    projects, _, answers, _ = session
    copy = tmp_path / "copy"
    shutil.copytree(projects, copy, ignore=shutil.ignore_patterns("subagents"))
    assert not list(copy.rglob("agent-*.jsonl"))
    (run,) = collected(copy)
    agent_id = next(projects.rglob("agent-*.jsonl")).stem.removeprefix("agent-")
    last = answers[3]  # the subagent's last reply
    assert [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.cache_write_tokens,
             c.usage.output_tokens) for c in run.calls] == [
        (a.input_tokens, a.cache_read, a.cache_write, a.output_tokens)
        for a in (answers[0], answers[1], last, answers[4])]
    assert [c.agent for c in run.calls] == [None, None, agent_id, None]
    assert run.calls[2].text_sha256 == sha256_text("The command printed: sub")
    assert run.calls[2].model == MODEL and run.calls[2].provenance["output_tokens"] == EXACT
    assert run.conventions == {"subagents": SUBAGENTS_FROM_PROGRESS}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _sent_results(requests) -> dict[str, str]:
    """``{tool_use_id: text}`` of the tool_result blocks the server received."""
    out = {}
    for request in requests:
        for message in request.body.get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    out[block["tool_use_id"]] = _text(block.get("content"))
    return out


def _transcript_results(projects: Path) -> dict[str, str]:
    """``{tool_use_id: text}`` of the tool_result blocks in the transcripts."""
    out = {}
    for path in projects.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            content = (json.loads(line).get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    out[block["tool_use_id"]] = _text(block.get("content"))
    return out


def test_a_session_round_trips_through_summary_and_replay(session, tmp_path, capsys):
    """Import, ``traces summary`` and a replay under non-binding limits that
    reproduces the session's calls and token counts."""
    projects = session[0]
    imported([projects], tmp_path / "traces", source="claude-code", runs=1)
    summary = round_trip(tmp_path / "traces", tmp_path, capsys)
    assert summary["calls"] == len(SCRIPT)
    (run,) = read_trace_folder(tmp_path / "traces")
    assert run.calls[0].usage.prompt_tokens == 120 + 1000 + 200


def _edited(projects: Path, out: Path, edit) -> Path:
    """A copy of the session's transcripts, its main file's lines passed through
    ``edit`` (a function of the list of line objects)."""
    shutil.copytree(projects, out)
    main_file = next(p for p in out.rglob("*.jsonl") if "subagents" not in p.parts)
    lines = [json.loads(x) for x in main_file.read_text().splitlines() if x.strip()]
    main_file.write_text("".join(json.dumps(x) + "\n" for x in edit(lines)))
    return out


def test_synthetic_messages_are_not_calls_and_a_message_without_usage_is_an_unknown_call(
        session, tmp_path):
    """A ``<synthetic>`` assistant message (no request made) adds no call; an
    assistant message of a model without usage (on none of its lines) is kept
    as a call whose five token counts are 0 with provenance unknown, and its
    session is kept with its other calls' counts as recorded."""
    def synthetic(lines):
        extra = {"type": "assistant", "sessionId": lines[-1]["sessionId"], "uuid": "x",
                 "timestamp": "2030-01-01T00:00:00Z", "isSidechain": False,
                 "message": {"id": "synthetic-1", "model": "<synthetic>", "role": "assistant",
                             "content": [{"type": "text", "text": "No response requested."}],
                             "usage": {"input_tokens": 0, "output_tokens": 0}}}
        return [*lines, extra]

    folder = _edited(session[0], tmp_path / "synthetic", synthetic)
    imported([folder], tmp_path / "a", source="claude-code", runs=1)
    assert len(read_traces(tmp_path / "a")[1]) == len(SCRIPT)

    def no_usage(lines):
        first = next(x for x in lines if x.get("type") == "assistant")["message"]["id"]
        for line in lines:
            if line.get("type") == "assistant" and line["message"]["id"] == first:
                del line["message"]["usage"]
        return lines

    folder = _edited(session[0], tmp_path / "no_usage", no_usage)
    (run,) = collected(folder)
    assert len(run.calls) == len(SCRIPT)
    first = run.calls[0]
    assert (first.usage.input_tokens, first.usage.cache_read_tokens,
            first.usage.cache_write_tokens, first.usage.output_tokens,
            first.usage.thinking_tokens) == (0, 0, 0, 0, 0)
    assert first.provenance == {**dict.fromkeys(TOKEN_COLUMNS, UNKNOWN), "cost_usd": UNKNOWN}
    second = run.calls[1]
    assert (second.usage.input_tokens, second.usage.output_tokens) == (90, 22)
    assert second.provenance == {**dict.fromkeys(TOKEN_COLUMNS, EXACT), "cost_usd": UNKNOWN}
    imported([folder], tmp_path / "b", source="claude-code", runs=1)


def _env(home: Path, server: FakeProvider) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
            "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-ant-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}


def test_a_compacted_session_keeps_its_calls_and_the_summary_is_an_observation(tmp_path):
    """Three turns, ``/compact`` and one more turn, resumed in one session: the
    latest Claude Code's transcript (2.1.197 when written) does not record the
    compaction request (only the summary it produced), so the import has every other call the server
    answered, with its tokens, and the summary's text counts as an
    observation of the call before it."""
    summary = "The user greeted the assistant three times."
    projects, answers, compaction = _compacted(claude_binary(), tmp_path, summary)
    assert not list(projects.rglob("agent-acompact-*.jsonl"))
    imported([projects], tmp_path / "traces", source="claude-code", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    kept = [a for i, a in enumerate(answers) if i not in compaction]
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens)
            for r in calls.itertuples()] == [(a.input_tokens, a.cache_read, a.output_tokens)
                                             for a in kept]
    (run,) = read_trace_folder(tmp_path / "traces")
    before = run.calls[2]  # the last call before the compaction
    assert before.observation_tokens is not None and before.observation_tokens > 0
    lines = [json.loads(x) for f in projects.rglob("*.jsonl") for x in f.read_text().splitlines()]
    assert any(summary in str(x.get("message")) for x in lines)


def test_claude_code_2_1_90_records_the_compaction_request_as_a_compaction_call(tmp_path):
    """Claude Code 2.1.90 runs ``/compact`` as a forked agent whose transcript
    (``subagents/agent-acompact-<hex>.jsonl``) starts with a copy of the
    conversation and holds the compaction request's reply: the import has
    every call the server answered, once, the compaction request's of
    purpose compaction with agent null, not a subagent's."""
    projects, answers, compaction = _compacted(claude_binary(PARTIAL_VERSION), tmp_path,
                                               "The user greeted the assistant three times.")
    assert len(list(projects.rglob("agent-acompact-*.jsonl"))) == 1
    imported([projects], tmp_path / "traces", source="claude-code", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert [(r.input_tokens, r.cache_read_tokens, r.output_tokens)
            for r in calls.itertuples()] == [(a.input_tokens, a.cache_read, a.output_tokens)
                                             for a in answers]
    assert [None if pd.isna(p) else p for p in calls["purpose"]] == [
        COMPACTION if i in compaction else None for i in range(len(answers))]
    assert calls["agent"].isna().all()


def _compacted(binary: Path, tmp_path: Path, summary: str) -> tuple[Path, list, list[int]]:
    """Three turns, ``/compact`` and one more turn, resumed in one session:
    ``(transcripts folder, the server's answers, the compaction request's index)``."""
    script = [Reply([("text", f"answer {i}")], input_tokens=100 + i, output_tokens=20 + i)
              for i in range(3)]
    script += [Reply([("text", f"<analysis>greetings</analysis>\n<summary>{summary}</summary>")],
                     input_tokens=300, output_tokens=40),
               Reply([("text", "after compaction")], input_tokens=30, output_tokens=4,
                     cache_read=7)]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with FakeProvider(list(script), lifetime_s=120) as server:
        session_id = None
        for prompt in ["hi 0", "hi 1", "hi 2", "/compact", "continue"]:
            resume = ["--resume", session_id] if session_id else []
            done = subprocess.run([str(binary), "-p", prompt, *resume, "--output-format", "json",
                                   "--model", MODEL], cwd=work, env=_env(home, server),
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr[-2000:]
            session_id = json.loads(done.stdout)["session_id"]
        answers = list(server.answers)
        asked = [json.dumps(r.body.get("messages", [])[-1:]) for r in server.requests]
    assert len(answers) == len(script)
    compaction = [i for i, text in enumerate(asked) if "<summary>" in text]
    assert compaction == [3]
    return home / ".claude" / "projects", answers, compaction


def test_a_forked_session_does_not_count_its_parents_calls_twice(tmp_path):
    """``--resume ID --fork-session`` copies the parent's messages into the new
    session's file: each message the server answered is one call, once."""
    binary = claude_binary()
    script = [Reply([("text", "first")], input_tokens=100, output_tokens=20),
              Reply([("text", "second")], input_tokens=50, output_tokens=5, cache_read=90)]
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with FakeProvider(list(script), lifetime_s=120) as server:
        first = subprocess.run([str(binary), "-p", "hi", "--output-format", "json", "--model",
                                MODEL], cwd=work, env=_env(home, server), capture_output=True,
                               text=True, timeout=120)
        assert first.returncode == 0, first.stderr[-2000:]
        parent = json.loads(first.stdout)["session_id"]
        fork = subprocess.run([str(binary), "-p", "more", "--resume", parent, "--fork-session",
                               "--output-format", "json", "--model", MODEL], cwd=work,
                              env=_env(home, server), capture_output=True, text=True,
                              timeout=120)
        assert fork.returncode == 0, fork.stderr[-2000:]
        answers = list(server.answers)
    projects = home / ".claude" / "projects"
    ids = [json.loads(x)["message"]["id"] for f in projects.rglob("*.jsonl")
           for x in f.read_text().splitlines() if json.loads(x).get("type") == "assistant"]
    assert len(ids) > len(set(ids)) == len(answers)  # a message copied into the fork
    from sim.traces import import_traces

    import_traces([projects], tmp_path / "traces")
    _, calls = read_traces(tmp_path / "traces")
    assert sorted((r.input_tokens, r.cache_read_tokens, r.output_tokens)
                  for r in calls.itertuples()) == sorted(
        (a.input_tokens, a.cache_read, a.output_tokens) for a in answers)


def test_the_older_layout_sidechains_in_the_session_file_with_recorded_cost(session, tmp_path):
    """Older Claude Code versions wrote a subagent's lines into the session's
    own file (``isSidechain``, no ``agentId``) and each assistant line's
    ``costUSD``: the real session rewritten that way imports with the same
    calls, the subagent's marked ``sidechain``, and the costs kept as recorded."""
    projects = session[0]
    lines = []
    for path in sorted(projects.rglob("*.jsonl"), key=lambda p: "subagents" in p.parts):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            line.pop("agentId", None)
            if line.get("type") == "assistant":
                line["costUSD"] = 0.001
            lines.append(line)
    old = tmp_path / "old" / "project"
    old.mkdir(parents=True)
    (old / "session.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (old / "sessions-index.json").write_text(json.dumps({"version": 1, "entries": [
        {"sessionId": lines[-1]["sessionId"], "messageCount": len(lines)}]}))  # a companion
    imported([old], tmp_path / "traces", source="claude-code", runs=1)
    runs, calls = read_traces(tmp_path / "traces")
    assert len(calls) == len(SCRIPT)
    agents = [None if pd.isna(a) else a for a in calls["agent"]]
    assert agents == [None, None, "sidechain", "sidechain", None]
    assert calls["cost_usd"].tolist() == [0.001] * len(SCRIPT)
    assert runs["cost_usd"].iloc[0] == pytest.approx(0.001 * len(SCRIPT))


# a reply streamed slowly: three content blocks, the tool call in the middle
SLOW = [Reply([("text", "Let me run it."),
               ("tool_use", "toolu_slow", "Bash", {"command": "echo hello", "description": "hi"}),
               ("text", "more text")],
              stop_reason="tool_use", input_tokens=120, output_tokens=300, chunk_delay_s=0.25),
        Reply([("text", "done")], input_tokens=10, output_tokens=7)]


def _run_slow(binary: Path, tmp_path: Path) -> Path:
    """Run the CLI on :data:`SLOW`; its transcripts folder."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with FakeProvider(list(SLOW), lifetime_s=120) as server:
        done = subprocess.run([str(binary), "-p", "Say hello with Bash.", "--output-format",
                               "json", "--model", MODEL, "--allowedTools", "Bash"], cwd=work,
                              env=_env(home, server), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(server.answers) == len(SLOW)
    return home / ".claude" / "projects"


def _lines(projects: Path) -> list[dict]:
    return [json.loads(x) for f in sorted(projects.rglob("*.jsonl"))
            for x in f.read_text().splitlines() if x.strip()]


def test_a_tool_run_while_its_reply_streams_is_timed_from_its_own_line(tmp_path):
    """The CLI runs a tool as soon as its block is complete, while the reply's
    next block still streams: the tool's duration runs from the line holding
    its tool_use block to its result's line (never from the reply's last
    line, which may come after the result)."""
    projects = _run_slow(claude_binary(), tmp_path)
    lines = _lines(projects)
    called = next(x for x in lines if x.get("type") == "assistant"
                  and x["message"]["content"][0].get("id") == "toolu_slow")
    answered = next(x for x in lines if x.get("type") == "user"
                    and "toolu_slow" in json.dumps(x["message"]["content"]))
    (run,) = collected(projects)
    tool = run.calls[0].tool_calls[0]
    expected = (parse_utc(answered["timestamp"]) - parse_utc(called["timestamp"])).total_seconds()
    assert tool.duration_s == expected and expected >= 0



def test_start_counts_written_by_claude_code_2_1_90_are_estimated(tmp_path):
    """Claude Code 2.1.90 writes each block's line when the block ends, with
    the stream's start counts: the slow reply's three lines say stop_reason
    null and output_tokens 1 though the server counted 300. The import
    estimates that call's output from its content (text, tool name and
    canonical input), marks it estimated and the run notes it; its input
    count (known at the stream's start) is exact."""
    projects = _run_slow(claude_binary(PARTIAL_VERSION), tmp_path)
    slow = [x for x in _lines(projects) if x.get("type") == "assistant"
            and x["message"]["id"] == next(x for x in _lines(projects)
                                           if x.get("type") == "assistant")["message"]["id"]]
    assert len(slow) == 3
    assert all(x["version"] == PARTIAL_VERSION and x["message"]["stop_reason"] is None
               and x["message"]["usage"]["output_tokens"] == 1 for x in slow)
    (run,) = collected(projects)
    first = run.calls[0]
    content = "Let me run it." + "Bash" + canonical_json(
        {"command": "echo hello", "description": "hi"}) + "more text"
    assert first.usage.output_tokens == approx_tokens(content) == 18
    assert (first.usage.input_tokens, first.provenance["output_tokens"],
            first.provenance["input_tokens"]) == (120, ESTIMATED, EXACT)
    assert run.conventions["output_tokens"] == ESTIMATED_OUTPUT
