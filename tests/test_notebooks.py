"""Notebooks are executed documentation, stored with their outputs: every
notebook in notebooks/ runs top to bottom in a headless kernel (small task
counts here), its stored outputs are those its current code and inputs make
(a stamp of hashes, checked here; ``python -m tools.notebooks`` refreshes it),
and the budget explorer's widgets redraw its figures when a front end moves
them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from sim.bad_input import InputError
from tools import notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = notebooks.notebook_paths(ROOT)
BUDGETS = ROOT / "notebooks" / "explore_budgets.ipynb"
YOUR_AGENT = ROOT / "notebooks" / "your_agent.ipynb"
FANOUT = ROOT / "notebooks" / "fanout_and_storms.ipynb"
QUICK = {  # parameters for a quick headless run, per notebook
    "explore_budgets.ipynb": {"TASKS": 200, "FULL_TASKS": 400, "COMPARE_TASKS": 300},
    "your_agent.ipynb": {"LADDER": [100_000, None], "TOKENS": 100_000, "TASKS": 200,
                         "FULL_TASKS": 300, "EVALUATIONS": 0},
    "fanout_and_storms.ipynb": {"CAPS": [8, 16, None], "FANOUT_TASKS": 30},
}
# The project's shared data folder: beside the repository (as in CI), or $SIM_SHARED.
SHARED = Path(os.environ.get("SIM_SHARED") or ROOT.parent / "shared")
TAU2 = SHARED / "data" / "traces" / "tau2" / "raw"


def test_there_are_notebooks_to_run():
    """The checks below look at the real folder (and find the three notebooks)."""
    assert BUDGETS in NOTEBOOKS and YOUR_AGENT in NOTEBOOKS and FANOUT in NOTEBOOKS
    assert set(QUICK) == {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_is_fresh_and_shows_its_figures(path):
    """Each notebook is stored with the outputs of ``python -m tools.notebooks``
    for its current code cells and inputs (modules of sim and data files it
    read), every code cell run, no error stored, and its figures as PNG, so a
    reader on a code host sees them."""
    reasons = notebooks.staleness(path, ROOT)
    assert not reasons, (f"{path.name} is stale: {'; '.join(reasons)}. "
                         f"Refresh it with: {notebooks.COMMAND} {path.relative_to(ROOT)}")
    nb = nbformat.read(path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)


def _errors(nb) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for c in nb.cells if c.cell_type == "code"
            for o in c.outputs if o.output_type == "error"]


@pytest.fixture(scope="module")
def budgets_kernel():
    """The budgets notebook executed headless with small task counts, its
    kernel kept alive for the widget tests."""
    nb = notebooks.with_parameters(notebooks.read(BUDGETS), QUICK[BUDGETS.name])
    with notebooks.running(nb, root=ROOT, name=BUDGETS.name) as kernel:
        yield kernel


@pytest.mark.slow  # a notebook kernel: minutes, and no coverage (another process)
def test_budgets_notebook_runs_headless_and_draws_figures(budgets_kernel):
    """Every cell of the budgets notebook runs without a widget front end (a
    cell that raises fails here); it draws PNG figures, and its dials cell
    shows a readable text fallback."""
    nb = budgets_kernel.client.nb
    assert not _errors(nb)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 8
    texts = [o["data"]["text/plain"] for o in outputs
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert texts and texts[0].startswith("bounded dials (live in Jupyter): tokens=2M")


class TestYourAgent:
    """The agent notebook's headless run (the module's longest test), a class so
    that pytest-xdist can run it beside the budgets notebook's kernel."""

    pytestmark = pytest.mark.slow

    def test_your_agent_notebook_runs_headless_on_the_tau2_runs(self, tmp_path):
        """The agent notebook runs top to bottom on the shared tau2-bench runs
        (imports, summarizes, replays, calibrates, explores, sets the forecast
        beside the replay), writing only to its WORK folder (here a temporary
        one), and draws its figures: the fit report's ECDF overlays among them."""
        if not TAU2.is_dir():
            if os.environ.get("CI"):
                pytest.fail(f"the shared tau2 runs are missing at {TAU2}")
            pytest.skip(f"no shared data folder at {SHARED}: set SIM_SHARED to the project's "
                        f"shared folder (the one holding data/traces/tau2/raw)")
        parameters = {**QUICK[YOUR_AGENT.name], "TRACES": str(TAU2), "WORK": str(tmp_path)}
        run = notebooks.execute(YOUR_AGENT, root=ROOT, parameters=parameters)
        assert not _errors(run.nb)
        outputs = [o for c in run.nb.cells if c.cell_type == "code" for o in c.outputs]
        assert sum("image/png" in o.get("data", {}) for o in outputs) >= 14
        text = "".join(o.get("text", "") for o in outputs)
        assert "sim.import_traces: trace folder" in text and "steps per run" in text
        assert "sim.replay at 100,000 tokens: stopped" in text
        assert "sim.calibrate: fit " in text and "forecast:" in text
        assert "sim.cli" not in "".join(c.source for c in run.nb.cells)  # the API only
        for name in ("traces/runs.parquet", "replay_budget/results.parquet", "your_agent.yaml",
                     "your_agent_calibration/calibration.html", "replay_chosen/results.parquet",
                     "tune/recommended.yaml"):
            assert (tmp_path / name).is_file(), name


@pytest.mark.slow  # a notebook kernel: seconds, and no coverage (another process)
def test_fanout_and_storms_notebook_runs_headless_and_names_the_knee():
    """The fan-out and storms notebook runs top to bottom through the API
    (no command line) on 3 caps x 4 retry policies (12 storm cells) and 30
    leads per fan-out cell; it draws its 2 figures, names one knee per
    retry policy (4 lines) and prints one line per fan-out cell (3 caps x 2
    rules: 6), with no session over its budget under the before_call rule."""
    run = notebooks.execute(FANOUT, root=ROOT, parameters=QUICK[FANOUT.name])
    assert not _errors(run.nb)
    outputs = [o for c in run.nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2
    text = "".join(o.get("text", "") for o in outputs)
    assert "12 cells of 40 runs" in text
    assert text.count("largest cap without a storm:") == 4
    cells = [line for line in text.splitlines()
             if line.startswith(("before_call, ", "between_turns, "))]
    assert len(cells) == 6
    before = [line for line in cells if line.startswith("before_call")]
    assert len(before) == 3 and all(": 0 of 30 sessions over budget" in line for line in before)
    assert "sim.cli" not in "".join(c.source for c in run.nb.cells)  # the API only


# What the figures of the last redraw show, read from their matplotlib artists
# and from the output widget the front end displays.
_FIGURE_DATA = """
import base64, hashlib, json
_figs = dials.figures
_bars = {c.get_label(): [p.get_width() for p in c.patches]
         for c in _figs["outcomes"].axes[0].containers}
_ccdf = [line.get_xdata().tolist() for line in _figs["cost_ccdf"].axes[0].lines]
_chosen = _figs["frontier"].axes[0].collections[-1].get_offsets().tolist()
_pngs = [o["data"]["image/png"] for o in dials.output.outputs if "image/png" in o["data"]]
assert all(base64.b64decode(p).startswith(b"\\x89PNG") for p in _pngs)  # text, as a front end wants
_pngs = [hashlib.sha256(p.encode()).hexdigest() for p in _pngs]
print(json.dumps({"bars": _bars, "ccdf": _ccdf, "chosen": _chosen, "pngs": _pngs,
                  "status": dials.status.value, "seconds": dials.seconds,
                  "tokens": dials.controls["tokens"].value}))
"""


def _figure_data(kernel) -> dict:
    return json.loads(kernel.run(_FIGURE_DATA))


def _move_widget(kernel, model_id: str, state: dict, timeout: float = 120) -> None:
    """Send the kernel what a browser sends when a slider is released (a
    comm ``update`` of the widget's synced state), from a second client, and
    wait until the kernel has handled it."""
    kc = kernel.client.km.blocking_client()
    kc.start_channels()
    try:
        msg = kc.session.msg("comm_msg", {"comm_id": model_id, "data": {
            "method": "update", "state": state, "buffer_paths": []}})
        kc.shell_channel.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            reply = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if (reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]
                    and reply["msg_type"] == "status"
                    and reply["content"]["execution_state"] == "idle"):
                return
    finally:
        kc.stop_channels()


@pytest.mark.slow  # a notebook kernel: minutes, and no coverage (another process)
def test_moving_the_token_budget_widget_redraws_the_figures(budgets_kernel):
    """A front end moving the token-budget slider from 2M to 100k tokens (a
    budget the notebook itself never simulated) by a comm update of its
    synced ``index``, as a browser sends it, redraws the outcome shares, the
    cost tail, the frontier's chosen point and the output widget's PNGs; the
    redrawn bars are the outcome shares of an independent simulation of that
    budget, and only the new cell was simulated (the rest came from the cache)."""
    before = _figure_data(budgets_kernel)
    assert before["tokens"] == 2_000_000
    options = json.loads(budgets_kernel.run(
        "import json; print(json.dumps([v for _, v in dials.controls['tokens'].options]))"))
    model_id = budgets_kernel.run("print(dials.controls['tokens'].model_id)").strip()
    _move_widget(budgets_kernel, model_id, {"index": options.index(100_000)})
    after = _figure_data(budgets_kernel)

    assert after["tokens"] == 100_000
    assert after["bars"] != before["bars"]
    assert after["ccdf"][0] != before["ccdf"][0]  # the setting's tail...
    assert after["ccdf"][1] == before["ccdf"][1]  # ...the reference's is the same
    assert after["chosen"] != before["chosen"]
    assert len(after["pngs"]) == 3 and not set(after["pngs"]) & set(before["pngs"])
    assert "1 cell simulated" in after["status"], after["status"]

    expected = json.loads(budgets_kernel.run(
        "import json; from sim import simulate\n"
        "_rows = simulate(SCENARIO, {'harness.budgets.tokens': 100_000}, tasks=TASKS)\n"
        "print(json.dumps(_rows['outcome'].value_counts(normalize=True).to_dict()))"))
    assert expected.get("budget_exhausted:tokens", 0) > 0.1  # the budget binds
    drawn = {outcome: widths[0] / 100 for outcome, widths in after["bars"].items()}
    assert drawn == pytest.approx({k: expected.get(k, 0.0) for k in drawn})
    assert set(expected) <= set(drawn)
    print(f"redraw after the token move: {after['seconds']:.2f} s ({after['status']})")


@pytest.mark.slow  # a notebook kernel: minutes, and no coverage (another process)
def test_moving_another_dial_back_costs_no_simulation(budgets_kernel):
    """Nudges 1 -> 2 simulates a new ladder; moving back to 1 finds every
    cell in the cache."""
    model_id = budgets_kernel.run("print(dials.controls['nudges'].model_id)").strip()
    _move_widget(budgets_kernel, model_id, {"value": 2})
    moved = _figure_data(budgets_kernel)
    _move_widget(budgets_kernel, model_id, {"value": 1})
    back = _figure_data(budgets_kernel)
    assert "0 cells simulated" not in moved["status"]
    assert "0 cells simulated" in back["status"], back["status"]


# ------------------------------------------------------------- the tooling

def _tiny_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with one notebook that imports sim and reads a data file."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "sim", root / "sim", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "notebooks").mkdir()
    (root / "data.txt").write_text("3\n")
    (tmp_path / "outside.txt").write_text("1\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("N = 2"),
        nbformat.v4.new_code_cell("import sim.bad_input\n"
                                  "print(N * int(open('data.txt').read())\n"
                                  "      * int(open('../outside.txt').read()))\n"
                                  "open('written.txt', 'w').write('x')\n"
                                  "import subprocess  # a file made by another process\n"
                                  "subprocess.run(['sh', '-c', 'echo y > made.txt'])\n"
                                  "print(open('made.txt').read(), end='')"),
    ])
    nb.cells[0].metadata["tags"] = ["parameters"]
    path = root / "notebooks" / "tiny.ipynb"
    nbformat.write(nb, path)
    return root, path


def test_a_stamp_names_the_inputs_and_goes_stale_when_one_changes(tmp_path):
    """Executing stamps the hashes of the sim modules imported and the files
    read under the repository (not the files it wrote or that changed while
    it ran, nor files outside the repository);
    changing a read file or an imported module makes the stored notebook
    stale, naming what changed."""
    root, path = _tiny_repo(tmp_path)
    run = notebooks.execute(path, root=root)
    assert run.nb.cells[1].outputs[0]["text"] == "6\ny\n"
    assert "data.txt" in run.inputs and "sim/bad_input.py" in run.inputs
    assert "sim/api.py" not in run.inputs
    assert "written.txt" not in run.inputs and "made.txt" not in run.inputs
    assert not [name for name in run.inputs if "outside" in name]
    assert run.inputs["data.txt"] == hashlib.sha256(b"3\n").hexdigest()
    notebooks.write(path, run.nb)
    assert notebooks.staleness(path, root) == []

    (root / "data.txt").write_text("4\n")
    assert notebooks.staleness(path, root) == ["data.txt changed"]
    (root / "data.txt").write_text("3\n")
    with open(root / "sim" / "bad_input.py", "a") as handle:
        handle.write("\n# edited\n")
    assert notebooks.staleness(path, root) == ["sim/bad_input.py changed"]


def test_files_git_does_not_track_are_not_inputs(tmp_path):
    """In a git checkout, a file the notebook read that git does not track
    (an ignored install artefact, say) is not stamped: a fresh clone lacks it."""
    import subprocess

    root, path = _tiny_repo(tmp_path)
    (root / ".gitignore").write_text("data.txt\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    run = notebooks.execute(path, root=root)
    assert "data.txt" not in run.inputs and "sim/bad_input.py" in run.inputs


def test_editing_a_code_cell_or_storing_unrun_cells_is_stale(tmp_path):
    """A notebook never executed by the command, one whose code was edited
    after, and one with a cell never run are stale; a markdown edit is not."""
    root, path = _tiny_repo(tmp_path)
    assert notebooks.staleness(path, root) == [
        f"it was not executed by {notebooks.COMMAND} (no stamp)"]
    nb = notebooks.execute(path, root=root).nb
    nb.cells.append(nbformat.v4.new_markdown_cell("prose"))
    notebooks.write(path, nb)
    assert notebooks.staleness(path, root) == []
    nb.cells[0].source = "N = 5"
    notebooks.write(path, nb)
    assert notebooks.staleness(path, root) == [
        "its code cells changed since its outputs were made"]
    nb.cells[0].source = "N = 2"
    nb.cells[1].execution_count = None
    notebooks.write(path, nb)
    assert notebooks.staleness(path, root) == ["cell 1 was not run"]


def test_parameters_replace_the_parameters_cell_and_are_never_stamped(tmp_path):
    """A parameters override runs after the tagged cell (here N = 5 gives 15),
    names only what that cell assigns, and leaves the notebook unstamped."""
    root, path = _tiny_repo(tmp_path)
    run = notebooks.execute(path, root=root, parameters={"N": 5})
    assert run.nb.cells[2].outputs[0]["text"] == "15\ny\n"
    assert notebooks.STAMP not in run.nb.metadata
    with pytest.raises(InputError, match="does not set M"):
        notebooks.with_parameters(notebooks.read(path), {"M": 1}, "tiny")


def test_a_cell_that_raises_names_the_notebook_and_cell(tmp_path):
    """A failing cell stops the run with the notebook, the cell and the error."""
    root, path = _tiny_repo(tmp_path)
    nb = notebooks.read(path)
    nb.cells.append(nbformat.v4.new_code_cell("1 / 0"))
    nbformat.write(nb, path)
    with pytest.raises(notebooks.NotebookError, match=r"tiny.ipynb: cell 2 raised(.|\n)*"
                                                      "ZeroDivisionError"):
        notebooks.execute(path, root=root)


def test_command_line_checks_and_refuses_bad_input(tmp_path, capsys):
    """``--check`` exits 0 when the stored notebooks are fresh and 1 with the
    reasons when one is stale; a missing notebook or a bad --set exits 2."""
    assert notebooks.main(["--check", str(BUDGETS)]) == 0
    _, path = _tiny_repo(tmp_path)
    assert notebooks.main(["--check", str(path)]) == 1
    assert "no stamp" in capsys.readouterr().out
    assert notebooks.main([str(tmp_path / "nope.ipynb")]) == 2
    assert notebooks.main(["--set", "N", str(path)]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
