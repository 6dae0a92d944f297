"""``python -m sim calibrate``: bad input is a clear message and exit 2, a fit
that does not hold is exit 1 with the report saying which and why, and the
outputs are where the command says."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sim.cli import main
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
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
        calls.append(CallRecord(Usage(input_tokens=prompt, output_tokens=20 if usage else 0),
                                model="m1",
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
    (["--folds", "1"], "--folds"), (["--folds", "15"], "--folds"),
    (["--seed", "-1"], "--seed"), (["--evaluations", "-2"], "--evaluations"),
    (["--by", "model", "--classes", "2"], "--by model and --classes"),
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


@pytest.mark.slow  # calibrations at full size: 25-40 s each
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
    assert summary["runs"] == {"fitted": 80, "held_out": 80, "folds": [16] * 5, "dropped": {},
                               "repaired": {}}
    assert summary["structure"]["forced"] and summary["structure"]["options"] == "--classes 1"
    # within the sample's cap: every run searched, no sampling error from the runs
    assert summary["sample"] == {"per_model": 2000, "runs": 80, "all": True,
                                 "searched": [64] * 5, "held_out": [16] * 5}
    assert summary["search"]["sampled_runs"] == 80
    assert summary["search"]["sampling_error"]["runs"] == 0.0
    assert "stratified sample" not in (tmp_path / "fit.yaml").read_text()


def two_models(tmp_path):
    """Runs of two models: m1 short and cheap, m2 long, priced ten times higher."""
    runs = []
    for i in range(60):
        run = a_run(i, 4 + (i * 7) % 5 if i % 2 else 12 + (i * 5) % 7)
        if i % 2 == 0:
            run.calls = [replace(c, model="m2") for c in run.calls]
            run.model = "m2"
        runs.append(run)
    return write_folder(tmp_path / "t", runs)


@pytest.mark.slow  # calibrations at full size: 25-40 s each
def test_the_default_structure_is_chosen_by_cross_validated_loss_and_said(tmp_path, capsys):
    """Without --classes or --by, each candidate structure is cross-validated;
    the report names the one chosen, why, and every candidate's losses per
    fold; the ladder of budgets has forecast and replay for each rung."""
    folder = two_models(tmp_path)
    status = main(["calibrate", folder, "--out", str(tmp_path / "fit.yaml"), "--quiet",
                   "--folds", "3", "--evaluations", "0", "--search-runs", "50",
                   "--format", "json"])
    summary = json.loads(capsys.readouterr().out)
    assert status == summary["verdict"]["status"]
    structure = summary["structure"]
    assert not structure["forced"]
    assert set(structure["losses"]) == {"one class", "one class per model", "clusters (by BIC)"}
    assert all(len(v["folds"]) == 3 for v in structure["losses"].values())
    means = {k: v["mean"] for k, v in structure["losses"].items()}
    assert means[structure["chosen"]] <= min(means.values()) + max(
        v["se"] for v in structure["losses"].values())
    assert structure["chosen"] in structure["why"]
    labels = [r["budget"] for r in summary["ladder"]]
    assert {"p50 steps", "p95 prompt tokens", "100k prompt tokens"} <= set(labels)
    for rung in summary["ladder"]:
        for side in ("forecast", "replay"):
            assert 0 <= rung[side]["stopped"] <= 1
            assert len(rung["folds"]) == 3
    md = (tmp_path / "fit_calibration" / "calibration.md").read_text()
    assert "## Structure" in md and "## Budgets: forecast against replay" in md
    assert "## Folds" in md
    # the user's own runs' accuracy beside the sampling floor, and the power
    assert "## Accuracy against the sampling floor" in md
    accuracy = {row["key"]: row for row in summary["accuracy"]}
    assert {"stopped", "lost", "steps", "prompt", "output"} <= set(accuracy)  # no cost here
    assert all(row["error"] >= 0 and row["floor"] >= 0 for row in accuracy.values())
    at_shift = summary["verdict"]["power"]["at_shift"]
    assert {"steps", "prompt", "output"} <= set(at_shift)
    assert all(0 <= v <= 1 for v in at_shift.values())


@pytest.mark.slow  # calibrations at full size: 25-40 s each
def test_same_traces_options_and_seed_give_identical_outputs(tmp_path, capsys):
    """Two calibrations with the same seed write the same scenario and report
    data; another seed deals other folds."""
    folder = two_models(tmp_path)
    texts = []
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        assert main(["calibrate", folder, "--out", str(tmp_path / f"{name}.yaml"), "--quiet",
                     "--by", "model", "--folds", "3", "--evaluations", "0", "--search-runs",
                     "50", "--seed", seed, "--no-ladder", "--name", "fit"]) in (0, 1)
        texts.append(((tmp_path / f"{name}.yaml").read_text(),
                      (tmp_path / f"{name}_calibration" / "calibration.json").read_text()))
    capsys.readouterr()
    assert texts[0][0] == texts[1][0]
    assert texts[0][1] == texts[1][1]
    assert texts[0][1] != texts[2][1]


def test_an_output_that_cannot_be_written_is_exit_2_before_any_fitting(tmp_path, capsys,
                                                                       monkeypatch):
    """--out in a folder that cannot be made (its parent is a file) is refused at
    once, naming the folder: calibration is not run and nothing is written."""
    import sim.calibration.pipeline as pipeline

    def never(*args, **kwargs):
        raise AssertionError("calibration ran before the output was checked")

    monkeypatch.setattr(pipeline, "calibrate", never)
    folder = write_folder(tmp_path / "traces", [a_run(i, 5 + i % 7) for i in range(30)])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    status = run_cli(folder, "--out", str(blocker / "fit.yaml"))
    err = capsys.readouterr().err
    assert status == 2
    assert f"cannot write {blocker}" in err and "nothing was fitted" in err
    assert "Traceback" not in err
    assert not (tmp_path / "fit_calibration").exists()


def test_runs_that_failed_before_their_first_reply_are_fitted_not_refused(tmp_path, capsys):
    """Runs with no model call (a provider error before the first reply) are
    kept: they count in the exit mix, and even a class made only of them fits
    (a fault at the first call; its probability at most 1), exit 0 or 1."""
    from dataclasses import replace

    runs = [a_run(i, 4 + i % 9) for i in range(40)]
    runs += [replace(a_run(100 + i, 1), calls=[], exit="agent_error", resolved=False)
             for i in range(8)]
    folder = write_folder(tmp_path / "t", runs)
    status = run_cli(folder, "--folds", "2", "--evaluations", "0", "--classes", "2",
                     "--out", str(tmp_path / "fit.yaml"), "--format", "json", "--no-ladder")
    out = capsys.readouterr()
    assert status in (0, 1), out.err
    summary = json.loads(out.out)
    assert summary["runs"]["fitted"] == 48 and not summary["runs"]["dropped"]


def test_the_verdict_table_says_n_a_where_no_run_records_an_outcome():
    """Runs without a resolved label give no replayed successes lost (NaN);
    stdout printed ``replay nan%`` where the report says n/a, and an exit mix
    without a p-value ``nan``. Both now read as the report does."""
    from types import SimpleNamespace

    from sim.api.calibrating import table_lines

    budget = SimpleNamespace(kind="tokens", label="50k prompt tokens")
    rung = SimpleNamespace(budget=budget, forecast={"lost": 0.347, "stopped": 0.348},
                           replay={"lost": float("nan"), "stopped": 0.417})
    exits = SimpleNamespace(tv=0.001, critical=0.003, p_adjusted=None, rejected=False)
    result = SimpleNamespace(structure=SimpleNamespace(reason="one class"), metrics=[],
                             exits=exits, ladder=[rung])
    lines = table_lines(result)
    assert lines[-1] == ("budget 50k prompt tokens    successes lost: forecast 34.7%, "
                         "replay n/a; stopped 34.8% vs 41.7%")
    assert lines[-2].endswith("untested") and "nan" not in "\n".join(lines)


def test_a_run_without_an_exit_label_that_answered_is_the_agents_end(tmp_path):
    """OpenTelemetry-style runs record no exit when they end without error.
    Every such run was category ``other``, which no fitted world makes, so
    the exit mix rejected a good fit (TV 1.0). A run of a source that labels
    none of its runs, whose last call answered, is now the agent's end; one
    whose last call asked for a tool (cut off) stays ``other``, and so does
    an unlabelled run of a source that labels others (tau2's leaderboard
    runs: in a conversation the last answer does not say who ended it)."""
    from dataclasses import replace

    from sim.calibration.data import load

    answered = [replace(a_run(i, 4), exit=None, source="otel-genai") for i in range(3)]
    cut = replace(a_run(9, 4), exit=None, source="otel-genai")
    cut.calls[-1] = replace(cut.calls[-1], tool_calls=a_run(9, 4).calls[0].tool_calls,
                            finish_reason="tool_calls")
    labelled = [replace(a_run(10 + i, 4), exit="max_steps") for i in range(7)]
    quiet = replace(a_run(20, 4), exit=None)
    traces = load(write_folder(tmp_path / "t", [*answered, cut, *labelled, quiet]))
    assert dict(zip(traces.runs["run_id"], traces.runs["category"], strict=True)) == {
        "run0": "agent", "run1": "agent", "run2": "agent", "run9": "other",
        **{f"run{10 + i}": "steps" for i in range(7)}, "run20": "other"}
