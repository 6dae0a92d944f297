"""``--where`` on every command that reads runs (sim.traces.where): import,
summary, calibrate and replay each keep exactly the runs a condition selects,
tags included (a list column ``tags``, a struct column ``metadata``) where a
folder carries them."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_calibrate_cli import a_run, write_folder
from traces_helpers import data_folder

from sim.cli import main
from sim.traces.where import parse_where, run_mask
from sim.tuning.where import slice_folder as tuning_slice_folder

M1, M2 = 12, 5
"""Runs of model m1 (exit agent_stop) and of m2 (exit max_steps) in the folder."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    runs = [a_run(i, 4 + i % 3) for i in range(M1)]
    runs += [replace(a_run(100 + i, 5), model="m2", exit="max_steps",
                     calls=[replace(c, model="m2") for c in a_run(100 + i, 5).calls])
             for i in range(M2)]
    return write_folder(tmp_path_factory.mktemp("where") / "t", runs)


@pytest.fixture(scope="module")
def tagged(folder, tmp_path_factory) -> str:
    """The folder with two columns another tool might write: ``tags`` (a list
    of strings: ``nightly`` on the even runs, ``canary`` on every third) and
    ``metadata`` (a struct: team ``search`` on runs of m2, ``chat`` on the rest)."""
    out = tmp_path_factory.mktemp("tagged")
    runs = pq.read_table(f"{folder}/runs.parquet")
    ids = runs.column("run_id").to_pylist()
    tags = [[t for t, on in (("nightly", k % 2 == 0), ("canary", k % 3 == 0)) if on]
            for k in range(len(ids))]
    models = runs.column("model").to_pylist()
    meta = [{"team": "search" if m == "m2" else "chat"} for m in models]
    runs = runs.append_column("tags", pa.array(tags, pa.list_(pa.string())))
    runs = runs.append_column("metadata", pa.array(meta))
    pq.write_table(runs, out / "runs.parquet")
    pq.write_table(pq.read_table(f"{folder}/calls.parquet"), out / "calls.parquet")
    return str(out)


def test_summary_keeps_the_runs_a_condition_selects(folder, capsys):
    """``traces summary --where model=m2``: 5 of 17 runs, said on top."""
    assert main(["traces", "summary", folder, "--where", "model=m2", "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == M2 and summary["runs_in_folder"] == M1 + M2
    assert summary["where"] == ["model=m2"] and summary["calls"] == 5 * M2
    assert main(["traces", "summary", folder, "--where", "exit!=max_steps"]) == 0
    assert f"slice: --where exit!=max_steps ({M1} of {M1 + M2} runs)" in capsys.readouterr().out


def test_summary_with_no_run_selected_is_exit_2_naming_the_condition(folder, capsys):
    assert main(["traces", "summary", folder, "--where", "model=m3"]) == 2
    assert "no run matches --where model=m3 (of 17 runs)" in capsys.readouterr().err


def test_replay_replays_the_runs_a_condition_selects(folder, tmp_path):
    """``replay --where model=m1 --where steps>=5``: the 8 m1 runs of 5 or 6 calls."""
    assert main(["replay", folder, "replay", "--out", str(tmp_path / "r"), "--quiet",
                 "--where", "model=m1", "--where", "steps>=5"]) == 0
    rows = pd.read_parquet(tmp_path / "r" / "results.parquet")
    expected = {f"run{i}" for i in range(M1) if 4 + i % 3 >= 5}
    assert len(expected) == 8 and set(rows["run_id"]) == expected


def test_calibrate_fits_the_runs_a_condition_selects(folder, tmp_path, capsys):
    """``calibrate --where model=m1``: the world is fitted to the 12 m1 runs."""
    status = main(["calibrate", folder, "--out", str(tmp_path / "fit.yaml"), "--quiet",
                   "--where", "model=m1", "--folds", "3", "--evaluations", "0",
                   "--search-runs", "50", "--no-ladder", "--format", "json"])
    assert status in (0, 1)
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"]["fitted"] == M1 and summary["runs"]["dropped"] == {}


def test_import_writes_only_the_runs_a_condition_selects(tmp_path, capsys):
    """``traces import --where model=gpt-4o`` of the shared tau2 files: the
    folder holds exactly the runs the whole import holds for that model."""
    raw = data_folder("tau2", "raw")
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["traces", "import", str(raw), "--out", str(whole), "--quiet"]) == 0
    assert main(["traces", "import", str(raw), "--out", str(part), "--quiet",
                 "--where", "model=gpt-4o"]) == 0
    all_runs = pd.read_parquet(whole / "runs.parquet")
    runs = pd.read_parquet(part / "runs.parquet")
    calls = pd.read_parquet(part / "calls.parquet")
    expected = set(all_runs.loc[all_runs["model"] == "gpt-4o", "run_id"])
    assert expected and set(runs["run_id"]) == expected
    assert set(calls["run_id"]) <= expected
    assert len(calls) == int(runs["steps"].sum())
    assert f"kept {len(expected):,} of {len(all_runs):,} runs imported" in capsys.readouterr().err


def test_tags_in_a_list_column_and_fields_of_a_struct_column_select_runs(tagged, capsys):
    """``tags=nightly``: the 9 even runs of 17; ``tags!=canary``: the 11 not
    a multiple of 3; ``metadata.team=search``: the 5 runs of m2; ``tags>=x``
    is refused (a list takes = and != only)."""
    runs = pd.read_parquet(f"{tagged}/runs.parquet")
    assert run_mask(runs, parse_where("tags=nightly")).sum() == 9
    assert run_mask(runs, parse_where("tags!=canary")).sum() == 11
    assert run_mask(runs, parse_where(["metadata.team=search"])).sum() == M2
    assert run_mask(runs, parse_where(["metadata.team=chat", "tags=canary"])).sum() == 4
    assert main(["traces", "summary", tagged, "--where", "metadata.team=search",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == M2
    assert main(["traces", "summary", tagged, "--where", "tags>=a"]) == 2
    assert "a list of tags" in capsys.readouterr().err


def test_the_conditions_moved_to_the_trace_model_are_still_importable_from_tune():
    """``sim.tuning.where`` re-exports :mod:`sim.traces.where`'s names."""
    from sim.traces.where import slice_folder

    assert tuning_slice_folder is slice_folder


def test_an_import_whose_where_selects_no_run_writes_nothing_and_keeps_the_folder(
        folder, tmp_path, capsys):
    """``traces import --where`` cut the folder after writing it: a condition
    no run met exited 2 but left the whole import in --out (and, with
    --force, a good folder already there replaced by it). The cut is now
    made before the folder is put in place: nothing is written, the old
    folder stays, and a folder cut to some runs says so in import.json."""
    fresh = tmp_path / "fresh"
    assert main(["traces", "import", folder, "--out", str(fresh), "--quiet",
                 "--where", "model=m3"]) == 2
    assert "no run matches --where model=m3 (of 17 runs)" in capsys.readouterr().err
    assert not fresh.exists() and [p.name for p in tmp_path.iterdir()] == []
    kept = tmp_path / "kept"
    assert main(["traces", "import", folder, "--out", str(kept), "--quiet",
                 "--where", "model=m2"]) == 0
    before = {p.name: p.read_bytes() for p in kept.iterdir()}
    assert main(["traces", "import", folder, "--out", str(kept), "--quiet", "--force",
                 "--where", "model=m3"]) == 2
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    report = json.loads(before["import.json"])
    assert report["runs"] == M1 + M2
    assert report["where"] == {"conditions": "--where model=m2", "runs_kept": M2}
    assert len(pd.read_parquet(kept / "runs.parquet")) == M2
