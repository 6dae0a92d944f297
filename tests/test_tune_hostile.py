"""``sim tune`` on hostile folders: exit 0 or 3 (2 for no runs), never a traceback.

Every folder here is small and real-shaped: written with the trace writer
(:func:`sim.traces.writer.write_runs`) from runs whose prompts are far below
the default output cap (16,384 tokens), so the harness in force has a window
smaller than one call's output unless tune sizes it; and cut by run from
tau2-bench's imported traces (same files, filtered rows; skipped without the
shared data)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from traces_helpers import data_folder

from sim.cli import main
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
from sim.traces.writer import write_runs

START = datetime(2025, 1, 1, tzinfo=UTC)


def _run(i: int, calls: int, *, prompt: int = 100, resolved: bool | None = True,
         cost: float | None = None, model: str = "gpt-4o", **fields) -> RunRecord:
    """Run ``r<i>`` of ``calls`` calls, call k with a prompt of ``prompt * (k + 1)``
    tokens, 10 output tokens and one tool call."""
    return RunRecord(
        run_id=f"r{i}", source="sim", file="hostile", model=model,
        calls=[CallRecord(Usage(input_tokens=prompt * (k + 1), output_tokens=10),
                          tool_calls=[ToolCallRecord(name="t", id=f"c{k}", arguments="{}")],
                          cost_usd=cost, model=model) for k in range(calls)],
        resolved=resolved, exit=None if resolved is None else ("done" if resolved else "error"),
        started_at=START, **fields)


HOSTILE: dict[str, list[RunRecord]] = {
    "one run": [_run(0, 5)],
    "two runs, one failed": [_run(0, 5), _run(1, 8, resolved=False)],
    "all runs failed": [_run(i, 3 + i, resolved=False) for i in range(10)],
    "no run says whether it resolved": [_run(i, 3 + i, resolved=None) for i in range(10)],
    "no cost, a model no catalogue knows": [_run(i, 3 + i, model="our-own-llm")
                                            for i in range(10)],
    "every call recorded at $0": [_run(i, 3 + i, cost=0.0) for i in range(10)],
    "all runs the same length": [_run(i, 4) for i in range(10)],
    "huge prompts": [_run(i, 3 + i, prompt=3_000_000) for i in range(10)],
    "zero-call runs only": [_run(i, 0) for i in range(5)],
    "zero-call runs among others": [_run(i, 0 if i % 2 else 4) for i in range(10)],
    "two models of different lengths, one with one run": [
        _run(i, 3 + (i % 2) * 9, model="gpt-4o" if i < 12 else "claude-3-5-sonnet-20241022")
        for i in range(20)] + [_run(20, 4, model="solo")],
    "a step limit in force (looser caps need a world; too few runs to fit)": [
        _run(i, 3 + i, step_limit=12) for i in range(10)],
    "100 runs of tiny prompts": [_run(i, 2 + i % 7, prompt=10, resolved=i % 3 != 0)
                                 for i in range(100)],
}
"""Folders whose largest prompt (but for 'huge prompts') is under the default
output cap; all but one state no limit, so every candidate is replayed (no
world to calibrate: fast)."""


def _tune(folder: Path, out: Path, capsys, *extra: str) -> tuple[int, str]:
    status = main(["tune", str(folder), "--out", str(out), "--quiet", *extra])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return status, captured.out + captured.err


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_folders_exit_0_or_3_and_write_the_outputs(case, tmp_path, capsys):
    """Each hostile folder gives exit 0 or 3, a one-statement headline and
    recommended.yaml, never a traceback (before the fix, every folder whose
    largest prompt was under 16,384 tokens raised ParameterError)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    write_runs(folder, HOSTILE[case])
    status, printed = _tune(folder, tmp_path / "out", capsys)
    assert status in (0, 3), printed
    assert (tmp_path / "out" / "recommended.yaml").is_file()


def test_a_folder_without_runs_exits_2_naming_it(tmp_path, capsys):
    """A trace folder of zero runs is bad input: exit 2, the folder named."""
    folder = tmp_path / "empty"
    folder.mkdir()
    write_runs(folder, [])
    status, printed = _tune(folder, tmp_path / "out", capsys)
    assert status == 2 and str(folder) in printed and "no runs" in printed


@pytest.fixture(scope="module")
def tau2(tmp_path_factory) -> Path:
    raw = data_folder("tau2", "raw")
    out = tmp_path_factory.mktemp("tau2") / "traces"
    assert main(["traces", "import", str(raw), "--out", str(out), "--quiet"]) == 0
    return out


def cut(source: Path, out: Path, run_ids: list[str]) -> Path:
    """A trace folder of the runs ``run_ids`` of ``source``: the same files,
    their rows filtered."""
    out.mkdir(parents=True)
    keep = pa.array(run_ids, pa.string())
    for name in ("runs.parquet", "calls.parquet"):
        table = pq.read_table(source / name)
        pq.write_table(table.filter(pc.is_in(table.column("run_id"), keep)), out / name)
    return out


@pytest.mark.parametrize("size", [1, 2, 10, 100])
def test_tau2_cuts_of_1_2_10_and_100_runs_exit_0_or_3(tau2, size, tmp_path, capsys):
    """The first ``size`` runs of tau2-bench whose calls all record usage, and
    ``size`` such runs taken from the end (other models, other domains): exit
    0 or 3 each; ``size`` runs none of whose calls record usage: exit 2, saying
    so (no run can be replayed)."""
    runs = pq.read_table(tau2 / "runs.parquet", columns=["run_id"]).column("run_id").to_pylist()
    calls = pq.read_table(tau2 / "calls.parquet", columns=["run_id", "input_tokens"])
    unknown = set(pc.filter(calls.column("run_id"),
                            pc.is_null(calls.column("input_tokens"))).to_pylist())
    ids = [r for r in runs if r not in unknown]
    for name, chosen in (("head", ids[:size]), ("tail", ids[-size:])):
        folder = cut(tau2, tmp_path / name, chosen)
        status, printed = _tune(folder, tmp_path / f"{name}_out", capsys)
        assert status in (0, 3), (name, printed)
    folder = cut(tau2, tmp_path / "unknown", [r for r in runs if r in unknown][:size])
    status, printed = _tune(folder, tmp_path / "unknown_out", capsys)
    assert status == 2 and "per-call usage absent" in printed, printed
