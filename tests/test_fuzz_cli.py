"""Generated command lines and mutated sample scenarios (issue 25, "What to
build" item 2): whatever the flags and whatever a real sample file is
mutated into, a command exits 0, 1, 2 or 3, prints no traceback, answers
within a time limit and, on exit 0, writes its whole folder.

The flags are drawn around each one's bounds (NaN, infinities, negative,
huge, empty, text where numbers belong); the scenarios are the project's own
``scenarios/*.yaml`` with one value replaced by an odd one, found by walking
the file (so the generator follows the samples as they change).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim.cli

REPO = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p for p in (REPO / "scenarios").glob("*.yaml") if p.name != "tau2.yaml")
TIME_LIMIT_S = 60
EXITS = {0, 1, 2, 3}
RESULT_FILES = {"results.parquet", "summary.json", "report.md", "report.html"}

ODD_NUMBERS = ["nan", "inf", "-inf", "-1", "0", "1e308", "10" * 20, "", "x", "1.5", "2",
               "1000000000000"]
ODD_VALUES: list[Any] = [None, True, -1, 0, 10**13, 1e300, float("nan"), "x", "", [], {},
                         [1, 2], "$x^$", "\x00", 2**63, 1e-320, "../../etc", {"a": {"b": 1}}]


class Hang(Exception):
    """A command did not answer within TIME_LIMIT_S."""


def _alarm(signum, frame):
    raise Hang(f"no answer within {TIME_LIMIT_S} s")


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``python -m sim ARGV`` in this process, under a time limit."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = sim.cli.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return status, out.getvalue(), err.getvalue()


def leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a scalar of ``doc`` (keys and list positions)."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in leaves(v, (*path, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in leaves(v, (*path, i))] or [path]
    return [path]


def mutate(doc: Any, path: tuple, value: Any) -> Any:
    """``doc`` with the value at ``path`` replaced."""
    if not path:
        return value
    head, *rest = path
    copy = list(doc) if isinstance(doc, list) else dict(doc)
    copy[head] = mutate(doc[head], tuple(rest), value)
    return copy


@st.composite
def mutated_samples(draw) -> tuple[str, dict]:
    """A sample scenario with one leaf replaced by an odd value."""
    sample = draw(st.sampled_from(SAMPLES))
    doc = yaml.safe_load(sample.read_text(encoding="utf-8"))
    path = draw(st.sampled_from(leaves(doc)))
    return sample.name, mutate(doc, path, draw(st.sampled_from(ODD_VALUES)))


FLAGS = {
    "--tasks": ["2", "3", "0", "-5", "x", "10" * 10, "2.5"],
    "--seed": ["0", "7", "-1", "x", str(2**64)],
    "--workers": ["1", "0", "-1", "1000", "x"],
    "--cost-ceiling": ODD_NUMBERS,
    "--set": ["harness.budgets.steps=5", "harness.budgets.steps=nan", "x", "=", "a.b.c=1",
              "world.difficulty.sigma=1000", "tasks=2", "name=$x^$", "harness=[]",
              "harness.retry.max_attempts=1000000000"],
    "--format": ["json", "table", "xml"],
    "--out": ["", "OUT"],
}


@st.composite
def run_lines(draw) -> list[str]:
    """A ``run`` or ``sweep`` command line over a sample scenario."""
    command = draw(st.sampled_from(["run", "sweep"]))
    sample = draw(st.sampled_from([p for p in SAMPLES if p.name in ("bounded.yaml",
                                                                    "naive.yaml",
                                                                    "cached.yaml")]))
    argv = [command, str(sample), "--quiet", "--tasks", "2", "--workers", "1", "--out", "OUT"]
    for flag in draw(st.lists(st.sampled_from(sorted(FLAGS)), max_size=3, unique=True)):
        argv += [flag, draw(st.sampled_from(FLAGS[flag]))]
    return argv


COMPARE_FLAGS = {"--resamples": ["100", "99", "10" * 6, str(10**12), "x", "-1"],
                 "--alpha": ["0.05", "0", "1", "nan", "-0.1"],
                 "--max-share-drop": ["1", "-1", "nan", "inf", "101"],
                 "--max-cost-rise": ["5", "-5", "nan", "1e308"],
                 "--tasks": ["20", "0", "-1"], "--out": ["", "OUT"]}


@st.composite
def compare_lines(draw) -> list[str]:
    argv = ["compare", str(REPO / "scenarios" / "bounded.yaml"),
            str(REPO / "scenarios" / "bounded_stop_first.yaml"), "--quiet", "--workers", "1",
            "--tasks", "20", "--out", "OUT"]
    for flag in draw(st.lists(st.sampled_from(sorted(COMPARE_FLAGS)), max_size=2, unique=True)):
        argv += [flag, draw(st.sampled_from(COMPARE_FLAGS[flag]))]
    return argv


def check(status: int, stdout: str, stderr: str, out: Path, argv: list[str]) -> None:
    """The contract: an exit of the table, no traceback; a clean run writes
    the whole folder; a refusal says ``error:`` on stderr."""
    assert status in EXITS, (argv, status, stderr[-2000:])
    assert "Traceback" not in stderr, (argv, stderr[-2000:])
    if status == 0 and argv[0] in ("run", "sweep"):
        assert {p.name for p in out.iterdir()} >= RESULT_FILES, argv
        if "--format" in argv and argv[argv.index("--format") + 1] == "json":
            json.loads(stdout)
    if status == 2:
        assert "error" in stderr, (argv, stderr)


def _with_out(argv: list[str], out: Path) -> list[str]:
    return [str(out) if a == "OUT" else a for a in argv]


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=run_lines())
def test_generated_run_and_sweep_command_lines_exit_cleanly(tmp_path, argv) -> None:
    out = tmp_path / f"out{random.random()}"
    argv = [*_with_out(argv, out), "--force"]
    check(*cli(argv), out, argv)


@pytest.mark.slow
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=compare_lines())
def test_generated_compare_command_lines_exit_cleanly(tmp_path, argv) -> None:
    out = tmp_path / f"cmp{random.random()}"
    argv = [*_with_out(argv, out), "--force"]
    check(*cli(argv), out, argv)


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=mutated_samples())
def test_mutated_sample_scenarios_run_cleanly_or_are_refused_with_a_field(tmp_path,
                                                                         case) -> None:
    """One odd value anywhere in a real sample: a clean run, or exit 2 whose
    message names the file (never a traceback or a hang)."""
    name, doc = case
    path = tmp_path / name
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return
    path.write_text(text, encoding="utf-8")
    out = tmp_path / f"out{random.random()}"
    command = "sweep" if isinstance(doc, dict) and "sweep" in doc else "run"
    argv = [command, str(path), "--tasks", "2", "--workers", "1", "--quiet", "--format",
            "json", "--out", str(out), "--force"]
    status, stdout, stderr = cli(argv)
    check(status, stdout, stderr, out, argv)
    if status == 2:
        assert re.match(rf"error: ({re.escape(str(path))}|[^\n]*--)", stderr), stderr


def test_the_generators_make_what_they_say() -> None:
    """Sanity: leaves and mutate reach every scalar of a sample."""
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert leaves(doc) == [("a", "b"), ("a", "c", 0), ("a", "c", 1), ("d",)]
    assert mutate(doc, ("a", "c", 1), None) == {"a": {"b": 1, "c": [1, None]}, "d": "x"}
    assert doc["a"]["c"] == [1, 2]
