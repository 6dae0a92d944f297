"""One path for a results folder: ``sim.api.simulate``/``sweep`` with ``out``
write the folder ``python -m sim run``/``sweep`` write (both call
``sim.api.simulating.write_cells``), and return the rows they wrote."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from sim import api
from sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
BOUNDED = str(ROOT / "scenarios" / "bounded.yaml")


def _table(folder: Path) -> dict[str, list]:
    return pq.read_table(folder / "results.parquet").to_pydict()


def _cells(folder: Path) -> list[dict]:
    return json.loads((folder / "summary.json").read_text())["cells"]


def test_simulate_with_out_writes_the_folder_run_writes(tmp_path: Path) -> None:
    """The rows and per-cell summary of ``simulate(out=...)`` are those of
    ``run`` with the same tasks and seed; the rows returned are the 12
    written, one per task."""
    assert main(["run", BOUNDED, "--tasks", "12", "--workers", "1", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    rows = api.simulate(BOUNDED, tasks=12, workers=1, out=tmp_path / "api")
    assert len(rows) == 12 and rows["task"].tolist() == list(range(12))
    assert _table(tmp_path / "api") == _table(tmp_path / "cli")
    assert _cells(tmp_path / "api") == _cells(tmp_path / "cli")
    assert {p.name for p in (tmp_path / "api").iterdir()} >= {
        "results.parquet", "summary.json", "report.md", "report.html"}


def test_sweep_with_out_returns_the_cells_it_wrote(tmp_path: Path) -> None:
    """A grid of two cells of 5 tasks: ``sweep(out=...)`` writes 10 rows and
    two cells, the frames ``read_results`` reads back; the cell with no nudge
    names the one setting it changes from the base (bounded.yaml gives one
    nudge), the other none."""
    out = tmp_path / "grid"
    rows, summary = api.sweep(BOUNDED, {"sweep": {"harness.detector.nudges": [0, 1]}},
                              tasks=5, workers=1, out=out)
    assert len(rows) == 10 and summary["cell"].tolist() == ["nudges=0", "nudges=1"]
    again = api.read_results(out)
    assert again.rows.equals(rows) and again.summary.equals(summary)
    assert [[c["path"] for c in cell["changes"]] for cell in _cells(out)] == [
        ["harness.detector.nudges"], []]


def test_traces_with_out_write_runs_and_calls(tmp_path: Path) -> None:
    """``traces=True`` adds runs.parquet (one row per task: 4) and calls.parquet."""
    api.simulate(BOUNDED, tasks=4, workers=1, out=tmp_path / "t", traces=True)
    assert pq.read_table(tmp_path / "t" / "runs.parquet").num_rows == 4
    assert (tmp_path / "t" / "calls.parquet").is_file()


def test_the_run_command_loads_no_other_step_of_the_api(tmp_path: Path) -> None:
    """``run`` goes through sim.api.simulating: the steps it does not take
    (comparing, which loads scipy, calibrating, replaying, tuning, importing)
    are not imported; the parser's vocabulary (costing, live: standard
    library and sim.cost only) is."""
    code = ("import sys; from sim.cli import main; "
            f"main(['run', {BOUNDED!r}, '--tasks', '2', '--workers', '1', '--quiet', "
            f"'--out', {str(tmp_path / 'o')!r}]); "
            "print(sorted(m for m in sys.modules if m.startswith('sim.api.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    loaded = set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert {"sim.api.scenarios", "sim.api.simulating"} <= loaded
    assert not loaded & {"sim.api.comparing", "sim.api.calibrating", "sim.api.replaying",
                         "sim.api.tuning", "sim.api.importing"}
