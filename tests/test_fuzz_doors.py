"""The doors of issue 41's campaign in CI: a few generated cases of every door
(``benchmarks/fuzz/doors.py``: ``--otel``, ``[tool.sim]``, ``$SIM_OUT``,
``compare --summary-md``, ``view``, ``scenarios``, ``cost``, ``tune``,
``replay``, ``calibrate``, every importer) through the campaign's own
detectors (``benchmarks/fuzz/checks.py``): no traceback, no hang, no
accepted nonsense, no data lost.

Cases are drawn by hypothesis, derandomized, a handful per door, each run
once per module (:func:`findings`); one test per door asserts that no check
failed. The detectors themselves are tested on inputs
made to trip them, so a door that finds nothing is not a door that cannot
find anything.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz.checks import (
    Finding,
    Ran,
    calls_nonsense,
    digest,
    escapes,
    leftovers,
    tracebacks,
    untouched,
    whole,
)
from benchmarks.fuzz.doors import DOORS, Lab

CASES = {"otel": 4, "project": 8, "sim_out": 3, "summary_md": 2, "view": 8, "scenarios": 8,
         "cost": 12, "tune": 3, "replay": 4, "calibrate": 1, "importers": 12, "flags": 6}
"""Generated cases per door in CI (the campaign runs :data:`DOORS`' counts)."""


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Finding]]:
    """Every door's findings over its CI cases, each drawn by hypothesis
    (derandomized) as the seed of the door's :class:`random.Random`."""
    lab = Lab(tmp_path_factory.mktemp("doors"))
    found: dict[str, list[Finding]] = {}
    for name, (door, _) in DOORS.items():
        found[name] = _run(door, CASES[name], lab)
    return found


def _run(door, cases: int, lab: Lab) -> list[Finding]:
    """The findings of ``cases`` hypothesis-drawn cases of ``door``."""
    kept: list[Finding] = []

    @settings(max_examples=cases, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32))
    def case(seed: int) -> None:
        kept.extend(door(random.Random(seed), lab))

    case()
    return kept


def test_every_door_has_ci_cases():
    """Each door of the campaign runs in CI (a new door needs its count here)."""
    assert set(CASES) == set(DOORS)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_generated_cases_of_each_door_find_no_defect(door, findings):
    """No traceback, hang, accepted nonsense or data lost on the door's
    generated cases (issue 41's defects included: output targets,
    ``[tool.sim]``, ``SIM_OUT``, ``cost --model``, nameless tools, escaping)."""
    found = findings[door]
    assert found == [], "\n\n".join(f"{f.column}/{f.check}: {f.detail}" for f in found[:3])


# ---------------------------------------------------------------- detectors
def test_a_tool_named_none_is_accepted_nonsense(tmp_path: Path, monkeypatch):
    """calls_nonsense flags a tool named "None" in a folder sim's writer
    wrote (one finding), and nothing in the same folder with the tool named
    "bash". (The writer refuses "None" itself now; its check is switched off
    here to make the folder the detector must catch.)"""
    import sim.traces.repairs
    from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
    from sim.traces.writer import write_runs

    def folder(name: str, tokens: int, where: Path) -> Path:
        where.mkdir()
        write_runs(where, [RunRecord(
            run_id="r", source="sim", file="f", model="m", calls=[CallRecord(
                Usage(input_tokens=tokens, output_tokens=1),
                tool_calls=[ToolCallRecord(name=name, id="c", arguments="{}")])])])
        return where

    monkeypatch.setattr(sim.traces.repairs, "is_tool_name", lambda value: True)
    clean = calls_nonsense(folder("bash", 5, tmp_path / "clean"), True)
    assert clean == []
    found = calls_nonsense(folder("None", 5, tmp_path / "none"), True)
    assert [f.check for f in found] == ["nameless-tool"]


def test_raw_markup_and_escapes_from_the_input_are_accepted_nonsense():
    """escapes flags raw <script>, <img> and ESC only when the input held them,
    and markup only in reports (not on a terminal)."""
    assert len(escapes("a <script>x", True, "r")) == 1
    assert escapes("a <script>x", False, "r") == []
    assert escapes("a <script>x", True, "stdout", markup=False) == []
    assert len(escapes("a \x1b[31m", True, "stdout", markup=False)) == 1
    assert escapes("&lt;script&gt; tab\tnew\n", True, "r") == []


def test_a_changed_file_and_a_temporary_file_left_are_data_lost(tmp_path: Path):
    """untouched flags one changed file of a guarded folder; leftovers flags a
    .tmp file; whole wants every file of the set."""
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "summary.json").write_text("{}")
    before = digest([tmp_path / "keep"])
    assert untouched(before, [tmp_path / "keep"], "x") == []
    (tmp_path / "keep" / "summary.json").write_text("{} ")
    assert [f.column for f in untouched(before, [tmp_path / "keep"], "x")] == ["data_lost"]
    assert leftovers(tmp_path) == []
    (tmp_path / "x.json.tmp").write_text("")
    assert len(leftovers(tmp_path)) == 1
    assert not whole(tmp_path / "keep")


def test_an_exception_or_an_exit_outside_the_table_is_a_traceback():
    """tracebacks flags an escaped exception, "Traceback" on stderr and exit
    75; not exit 2 with a message."""
    assert tracebacks(Ran(["x"], 2, "", "error: bad")) == []
    assert len(tracebacks(Ran(["x"], None, "", "", ValueError("boom")))) == 1
    assert len(tracebacks(Ran(["x"], 2, "", "Traceback (most recent call last)"))) == 1
    assert len(tracebacks(Ran(["x"], 75, "", ""))) == 1
