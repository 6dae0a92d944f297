"""Where a part may reach into a lower part only for its types and
parameters, not to run it (docs/architecture.md): the module-level rules
that ``tests/layering.toml`` (which names parts, not modules) cannot say."""

from __future__ import annotations

import ast
from pathlib import Path

SIM = Path(__file__).resolve().parent.parent / "sim"

SCENARIO_MAY_NAME = {"sim.engines.des_params", "sim.engines.arrivals"}
"""What sim/scenario takes from the engines: the DES parameter types and the
arrival schedule (drawn or read from a CSV), never an engine that runs."""

ANALYSIS_MAY_NAME = {"sim.engines.des_result", "sim.engines.monitor"}
"""What sim/analysis takes from the engines: the DES result type and the
monitors' series it computes from, never an engine that runs (a cell's
children table is run in sim/sweeps/fanout.py)."""


def imported(folder: str, part: str = "sim.engines") -> dict[str, set[str]]:
    """Each module of ``part`` (default ``sim.engines``) imported by a module
    of ``sim/<folder>`` (anywhere in it: module level, functions,
    TYPE_CHECKING), with the files that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((SIM / folder).rglob("*.py")):
        for name in imported_by_file(path, part):
            found.setdefault(name, set()).add(path.name)
    return found


def imported_by_file(path: Path, part: str) -> list[str]:
    """The modules of ``part`` (``part`` itself or below it) that the file
    ``path`` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                 else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        found += [name for name in names if name == part or name.startswith(part + ".")]
    return found


def test_the_scenario_names_engine_parameters_and_arrivals_only() -> None:
    """sim/scenario imports sim.engines.des_params and sim.engines.arrivals,
    no other engine module (the DES arrival check reads the schedule without
    running the DES)."""
    used = imported("scenario")
    assert set(used) <= SCENARIO_MAY_NAME, {m: f for m, f in used.items()
                                            if m not in SCENARIO_MAY_NAME}
    assert "sim.engines.arrivals" in used  # the check is still made, from its home


def test_no_engine_module_is_found_where_none_is_imported(tmp_path: Path) -> None:
    """The finder sees an import inside a function (a rule that cannot fail
    proves nothing)."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "m.py").write_text("def f():\n    from sim.engines.des import DesEngine\n")
    global SIM
    saved, SIM = SIM, tmp_path
    try:
        assert imported("x") == {"sim.engines.des": {"m.py"}}
    finally:
        SIM = saved


def test_capacity_sizing_runs_the_des_above_analysis() -> None:
    """Sizing, which runs the DES many times, lives in sim/sweeps (a long
    job), not in sim/analysis; analysis reads the DES result type from its
    own module (sim.engines.des_result), not from the engine."""
    assert not (SIM / "analysis" / "sizing.py").exists()
    assert (SIM / "sweeps" / "sizing.py").exists()
    assert "sim.engines.des" not in imported("analysis")


def test_analysis_names_engine_result_types_only() -> None:
    """sim/analysis imports sim.engines.des_result and sim.engines.monitor
    (the results it computes from), no engine that runs tasks: the
    children table's tasks run in sim/sweeps/fanout.py."""
    used = imported("analysis")
    assert set(used) <= ANALYSIS_MAY_NAME, {m: f for m, f in used.items()
                                            if m not in ANALYSIS_MAY_NAME}
    assert "sim.engines.direct" in imported("sweeps")  # the run moved, not vanished


def test_calibration_writes_through_no_output_module() -> None:
    """sim/calibration imports no module of sim.output (its report is
    sim/api/calibration_report.py, its bars sim.progress, its Parquet reads
    sim.parquet), and sim.progress takes only sim.output.safe_text from
    output (a bar's name printed as text), so calibration reaches no writer
    of output's through it."""
    assert imported("calibration", "sim.output") == {}
    assert not (SIM / "calibration" / "report.py").exists()
    assert set(imported_by_file(SIM / "progress.py", "sim.output")) == {"sim.output.safe_text"}
