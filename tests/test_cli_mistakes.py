"""Every documented command, given each mistake a newcomer makes, answers
with exit status 2 and one line on stderr (``error: ...``) naming the file or
flag, never a traceback, a Python exception's name or pydantic's wording: a
missing file, a folder or a Parquet file where a scenario goes, swapped
arguments, a field typo (with "did you mean" and the YAML line), a bad flag
value, an unknown flag, and a missing API key for ``live``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sim.cli

LEAKS = ("Traceback", "Error:", "IsADirectoryError", "UnicodeDecodeError",
         "FileNotFoundError", "Extra inputs are not permitted", "codec")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A trace folder (a 4-task run with --traces), a Parquet file, a plain
    folder, a scenario with a typo on line 4 and a tasks file."""
    root = tmp_path_factory.mktemp("mistakes")
    traces = root / "traces"
    assert sim.cli.main(["run", "bounded", "--tasks", "4", "--traces", "--quiet",
                         "--workers", "1", "--out", str(traces)]) == 0
    parquet = root / "data.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), parquet)
    plain = root / "plain"
    plain.mkdir()
    typo = root / "typo.yaml"
    typo.write_text("name: typo\nharness:\n  budgets:\n    stepz: 3\n", encoding="utf-8")
    tasks = root / "tasks.yaml"
    tasks.write_text("- instruction: say hi\n  tools: [shell]\n", encoding="utf-8")
    return {"traces": traces, "parquet": parquet, "plain": plain, "typo": typo,
            "tasks": tasks, "root": root}


def _cases(f: dict[str, Path]) -> dict[str, tuple[list[str], tuple[str, ...]]]:
    """mistake -> (argv, fragments the one line must hold)."""
    t, pqf, plain, typo = (str(f[k]) for k in ("traces", "parquet", "plain", "typo"))
    missing = str(f["root"] / "nope.yaml")
    out = ["--out", str(f["root"] / "out")]
    cases: dict[str, tuple[list[str], tuple[str, ...]]] = {}
    for command in ("run", "sweep", "capacity"):
        cases |= {
            f"{command}: missing file": ([command, missing, *out], ("nope.yaml", "not found")),
            f"{command}: unknown name": ([command, "bounde", *out], ("did you mean bounded",)),
            f"{command}: a folder": ([command, plain, *out], ("is a folder",)),
            f"{command}: a trace folder": ([command, t, *out], ("trace folder", "swapped")),
            f"{command}: a Parquet file": ([command, pqf, *out], ("Parquet file",)),
            f"{command}: a field typo": ([command, typo, *out],
                                        ("harness.budgets.stepz", "did you mean 'steps'",
                                         "(line 4)")),
            f"{command}: a --set typo": ([command, "bounded", "--set",
                                          "harness.budgets.stepz=3", *out],
                                         ("harness.budgets.stepz", "did you mean 'steps'")),
            f"{command}: a bad flag value": ([command, "bounded", "--tasks", "ten"],
                                             ("--tasks", "'ten'")),
            f"{command}: an unknown flag": ([command, "bounded", "--taks", "10"],
                                            ("--taks",)),
        }
    cases |= {
        "replay: swapped arguments": (["replay", "replay", t, *out], ("swapped",)),
        "replay: a Parquet file as the scenario": (["replay", t, pqf, *out], ("Parquet",)),
        "replay: a field typo": (["replay", t, typo, *out], ("did you mean 'steps'",)),
        "replay: missing traces": (["replay", missing, "replay", *out], ("nope.yaml",)),
        "compare: missing side": (["compare", "bounded", missing, *out], ("nope.yaml",)),
        "compare: a Parquet side": (["compare", "bounded", pqf, "--tasks", "5", *out],
                                    ("Parquet",)),
        "compare: a field typo": (["compare", "bounded", typo, "--tasks", "5", *out],
                                  ("did you mean 'steps'",)),
        "traces summary: a scenario instead": (["traces", "summary", "bounded"],
                                               ("bounded",)),
        "traces import: missing source": (["traces", "import", missing, *out],
                                          ("nope.yaml",)),
        "calibrate: a scenario instead": (["calibrate", "bounded", "--out",
                                           str(f["root"] / "w.yaml")], ("bounded",)),
        "cost: a bad number": (["cost", "--steps", "x"], ("--steps",)),
        "view: no report": (["view", plain], ("no report",)),
        "view: missing": (["view", missing], ("not found",)),
        "scenarios: unknown flag": (["scenarios", "--al"], ("--al",)),
        "live: a scenario typo": (["live", str(f["tasks"]), "--provider", "openai",
                                   "--model", "m", "--scenario", typo, *out],
                                  ("did you mean 'steps'",)),
    }
    return cases


CASE_NAMES = sorted(_cases({k: Path("x") for k in ("traces", "parquet", "plain", "typo",
                                                      "tasks", "root")}))


@pytest.mark.parametrize("name", CASE_NAMES)
def test_each_mistake_is_exit_2_with_one_line(name, files, capsys, monkeypatch):
    """Exit 2, nothing on stdout, exactly one ``error: ...`` line on stderr
    holding the expected words, and no Python internals."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the key is not this test's mistake
    monkeypatch.chdir(files["root"])  # a mistake that ran anyway writes nothing here
    argv, fragments = _cases(files)[name]
    status = sim.cli.main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2, (status, captured.err)
    assert captured.out == ""
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    for leak in LEAKS:
        assert leak not in lines[0], (leak, lines[0])


@pytest.mark.parametrize("provider,variable,model", [
    ("anthropic", "ANTHROPIC_API_KEY", "claude-sonnet-4-20250514"),
    ("openai", "OPENAI_API_KEY", "gpt-4o")])
def test_live_without_an_api_key_is_one_line_and_writes_nothing(provider, variable, model, files,
                                                                 tmp_path, monkeypatch, capsys):
    """``live`` without the provider's key: exit 2, one line naming the
    variable, and no checkpoint database or trace folder left behind."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "live"
    status = sim.cli.main(["live", str(files["tasks"]), "--provider", provider, "--model", model,
                           "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and variable in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_format_json_reports_the_error_as_json_on_stdout(files, capsys):
    """Under ``--format json`` stdout is one JSON object naming the file, the
    field and the line; stderr still has the one line."""
    assert sim.cli.main(["run", str(files["typo"]), "--format", "json"]) == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["file"] == str(files["typo"]) and error["field"] == "harness.budgets.stepz"
    assert error["line"] == 4 and error["status"] == 2 and "did you mean" in error["problem"]
    assert captured.err.startswith("error: ")
    assert sim.cli.main(["run", "bounded", "--tasks", "x", "--format=json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "usage"
