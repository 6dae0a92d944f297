"""Provenance and safety of results folders (sim.output.provenance,
sim.output.folder): what produced a folder is recorded in it; a folder of
another run is never replaced silently; a failure never leaves a mixed folder;
``--out`` is checked before anything runs; reports follow ``--set``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import sim.cli
import sim.output.html
from sim.output import folder
from sim.output.provenance import identity, sim_version
from sim.output.results import read_provenance

BOUNDED = "scenarios/bounded.yaml"


def run(*argv: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``python -m sim ...`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sim.cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_summary_and_parquet_record_the_resolved_scenario_after_set(tmp_path):
    """``--set harness.budgets.tokens=500000``: summary.json and both files'
    Parquet metadata hold the resolved scenario (500,000, not the file's 2 M),
    the overrides as given, the seed, sim's version and the prices date; the
    report states the budget as run, not the description's number."""
    out = tmp_path / "out"
    status, _, err = run("run", BOUNDED, "--tasks", "30", "--seed", "3", "--quiet",
                         "--workers", "1", "--out", str(out),
                         "--set", "harness.budgets.tokens=500000")
    assert status == 0, err
    summary = json.loads((out / "summary.json").read_text())
    provenance = summary["provenance"]
    assert provenance["scenario"]["harness"]["budgets"]["tokens"] == 500_000
    assert provenance["scenario"]["tasks"] == 30 and provenance["seed"] == 3
    assert provenance["overrides"] == ["harness.budgets.tokens=500000", "tasks=30", "seed=3"]
    assert provenance["sim_version"] == sim_version() and provenance["command"] == "run"
    assert provenance["prices_date"]  # seed001 prices, dated by the run
    assert read_provenance(out / "results.parquet") == provenance
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "500 k prompt-token budget" in report and "2 M" not in report
    assert "`harness.budgets.tokens=500000`" in report


def test_a_folder_of_another_run_is_refused_unless_forced(tmp_path):
    """A 10-task run may not replace a 40-task result in the same folder
    (exit 2 before simulating, naming the first difference and --force); the
    same run again may; --force replaces it."""
    out = str(tmp_path / "out")
    common = ("--quiet", "--workers", "1", "--out", out)
    assert run("run", BOUNDED, "--tasks", "40", *common)[0] == 0
    before = (Path(out) / "results.parquet").read_bytes()
    status, _, err = run("run", BOUNDED, "--tasks", "10", *common)
    assert status == 2 and "different run" in err and "tasks" in err and "--force" in err
    assert (Path(out) / "results.parquet").read_bytes() == before
    assert run("run", BOUNDED, "--tasks", "40", *common)[0] == 0
    assert (Path(out) / "results.parquet").read_bytes() == before
    assert run("run", BOUNDED, "--tasks", "10", "--force", *common)[0] == 0
    assert len(pd.read_parquet(Path(out) / "results.parquet")) == 10


def test_a_folder_that_is_not_results_is_never_used(tmp_path):
    """A non-empty folder holding other files is refused even with --force:
    nothing of the user's is deleted."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    for extra in ((), ("--force",)):
        status, _, err = run("run", BOUNDED, "--tasks", "5", "--quiet", "--out", str(out),
                             *extra)
        assert status == 2 and "not a results folder" in err and "notes.txt" in err
    assert (out / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("where", ["file", "under_a_file", "proc", "read_only"])
def test_out_is_checked_before_anything_runs(where, tmp_path, monkeypatch):
    """--out naming a file, a folder inside a file, /proc/x or a folder that
    cannot be written is exit 2 at once: the simulation never starts."""
    if where in ("file", "under_a_file"):
        out = tmp_path / "results.txt"
        out.write_text("x", encoding="utf-8")
        if where == "under_a_file":
            out = out / "sub"
    elif where == "proc":
        out = Path("/proc/x")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        if os.access(locked, os.W_OK):  # running as root: permissions do not bind
            pytest.skip("root can write anywhere")
        out = locked / "out"
    import sim.sweeps.chunks

    def never(*args, **kwargs):
        raise AssertionError("simulated before checking --out")

    monkeypatch.setattr(sim.sweeps.chunks, "run_chunks", never)
    status, _, err = run("run", BOUNDED, "--tasks", "5", "--quiet", "--out", str(out))
    assert status == 2 and err.startswith("error: --out") and "Traceback" not in err


def test_a_failure_after_simulating_leaves_the_previous_results_intact(tmp_path, monkeypatch):
    """When writing report.html fails after results.parquet and summary.json
    were written, the folder still holds the previous run's files, all of
    them, and no temporary folder is left beside it."""
    out = tmp_path / "out"
    common = ("--quiet", "--workers", "1", "--out", str(out))
    assert run("run", BOUNDED, "--tasks", "20", *common)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(sim.output.html, "write_sweep_html", broken)
    with pytest.raises(OSError, match="disk full"):
        run("run", BOUNDED, "--tasks", "25", "--force", *common)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_swaps_a_whole_folder_and_prepare_compares_identities(tmp_path):
    """folder.replace puts the new files in place of the old folder (stale
    files of the old run do not survive); prepare accepts the same identity
    and refuses another one."""
    out = tmp_path / "r"
    provenance = {"command": "run", "scenario": {"tasks": 3}, "sim_version": "x"}
    with folder.replace(out) as staging:
        (staging / "summary.json").write_text(json.dumps({"provenance": provenance}))
        (staging / "timeseries.parquet").write_text("old")
    with folder.replace(out) as staging:
        (staging / "summary.json").write_text(json.dumps({"provenance": provenance}))
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert folder.prepare(out, {**provenance, "sim_version": "y"}) == out
    assert identity(provenance) == {"command": "run", "scenario": {"tasks": 3}}
    with pytest.raises(Exception, match="different run"):
        folder.prepare(out, {**provenance, "scenario": {"tasks": 4}})


def test_a_replay_is_the_same_run_whatever_the_trace_folder_is_spelled(tmp_path, monkeypatch):
    """A replay's provenance records the trace folder by resolved path and
    content hash: the same replay given ``traces``, ``./sub/../traces``, an
    absolute path or a link from another working folder may rewrite its
    --out; a trace folder with other content is a different run."""
    traces = tmp_path / "traces"
    assert run("run", BOUNDED, "--tasks", "4", "--workers", "1", "--quiet", "--traces",
               "--out", str(traces))[0] == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(traces)
    out = tmp_path / "replayed"
    replay = str(Path(BOUNDED).resolve().parent / "replay.yaml")
    monkeypatch.chdir(tmp_path)
    for spelling in ("traces", "./sub/../traces", str(traces), "link"):
        status, _, err = run("replay", spelling, replay, "--out", str(out), "--quiet")
        assert status == 0, err
    recorded = json.loads((out / "summary.json").read_text(encoding="utf-8"))["provenance"]
    assert recorded["traces"]["path"] == str(traces.resolve())
    other = tmp_path / "other"
    assert run("run", BOUNDED, "--tasks", "5", "--workers", "1", "--quiet", "--traces",
               "--out", str(other))[0] == 0
    status, _, err = run("replay", "other", replay, "--out", str(out), "--quiet")
    assert status == 2 and "different run" in err
