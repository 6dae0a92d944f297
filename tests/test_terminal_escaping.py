"""User text printed to a terminal carries no control bytes (issue 41): a
scenario's header line and name (``sim scenarios``), a trace's exit label
(``traces summary``), a report's path (``view``) and
a cell's name (the sweep tables) show ESC, BEL and the rest as visible escapes
(:func:`sim.output.safe_text.printable`), so a file cannot set the terminal's
title, clear the screen or hide text."""

from __future__ import annotations

import re

from sim.cli import main
from sim.output.terminal import format_comparison, format_table
from sim.traces.model import CallRecord, RunRecord, Usage
from sim.traces.writer import write_runs

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_sim_scenarios_shows_a_headers_escape_bytes_as_text(tmp_path, monkeypatch, capsys):
    """A scenario whose header line and file name hold a terminal-title and a
    clear-screen sequence is listed with them as ``\\x1b``... text."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / f"evil{CLEAR}.yaml").write_text(f"# Header {TITLE} then {CLEAR} cleared\n"
                                             "name: evil\ntasks: 5\n", encoding="utf-8")
    monkeypatch.setenv("SIM_SCENARIOS", str(folder))
    monkeypatch.chdir(tmp_path)
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out)
    [line] = [x for x in out.splitlines() if x.startswith("evil")]
    assert re.match(r"evil\\x1b\[2J +Header \\x1b\]0;pwned\\x07 then \\x1b\[2J cleared  "
                    r"\(mine/evil\\x1b\[2J\.yaml\)$", line), line


def test_traces_summary_shows_an_exit_labels_escape_bytes_as_text(tmp_path, capsys):
    """``traces summary`` of a folder whose exit label holds escape bytes
    prints them as text."""
    folder = tmp_path / "traces"
    folder.mkdir()
    write_runs(folder, [RunRecord(run_id=f"r{CLEAR}", source="tau2", file="x",
                                  model=f"m{TITLE}", exit=f"done{CLEAR}",
                                  calls=[CallRecord(Usage(input_tokens=10, output_tokens=2),
                                                    model=f"m{TITLE}")])])
    assert main(["traces", "summary", str(folder)]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out)
    assert "done\\x1b[2J 100.0%" in out


def test_view_prints_a_report_path_with_escape_bytes_as_text(tmp_path, capsys):
    """``view --print`` of a folder whose name holds ESC prints it escaped."""
    folder = tmp_path / f"out{CLEAR}"
    folder.mkdir()
    (folder / "report.md").write_text("# x\n", encoding="utf-8")
    assert main(["view", "--print", str(folder)]) == 0
    out = capsys.readouterr().out
    assert not CONTROL.search(out) and "out\\x1b[2J" in out


def test_the_sweep_tables_show_a_cells_escape_bytes_as_text():
    """The per-cell table and the cells compared escape a cell's name (and an
    outcome label), keeping their columns aligned on the escaped text."""
    cell = {"name": f"model={TITLE}", "tasks": 2, "outcome_counts": {f"x{CLEAR}": 2},
            "outcomes": {f"x{CLEAR}": 1.0},
            "steps": {"p50": 1, "p95": 1, "max": 1}, "input_tokens": {"p50": 1, "p95": 1,
                                                                      "max": 1},
            "cost": {"mean": 0.0, "p95": 0.0, "max": 0.0, "total": 0.0}}
    table = format_table(cell)
    assert not CONTROL.search(table)
    assert table.splitlines()[0] == "== model=\\x1b]0;pwned\\x07, 2 tasks"
    assert table.splitlines()[1].startswith("  x\\x1b[2J ")
    compared = format_comparison([cell, {**cell, "name": "plain"}])
    assert not CONTROL.search(compared)
    rows = compared.splitlines()[2:]
    assert rows[0].index("0.0%") == rows[1].index("0.0%")


def test_a_progress_bars_description_shows_escape_bytes_as_text():
    """A progress bar named after a scenario (``replay NAME``) prints the
    name's escape bytes as text."""
    import io

    from sim.progress import progress_bar

    stream = io.StringIO()
    with progress_bar(total=2, desc=f"replay x{CLEAR}{TITLE}", file=stream) as bar:
        bar.update(2)
    assert not CONTROL.search(stream.getvalue().replace("\r", ""))
    assert "replay x\\x1b[2J\\x1b]0;pwned\\x07" in stream.getvalue()


def test_tune_prints_a_models_escape_bytes_as_text(tmp_path, capsys):
    """``tune`` of runs whose model (not in the price catalogue) holds a
    clear-screen sequence names it in its note on prices as ``\\x1b`` text,
    never the raw byte (the note printed it raw: found by the campaign's
    tune door)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    model = f"m{CLEAR}"
    runs = [RunRecord(run_id=f"r{i}", source="tau2", file="x", model=model, exit="done",
                      resolved=i % 2 == 0,
                      calls=[CallRecord(Usage(input_tokens=1000 * (j + 1), output_tokens=50),
                                        model=model, cost_usd=0.001 * (j + 1))
                             for j in range(3 + i)])
            for i in range(6)]
    write_runs(folder, runs)
    status = main(["tune", str(folder), "--out", str(tmp_path / "tuned"), "--quiet"])
    assert status in (0, 3)
    out = capsys.readouterr().out
    assert not CONTROL.search(out)
    assert "m\\x1b[2J" in out
