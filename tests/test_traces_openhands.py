"""The OpenHands importer (sim/traces/openhands.py) on small event streams
shaped like what OpenHands writes: ``event_to_dict`` events (a saved
trajectory) and evaluation ``output.jsonl`` lines (``EvalOutput`` with
``Metrics.get()``), every count below worked out by hand."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sim.traces import import_traces, read_traces
from sim.traces.model import DERIVED, TOKEN_COLUMNS, UNKNOWN
from sim.traces.openhands import detect, runs
from sim.traces.skips import NO_TRAJECTORY, Skip
from tests.fuzz_helpers import check_mutations

T0 = "2025-03-01T10:00:0"


def response(rid: str, usage: dict, tool_calls: list[dict] | None, content: str = "",
             finish: str = "tool_calls") -> dict:
    """A LiteLLM ModelResponse as ``ToolCallMetadata.model_dump()`` writes it."""
    return {"id": rid, "created": 1740823200, "model": "claude-sonnet-4-20250514",
            "object": "chat.completion", "system_fingerprint": None,
            "choices": [{"finish_reason": finish, "index": 0, "message": {
                "content": content, "role": "assistant", "tool_calls": tool_calls,
                "function_call": None}}],
            "usage": usage}


def fn(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


R1 = response("R1", {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050,
                     "prompt_tokens_details": {"cached_tokens": 800, "audio_tokens": None},
                     "completion_tokens_details": {"reasoning_tokens": 20}},
              [fn("call_a", "execute_bash", {"command": "ls"}),
               fn("call_b", "str_replace_editor", {"command": "view", "path": "/repo/a.py"})],
              content="Let me look")
R2 = response("R2", {"prompt_tokens": 1300, "completion_tokens": 30, "total_tokens": 1330,
                     "prompt_tokens_details": {"cached_tokens": 1000},
                     "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000},
              [fn("call_c", "finish", {"message": "Done"})])


def meta(call_id: str, name: str, model_response: dict) -> dict:
    return {"function_name": name, "tool_call_id": call_id, "model_response": model_response,
            "total_calls_in_response": len(model_response["choices"][0]["message"]
                                           ["tool_calls"])}


ACCUMULATED = {"accumulated_cost": 0.06, "max_budget_per_task": 2.0,
               "accumulated_token_usage": {"model": "default", "prompt_tokens": 3500,
                                           "completion_tokens": 120, "cache_read_tokens": 1800,
                                           "cache_write_tokens": 100, "context_window": 200000,
                                           "per_turn_token": 1330, "response_id": ""},
               "costs": [], "response_latencies": [], "token_usages": []}


def history() -> list[dict]:
    """One task: the system prompt; the user's task; a response of two
    parallel tool calls (R1) with their observations; a message without a tool
    call (usage not in the stream); the user's answer; a finish (R2)."""
    return [
        {"id": 0, "timestamp": T0 + "0", "source": "agent", "message": "You are OpenHands",
         "action": "system", "args": {"content": "You are OpenHands", "tools": []}},
        {"id": 1, "timestamp": T0 + "1", "source": "user", "message": "Fix the bug",
         "action": "message", "args": {"content": "Fix the bug", "image_urls": None,
                                       "wait_for_response": False}},
        {"id": 2, "timestamp": T0 + "1", "source": "environment", "message": "",
         "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running", "reason": ""}},
        {"id": 3, "timestamp": T0 + "3", "source": "agent", "message": "Running command: ls",
         "action": "run", "tool_call_metadata": meta("call_a", "execute_bash", R1),
         "args": {"command": "ls", "is_input": False, "thought": "Let me look",
                  "blocking": False, "hidden": False, "confirmation_state": "confirmed"}},
        {"id": 4, "timestamp": T0 + "3", "source": "agent", "message": "Reading /repo/a.py",
         "action": "read", "tool_call_metadata": meta("call_b", "str_replace_editor", R1),
         "args": {"path": "/repo/a.py", "start": 0, "end": -1, "thought": ""}},
        {"id": 5, "timestamp": T0 + "4", "source": "agent", "message": "Command finished",
         "cause": 3, "observation": "run", "tool_call_metadata": meta("call_a", "execute_bash",
                                                                      R1),
         "content": "a.py\nb.py", "extras": {"command": "ls", "metadata": {"exit_code": 0}},
         "success": True},
        {"id": 6, "timestamp": T0 + "5", "source": "agent", "message": "I read the file",
         "cause": 4, "observation": "read",
         "tool_call_metadata": meta("call_b", "str_replace_editor", R1),
         "content": "print(1)\n", "extras": {"path": "/repo/a.py"}},
        {"id": 7, "timestamp": T0 + "7", "source": "agent",
         "message": "Which version do you use?", "action": "message",
         "args": {"content": "Which version do you use?", "image_urls": None,
                  "wait_for_response": True}},
        {"id": 8, "timestamp": T0 + "8", "source": "user", "message": "Version 2",
         "action": "message", "args": {"content": "Version 2", "wait_for_response": False}},
        {"id": 9, "timestamp": T0 + "9", "source": "agent", "message": "Done",
         "action": "finish", "tool_call_metadata": meta("call_c", "finish", R2),
         "llm_metrics": ACCUMULATED,
         "args": {"final_thought": "Done", "outputs": {}, "thought": ""}},
        {"id": 10, "timestamp": T0 + "9", "source": "environment", "message": "",
         "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "finished", "reason": ""}},
    ]


def output_line(instance: str) -> dict:
    """An ``EvalOutput`` line as eval_infer leaves it (verdict in the report)."""
    return {"instance_id": instance, "instruction": "Fix the bug",
            "test_result": {"git_patch": "diff", "report": {"resolved": True}},
            "metadata": {"agent_class": "CodeActAgent", "max_iterations": 100,
                         "llm_config": {"model": "litellm_proxy/claude-sonnet-4"}},
            "history": history(), "error": None,
            "metrics": {"accumulated_cost": 0.06, "max_budget_per_task": None,
                        "accumulated_token_usage": ACCUMULATED["accumulated_token_usage"],
                        "costs": [{"model": "m", "cost": c, "timestamp": 1.0}
                                  for c in (0.01, 0.02, 0.03)],
                        "response_latencies": [{"model": "m", "latency": 2.5,
                                                "response_id": "R1"},
                                               {"model": "m", "latency": 1.25,
                                                "response_id": "R2"}],
                        "token_usages": [
                            {"model": "m", "prompt_tokens": 1000, "completion_tokens": 50,
                             "cache_read_tokens": 800, "cache_write_tokens": 0,
                             "response_id": "R1"},
                            {"model": "m", "prompt_tokens": 1200, "completion_tokens": 40,
                             "cache_read_tokens": 0, "cache_write_tokens": 0,
                             "response_id": "R-message"},
                            {"model": "m", "prompt_tokens": 1300, "completion_tokens": 30,
                             "cache_read_tokens": 1000, "cache_write_tokens": 100,
                             "response_id": "R2"}]}}


def only_run(values: list) -> object:
    (record,) = list(runs(values, "f.json"))
    return record


def test_an_event_list_and_output_lines_are_recognised_and_other_json_is_not():
    assert detect([history()]) == "events"
    assert detect([output_line("a"), output_line("b")]) == "output"
    assert detect([[{"role": "user", "content": "hi"}]]) is None
    assert detect([{"simulations": []}]) is None
    assert detect([[]]) is None


def test_parallel_tool_calls_of_one_response_are_one_call_with_both_tool_calls():
    """Events 3 and 4 share response R1: one call, two tool calls with the
    observations that answer them; three calls in all (R1, the message, R2)."""
    record = only_run([history()])
    assert len(record.calls) == 3
    first = record.calls[0]
    assert [t.name for t in first.tool_calls] == ["execute_bash", "str_replace_editor"]
    assert [t.id for t in first.tool_calls] == ["call_a", "call_b"]
    assert first.tool_calls[0].arguments == '{"command":"ls"}'
    assert first.tool_calls[0].result_tokens == 3  # "a.py\nb.py": 9 characters
    assert first.tool_calls[1].result_tokens == 3  # "print(1)\n": 9 characters
    assert [t.error for t in first.tool_calls] == [False, False]
    assert first.tool_calls[0].duration_s == 1.0 and first.tool_calls[1].duration_s == 2.0
    assert first.text_tokens == 3  # "Let me look"
    assert first.finish_reason == "tool_calls"


def test_a_response_usage_is_split_and_the_subtracted_columns_are_derived():
    """R1: 1000 prompt with 800 cached, 50 completion with 20 reasoning;
    R2: 1300 prompt with 1000 read and 100 written, 30 completion."""
    first, _, last = only_run([history()]).calls
    assert (first.usage.input_tokens, first.usage.cache_read_tokens,
            first.usage.output_tokens, first.usage.thinking_tokens) == (200, 800, 30, 20)
    assert first.provenance == {"input_tokens": DERIVED, "output_tokens": DERIVED}
    assert (last.usage.input_tokens, last.usage.cache_read_tokens,
            last.usage.cache_write_tokens, last.usage.output_tokens) == (200, 1000, 100, 30)
    assert last.provenance == {"input_tokens": DERIVED}


def test_a_message_without_a_tool_call_is_a_call_of_unknown_usage_and_the_run_keeps_totals():
    """The stream records no usage for the message (event 7): its token
    columns are unknown, and the run's totals are the accumulated usage the
    last action carries (3500 prompt - 1800 read - 100 written = 1600)."""
    record = only_run([history()])
    message = record.calls[1]
    assert message.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)
    assert message.usage.input_tokens == 0 and message.tool_calls == []
    assert message.text_tokens == 7  # "Which version do you use?": 25 characters
    assert message.observation_tokens == 3  # the user's "Version 2"
    assert record.totals == {"input_tokens": 1600, "cache_read_tokens": 1800,
                             "cache_write_tokens": 100, "output_tokens": 120,
                             "reasoning_tokens": 0}
    assert record.cost_usd == 0.06 and record.cost_limit_usd == 2.0
    assert record.exit == "finished" and record.resolved is None
    assert record.duration_s == 9.0


def test_output_lines_fill_calls_from_token_usages_costs_and_latencies():
    """The message's usage is the one token_usages entry no action names
    (1200 prompt, 40 completion, exact); costs align with token_usages (three
    each); latencies by response id; the verdict from the report."""
    record = only_run([output_line("django__django-1")])
    assert record.run_id == record.task_id == "django__django-1"
    first, message, last = record.calls
    assert (message.usage.input_tokens, message.usage.output_tokens) == (1200, 40)
    assert message.provenance == {}
    assert [c.cost_usd for c in record.calls] == [0.01, 0.02, 0.03]
    assert first.latency_s == 2.5 and last.latency_s == 1.25
    assert message.latency_s == 2.0  # event 6 at :05 to event 7 at :07
    assert record.totals is None
    assert record.resolved is True and record.step_limit == 100
    assert record.model == "litellm_proxy/claude-sonnet-4"


def test_unmatched_token_usages_are_not_guessed_when_their_number_differs():
    line = output_line("x")
    line["metrics"]["token_usages"].append(dict(line["metrics"]["token_usages"][1],
                                                response_id="R-extra"))
    line["metrics"]["costs"].append({"model": "m", "cost": 0.04, "timestamp": 2.0})
    record = only_run([line])
    assert record.calls[1].provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)
    assert record.totals is not None and record.totals["input_tokens"] == 1600


def test_after_a_condensation_unnamed_token_usages_are_not_given_to_calls():
    """A condenser's own model calls are in token_usages too: with one in the
    history, the one unnamed entry may be the condenser's, so the message
    stays unknown."""
    line = output_line("x")
    line["history"].insert(7, {"id": 11, "timestamp": T0 + "6", "source": "agent",
                               "action": "condensation",
                               "args": {"forgotten_event_ids": [1, 2], "summary": "s"}})
    record = only_run([line])
    assert len(record.calls) == 3
    assert record.calls[1].provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN)


def test_unhashable_actions_ids_and_causes_name_nothing():
    """Found by the fuzzer: an ``action``, ``id`` or ``cause`` that is a list
    is not a call and names no event, instead of a TypeError."""
    events = history()
    events[7] = dict(events[7], action=["message"])  # the message: no longer a call
    events[3] = dict(events[3], id=[3])
    events[5] = dict(events[5], cause={"id": 3})
    record = only_run([events])
    assert len(record.calls) == 2
    assert record.calls[0].tool_calls[0].result_tokens == 3  # still by its tool_call_id


def test_a_line_without_history_is_skipped_and_an_empty_history_is_a_run_of_no_calls():
    empty = dict(output_line("b"), history=[])
    failed = dict(output_line("d"), error="RuntimeError: sandbox died",
                  history=history()[:2])
    broken = dict(output_line("c"), history=None)
    got = list(runs([output_line("a"), empty, broken, failed], "output.jsonl"))
    assert [type(g).__name__ for g in got] == ["RunRecord", "RunRecord", "Skip", "RunRecord"]
    assert got[3].exit == "RuntimeError: sandbox died" and got[3].calls == []
    assert got[1].calls == [] and got[1].resolved is True and got[1].exit is None
    assert isinstance(got[2], Skip) and got[2].reason == NO_TRAJECTORY and got[2].run == "c"


def test_the_older_history_of_action_observation_pairs_reads_as_the_same_events():
    events = history()
    pairs = [[events[i], events[i + 1]] for i in range(0, 10, 2)] + [[events[10], {}]]
    flat = only_run([history()])
    paired = only_run([pairs])
    assert [c.usage for c in paired.calls] == [c.usage for c in flat.calls]
    assert [len(c.tool_calls) for c in paired.calls] == [2, 0, 1]


def test_a_delegates_calls_are_marked_with_its_agent_name():
    """A delegate action (a call of the run's agent), the delegate's own
    message, its result, then the run's finish: the middle call is
    BrowsingAgent's."""
    events = [
        {"id": 1, "timestamp": T0 + "1", "source": "user", "action": "message",
         "args": {"content": "Find the docs"}},
        {"id": 2, "timestamp": T0 + "2", "source": "agent", "action": "delegate",
         "args": {"agent": "BrowsingAgent", "inputs": {"task": "docs"}, "thought": ""}},
        {"id": 3, "timestamp": T0 + "3", "source": "agent", "action": "message",
         "args": {"content": "Found them"}},
        {"id": 4, "timestamp": T0 + "4", "source": "agent", "cause": 2,
         "observation": "delegate", "content": "Found them", "extras": {"outputs": {}}},
        {"id": 5, "timestamp": T0 + "5", "source": "agent", "action": "finish",
         "args": {"final_thought": "done"}},
    ]
    record = only_run([events])
    assert [c.agent for c in record.calls] == [None, "BrowsingAgent", None]
    assert record.calls[0].tool_calls[0].name == "delegate"
    assert record.calls[0].tool_calls[0].result_tokens == 3  # "Found them"


def test_a_failed_command_and_an_error_observation_are_tool_errors():
    events = history()
    events[5] = dict(events[5], success=False,
                     extras={"command": "ls", "metadata": {"exit_code": 2}})
    events[6] = dict(events[6], observation="error", content="File not found")
    first = only_run([events]).calls[0]
    assert [t.error for t in first.tool_calls] == [True, True]


def test_without_function_calling_each_agent_action_is_a_call_named_by_its_action():
    """A CodeAct agent that acts from text: no tool_call_metadata; the run's
    action is a tool call named ``run`` answered by its ``cause``."""
    events = [
        {"id": 1, "timestamp": T0 + "1", "source": "user", "action": "message",
         "args": {"content": "List files"}},
        {"id": 2, "timestamp": T0 + "2", "source": "agent", "action": "run",
         "args": {"command": "ls", "thought": "I will list them"}},
        {"id": 3, "timestamp": T0 + "3", "source": "agent", "cause": 2, "observation": "run",
         "content": "a.py", "extras": {"metadata": {"exit_code": 0}}},
        {"id": 4, "timestamp": T0 + "4", "source": "agent", "action": "finish",
         "args": {"final_thought": "done", "thought": ""}},
    ]
    record = only_run([events])
    assert [[t.name for t in c.tool_calls] for c in record.calls] == [["run"], ["finish"]]
    assert record.calls[0].tool_calls[0].arguments == '{"command":"ls"}'
    assert record.calls[0].tool_calls[0].result_tokens == 1
    assert all(c.provenance == dict.fromkeys(TOKEN_COLUMNS, UNKNOWN) for c in record.calls)
    assert record.totals is None  # no llm_metrics recorded


def test_importing_a_trajectory_and_an_output_file_writes_readable_tables(tmp_path: Path):
    (tmp_path / "session.json").write_text(json.dumps(history(), indent=4))
    lines = [output_line("a"), output_line("b")]
    (tmp_path / "output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = import_traces([tmp_path], tmp_path / "out")
    assert report.runs == 3 and report.calls == 9 and not report.skips
    table, calls = read_traces(tmp_path / "out")
    assert set(table["source"]) == {"openhands"}
    by_id = table.set_index("run_id")
    assert by_id.loc["a", "input_tokens"] == 200 + 1200 + 200
    assert by_id.loc["a", "cache_read_tokens"] == 800 + 1000
    assert by_id.loc["a", "output_tokens"] == 30 + 40 + 30
    assert by_id.loc["a", "reasoning_tokens"] == 20
    assert bool(by_id.loc["a", "resolved"]) is True
    assert by_id.loc["a", "cost_usd"] == pytest.approx(0.06)
    assert len(calls[calls["run_id"] == "a"].iloc[0]["tool_calls"]) == 2


def test_a_run_whose_cache_exceeds_its_prompt_is_read_with_the_prompt_apart():
    """LiteLLM's older Anthropic usage: prompt_tokens without the cache (200
    prompt, 800 cache read): the whole run is read so, counted as a repair."""
    events = copy.deepcopy(history())
    usage = events[3]["tool_call_metadata"]["model_response"]["usage"]
    usage["prompt_tokens"] = 200
    record = only_run([events])
    first = record.calls[0]
    assert (first.usage.input_tokens, first.usage.cache_read_tokens) == (200, 800)
    assert "input_tokens" not in first.provenance
    assert record.repairs and record.repairs[0][0] == "calls.input_tokens"


def test_eval_infers_copy_of_output_jsonl_gives_its_verdict_instead_of_duplicates(
        tmp_path: Path):
    """output.jsonl (no verdict) and output.swebench_eval.jsonl (the same
    lines with test_result.report): one run per instance, its verdict from the
    copy, the copy a companion; a different run under the same id is still a
    duplicate."""
    plain = [output_line("a"), output_line("b")]
    for line in plain:
        line["test_result"] = {"git_patch": "diff"}
    judged = [output_line("a"), output_line("b")]
    judged[1]["test_result"]["report"]["resolved"] = False
    other = dict(output_line("a"), history=history()[:5])  # one call, not three
    (tmp_path / "output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in plain))
    (tmp_path / "output.swebench_eval.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in judged))
    (tmp_path / "rerun.jsonl").write_text(json.dumps(other) + "\n")
    report = import_traces([tmp_path], tmp_path / "out")
    assert report.runs == 2 and report.calls == 6
    assert [s.reason for s in report.skips] == ["duplicate run_id"]
    assert str(tmp_path / "output.swebench_eval.jsonl") in report.companions
    table, _ = read_traces(tmp_path / "out")
    verdicts = dict(zip(table["run_id"], table["resolved"], strict=True))
    assert verdicts == {"a": True, "b": False}


def test_a_sessions_event_store_is_one_run_with_its_pages_and_metadata_as_companions(
        tmp_path: Path):
    """sessions/SID/events/N.json, one event per file (written out of order
    here), is one run named SID with the three calls of the history; the
    event_cache page repeating the events and metadata.json are companions."""
    store = tmp_path / "sessions" / "4f2a9c"
    (store / "events").mkdir(parents=True)
    (store / "event_cache").mkdir()
    for event in reversed(history()):
        (store / "events" / f"{event['id']}.json").write_text(json.dumps(event))
    (store / "event_cache" / "0-25.json").write_text(json.dumps(history()))
    (store / "metadata.json").write_text(json.dumps(
        {"conversation_id": "4f2a9c", "selected_repository": None, "title": "Fix",
         "llm_model": "claude-sonnet-4", "accumulated_cost": 0.06}))
    report = import_traces([tmp_path / "sessions"], tmp_path / "out")
    assert report.runs == 1 and report.calls == 3 and not report.skips
    assert len(report.companions) == 2
    table, calls = read_traces(tmp_path / "out")
    assert list(table["run_id"]) == ["4f2a9c"]
    assert [len(t) for t in calls["tool_calls"]] == [2, 0, 1]
    # one call records no usage: the run holds the session's recorded total
    assert table["input_tokens"].iloc[0] == 1600


SAMPLES = json.loads(json.dumps({"openhands-events": history(),
                                 "openhands-output": output_line("x")}))
"""Valid files of the format, for the fuzzer's mutations (through JSON, so
that no two places share one object a swap could make into a cycle)."""


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_mutated_files_import_or_are_refused_never_a_traceback(fmt, tmp_path: Path):
    """The fuzzer's mutations (values replaced, swapped, deleted) of a valid
    file: the CLI exits 0 with tables every reader accepts, or 2 with a
    message; never a traceback or a hang. The file itself imports cleanly."""
    check_mutations(fmt, SAMPLES[fmt], tmp_path)


def test_a_session_inside_a_harbor_trial_is_left_to_its_atif_trajectory(tmp_path: Path):
    """TRIAL/agent/sessions/SID/events beside TRIAL/agent/trajectory.json:
    the session is skipped as a duplicate (Harbor's trajectory is the run:
    sim.traces.harbor.converted); a completion log is a companion."""
    agent = tmp_path / "job" / "fix__AbC" / "agent"
    store = agent / "sessions" / "sid1" / "events"
    store.mkdir(parents=True)
    for event in history():
        (store / f"{event['id']}.json").write_text(json.dumps(event))
    (agent / "completions").mkdir()
    (agent / "completions" / "c1.json").write_text(json.dumps(
        {"messages": [], "response": R1, "kwargs": {}, "timestamp": 1.0, "cost": 0.01}))
    (agent / "trajectory.json").write_text(json.dumps({
        "schema_version": "ATIF-v1.5", "session_id": "sid1",
        "agent": {"name": "openhands", "version": "0.62.0"},
        "steps": [{"step_id": 1, "source": "user", "message": "Fix the bug"},
                  {"step_id": 2, "source": "agent", "message": "Done",
                   "metrics": {"prompt_tokens": 10, "completion_tokens": 2}}]}))
    report = import_traces([tmp_path / "job"], tmp_path / "out")
    assert report.runs == 1 and dict(report.runs_by_source) == {"harbor": 1}
    assert [(s.reason, s.run) for s in report.skips] == [("duplicate run_id", "sid1")]
    assert report.companions == [str(agent / "completions" / "c1.json")]
