"""OpenHands V0 (sim/traces/openhands.py): response ids that repeat, and a
condenser's model calls. The files are written by hand in the shapes
OpenHands' V0 writes (``event_to_dict`` events whose ``tool_call_metadata``
holds the LiteLLM ``model_response``; an evaluation ``output.jsonl`` line with
``Metrics.get()``), every count worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.traces import import_traces, read_traces
from sim.traces.openhands import runs

TOKENS = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
          "reasoning_tokens"]
USAGES = [(1000, 50, 400), (1200, 70, 1000), (1400, 30, 1200)]  # prompt, completion, cached


def response(rid: str, k: int, name: str, arguments: dict, usage: tuple | None) -> dict:
    """A LiteLLM ``ModelResponse`` as ``ToolCallMetadata.model_dump()`` writes it."""
    body = {"id": rid, "created": 1738046713 + k, "model": "qwen2.5-coder",
            "object": "chat.completion", "system_fingerprint": None,
            "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                "content": f"step {k}", "role": "assistant", "function_call": None,
                "tool_calls": [{"index": 0, "id": f"call_{k}", "type": "function",
                                "function": {"name": name,
                                             "arguments": json.dumps(arguments)}}]}}]}
    if usage is not None:
        prompt, completion, cached = usage
        body["usage"] = {"completion_tokens": completion, "prompt_tokens": prompt,
                         "total_tokens": prompt + completion,
                         "completion_tokens_details": None,
                         "prompt_tokens_details": {"audio_tokens": None,
                                                   "cached_tokens": cached}}
    return body


def trajectory(ids: list[str], with_usage: bool = True) -> list[dict]:
    """A saved trajectory: the user's task, then three function-calling
    responses (ls, pwd, finish), each command answered by its observation."""
    tools = [("execute_bash", "run", {"command": "ls"}),
             ("execute_bash", "run", {"command": "pwd"}),
             ("finish", "finish", {"message": "done"})]
    events: list[dict] = [{"id": 0, "timestamp": "2025-01-27T22:44:56.000000", "source": "user",
                           "message": "hi", "action": "message",
                           "args": {"content": "hi", "image_urls": None,
                                    "wait_for_response": False}}]
    for k, (rid, usage, (name, kind, arguments)) in enumerate(zip(ids, USAGES, tools,
                                                                  strict=True)):
        meta = {"function_name": name, "tool_call_id": f"call_{k}",
                "model_response": response(rid, k, name, arguments,
                                           usage if with_usage else None),
                "total_calls_in_response": 1}
        args = dict(arguments, thought=f"step {k}") if kind == "run" else {
            "final_thought": "done", "outputs": {}, "thought": ""}
        events.append({"id": len(events), "timestamp": f"2025-01-27T22:45:{10 + 3 * k}.000000",
                       "source": "agent", "message": f"step {k}", "action": kind,
                       "tool_call_metadata": meta, "args": args})
        if kind == "run":
            events.append({"id": len(events), "cause": len(events) - 1,
                           "timestamp": f"2025-01-27T22:45:{11 + 3 * k}.000000",
                           "source": "agent", "message": "Command executed.",
                           "observation": "run", "tool_call_metadata": meta,
                           "content": "a b c", "success": True,
                           "extras": {"command": arguments["command"],
                                      "metadata": {"exit_code": 0, "pid": -1}}})
    return events


def test_a_repeated_response_id_after_another_response_is_a_new_call(tmp_path: Path) -> None:
    """Ollama's OpenAI endpoint names a response ``chatcmpl-<rand.Intn(999)>``:
    three responses 417, 88, 417 (prompt 1000/1200/1400 with 400/1000/1200
    cached, completion 50/70/30) are three calls; a response's parallel tool
    calls only ever follow the action before them, so the third is not folded
    into the first: input 600+200+200 = 1000, cache read 2600, output 150."""
    path = tmp_path / "traj.json"
    path.write_text(json.dumps(trajectory(["chatcmpl-417", "chatcmpl-88", "chatcmpl-417"])))
    import_traces([path], tmp_path / "out")
    run_rows, calls = read_traces(tmp_path / "out")
    assert run_rows["steps"].tolist() == [3]
    assert calls[TOKENS].values.tolist() == [[600, 400, 0, 50, 0], [200, 1000, 0, 70, 0],
                                             [200, 1200, 0, 30, 0]]
    assert [[t["name"] for t in c] for c in calls["tool_calls"]] == [
        ["execute_bash"], ["execute_bash"], ["finish"]]
    assert (run_rows["input_tokens"].tolist(), run_rows["cache_read_tokens"].tolist(),
            run_rows["output_tokens"].tolist()) == ([1000], [2600], [150])


def test_parallel_tool_calls_with_their_observations_between_are_one_call() -> None:
    """V0's agent emits a response's actions one at a time, each answered
    before the next: action, observation, action of one response id are one
    call with two tool calls."""
    events = trajectory(["R1", "R2", "R3"])
    second = dict(events[1], id=99, tool_call_metadata=dict(
        events[1]["tool_call_metadata"], tool_call_id="call_0b"))
    events.insert(3, second)  # after call_0's observation
    (record,) = list(runs([events], "traj.json"))
    assert len(record.calls) == 3
    assert [t.id for t in record.calls[0].tool_calls] == ["call_0", "call_0b"]


def test_output_lines_give_a_repeated_ids_entries_to_its_calls_in_order() -> None:
    """An evaluation line whose responses carry no usage (the metrics hold it:
    token_usages, costs 0.01/0.02/0.03 and latencies 2.5/1.5/0.5 s, one per
    response, ids 417, 88, 417): the k-th call with an id takes the k-th
    entry with it."""
    ids = ["chatcmpl-417", "chatcmpl-88", "chatcmpl-417"]
    line = {"instance_id": "x", "history": trajectory(ids, with_usage=False),
            "metadata": {"llm_config": {"model": "ollama/qwen2.5-coder"}},
            "metrics": {"accumulated_cost": 0.06,
                        "costs": [{"model": "m", "cost": c, "timestamp": 1.0}
                                  for c in (0.01, 0.02, 0.03)],
                        "response_latencies": [{"model": "m", "latency": t, "response_id": r}
                                               for t, r in zip((2.5, 1.5, 0.5), ids,
                                                               strict=True)],
                        "token_usages": [{"model": "m", "prompt_tokens": p,
                                          "completion_tokens": c, "cache_read_tokens": cached,
                                          "cache_write_tokens": 0, "response_id": r}
                                         for (p, c, cached), r in zip(USAGES, ids,
                                                                      strict=True)]}}
    (record,) = list(runs([line], "output.jsonl"))
    assert [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.output_tokens)
            for c in record.calls] == [(600, 400, 50), (200, 1000, 70), (200, 1200, 30)]
    assert [c.cost_usd for c in record.calls] == [0.01, 0.02, 0.03]
    assert [c.latency_s for c in record.calls] == pytest.approx([2.5, 1.5, 0.5])


def condensed_line() -> dict:
    """An evaluation line (run_infer: ``metrics`` is ``get_metrics(state)``,
    the agent LLM's metrics then the condenser LLM's) of a run in which
    ``LLMSummarizingCondenser`` condensed once: agent responses A (prompt
    5000 with 1000 cached, completion 100, cost 0.0113) and B (3000, 50,
    0.008) in the history, the summarizing call cond-1 (8000, 400, 0.024)
    only in token_usages; the condensation action carries no response id."""
    def body(rid: str, prompt: int, completion: int, cached: int, tool: tuple) -> dict:
        name, arguments, call_id = tool
        return {"id": rid, "created": 1738046713, "model": "gpt-4o-2024-08-06",
                "object": "chat.completion", "system_fingerprint": None,
                "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                    "content": "", "role": "assistant", "function_call": None,
                    "tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                    "function": {"name": name,
                                                 "arguments": json.dumps(arguments)}}]}}],
                "usage": {"completion_tokens": completion, "prompt_tokens": prompt,
                          "total_tokens": prompt + completion,
                          "prompt_tokens_details": {"cached_tokens": cached,
                                                    "audio_tokens": 0}}}

    def entry(rid: str, prompt: int, completion: int, cached: int) -> dict:
        return {"model": "gpt-4o", "prompt_tokens": prompt, "completion_tokens": completion,
                "cache_read_tokens": cached, "cache_write_tokens": 0, "context_window": 128000,
                "per_turn_token": prompt + completion, "response_id": rid}

    a = body("chatcmpl-A", 5000, 100, 1000, ("execute_bash", {"command": "ls"}, "call_1"))
    b = body("chatcmpl-B", 3000, 50, 0, ("finish", {"message": "done"}, "call_2"))
    meta_a = {"function_name": "execute_bash", "tool_call_id": "call_1", "model_response": a,
              "total_calls_in_response": 1}
    history = [
        {"id": 0, "timestamp": "2025-03-01T10:00:00.000000", "source": "user",
         "message": "fix it", "action": "message",
         "args": {"content": "fix it", "image_urls": None, "wait_for_response": False}},
        {"id": 1, "timestamp": "2025-03-01T10:00:05.000000", "source": "agent",
         "message": "Running command: ls", "action": "run", "tool_call_metadata": meta_a,
         "args": {"command": "ls", "is_input": False, "thought": "", "blocking": False,
                  "hidden": False, "confirmation_state": "confirmed"}},
        {"id": 2, "timestamp": "2025-03-01T10:00:06.000000", "source": "agent",
         "message": "Command `ls` executed with exit code 0.", "cause": 1,
         "observation": "run", "tool_call_metadata": meta_a, "content": "a b",
         "extras": {"command": "ls", "metadata": {"exit_code": 0}}, "success": True},
        {"id": 3, "timestamp": "2025-03-01T10:00:09.000000", "source": "agent",
         "message": "Summary: ...", "action": "condensation",
         "args": {"forgotten_event_ids": None, "forgotten_events_start_id": 1,
                  "forgotten_events_end_id": 2, "summary": "ran ls", "summary_offset": 1}},
        {"id": 4, "timestamp": "2025-03-01T10:00:12.000000", "source": "agent",
         "message": "done", "action": "finish",
         "tool_call_metadata": {"function_name": "finish", "tool_call_id": "call_2",
                                "model_response": b, "total_calls_in_response": 1},
         "args": {"final_thought": "done", "outputs": {}, "thought": ""}}]
    return {"instance_id": "astropy__astropy-12907", "history": history, "error": None,
            "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-4o"},
                         "max_iterations": 100,
                         "condenser_config": {"type": "llm", "keep_first": 1, "max_size": 4}},
            "test_result": {"git_patch": ""},
            "metrics": {
                "accumulated_cost": 0.0433, "max_budget_per_task": None,
                "accumulated_token_usage": dict(entry("", 16000, 550, 1000), model=""),
                "costs": [{"model": "gpt-4o", "cost": c, "timestamp": t}
                          for c, t in ((0.0113, 1.0), (0.008, 2.0), (0.024, 1.5))],
                "response_latencies": [{"model": "gpt-4o", "latency": t, "response_id": r}
                                       for t, r in ((4.0, "chatcmpl-A"), (2.0, "chatcmpl-B"),
                                                    (3.0, "cond-1"))],
                "token_usages": [entry("chatcmpl-A", 5000, 100, 1000),
                                 entry("chatcmpl-B", 3000, 50, 0),
                                 entry("cond-1", 8000, 400, 0)]}}


def test_a_condensers_model_call_is_a_compaction_call_so_tokens_and_cost_agree(
        tmp_path: Path) -> None:
    """The one token_usages entry no action names, after a condensation, is
    the condenser's call (purpose compaction, at the condensation): three
    calls, input 4000 + 8000 + 3000 = 15000 with 1000 cached (prompt 16000),
    output 550, costs 0.0113 + 0.024 + 0.008 = 0.0433, the recorded total."""
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(condensed_line()) + "\n")
    import_traces([path], tmp_path / "out")
    run_rows, calls = read_traces(tmp_path / "out")
    assert calls["purpose"].fillna("").tolist() == ["", "compaction", ""]
    assert calls[TOKENS].values.tolist() == [[4000, 1000, 0, 100, 0], [8000, 0, 0, 400, 0],
                                             [3000, 0, 0, 50, 0]]
    assert calls["cost_usd"].tolist() == pytest.approx([0.0113, 0.024, 0.008])
    assert calls["latency_s"].tolist() == pytest.approx([4.0, 3.0, 2.0])
    run = run_rows.iloc[0]
    assert (run["input_tokens"], run["cache_read_tokens"], run["output_tokens"]) == (
        15000, 1000, 550)
    assert run["cost_usd"] == pytest.approx(0.0433)
    assert run["cost_usd"] == pytest.approx(calls["cost_usd"].sum())
