"""The README as a newcomer uses it: its Python API example runs as written
in a fresh temporary folder (the shared tau2-bench traces resolved where
they are), every ``sim`` command of its shell blocks parses, and the figures
it quotes for ``traces summary`` on the tau2-bench runs are those a real
import gives today."""

from __future__ import annotations

import functools
import re
import shlex
import types
from pathlib import Path

import pytest
from test_api_journey import FAST_FIT
from traces_helpers import data_folder

import sim
from sim.bad_input import InputError
from sim.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TAU2_RAW = "../shared/data/traces/tau2/raw"
"""How the README names the shared tau2-bench runs (beside the repository)."""


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.M | re.S)


def section(title: str) -> str:
    """The README's text from the heading ``## title`` to the next ``## ``."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def sim_commands() -> list[list[str]]:
    """Every ``python -m sim ...`` or ``sim ...`` command of the bash blocks,
    as its arguments after ``sim`` (continuations joined, comments dropped,
    commands split at ``&&`` and ``;``)."""
    found = []
    for block in blocks("bash"):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", ";", "||"):
                    if command[:3] == ["python", "-m", "sim"]:
                        found.append(command[3:])
                    elif command[:1] == ["sim"]:
                        found.append(command[1:])
                    command = []
                else:
                    command.append(word)
    return found


def test_the_readme_has_sim_commands_to_check():
    """The check below is not vacuous: the README's shell blocks hold at
    least sweep, compare, replay, traces import, calibrate and live."""
    assert {argv[0] for argv in sim_commands()} >= {"sweep", "compare", "replay", "traces",
                                                    "calibrate", "live"}


@pytest.mark.parametrize("argv", sim_commands(), ids=lambda argv: " ".join(argv)[:60])
def test_every_sim_command_in_the_readme_parses(argv):
    """Each command is one the CLI accepts (its command, options and
    choices): argparse does not refuse it."""
    parser = build_parser("sim")
    try:
        parser.parse_args(argv)
    except SystemExit as stop:  # argparse's usage error
        pytest.fail(f"the README's `sim {' '.join(argv)}` does not parse (exit {stop.code})")


def test_the_traces_summary_figures_match_a_real_import(tmp_path):
    """The README's sentence on ``traces summary`` of the tau2-bench files
    (runs, steps p50/p95/max, median R²) states what an import of them
    gives now, and the tuning section's run count is the same."""
    from sim.traces.importer import import_traces
    from sim.traces.summary import summarize

    raw = data_folder("tau2", "raw")
    import_traces([raw], tmp_path / "tau2")
    summary = summarize(tmp_path / "tau2")
    quoted = re.search(r"it shows ([\d,]+) runs .*?steps p50 (\d+), p95 (\d+), max (\d+), "
                       r"and a\s+median R² of (\d+(?:\.\d+)?)", README, flags=re.S)
    assert quoted is not None, "the README no longer quotes the summary's figures"
    runs, p50, p95, high, r2 = quoted.groups()
    steps = summary["steps"]
    assert (int(runs.replace(",", "")), int(p50), int(p95), int(high)) == (
        summary["runs"], steps["p50"], steps["p95"], steps["max"])
    assert r2 == f"{summary['prompt_fit']['r2']:.2f}"
    tuning = re.search(r"On tau2-bench's ([\d,]+) runs", section("Tuning limits"))
    assert tuning is not None and int(tuning.group(1).replace(",", "")) == summary["runs"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded runs to import: 60 tasks of ``bounded`` with their calls."""
    out = tmp_path_factory.mktemp("runs") / "bounded"
    assert main(["run", "bounded", "--traces", "--tasks", "60", "--workers", "1", "--quiet",
                 "--out", str(out)]) == 0
    return out


def api_block() -> str:
    """The README's Python API example (the block that imports the traces)."""
    (code,) = [b for b in blocks("python") if "sim.import_traces(" in b]
    assert TAU2_RAW in code
    return code


def test_the_python_api_example_runs_twice_in_one_folder(recorded, tmp_path, monkeypatch,
                                                         capsys):
    """A user runs the example, then runs it again (or ran the shell block
    that imports into ``traces/tau2`` first): both runs succeed in the same
    folder; every step writes where it says. On 60 simulated runs with the
    calibration and the forecasts at test sizes (test_api_journey's)."""
    code = api_block().replace(TAU2_RAW, str(recorded)).replace("import sim\n", "")
    fast = types.SimpleNamespace(
        import_traces=sim.import_traces, replay=sim.replay,
        calibrate=functools.partial(sim.calibrate, **FAST_FIT),
        tune=functools.partial(sim.tune, forecast_runs=200, knobs="steps"))
    monkeypatch.chdir(tmp_path)
    for attempt in (1, 2):
        namespace: dict = {"sim": fast}
        try:
            exec(compile(code, "README.md (Python API)", "exec"), namespace)
        except InputError as error:
            pytest.fail(f"run {attempt} of the README's Python API example: {error}")
        for name in ("imported", "fit", "replayed", "tuned"):
            assert namespace[name].path.exists(), name
    capsys.readouterr()


@pytest.mark.slow  # an import, a 5-fold calibration, a replay and a tune of 700 runs: minutes
def test_the_python_api_example_runs_as_written_in_a_fresh_folder(tmp_path, monkeypatch,
                                                                   capsys):
    """The README's Python API block, run as a script in an empty folder
    (only the shared traces' path resolved): no error; it writes the trace
    folder and the fitted world it names."""
    code = api_block().replace(TAU2_RAW, str(data_folder("tau2", "raw")))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md (Python API)", "exec"), {"__name__": "__readme__"})
    assert (tmp_path / "traces" / "tau2" / "runs.parquet").is_file()
    assert (tmp_path / "worlds" / "tau2.yaml").is_file()
    assert capsys.readouterr().out.strip()
