"""``python -m sim calibrate``: bad input is a clear message and exit 2, a fit
that does not hold is exit 1 with the report saying which and why, and the
outputs are where the command says."""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.traces.writer import TraceWriter


def write_folder(folder, runs: list[RunRecord]) -> str:
    """A trace folder holding ``runs`` (the trace model's own writer)."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = TraceWriter(folder)
    for run in runs:
        writer.add(run)
    writer.close()
    return str(folder)


def a_run(i: int, steps: int, *, usage: bool = True, prefix: int = 3000) -> RunRecord:
    """A run of ``steps`` calls: tool calls whose results of 150 tokens grow the
    prompt, then a final answer; the agent ends it."""
    calls = []
    for n in range(steps):
        last = n == steps - 1
        tools = [] if last else [ToolCallRecord("lookup", f"c{i}_{n}", f'{{"q":{n}}}', 150,
                                                None, False, 0.1)]
        prompt = prefix + n * 170 if usage else 0
        calls.append(CallRecord(prompt, 0, 0, 20 if usage else 0, 0, model="m1",
                                cost_usd=None, finish_reason="stop" if last else "tool_calls",
                                started_s=n * 2.0, latency_s=1.0, text_tokens=20,
                                tool_calls=tools, observation_tokens=0))
    return RunRecord(f"run{i}", "tau2", "synthetic.json", calls, task_id=f"t{i}", model="m1",
                     exit="agent_stop", resolved=True, step_limit=200)


def run_cli(*argv: str) -> int:
    return main(["calibrate", *argv, "--quiet"])


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: str(d), "missing runs.parquet"),
    (lambda d: str(d / "nope"), "no such directory"),
    (lambda d: write_folder(d / "t", []), "has no runs"),
    (lambda d: write_folder(d / "t", [a_run(0, 5)]), "at least 10 runs"),
    (lambda d: write_folder(d / "t", [a_run(i, 5, usage=False) for i in range(30)]),
     "no run records any token usage"),
], ids=["empty folder", "no folder", "no runs", "one run", "no usage"])
def test_bad_trace_folders_are_exit_2_with_a_clear_message(tmp_path, capsys, make, message):
    """An empty folder, a missing one, no runs, one run, runs without usage:
    exit 2, one line naming the folder and what is wrong, nothing written."""
    folder = make(tmp_path)
    assert run_cli(folder, "--out", str(tmp_path / "out.yaml")) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize(("flags", "message"), [
    (["--classes", "0"], "--classes"), (["--classes", "many"], "--classes"),
    (["--holdout-fraction", "1.0"], "--holdout-fraction"), (["--seed", "-1"], "--seed"),
    (["--evaluations", "-2"], "--evaluations"),
])
def test_bad_options_are_exit_2(tmp_path, capsys, flags, message):
    """Options out of range: exit 2 naming the option."""
    folder = write_folder(tmp_path / "t", [a_run(i, 4 + i % 5) for i in range(20)])
    assert run_cli(folder, "--out", str(tmp_path / "out.yaml"), *flags) == 2
    assert message in capsys.readouterr().err


def test_out_must_be_a_yaml_file(tmp_path, capsys):
    folder = write_folder(tmp_path / "t", [a_run(i, 5) for i in range(20)])
    assert run_cli(folder, "--out", str(tmp_path / "out.txt")) == 2
    assert ".yaml" in capsys.readouterr().err


def test_a_fit_that_does_not_hold_is_exit_1_and_says_which_and_why(tmp_path, capsys):
    """Runs of 3 or of 40 steps and nothing between cannot be one lognormal
    class: exit 1; the table, calibration.json and calibration.md name the
    rejected metrics with their distances, critical values and quantiles."""
    runs = [a_run(i, 3 if i % 2 else 40) for i in range(120)]
    folder = write_folder(tmp_path / "t", runs)
    out = tmp_path / "fit.yaml"
    status = main(["calibrate", folder, "--out", str(out), "--classes", "1", "--quiet",
                   "--evaluations", "8", "--search-runs", "300"])
    assert status == 1
    printed = capsys.readouterr().out
    assert "rejected" in printed and "steps per run" in printed
    report = tmp_path / "fit_calibration"
    summary = json.loads((report / "calibration.json").read_text())
    assert summary["verdict"]["status"] == 1
    assert summary["metrics"]["steps"]["rejected"]
    assert any(why.startswith("steps per run: KS") for why in summary["verdict"]["rejected"])
    assert "**Fit rejected**" in (report / "calibration.md").read_text()
    assert out.exists()


def test_json_format_prints_the_summary_and_an_accepted_fit_is_exit_0(tmp_path, capsys):
    """Homogeneous runs fit: exit 0; --format json prints calibration.json on stdout."""
    runs = [a_run(i, 4 + (i * 7) % 6) for i in range(80)]
    folder = write_folder(tmp_path / "t", runs)
    out = tmp_path / "fit.yaml"
    status = main(["calibrate", folder, "--out", str(out), "--classes", "1", "--quiet",
                   "--format", "json", "--evaluations", "8", "--search-runs", "300",
                   "--report", str(tmp_path / "rep")])
    summary = json.loads(capsys.readouterr().out)
    assert status == summary["verdict"]["status"] == 0
    assert summary == json.loads((tmp_path / "rep" / "calibration.json").read_text())
    assert summary["runs"] == {"fitted": 56, "held_out": 24, "dropped": {}}
