"""Issue 25's reproducers at the scenario door, as specs: whatever a scenario
file or its command line holds, ``run`` ends in a clean run (exit 0, the
whole results folder) or one clear error naming the file and the field
(exit 2), quickly, never a traceback, a hang or a finished run thrown away.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import sim.cli
from sim.scenario import limits

REPO = Path(__file__).resolve().parents[1]
RESULT_FILES = {"results.parquet", "summary.json", "report.md", "report.html"}


class Hang(Exception):
    """A command took longer than its time limit."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds``."""
    def _alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli(*argv: str, limit_s: int = 60) -> tuple[int, str, str]:
    """``python -m sim ARGV`` in this process: (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with time_limit(limit_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sim.cli.main(list(argv))
    return status, out.getvalue(), err.getvalue()


def run(path: Path, out: Path, *extra: str, command: str = "run",
        limit_s: int = 60) -> tuple[int, str, str]:
    return cli(command, str(path), "--workers", "1", "--quiet", "--format", "json",
               "--out", str(out), *extra, limit_s=limit_s)


def error_only(stdout: str, source: Path) -> bool:
    """Nothing on stdout but, under ``--format json``, the error as one JSON object."""
    if not stdout:
        return True
    error = json.loads(stdout)["error"]
    return error["status"] == 2 and error["file"] == str(source)


def refused(status: int, stdout: str, stderr: str, source: Path, field: str) -> None:
    """Exit 2 with one ``error: <file>: <field>: ...`` line on stderr, and no result
    on stdout (only the same error as JSON: the commands run with ``--format json``)."""
    assert status == 2, stderr
    assert error_only(stdout, source), stdout
    assert stderr.startswith(f"error: {source}: {field}"), stderr
    assert "Traceback" not in stderr


def scenario(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------- item 1: mathtext labels
@pytest.mark.parametrize("text", ['name: "a $x^$"\n',
                                  'name: "$x^$ y"\nsweep:\n  harness.model: '
                                  '["claude-sonnet-4-5", "$\\\\frac{$ x"]\n'
                                  'harness:\n  prices: seed001\n'],
                         ids=["name", "sweep value"])
def test_a_dollar_in_a_name_or_sweep_value_keeps_the_finished_run(tmp_path, text) -> None:
    """Labels are plain text: ``$...$`` in a scenario name or a sweep value is
    drawn as written, and the whole folder is written."""
    path = scenario(tmp_path, text)
    out = tmp_path / "out"
    command = "sweep" if "sweep" in text else "run"
    status, stdout, stderr = run(path, out, "--tasks", "3", command=command)
    assert status == 0, stderr
    assert {p.name for p in out.iterdir()} >= RESULT_FILES
    assert json.loads(stdout)["cells"]


def test_a_figure_that_cannot_be_drawn_says_so_instead_of_raising() -> None:
    """png_bytes and the figure builders never raise: a figure whose drawing
    fails, or a builder given data it cannot plot, gives a PNG saying why."""
    from matplotlib.figure import Figure

    from sim.output.figures import new_figure, outcome_bars, png_bytes

    fig, (ax,) = new_figure(2.0)
    ax.plot([1.0, 2.0], [1.0, 2.0])

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    fig.draw = broken  # type: ignore[method-assign]
    assert png_bytes(fig)[:8] == b"\x89PNG\r\n\x1a\n"
    odd = outcome_bars({"a": {"succeeded": "not a share"}})  # type: ignore[dict-item]
    assert isinstance(odd, Figure)
    assert any("could not be drawn" in t.get_text() for t in odd.texts)
    assert png_bytes(odd)[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------- item 9: values that crashed or hung
@pytest.mark.parametrize("text, field", [
    ("world:\n  difficulty:\n    sigma: 1000\n", "world.difficulty.sigma"),
    ("world:\n  difficulty:\n    mu: -1000\n", "world.difficulty.mu"),
    ("engine: des\nworld:\n  difficulty:\n    mu: -1000\n", "world.difficulty.mu"),
    ("world:\n  tools:\n    - {name: t, duration: {median_s: 1, sigma: 50}}\n",
     "world.tools[0].duration.sigma"),
    ("harness:\n  retry:\n    max_attempts: 1000000000\nworld:\n  faults:\n"
     "    rate_limit: 1.0\n", "harness.retry.max_attempts"),
], ids=["sigma 1000", "mu -1000", "mu -1000 des", "tool sigma 50", "max_attempts 1e9"])
def test_values_that_overflowed_or_grew_memory_are_refused(tmp_path, text, field) -> None:
    """Bounds checked before anything runs: a lognormal's log-sd and
    log-median (every draw stays a finite float), and retries of one call."""
    path = scenario(tmp_path, text)
    status, stdout, stderr = run(path, tmp_path / "out", "--tasks", "20")
    refused(status, stdout, stderr, path, field)
    assert not (tmp_path / "out").exists()


def test_the_most_retries_allowed_with_every_call_rate_limited_ends_quickly(tmp_path) -> None:
    """retry.max_attempts at its bound with faults.rate_limit 1.0: every run
    ends as failed:retries_exhausted, in seconds."""
    path = scenario(tmp_path, f"harness:\n  retry:\n    max_attempts: {limits.MAX_ATTEMPTS}\n"
                              "world:\n  faults:\n    rate_limit: 1.0\n")
    status, stdout, stderr = run(path, tmp_path / "out", "--tasks", "3", limit_s=60)
    assert status == 0, stderr
    assert json.loads(stdout)["cells"][0]["outcomes"] == {"failed:retries_exhausted": 1.0}


@pytest.mark.slow
def test_a_run_that_nothing_stops_ends_at_the_simulation_ceiling(tmp_path) -> None:
    """scenarios/replay.yaml (no budgets, no detector, a huge window) run as
    a simulation finishes: a doom loop ends at MAX_RUN_STEPS model calls as
    budget_exhausted:steps."""
    status, stdout, stderr = run(REPO / "scenarios" / "replay.yaml", tmp_path / "out",
                                 "--tasks", "20", limit_s=120)
    assert status == 0, stderr
    cell = json.loads(stdout)["cells"][0]
    assert cell["steps"]["max"] <= limits.MAX_RUN_STEPS
    assert sum(cell["outcomes"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_a_scenario_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path,
                                                                            kind) -> None:
    """A FIFO (opening it would block), /dev/zero (endless) or a folder: exit 2
    at once, nothing read."""
    if kind == "fifo":
        path = tmp_path / "pipe.yaml"
        os.mkfifo(path)
    elif kind == "dev_zero":
        path = Path("/dev/zero")
    else:
        path = tmp_path
    status, stdout, stderr = run(path, tmp_path / "out", limit_s=20)
    assert status == 2 and error_only(stdout, path), stdout
    assert stderr.startswith((f"error: {path}: not a regular file",
                              f"error: {path}: is a folder")), stderr


def test_a_file_growing_past_the_bound_is_read_no_further(tmp_path, monkeypatch) -> None:
    """The read itself is bounded (a file may grow after its size is checked)."""
    from sim.scenario import loading

    monkeypatch.setattr(loading, "MAX_FILE_BYTES", 10)
    path = scenario(tmp_path, "name: abcdefghijklmnop\n")
    status, _stdout, stderr = run(path, tmp_path / "out")
    assert status == 2 and "larger than 10 bytes" in stderr


@pytest.mark.parametrize("byte", ["\x01", "\x7f", "\ufffe"])
def test_a_control_character_is_a_clear_yaml_error(tmp_path, byte) -> None:
    """A character YAML does not allow is one error line, not a ReaderError traceback."""
    path = scenario(tmp_path, f'name: "a{byte}b"\n')
    status, stdout, stderr = run(path, tmp_path / "out")
    refused(status, stdout, stderr, path, "malformed YAML")


def test_a_control_character_in_a_set_value_is_taken_as_text(tmp_path) -> None:
    """--set values that are not YAML are their own text (then validated)."""
    path = scenario(tmp_path, "tasks: 2\n")
    status, _, stderr = run(path, tmp_path / "out", "--set", "description=a\x01b")
    assert status == 0, stderr


def test_csv_arrivals_fewer_than_the_tasks_are_refused_before_simulating(tmp_path) -> None:
    """A CSV of 3 arrivals for 20 tasks: exit 2 naming des.arrivals.path."""
    (tmp_path / "arr.csv").write_text("arrival_s\n0\n1\n2\n", encoding="utf-8")
    path = scenario(tmp_path, "engine: des\ndes:\n  arrivals:\n    kind: csv\n"
                              "    path: arr.csv\n")
    status, stdout, stderr = run(path, tmp_path / "out", "--tasks", "20")
    refused(status, stdout, stderr, path, "des.arrivals.path")
    assert "3 arrivals, fewer than the 20 tasks" in stderr
    status, _, stderr = run(path, tmp_path / "out", "--tasks", "3")
    assert status == 0, stderr


# --------------------------------------------------- smaller: falsy names
@pytest.mark.parametrize("value", ["null", "[]", "0", "no", "false", "{}"])
def test_a_name_that_is_not_a_string_is_an_error_not_the_file_stem(tmp_path, value) -> None:
    path = scenario(tmp_path, f"name: {value}\n")
    status, stdout, stderr = run(path, tmp_path / "out", "--tasks", "2")
    refused(status, stdout, stderr, path, "name")
    assert "name:" in stderr


@pytest.mark.parametrize("text", ["tasks: 2\n", "name: ''\ntasks: 2\n"], ids=["absent", "empty"])
def test_an_absent_or_empty_name_is_the_file_stem(tmp_path, text) -> None:
    path = scenario(tmp_path, text, name="stem.yaml")
    status, stdout, stderr = run(path, tmp_path / "out")
    assert status == 0, stderr
    assert json.loads(stdout)["cells"][0]["name"] == "stem"


# ------------------------------------------------------ smaller: the flags
@pytest.mark.parametrize(("argv", "flag"), [
    (["run", "{bounded}", "--cost-ceiling", "nan"], "--cost-ceiling"),
    (["run", "{bounded}", "--cost-ceiling", "-1"], "--cost-ceiling"),
    (["run", "{bounded}", "--cost-ceiling", "inf"], "--cost-ceiling"),
    (["sweep", "{bounded}", "--cost-ceiling", "0"], "--cost-ceiling"),
    (["run", "{bounded}", "--out", ""], "--out"),
    (["sweep", "{bounded}", "--out", " "], "--out"),
    (["compare", "{bounded}", "{bounded}", "--resamples", str(10**12)], "--resamples"),
    (["compare", "{bounded}", "{bounded}", "--alpha", "nan"], "--alpha"),
    (["compare", "{bounded}", "{bounded}", "--max-cost-rise", "inf"], "--max-cost-rise"),
    (["compare", "{bounded}", "{bounded}", "--out", ""], "--out"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_flags_out_of_bounds_are_refused_before_anything_runs(tmp_path, argv, flag) -> None:
    """NaN, infinite, negative or zero ceilings, an empty --out and 10**12
    resamples: exit 2 naming the flag, at once (they were accepted, silently
    defaulted or hung)."""
    bounded = str(REPO / "scenarios" / "bounded.yaml")
    status, stdout, stderr = cli(*[a.format(bounded=bounded) for a in argv], limit_s=20)
    assert status == 2 and stdout == ""
    assert f"argument {flag}" in stderr and "Traceback" not in stderr
