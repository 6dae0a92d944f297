"""Harbor multi-step trials (sim/traces/harbor.py).

A task with ``steps`` runs the agent once per step (Harbor 0.13 on,
``harbor/trial/multi_step.py``): each step gets its own instruction, agent
session and verifier, and Harbor moves the step's logs to
``TRIAL/steps/STEP/agent/`` and ``TRIAL/steps/STEP/verifier/``; the trial's
``result.json`` (``TrialResult``) holds ``step_results[]`` (``StepResult``:
``step_name``, ``agent_result``, ``verifier_result``, ``exception_info``,
``agent_execution``, ``verifier``) and no trial-level ``agent_result``. The
layout and result below are trimmed from a job written with Harbor 0.26.0's
own models. Each step's agent session is a run ``TRIAL/STEP`` with the trial's
task and the step's verdict, exception, cost and times."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from sim.traces import import_traces, read_traces
from tests.test_traces_harbor import claude_trajectory, trial_result


def step_result(name: str, start: str, end: str, reward: float | None,
                exception: str | None = None) -> dict:
    return {"step_name": name,
            "agent_result": {"n_input_tokens": 11000, "n_cache_tokens": 7000,
                             "n_output_tokens": 200, "cost_usd": 0.05,
                             "model_usage": None, "rollout_details": None, "metadata": None},
            "verifier_result": None if reward is None else {"rewards": {"reward": reward}},
            "exception_info": None if exception is None else {
                "exception_type": exception, "exception_message": "timed out",
                "exception_traceback": "", "occurred_at": end},
            "agent_execution": {"started_at": start, "finished_at": end},
            "verifier": None}


def multi_step_trial(job: Path, trial: str, task: str, steps: list[dict],
                     reward_txt: dict[str, str] | None = None) -> None:
    """TRIAL/result.json with step_results, TRIAL/steps/STEP/agent/trajectory.json
    (final_metrics without a cost: the step's agent_result has it)."""
    for step in steps:
        agent = job / trial / "steps" / step["step_name"] / "agent"
        agent.mkdir(parents=True)
        doc = copy.deepcopy(claude_trajectory())
        doc["session_id"] = f"{trial}-{step['step_name']}"
        del doc["final_metrics"]["total_cost_usd"]
        (agent / "trajectory.json").write_text(json.dumps(doc, indent=2))
    for name, text in (reward_txt or {}).items():
        verifier = job / trial / "steps" / name / "verifier"
        verifier.mkdir(parents=True)
        (verifier / "reward.txt").write_text(text)
    result = {"schema_version": 1, "id": "f584", "task_name": task, "trial_name": trial,
              "trial_uri": f"file://job/{trial}", "task_id": {"path": f"tasks/{task}"},
              "source": None, "task_checksum": "abc", "config": {},
              "agent_info": {"name": "claude-code", "version": "2.0.31", "model_info": None},
              "agent_result": None, "verifier_result": {"rewards": {"reward": 0.5}},
              "exception_info": None, "started_at": "2026-01-01T12:00:00Z",
              "finished_at": "2026-01-01T12:05:00Z", "step_results": steps}
    (job / trial / "result.json").write_text(json.dumps(result, indent=2))


def test_each_step_of_a_multi_step_trial_is_a_run_with_the_trials_task(tmp_path):
    """Two trials of steps build and test: 4 runs (the old reading named them
    'build' and 'test' and skipped the second trial's 2 as duplicates, task
    None, times from the trajectory's steps). multi__B/test raised
    AgentTimeoutError without a verdict; multi__C/test's verdict is its
    verifier/reward.txt ("1"); each step's cost is its agent_result's 0.05;
    its time runs from its agent's start to its agent's end (90 s, 80 s)."""
    job = tmp_path / "job"
    multi_step_trial(job, "multi__B", "task-b", [
        step_result("build", "2026-01-01T12:00:00Z", "2026-01-01T12:01:30Z", 1.0),
        step_result("test", "2026-01-01T12:01:40Z", "2026-01-01T12:03:00Z", None,
                    "AgentTimeoutError")])
    multi_step_trial(job, "multi__C", "task-c", [
        step_result("build", "2026-01-01T12:00:00Z", "2026-01-01T12:01:30Z", 0.0),
        step_result("test", "2026-01-01T12:01:40Z", "2026-01-01T12:03:00Z", None)],
        reward_txt={"test": "1"})
    report = import_traces([job], tmp_path / "out")
    assert report.runs == 4 and not report.skips
    runs, _ = read_traces(tmp_path / "out")
    by_id = runs.set_index("run_id")
    assert sorted(by_id.index) == ["multi__B/build", "multi__B/test",
                                   "multi__C/build", "multi__C/test"]
    assert list(by_id.loc[["multi__B/build", "multi__C/test"], "task_id"]) == ["task-b",
                                                                               "task-c"]
    assert by_id["resolved"].to_dict() == {"multi__B/build": True, "multi__B/test": None,
                                           "multi__C/build": False, "multi__C/test": True}
    assert by_id.loc["multi__B/test", "exit"] == "AgentTimeoutError"
    assert by_id["exit"].isna().to_dict() == {"multi__B/build": True, "multi__B/test": False,
                                              "multi__C/build": True, "multi__C/test": True}
    assert set(by_id["cost_usd"]) == {0.05}
    assert str(by_id.loc["multi__C/test", "started_at"]) == "2026-01-01 12:01:40+00:00"
    assert list(by_id.loc[["multi__B/build", "multi__B/test"], "duration_s"]) == [90.0, 80.0]


def test_a_trial_exception_belongs_to_its_last_step_and_a_verifier_ends_a_step(tmp_path):
    """A trial-level exception_info (the trial stopped after step build) is
    build's exit; build's verifier timing (finished 12:02:00) ends its run: 120 s."""
    job = tmp_path / "job"
    build = step_result("build", "2026-01-01T12:00:00Z", "2026-01-01T12:01:30Z", 1.0)
    build["verifier"] = {"started_at": "2026-01-01T12:01:31Z",
                         "finished_at": "2026-01-01T12:02:00Z"}
    multi_step_trial(job, "multi__D", "task-d", [build])
    result = json.loads((job / "multi__D" / "result.json").read_text())
    result["exception_info"] = {"exception_type": "CancelledError", "exception_message": "",
                                "exception_traceback": "", "occurred_at": "2026-01-01T12:02:01Z"}
    (job / "multi__D" / "result.json").write_text(json.dumps(result))
    import_traces([job], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    row = runs.set_index("run_id").loc["multi__D/build"]
    assert (row["exit"], row["duration_s"], bool(row["resolved"])) == ("CancelledError",
                                                                        120.0, True)


def test_a_single_step_trial_in_a_job_named_steps_is_still_its_trial(tmp_path):
    """A job folder that happens to be called "steps": steps/TRIAL/agent/
    beside TRIAL/result.json is a trial (a step folder has no result.json):
    run_id TRIAL, task from its result."""
    trial = tmp_path / "steps" / "hello__AbC12"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "trajectory.json").write_text(json.dumps(claude_trajectory()))
    (trial / "result.json").write_text(json.dumps(trial_result("hello", 1.0)))
    import_traces([tmp_path / "steps"], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert list(runs["run_id"]) == ["hello__AbC12"] and list(runs["task_id"]) == ["hello"]
