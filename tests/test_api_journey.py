"""The Python API's journey (sim.import_traces -> sim.calibrate -> sim.replay ->
sim.tune): each step returns its data and the path it wrote, writes what the
command writes, and refuses bad input with the message the command prints.

The runs are sim's own: 60 tasks of the built-in ``bounded`` scenario written
by ``sim run --traces`` (a few seconds), imported like anyone's."""

from __future__ import annotations

import functools
import re
import types
from pathlib import Path

import pandas as pd
import pytest

import sim
from sim.bad_input import InputError
from sim.cli import main
from sim.traces import read_traces

ROOT = Path(__file__).resolve().parent.parent
FAST_FIT = {"folds": 2, "evaluations": 0, "ladder": False, "by": "model"}
"""Calibration options that take seconds (the method is tested in test_calibrate_*)."""
FAST_FIT_FLAGS = ["--folds", "2", "--evaluations", "0", "--no-ladder", "--by", "model"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A folder of recorded runs: 60 tasks of ``bounded`` with their calls."""
    out = tmp_path_factory.mktemp("runs") / "bounded"
    assert main(["run", "bounded", "--traces", "--tasks", "60", "--workers", "1", "--quiet",
                 "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory) -> sim.Imported:
    return sim.import_traces(source, tmp_path_factory.mktemp("traces") / "t")


@pytest.fixture(scope="module")
def fit(imported, tmp_path_factory) -> sim.Calibrated:
    return sim.calibrate(imported.path, tmp_path_factory.mktemp("fit") / "world.yaml",
                         **FAST_FIT)


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one-line message a command prints for bad input (exit 2)."""
    assert main(argv) == 2
    return capsys.readouterr().err


# ------------------------------------------------------------------ import

def test_import_traces_returns_the_tables_it_wrote_and_the_folder(imported, source):
    """Imported holds the runs and calls as read_traces reads the folder back,
    the import report (every run imported, nothing skipped) and the path."""
    runs, calls = read_traces(imported.path)
    assert imported.runs.equals(runs) and imported.calls.equals(calls)
    assert len(imported.runs) == 60 and imported.report.runs == 60
    assert not imported.report.skips
    assert {"runs.parquet", "calls.parquet", "import.json"} <= {
        p.name for p in imported.path.iterdir()}
    assert imported.summary()["runs"] == 60
    assert "60 runs" in imported.describe() or "runs 60" in imported.describe()


def test_import_traces_refuses_what_the_command_refuses(tmp_path, capsys):
    """A missing source: InputError, with the message the command prints."""
    missing = str(tmp_path / "nowhere")
    with pytest.raises(InputError) as error:
        sim.import_traces(missing, tmp_path / "t")
    assert str(error.value) in cli_error(
        ["traces", "import", missing, "--out", str(tmp_path / "u"), "--quiet"], capsys)
    assert not (tmp_path / "t").exists()


# --------------------------------------------------------------- calibrate

def test_calibrate_writes_what_the_command_writes(fit, imported, tmp_path, capsys):
    """The scenario and calibration.json of sim.calibrate are the command's,
    byte for byte; the result states the verdict the exit status gives."""
    status = main(["calibrate", str(imported.path), "--out", str(tmp_path / "world.yaml"),
                   "--quiet", *FAST_FIT_FLAGS])
    capsys.readouterr()
    assert status == fit.status == (0 if fit.accepted else 1)
    assert fit.path.read_text() == (tmp_path / "world.yaml").read_text()
    assert fit.report == fit.path.with_name("world_calibration")
    assert ((fit.report / "calibration.json").read_text()
            == (tmp_path / "world_calibration" / "calibration.json").read_text())
    if fit.accepted:
        assert fit.verdict == "accepted"
    else:
        assert fit.verdict.startswith("rejected: ")
    assert list(fit.metrics["rejected"]) == [m.rejected for m in fit.result.metrics] + [
        fit.result.exits.rejected]
    assert (fit.metrics["ks"] >= 0).all() and (fit.metrics["critical"] >= 0).all()


@pytest.mark.parametrize(("options", "flags"), [
    ({"folds": 1}, ["--folds", "1"]),
    ({"seed": -1}, ["--seed", "-1"]),
    ({"evaluations": -2}, ["--evaluations", "-2"]),
    ({"classes": 0}, ["--classes", "0"]),
    ({"by": "model", "classes": 2}, ["--by", "model", "--classes", "2"]),
    ({"search_runs": 5}, ["--search-runs", "5"]),
], ids=["folds", "seed", "evaluations", "classes", "by and classes", "search runs"])
def test_calibrate_refuses_bad_options_with_the_commands_message(imported, tmp_path, capsys,
                                                                 options, flags):
    """Checked before any fitting; the message is the one the command prints."""
    with pytest.raises(InputError) as error:
        sim.calibrate(imported.path, tmp_path / "w.yaml", **options)
    printed = cli_error(["calibrate", str(imported.path), "--out", str(tmp_path / "c.yaml"),
                         *flags], capsys)
    assert str(error.value) in printed
    assert not (tmp_path / "w.yaml").exists()


def test_calibrate_out_must_be_a_yaml_file(imported, tmp_path, capsys):
    with pytest.raises(InputError, match=r"\.yaml") as error:
        sim.calibrate(imported.path, tmp_path / "w.txt")
    printed = cli_error(["calibrate", str(imported.path), "--out", str(tmp_path / "w.txt")],
                        capsys)
    assert str(error.value) in printed


# ------------------------------------------------------------------ replay

def test_replay_writes_the_bytes_the_command_writes(imported, tmp_path, capsys):
    """sim.replay and 'sim replay' write the same results.parquet and
    summary.json; the result holds those rows and the per-cell summary."""
    api = sim.replay(imported.path, "replay", ["harness.budgets.tokens=300000"],
                     out=tmp_path / "api")
    assert main(["replay", str(imported.path), "replay", "--set",
                 "harness.budgets.tokens=300000", "--out", str(tmp_path / "cli"),
                 "--quiet"]) == 0
    capsys.readouterr()
    for name in ("results.parquet", "summary.json"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    rows, summary = sim.read_results(tmp_path / "cli")
    assert api.path == tmp_path / "api"
    assert api.rows.equals(rows) and api.summary.equals(summary)
    assert len(api.rows) == 60 and list(api.replay) == list(summary["cell"])
    stopped = api.replay["replay"]["stopped"]["runs"]
    assert stopped == int((api.rows["outcome"] == "budget_exhausted:tokens").sum())


def test_replay_takes_overrides_as_a_dict(imported, tmp_path):
    """A dict of dotted paths replays the same as the 'path=value' words,
    and a sweep gives one cell per setting."""
    words = sim.replay(imported.path, "replay", ["harness.budgets.tokens=300000"],
                       out=tmp_path / "w")
    mapping = sim.replay(imported.path, "replay", {"harness.budgets.tokens": 300_000},
                         out=tmp_path / "m")
    assert words.rows.equals(mapping.rows)
    ladder = sim.replay(imported.path, "replay",
                        {"sweep": {"harness.budgets.tokens": [200_000, None]}},
                        out=tmp_path / "ladder")
    assert len(ladder.summary) == 2 and len(ladder.rows) == 120
    shares = ladder.summary["succeeded"].tolist()
    assert shares[0] <= shares[1]  # a budget only stops runs


def test_replay_refuses_a_world_without_a_harness(imported, tmp_path, capsys):
    world = tmp_path / "world.yaml"
    world.write_text("name: w\nworld: {policy: {loop: 0.1}}\n")
    with pytest.raises(InputError, match="no harness section") as error:
        sim.replay(imported.path, world, out=tmp_path / "a")
    assert str(error.value) in cli_error(
        ["replay", str(imported.path), str(world), "--out", str(tmp_path / "b")], capsys)
    with pytest.raises(InputError, match="--after-intervention"):
        sim.replay(imported.path, "replay", after_intervention="later", out=tmp_path / "c")


# -------------------------------------------------------------------- tune

def test_tune_on_the_calibrated_world_writes_its_outputs(imported, fit, tmp_path):
    """sim.tune with the world sim.calibrate fitted: the frontier and the
    recommendation (it unpacks as both), forecasts carry that fit's verdict,
    and recommended.yaml holds the recommended harness."""
    tuned = sim.tune(imported.path, world=fit, knobs="steps", grid={"steps": [20, 30, 80]},
                     forecast_runs=200, keep_successes=0.9, out=tmp_path / "tune")
    frontier, recommendation = tuned
    assert frontier is tuned.frontier and recommendation is tuned.recommendation
    assert tuned.path == tmp_path / "tune" and tuned.status in (0, 3)
    assert {"recommended.yaml", "frontier.csv", "tune.json", "report.md", "report.html"} <= {
        p.name for p in tuned.path.iterdir()}
    forecast = frontier[frontier["method"] == "forecast"]
    assert len(forecast) and forecast["fidelity"].str.contains(
        "accepted" if fit.accepted else "REJECTED").all()
    written = sim.load_scenario(tuned.recommended).harness
    assert written.budgets.steps == recommendation.harness.budgets.steps


def test_tune_refuses_a_folder_without_runs(tmp_path, capsys):
    with pytest.raises(InputError, match="not a trace folder") as error:
        sim.tune(tmp_path)
    assert str(error.value) in cli_error(["tune", str(tmp_path), "--out",
                                          str(tmp_path / "o")], capsys)
    with pytest.raises(InputError, match="--forecast-runs"):
        sim.tune(tmp_path, forecast_runs=0)


# ------------------------------------------------------------------ README

def readme_journey() -> str:
    """The code block of the README's 'Python API' section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow  # the whole journey (30 s); test_newcomer_readme runs the README's block twice
def test_the_readmes_journey_runs_as_written(source, tmp_path, monkeypatch, capsys):
    """The README's journey runs on a small folder of runs (the calibration
    and the forecasts at test sizes), and every step writes where it says."""
    code = readme_journey()
    assert all(f"sim.{step}(" in code for step in ("import_traces", "calibrate", "replay",
                                                    "tune"))
    first = re.search(r'sim\.import_traces\("([^"]+)"', code).group(1)
    monkeypatch.chdir(tmp_path)
    fast = types.SimpleNamespace(
        import_traces=sim.import_traces, replay=sim.replay,
        calibrate=functools.partial(sim.calibrate, **FAST_FIT),
        tune=functools.partial(sim.tune, forecast_runs=200, knobs="steps"))
    body = code.replace(first, str(source)).replace("import sim\n", "")
    namespace = {"sim": fast, "pd": pd}
    exec(compile(body, "README.md", "exec"), namespace)  # the README's own code
    capsys.readouterr()
    for name in ("imported", "fit", "replayed", "tuned"):
        assert namespace[name].path.exists(), name
