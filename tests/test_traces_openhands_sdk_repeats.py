"""OpenHands V1 conversations (sim/traces/openhands_sdk.py) whose response ids
repeat, whose sub-agents persist beside them, or that a budget stopped: the
folders are written by hand in the shapes openhands-sdk 1.58.2 wrote them
(``base_state.json`` beside ``events/event-NNNNN-<uuid>.json``; the state's
``stats.usage_to_metrics`` with per-response ``token_usages``,
``response_latencies`` and ``costs``), trimmed to the fields the importer reads."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from sim.traces import import_traces, read_traces

TOKENS = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
          "reasoning_tokens"]
MODEL = "openai/gpt-4o-mini"


def stamp(second: float) -> str:
    """A local time without a zone, as the SDK writes it."""
    return f"2026-12-07T02:31:{second:09.6f}"


def usage(rid: str, prompt: int, completion: int, cached: int, reasoning: int = 0) -> dict:
    return {"model": MODEL, "prompt_tokens": prompt, "completion_tokens": completion,
            "cache_read_tokens": cached, "cache_write_tokens": 0,
            "reasoning_tokens": reasoning, "context_window": 128000,
            "per_turn_token": prompt + completion, "response_id": rid}


def metrics(entries: list[dict], latencies: list[float], costs: list[float]) -> dict:
    """An LLM's ``Metrics`` as the SDK's telemetry records them: a latency per
    response, a token usage per response with a usage, a cost per positive
    cost (without a response id)."""
    return {"model_name": MODEL, "accumulated_cost": sum(costs),
            "accumulated_token_usage": {
                "model": MODEL, "response_id": "",
                **{k: sum(e[k] for e in entries) for k in (
                    "prompt_tokens", "completion_tokens", "cache_read_tokens",
                    "cache_write_tokens", "reasoning_tokens")}},
            "costs": [{"model": MODEL, "cost": c, "timestamp": 1796610662.0} for c in costs],
            "response_latencies": [{"model": MODEL, "latency": t, "response_id": e["response_id"]}
                                   for t, e in zip(latencies, entries, strict=True)],
            "token_usages": entries}


def action(rid: str, tool: str, call_id: str, second: float) -> dict:
    return {"id": str(uuid.uuid4()), "timestamp": stamp(second), "source": "agent",
            "thought": [{"type": "text", "text": "Let me think."}],
            "action": {"thought": "x", "kind": "ThinkAction"}, "tool_name": tool,
            "tool_call_id": call_id, "tool_call": {
                "id": call_id, "name": tool, "arguments": "{\"thought\": \"x\"}",
                "origin": "completion"},
            "llm_response_id": rid, "kind": "ActionEvent"}


def observation(call_id: str, second: float, text: str = "logged") -> dict:
    return {"id": str(uuid.uuid4()), "timestamp": stamp(second), "source": "environment",
            "tool_name": "think", "tool_call_id": call_id, "observation": {
                "content": [{"type": "text", "text": text}], "is_error": False,
                "kind": "ThinkObservation"}, "kind": "ObservationEvent"}


def opening(second: float = 1.0) -> list[dict]:
    """The system prompt and the user's task that open a conversation."""
    return [{"id": str(uuid.uuid4()), "timestamp": stamp(second), "source": "agent",
             "system_prompt": {"type": "text", "text": "You are OpenHands."},
             "tools": [], "kind": "SystemPromptEvent"},
            {"id": str(uuid.uuid4()), "timestamp": stamp(second + 0.05), "source": "user",
             "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
             "kind": "MessageEvent"}]


def conversation(folder: Path, events: list[dict], usage_to_metrics: dict,
                 status: str = "finished") -> Path:
    """A ``LocalConversation``'s persistence folder."""
    conv_id = uuid.uuid4()
    (folder / "events").mkdir(parents=True)
    (folder / "events" / ".eventlog.lock").write_text("")
    state = {"id": str(conv_id), "agent": {"llm": {"model": MODEL, "usage_id": "agent"},
                                            "kind": "Agent"},
             "max_iterations": 20, "execution_status": status,
             "stats": {"usage_to_metrics": usage_to_metrics}}
    (folder / "base_state.json").write_text(json.dumps(state))
    for index, event in enumerate(events):
        (folder / "events" / f"event-{index:05d}-{event['id']}.json").write_text(
            json.dumps(event))
    return folder


def imported(tmp_path: Path, source: Path):
    import_traces([source], tmp_path / "out")
    return read_traces(tmp_path / "out")


def three_responses(ids: list[str]) -> tuple[list[dict], dict]:
    """Three responses: think (one call), think twice in parallel, finish."""
    events = [*opening(),
              action(ids[0], "think", "call_a1", 2.37), observation("call_a1", 2.39),
              action(ids[1], "think", "call_b1", 2.48), action(ids[1], "think", "call_b2", 2.50),
              observation("call_b1", 2.504), observation("call_b2", 2.505),
              action(ids[2], "finish", "call_c1", 2.59), observation("call_c1", 2.60, "done")]
    stats = {"agent": metrics([usage(ids[0], 1000, 50, 400, 20), usage(ids[1], 1200, 70, 1000, 30),
                               usage(ids[2], 1400, 30, 1200)],
                              [0.4, 0.08, 0.06], [0.0123, 0.0045, 0.002])}
    return events, stats


@pytest.mark.parametrize("ids", [["chatcmpl-417", "chatcmpl-88", "chatcmpl-417"],
                                 ["chatcmpl-same"] * 3],
                         ids=["ollama", "constant"])
def test_a_repeated_response_id_is_consumed_in_order_not_collapsed(
        tmp_path: Path, ids: list[str]) -> None:
    """Ollama's OpenAI endpoint names a response ``chatcmpl-<rand.Intn(999)>``
    (here 417, 88, 417) and some proxies send one id for all; the SDK records
    each response's usage and latency under that id all the same. Three
    responses (the second with two parallel tool calls) are three calls: prompt
    1000/1200/1400 with 400/1000/1200 cached, completion 50/70/30 with
    reasoning 20/30/0, latency 0.4/0.08/0.06 s, cost 0.0123/0.0045/0.002
    (total 0.0188); the k-th response naming an id takes that id's k-th
    entry, and no entry is left over to make a phantom call."""
    events, stats = three_responses(ids)
    runs, calls = imported(tmp_path, conversation(tmp_path / "conv", events, stats))
    assert runs["steps"].tolist() == [3]
    assert calls[TOKENS].values.tolist() == [[600, 400, 0, 30, 20], [200, 1000, 0, 40, 30],
                                             [200, 1200, 0, 30, 0]]
    assert calls["latency_s"].tolist() == pytest.approx([0.4, 0.08, 0.06])
    assert calls["cost_usd"].tolist() == pytest.approx([0.0123, 0.0045, 0.002])
    assert [[t["name"] for t in c] for c in calls["tool_calls"]] == [
        ["think"], ["think", "think"], ["finish"]]
    assert runs["cost_usd"].tolist() == pytest.approx([0.0188])


def task_conversation(root: Path, with_subagent: bool = True, copied_ids: str = "sub-000"
                      ) -> Path:
    """A parent that calls the ``task`` tool (response chatcmpl-000: prompt
    1000 with 200 cached, completion 40, cost 0.01) and then finishes
    (chatcmpl-002: prompt 1500 with 1000 cached, completion 30, cost 0: the
    SDK records no cost of 0, so its agent usage holds one cost for two
    responses); the sub-agent answers once (sub-000: prompt 2000, completion
    60, cost 0.02) in ``subagents/<id>/``, and the task manager copies its
    combined metrics into the parent's stats as ``task:task_00000001``
    (with the response id ``copied_ids``)."""
    sub_metrics = metrics([usage("sub-000", 2000, 60, 0)], [0.06], [0.02])
    copied = metrics([usage(copied_ids, 2000, 60, 0)], [0.06], [0.02])
    parent_events = [*opening(),
                     action("chatcmpl-000", "task", "call_t0", 2.37),
                     observation("call_t0", 2.90, "sub result"),
                     action("chatcmpl-002", "finish", "call_t1", 3.10),
                     observation("call_t1", 3.12, "ok")]
    parent = conversation(root / "92b594d88875428b84282889d3a7ad2c", parent_events, {
        "agent": metrics([usage("chatcmpl-000", 1000, 40, 200),
                          usage("chatcmpl-002", 1500, 30, 1000)], [0.34, 0.07], [0.01]),
        "task:task_00000001": copied})
    if with_subagent:
        conversation(parent / "subagents" / "0b5599ca2074411d9de529e1b4de34ad",
                     [*opening(2.5), action("sub-000", "finish", "call_s0", 2.75),
                      observation("call_s0", 2.77, "sub result")],
                     {"agent": sub_metrics, "condenser": metrics([], [], [])})
    return root


def test_a_task_sub_agent_is_folded_into_its_parent_and_its_cost_counted_once(
        tmp_path: Path) -> None:
    """The parent's and the sub-agent's folders are one run of three calls in
    time order, the sub-agent's marked with its task id: input 800 + 2000 +
    500 = 3300, cost 0.01 + 0.02 + 0 = 0.03 (the parent's own 0.01 and the
    sub-agent's 0.02 once: not again from ``task:task_00000001``)."""
    runs, calls = imported(tmp_path, task_conversation(tmp_path / "in"))
    assert len(runs) == 1
    run = runs.iloc[0]
    assert (run["steps"], run["input_tokens"], run["output_tokens"]) == (3, 3300, 130)
    assert run["cost_usd"] == pytest.approx(0.03)
    assert calls["agent"].fillna("").tolist() == ["", "task_00000001", ""]
    assert calls["input_tokens"].tolist() == [800, 2000, 500]
    assert calls["cost_usd"].tolist()[1] == pytest.approx(0.02)
    assert [[t["name"] for t in c] for c in calls["tool_calls"]] == [["task"], ["finish"],
                                                                     ["finish"]]


def test_a_sub_agent_its_parents_copy_does_not_match_is_still_counted_once(
        tmp_path: Path) -> None:
    """The parent's copy of the sub-agent's metrics names another response id
    than the sub-agent's own state: the one delegated usage id left still
    pairs with the one folded sub-agent, so the cost is 0.03, not 0.05 (the
    sub-agent's 0.02 from its folder and again from the parent's copy)."""
    runs, calls = imported(tmp_path, task_conversation(tmp_path / "in", copied_ids="other"))
    assert len(runs) == 1 and runs["cost_usd"].tolist() == pytest.approx([0.03])
    assert calls["agent"].fillna("").tolist() == ["", "task_00000001", ""]


def test_without_its_sub_agents_folder_a_parent_still_counts_their_recorded_cost(
        tmp_path: Path) -> None:
    """A parent copied without ``subagents/``: its two calls, and a cost of
    its own 0.01 plus the sub-agent's 0.02 its stats recorded = 0.03."""
    runs, calls = imported(tmp_path, task_conversation(tmp_path / "in", with_subagent=False))
    assert runs["steps"].tolist() == [2] and calls["agent"].isna().all()
    assert runs["cost_usd"].tolist() == pytest.approx([0.03])


def test_a_run_stopped_at_its_budget_reads_the_budget_from_the_error_detail(
        tmp_path: Path) -> None:
    """``LocalConversation(max_budget_per_run=0.015)`` after two responses
    costing 0.0123 + 0.0045 (over the budget): execution_status error and a
    ConversationErrorEvent MaxBudgetReached whose detail is the only record of
    the budget ("maximum budget limit ($0.0150)"); the agent usage's
    max_budget_per_task is null. The run's cost_limit_usd is 0.015."""
    events, stats = three_responses(["r1", "r2", "r3"])
    events = [*events[:8], {
        "id": str(uuid.uuid4()), "timestamp": stamp(2.6), "source": "environment",
        "code": "MaxBudgetReached",
        "detail": "Agent reached maximum budget limit ($0.0150); accumulated cost $0.0168.",
        "classification": {"kind": "quota", "retryable": False, "user_action": "settings"},
        "kind": "ConversationErrorEvent"}]
    agent = stats["agent"]
    stats = {"agent": dict(metrics(agent["token_usages"][:2], [0.4, 0.08], [0.0123, 0.0045]),
                           max_budget_per_task=None)}
    runs, _ = imported(tmp_path, conversation(tmp_path / "conv", events, stats, "error"))
    run = runs.iloc[0]
    assert (run["exit"], run["steps"]) == ("MaxBudgetReached", 2)
    assert run["cost_limit_usd"] == pytest.approx(0.015)
    assert run["cost_usd"] == pytest.approx(0.0168)
