"""``sim tune`` never silently overwrites its output folder: the same tune of
the same traces may rewrite it; another tune (other options, other traces)
is refused with exit 2 unless ``--force``, before anything runs, like the
other commands (:func:`sim.output.folder.prepare`)."""

from __future__ import annotations

import json

from test_tune_headline import folder

from sim.cli import main


def test_the_same_tune_rewrites_another_needs_force(tmp_path, capsys):
    """Rerun: exit as before; other knobs: exit 2 naming --force, tune.json
    untouched; with --force: replaced; other traces: exit 2 too."""
    traces = folder(tmp_path, 20, 5)
    out = tmp_path / "out"
    argv = ["tune", str(traces), "--out", str(out), "--quiet"]
    assert main([*argv, "--knobs", "steps"]) == 3
    written = (out / "tune.json").read_text()
    assert json.loads(written)["provenance"]["command"] == "tune"
    assert main([*argv, "--knobs", "steps"]) == 3
    capsys.readouterr()
    assert main([*argv, "--knobs", "steps,tokens"]) == 2
    err = capsys.readouterr().err
    assert "--force" in err and str(out) in err and "Traceback" not in err
    assert (out / "tune.json").read_text() == written
    assert main([*argv, "--knobs", "steps,tokens", "--force"]) == 3
    assert json.loads((out / "tune.json").read_text())["knobs"] == ["tokens", "steps"]
    other = folder(tmp_path, 21, 5)
    assert main(["tune", str(other), "--out", str(out), "--quiet", "--knobs", "steps,tokens"]) == 2


def test_a_folder_of_other_files_is_never_replaced(tmp_path, capsys):
    """An --out holding files tune does not write is refused even with --force."""
    traces = folder(tmp_path, 20, 5)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["tune", str(traces), "--out", str(out), "--quiet", "--force"]) == 2
    assert (out / "notes.txt").read_text() == "mine"
    assert "not a results folder" in capsys.readouterr().err
