"""OpenHands V1 conversations (sim/traces/openhands_sdk.py) on files the
software-agent-sdk's own code wrote (tests/fixtures/real/openhands_sdk: the
README there names each one's commit, path and licence). Each expectation is
counted by hand from the file; the cases the repository ships no file for
(an iteration limit, parallel tool calls, a lost action) are those files
changed in the SDK's own shapes, in a temporary folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import sim.cli
from sim.calibration.exits import category
from sim.traces import import_traces, openhands, openhands_sdk, read_traces
from sim.traces.skips import INVALID_JSON, NO_TRAJECTORY
from sim.traces.sources import read_json
from tests.fuzz_helpers import check_mutations

REAL = Path(__file__).parent / "fixtures" / "real"
SDK = REAL / "openhands_sdk"
GPT = SDK / "gpt-4o-mini" / "cd94562403b9487ebdd4018e3f531dfd"
PROBE = SDK / "restore-probe" / "a3f2edad6f594a2f820cbabb09f93b3d"
TOKENS = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
          "reasoning_tokens"]


def imported(tmp_path: Path, *sources: Path):
    import_traces(list(sources), tmp_path / "out")
    return read_traces(tmp_path / "out")


def events_of(folder: Path) -> list[Path]:
    return sorted((folder / "events").glob("event-*.json"))


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "in" / folder.name
    shutil.copytree(folder, target)
    return target


def cli(argv: list[str], capsys) -> tuple[int, str]:
    status = sim.cli.main(argv)
    return status, capsys.readouterr().err


def test_a_real_conversation_folder_is_one_run_with_the_usage_cost_and_exit_it_records(
        tmp_path: Path) -> None:
    """gpt-4o-mini, three responses (terminal, finish, then a plain answer):
    token_usages prompt 3778/3869/3936 with 0/3712/3840 cached, completion
    36/32/26; costs 0.0005883 + 0.00032115 + 0.000318 = accumulated_cost
    0.00122745 (gpt-4o-mini's prices: 3778 x 0.15 + 36 x 0.6 per million is
    the first); execution_status finished, max_iterations 500; the terminal
    command exits 0 and finish is no error."""
    runs, calls = imported(tmp_path, GPT.parent)
    assert len(runs) == 1
    run = runs.iloc[0]
    assert (run["run_id"], run["source"], run["model"], run["steps"], run["step_limit"]) == (
        "cd945624-03b9-487e-bdd4-018e3f531dfd", "openhands-sdk", "openai/gpt-4o-mini", 3, 500)
    assert (run["exit"], category(run["exit"])) == ("finished", "agent")
    assert calls[TOKENS].values.tolist() == [[3778, 0, 0, 36, 0], [157, 3712, 0, 32, 0],
                                             [96, 3840, 0, 26, 0]]
    assert calls["cost_usd"].tolist() == pytest.approx([0.0005883, 0.00032115, 0.000318],
                                                       rel=1e-12)
    assert run["cost_usd"] == pytest.approx(0.00122745, rel=1e-12)
    assert calls["latency_s"].tolist() == pytest.approx([1.8272709846496582,
                                                         1.156938076019287,
                                                         1.3530051708221436])
    assert [[t["name"] for t in c] for c in calls["tool_calls"]] == [["terminal"], ["finish"],
                                                                     []]
    assert [[t["error"] for t in c] for c in calls["tool_calls"]] == [[False], [False], []]
    assert calls["tool_calls"][0][0]["id"] == "call_KaQ0kUcBb5tbMzhxbIx9dvoZ"
    # the user's second message answers the finish call; the last call's text is its answer
    assert calls["observation_tokens"].tolist()[1] > 0 and calls["text_tokens"].tolist()[2] > 0
    assert run["duration_s"] == pytest.approx(4.522201, abs=1e-6)  # 11:24:45.292853 -> 49.815054


def test_a_restored_conversation_whose_stats_lost_two_responses_keeps_them_unknown(
        tmp_path: Path) -> None:
    """The restore probe (the SDK with its LLM transport stubbed): three finish
    responses, but the stats hold one token usage (resp_6d43cb5108: prompt
    10, completion 5) and one cost (4.5e-06): the other two calls' usage is
    unknown, and the run's totals and cost are the recorded accumulated ones."""
    runs, calls = imported(tmp_path, PROBE)
    run = runs.iloc[0]
    assert (run["run_id"], run["steps"], run["exit"]) == (
        "a3f2edad-6f59-4a2f-820c-babb09f93b3d", 3, "finished")
    assert calls["input_tokens"].isna().tolist() == [False, True, True]
    assert calls.loc[0, TOKENS].tolist() == [10, 0, 0, 5, 0]
    assert (run["input_tokens"], run["output_tokens"]) == (10, 5)
    assert run["cost_usd"] == pytest.approx(4.5e-06)
    assert calls["cost_usd"].isna().tolist() == [False, True, True]
    assert [len(c) for c in calls["tool_calls"]] == [1, 1, 1]


def test_an_event_list_with_stats_snapshots_holds_their_totals(tmp_path: Path) -> None:
    """The goal-judge fixture (JSON Lines; litellm_proxy/minimax-m2.7): two
    actions with their own response ids are two calls, of unknown usage (the
    stats updates are snapshots: no per-response lists); the run's totals are
    the last snapshot's (prompt 107458 with 68193 cached, completion 1347);
    accumulated_cost 0.0 is no price (the SDK records no cost it cannot
    compute), so the run's cost is unknown; the last execution_status update
    says running. The first command's observation has is_error true, the
    second's exit_code 1: both are tool errors."""
    runs, calls = imported(tmp_path, SDK / "goal-events.jsonl")
    run = runs.iloc[0]
    assert (run["steps"], run["exit"], run["model"]) == (2, "running",
                                                         "litellm_proxy/minimax-m2.7")
    assert calls["input_tokens"].isna().all()
    assert run[TOKENS].tolist() == [107458 - 68193, 68193, 0, 1347, 0]
    assert pd.isna(run["cost_usd"])
    assert [[t["error"] for t in c] for c in calls["tool_calls"]] == [[True], [True]]


def test_a_state_without_its_events_is_skipped_as_no_trajectory(tmp_path: Path) -> None:
    """openhands-sdk 1.11.5's base_state.json alone (the repository keeps no
    events beside it): a skip, not a run of no calls."""
    collector = openhands_sdk.Collector()
    path = SDK / "v1_11_5_cli_default" / "base_state.json"
    collector.add(read_json(path)[0], path, str(path))
    (skip,) = collector.runs()
    assert (skip.reason, skip.run) == (NO_TRAJECTORY, "11111111-2222-3333-4444-555555555555")


def error_event(code: str, detail: str) -> dict:
    """A ConversationErrorEvent as LocalConversation emits it on a run limit."""
    return {"id": "0b8a5d6e-1f2a-4c3b-9d4e-5f6a7b8c9d0e", "timestamp": "2026-02-05T11:24:49.900000",
            "source": "environment", "code": code, "detail": detail,
            "kind": "ConversationErrorEvent"}


def test_a_conversation_stopped_at_its_iteration_limit_is_a_step_limit(tmp_path: Path) -> None:
    """The real conversation as LocalConversation leaves it when its run loop
    reaches max_iteration_per_run (3 here): execution_status error and a
    ConversationErrorEvent MaxIterationsReached; the exit is the code, which
    calibration counts as the step limit. The same events as a JSON list
    (no status update) take the code too."""
    folder = copy_of(GPT, tmp_path)
    state = json.loads((folder / "base_state.json").read_text())
    state.update(execution_status="error", max_iterations=3)
    (folder / "base_state.json").write_text(json.dumps(state))
    stop = error_event("MaxIterationsReached", "Agent reached maximum iterations limit (3).")
    (folder / "events" / f"event-00008-{stop['id']}.json").write_text(json.dumps(stop))
    runs, _ = imported(tmp_path, folder)
    run = runs.iloc[0]
    assert (run["exit"], category(run["exit"]), run["step_limit"], run["steps"]) == (
        "MaxIterationsReached", "steps", 3, 3)
    listed = [json.loads(p.read_text()) for p in events_of(folder)]
    (tmp_path / "list.json").write_text(json.dumps(listed))
    import_traces([tmp_path / "list.json"], tmp_path / "out2")
    runs2, calls2 = read_traces(tmp_path / "out2")
    assert (runs2.iloc[0]["exit"], len(calls2)) == ("MaxIterationsReached", 3)
    assert calls2["input_tokens"].isna().all()  # a list without stats: usage unknown
    assert category("MaxBudgetReached") == "money" and category("stuck") == "no_progress"


def test_parallel_tool_calls_of_one_response_are_one_call(tmp_path: Path) -> None:
    """Two ActionEvents in a row with one llm_response_id (the SDK emits a
    response's actions before it runs them, and reads them back as one
    assistant message) are one call with both tool calls; each answered by
    its observation."""
    folder = copy_of(GPT, tmp_path)
    files = events_of(folder)
    action = json.loads(files[2].read_text())
    observation = json.loads(files[3].read_text())
    twin = dict(action, id="0c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f", tool_call_id="call_twin",
                tool_call=dict(action["tool_call"], id="call_twin"))
    twin_result = dict(observation, id="1d2e3f4a-5b6c-4d7e-9f0a-1b2c3d4e5f6a",
                       tool_call_id="call_twin", action_id=twin["id"],
                       observation=dict(observation["observation"], exit_code=2,
                                        metadata=dict(observation["observation"]["metadata"],
                                                      exit_code=2)))
    listed = [json.loads(p.read_text()) for p in files]
    listed[3:3] = [twin]
    listed[5:5] = [twin_result]
    (tmp_path / "events.jsonl").write_text("\n".join(json.dumps(e) for e in listed) + "\n")
    runs, calls = imported(tmp_path, tmp_path / "events.jsonl")
    assert runs.iloc[0]["steps"] == 3
    first = calls["tool_calls"][0]
    assert [(t["id"], t["error"]) for t in first] == [("call_KaQ0kUcBb5tbMzhxbIx9dvoZ", False),
                                                      ("call_twin", True)]


def test_a_response_whose_event_is_lost_is_still_a_call_in_its_place(tmp_path: Path) -> None:
    """The finish action's file truncated (and skipped, named): its response
    (prompt 3869, 3712 cached, completion 32) is still in token_usages, so it
    is a call between the other two, without a tool call; the import reports
    the file, and --strict refuses it with exit 2 naming it."""
    folder = copy_of(GPT, tmp_path)
    lost = events_of(folder)[4]
    lost.write_text(lost.read_text()[:200])
    report = import_traces([folder], tmp_path / "out")
    assert [(s.file, s.reason) for s in report.skips] == [(str(lost), INVALID_JSON)]
    runs, calls = read_traces(tmp_path / "out")
    assert calls[TOKENS].values.tolist()[1] == [157, 3712, 0, 32, 0]
    assert [len(c) for c in calls["tool_calls"]] == [1, 0, 0]
    assert runs.iloc[0]["cost_usd"] == pytest.approx(0.00122745)


def test_malformed_files_are_refused_with_exit_2_naming_file_and_field(
        tmp_path: Path, capsys) -> None:
    """A truncated event file under --strict, and a token count of the wrong
    type in base_state.json: exit 2, the message names the file (and the
    field), never a traceback."""
    folder = copy_of(GPT, tmp_path)
    lost = events_of(folder)[2]
    lost.write_text(lost.read_text()[:-40])
    status, err = cli(["traces", "import", str(folder), "--out", str(tmp_path / "o1"),
                       "--strict", "--quiet"], capsys)
    assert status == 2 and lost.name in err and "truncated JSON" in err
    assert "Traceback" not in err and not (tmp_path / "o1").exists()

    other = copy_of(PROBE, tmp_path)
    state = json.loads((other / "base_state.json").read_text())
    state["stats"]["usage_to_metrics"]["probe"]["token_usages"][0]["prompt_tokens"] = [10]
    (other / "base_state.json").write_text(json.dumps(state))
    status, err = cli(["traces", "import", str(other), "--out", str(tmp_path / "o2"),
                       "--quiet"], capsys)
    assert status == 2 and "Traceback" not in err
    assert "base_state.json" in err and "token_usages[0]: prompt_tokens is [10]" in err


def test_wrong_typed_event_fields_are_read_as_missing_or_refused_naming_the_field(
        tmp_path: Path, capsys) -> None:
    """An action whose tool_call is text, whose llm_response_id is an object
    and timestamp a number, and an observation that is text answering a list
    of ids: those are read as missing (3 calls still; the command's result
    unknown). A tool_name that is a number besides is no tool's name: the run
    is refused with exit 2, naming the field; never a traceback."""
    folder = copy_of(GPT, tmp_path)
    files = events_of(folder)
    action = json.loads(files[2].read_text())
    action.update(tool_call="terminal", llm_response_id={"id": 1}, timestamp=5)
    files[2].write_text(json.dumps(action))
    observation = json.loads(files[3].read_text())
    observation.update(observation="done", tool_call_id=["x"])
    files[3].write_text(json.dumps(observation))
    status, err = cli(["traces", "import", str(folder), "--out", str(tmp_path / "o"),
                       "--quiet"], capsys)
    assert status == 0 and "Traceback" not in err
    runs, calls = read_traces(tmp_path / "o")
    assert runs.iloc[0]["steps"] == 3
    first = calls["tool_calls"][0][0]
    assert (first["name"], first["result_tokens"]) == ("terminal", None)
    files[2].write_text(json.dumps(dict(action, tool_name=7)))
    status, err = cli(["traces", "import", str(folder), "--out", str(tmp_path / "o2"),
                       "--quiet"], capsys)
    assert status == 2 and "Traceback" not in err
    assert "base_state.json" in err and "tool_calls.name is 7" in err


SAMPLE = json.loads(json.dumps(
    [json.loads(p.read_text()) for p in events_of(GPT)]
    + [{"id": "2e3f4a5b-6c7d-4e8f-8a9b-2c3d4e5f6a7b", "timestamp": "2026-02-05T11:24:49.9",
        "source": "environment", "key": "full_state",
        "value": json.loads((GPT / "base_state.json").read_text()),
        "kind": "ConversationStateUpdateEvent"}]))
"""The real conversation as an event list whose last event is a full_state
update (the agent server's snapshot of the state, stats included)."""


def test_an_event_list_with_a_full_state_reads_like_the_folder(tmp_path: Path) -> None:
    runs, calls = imported(tmp_path, GPT.parent)
    (tmp_path / "list.json").write_text(json.dumps(SAMPLE))
    import_traces([tmp_path / "list.json"], tmp_path / "out2")
    runs2, calls2 = read_traces(tmp_path / "out2")
    assert runs2.iloc[0]["run_id"] == runs.iloc[0]["run_id"]
    assert calls2[TOKENS].values.tolist() == calls[TOKENS].values.tolist()
    assert runs2.iloc[0]["exit"] == "finished"


def test_mutated_event_lists_import_or_are_refused_never_a_traceback(tmp_path: Path) -> None:
    check_mutations("openhands-sdk-events", SAMPLE, tmp_path)


def test_v0_and_v1_files_are_each_claimed_by_their_own_importer() -> None:
    """By content: the SDK's events (``kind``, an object as ``action`` /
    ``observation``) are not OpenHands V0 events, and V0's (no ``kind``, the
    type named by text) are not the SDK's, whether one per file or listed."""
    for path in [GPT / "base_state.json", *events_of(GPT), SDK / "goal-events.jsonl"]:
        values = read_json(path)
        assert openhands.detect(values, path) is None, path
        assert openhands_sdk.detect(values) is not None, path
    v0_store = REAL / "openhands" / "max_iterations_store" / "sessions" / "basic_gui_mode"
    for path in [REAL / "openhands" / "basic.json", REAL / "openhands" /
                 "max_iterations_output.jsonl", *sorted((v0_store / "events").glob("*.json"))]:
        values = read_json(path)
        assert openhands_sdk.detect(values) is None, path
        assert openhands.detect(values, path) is not None, path


def test_v0_and_v1_imported_together_keep_their_sources(tmp_path: Path) -> None:
    runs, _ = imported(tmp_path, REAL / "openhands" / "basic.json", GPT.parent)
    assert sorted(runs["source"]) == ["openhands", "openhands-sdk"]
