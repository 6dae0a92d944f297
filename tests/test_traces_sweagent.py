"""SWE-agent ``.traj`` files (sim/traces/sweagent.py): run-level usage only.

The fixtures are shaped like what SWE-agent writes (``json.dumps(data,
indent=2)`` of ``get_trajectory_data()``): a 1.x trajectory under
``RUN_DIR/INSTANCE/INSTANCE.traj`` with its ``replay_config`` JSON string and
``info.swe_agent_version``, and a 0.x one (``environment`` ``swe_main``, steps
of action/observation/response/state/thought) as in SWE-agent's own
tests/test_data/trajectories."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz_traces import REPLACEMENTS, run_case, write_case
from sim.traces import import_traces, read_traces, sweagent
from sim.traces.model import PROVENANCE_FIELDS, UNKNOWN, Usage, approx_tokens, sha256_text

STEPS_V1 = [
    ("Let me find the file.", 'find_file "missing_colon.py"', "Found 1 matches", 0.25),
    ("Open it.", "open tests/missing_colon.py", "[File: tests/missing_colon.py (10 lines)]",
     0.5),
    ("Fix the colon.", "edit 4:4\ndef division(a: float, b: float) -> float:\nend_of_edit",
     "File updated.", 1.0),
    ("Done.", "submit", "diff --git a/tests/missing_colon.py", 2.0),
]


def v1_doc() -> dict:
    """A 1.x trajectory: 4 steps, 5 API calls (one beyond the steps)."""
    config = {"agent": {"model": {"name": "claude-sonnet-4-20250514",
                                  "per_instance_cost_limit": 3.0,
                                  "per_instance_call_limit": 0, "temperature": 0.0}},
              "problem_statement": {"id": "repo__issue-1", "type": "text"},
              "env": {"deployment": {"type": "docker"}}}
    return {
        "trajectory": [{"action": action, "observation": observation, "response": response,
                        "thought": response, "execution_time": seconds, "state": {},
                        "query": [{"role": "system", "content": "..."}], "extra_info": {}}
                       for response, action, observation, seconds in STEPS_V1],
        "history": [{"role": "system", "content": "You are...", "agent": "main",
                     "message_type": "system"}],
        "info": {"swe_agent_hash": "abc", "swe_agent_version": "1.1.0",
                 "swe_rex_version": "1.2.0", "swe_rex_hash": "def",
                 "submission": "diff --git a/tests/missing_colon.py",
                 "exit_status": "submitted",
                 "model_stats": {"instance_cost": 0.4213, "tokens_sent": 52861,
                                 "tokens_received": 326, "api_calls": 5},
                 "edited_files30": ""},
        "replay_config": json.dumps(config),
        "environment": "main",
    }


def v0_doc() -> dict:
    """A 0.x trajectory (SWE-agent's own test data shape): 3 steps, 3 calls."""
    return {
        "environment": "swe_main",
        "trajectory": [{"action": f"ls dir{i}\n", "observation": "a b" * (i + 1),
                        "response": f"step {i}", "state": '{"open_file": "n/a"}',
                        "thought": f"step {i}"} for i in range(3)],
        "history": [{"role": "system", "content": "SETTING: ...", "agent": "primary"}],
        "info": {"exit_status": "exit_cost", "submission": None,
                 "model_stats": {"total_cost": 3.1, "instance_cost": 3.05,
                                 "tokens_sent": 9000, "tokens_received": 120,
                                 "api_calls": 3}},
    }


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def test_a_v1_trajectory_is_a_run_of_api_calls_calls_of_unknown_usage(tmp_path):
    """5 API calls, none with usage: 5 calls with every token column and the
    cost unknown (0 in their usage); the run's totals are tokens_sent and
    tokens_received, its cost instance_cost; the call beyond the steps comes last, without
    a tool call."""
    path = write(tmp_path / "run-1" / "repo__issue-1" / "repo__issue-1.traj", v1_doc())
    record = sweagent.run(v1_doc(), path, str(path))
    assert record.source == "swe-agent" and len(record.calls) == 5
    assert all(c.usage == Usage() and c.cost_usd is None for c in record.calls)
    assert all(c.provenance == dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
               for c in record.calls)
    assert record.totals == {"input_tokens": 52861, "output_tokens": 326}
    assert record.cost_usd == 0.4213
    assert [len(c.tool_calls) for c in record.calls] == [1, 1, 1, 1, 0]


def test_v1_run_fields_come_from_info_and_the_replay_config(tmp_path):
    path = write(tmp_path / "run-1" / "repo__issue-1" / "repo__issue-1.traj", v1_doc())
    record = sweagent.run(v1_doc(), path, str(path))
    assert (record.run_id, record.task_id) == ("run-1/repo__issue-1", "repo__issue-1")
    assert record.model == "claude-sonnet-4-20250514"
    assert record.exit == "submitted" and record.resolved is None
    assert (record.cost_limit_usd, record.step_limit) == (3.0, None)  # 0: no limit
    assert record.conventions == {
        "calls": "per-call usage absent: run-level info.model_stats only",
        **sweagent.COUNTED_LOCALLY}


def test_each_steps_action_is_its_calls_tool_call(tmp_path):
    """Named after the command, arguments {"command": action}, the observation
    as its result, execution_time as its duration; the response as the
    call's text."""
    path = write(tmp_path / "x.traj", v1_doc())
    calls = sweagent.run(v1_doc(), path, str(path)).calls
    tools = [c.tool_calls[0] for c in calls[:4]]
    assert [t.name for t in tools] == ["find_file", "open", "edit", "submit"]
    assert tools[2].arguments == json.dumps({"command": STEPS_V1[2][1]},
                                            separators=(",", ":"))
    assert [t.duration_s for t in tools] == [0.25, 0.5, 1.0, 2.0]
    assert [t.result_tokens for t in tools] == [approx_tokens(s[2]) for s in STEPS_V1]
    assert tools[0].result_sha256 == sha256_text("Found 1 matches")
    assert [c.text_sha256 for c in calls[:4]] == [sha256_text(s[0]) for s in STEPS_V1]
    assert calls[4].text_sha256 is None and calls[4].tool_calls == []


def test_a_v0_trajectory_says_its_totals_are_the_providers(tmp_path):
    """0.x (no swe_agent_version): provider-counted totals, the instance id
    from the file name (not in a RUN_DIR/INSTANCE layout), no model."""
    path = write(tmp_path / "gpt4__repo__t-0.00" / "pydicom__pydicom-1458.traj", v0_doc())
    record = sweagent.run(v0_doc(), path, str(path))
    assert (record.run_id, record.task_id) == ("pydicom__pydicom-1458",) * 2
    assert record.model is None and record.exit == "exit_cost"
    assert len(record.calls) == 3 and record.cost_usd == 3.05
    assert record.totals == {"input_tokens": 9000, "output_tokens": 120}
    assert record.conventions["input_tokens"] == sweagent.PROVIDER_COUNTED["input_tokens"]


def test_without_api_calls_there_is_one_call_per_step(tmp_path):
    doc = v0_doc()
    del doc["info"]["model_stats"]["api_calls"]
    doc["info"]["model_stats"]["tokens_received"] = "lots"
    path = write(tmp_path / "x.traj", doc)
    record = sweagent.run(doc, path, str(path))
    assert len(record.calls) == 3
    assert record.totals == {"input_tokens": 9000}  # a count that is not one is left out
    assert record.repairs == [("runs.output_tokens", "wrong type: set to null")]


def test_an_impossible_total_or_cost_is_noted_and_the_run_kept(tmp_path):
    """A negative tokens_sent and a NaN instance_cost: the total left out
    (noted), the cost nulled by the writer and counted: the run imports."""
    doc = v0_doc()
    doc["info"]["model_stats"].update(tokens_sent=-5, instance_cost=float("nan"))
    path = write(tmp_path / "in" / "x.traj", doc)
    record = sweagent.run(doc, path, str(path))
    assert record.totals == {"output_tokens": 120}
    assert record.repairs == [("runs.input_tokens", "negative: set to null")]
    report = import_traces([path], tmp_path / "out")
    assert report.runs == 1
    runs, _ = read_traces(tmp_path / "out")
    assert runs["cost_usd"].isna().all()
    assert report.repairs_by_field()["runs.cost_usd"] == {"not a finite number: set to null": 1}


def test_traj_files_import_by_content_as_swe_agent_runs(tmp_path):
    """Both versions in one folder, found by content: 2 runs of 5 and 3
    steps with their costs and exits."""
    write(tmp_path / "in" / "run-1" / "repo__issue-1" / "repo__issue-1.traj", v1_doc())
    write(tmp_path / "in" / "old" / "pydicom__pydicom-1458.traj", v0_doc())
    report = import_traces([tmp_path / "in"], tmp_path / "out")
    assert report.runs_by_source == {"swe-agent": 2} and report.skips == []
    runs, calls = read_traces(tmp_path / "out")
    runs = runs.set_index("run_id")
    assert runs.loc["run-1/repo__issue-1", "steps"] == 5
    assert runs.loc["pydicom__pydicom-1458", "steps"] == 3
    assert runs["cost_usd"].to_dict() == {"run-1/repo__issue-1": 0.4213,
                                          "pydicom__pydicom-1458": 3.05}
    assert runs["exit"].to_dict() == {"run-1/repo__issue-1": "submitted",
                                      "pydicom__pydicom-1458": "exit_cost"}
    assert len(calls) == 8


def test_a_mini_swe_agent_trajectory_is_not_taken_for_swe_agents():
    mini = {"info": {"exit_status": "Submitted", "model_stats": {"instance_cost": 0.1,
                                                                 "api_calls": 2}},
            "messages": [], "trajectory_format": "mini-swe-agent-1.1"}
    assert not sweagent.detect(mini)
    assert sweagent.detect(v0_doc()) and sweagent.detect(v1_doc())


def test_a_trajectory_without_model_stats_is_not_recognised(tmp_path):
    """Without info.model_stats there is nothing to import: an unknown format,
    counted (exit 2 when it is all there is)."""
    from sim.cli import main

    doc = v0_doc()
    del doc["info"]["model_stats"]
    path = write(tmp_path / "x.traj", doc)
    assert main(["traces", "import", str(path), "--out", str(tmp_path / "out")]) == 2


def test_a_retry_loops_file_says_its_stats_sum_every_attempt(tmp_path):
    """RetryAgent's .traj: the chosen attempt's steps (4) beside model_stats
    summed over both attempts (9 calls): 9 calls, the last 5 without tool
    calls, and a convention note."""
    chosen = v1_doc()
    doc = {"attempts": [v1_doc(), chosen], **chosen}
    doc["info"] = dict(chosen["info"], best_attempt_idx=1,
                       model_stats={"instance_cost": 0.9, "tokens_sent": 100000,
                                    "tokens_received": 700, "api_calls": 9})
    path = write(tmp_path / "x.traj", doc)
    record = sweagent.run(doc, path, str(path))
    assert len(record.calls) == 9 and [len(c.tool_calls) for c in record.calls[3:]] == [
        1, 0, 0, 0, 0, 0]
    assert record.conventions["attempts"] == sweagent.ATTEMPTS[1]
    assert "attempts" not in sweagent.run(v1_doc(), path, str(path)).conventions


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(picks=st.lists(st.tuples(st.sampled_from(("replace", "replace", "swap", "delete")),
                                st.integers(0, 10**6), st.integers(0, 10**6),
                                st.integers(0, 4 * len(REPLACEMENTS))), min_size=1,
                      max_size=3))
def test_mutated_trajectories_exit_0_or_2_and_what_is_written_reads_back(picks):
    """The generator of tests/test_traces_fuzz.py on a 1.x trajectory: values
    replaced (deep nesting, huge or non-finite numbers, wrong types),
    swapped or deleted; every case is imported or refused, never a traceback."""
    work = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        source = write_case(work, "swe-agent.traj", v1_doc(), picks, False)
        outcome, detail = run_case(source, work, 20.0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert outcome in ("ok", "refused"), f"{outcome}: {detail}"
