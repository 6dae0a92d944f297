"""The round trip every importer's test makes: import, ``sim traces summary``,
and a replay under limits that do not bind, which must reproduce every run
(the same calls, the same five token counts, the recorded cost, no stop)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from sim.cli import main
from sim.drivers.replay.reading import read_trace_folder
from sim.traces import import_traces, read_traces

SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "replay.yaml")


def imported(sources: list[Path], out: Path, *, source: str, runs: int):
    """Import ``sources`` into ``out``; check ``runs`` runs of ``source`` and no skip."""
    report = import_traces(sources, out)
    assert report.runs_by_source == {source: runs}, report.lines()
    assert not report.skips, [s.message() for s in report.skips]
    return report


def round_trip(traces: Path, tmp_path: Path, capsys) -> dict:
    """``traces summary`` (JSON) agrees with the folder, and a replay under
    non-binding limits reproduces every run whose calls all record usage (the
    others are refused by replay, counted); returns the summary."""
    recorded = {r.run_id: r for r in read_trace_folder(traces)}
    runs, calls = read_traces(traces)
    capsys.readouterr()
    assert main(["traces", "summary", "--format", "json", str(traces)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == len(runs) and summary["calls"] == len(calls)
    unknown = calls[calls["input_tokens"].isna() | calls["output_tokens"].isna()]
    assert len(recorded) == len(runs) - unknown["run_id"].nunique()
    assert sum(len(r.calls) for r in recorded.values()) == len(
        calls[~calls["run_id"].isin(unknown["run_id"])])
    if not recorded:
        return summary
    out = tmp_path / "replay"
    assert main(["replay", str(traces), SCENARIO, "--out", str(out), "--quiet"]) == 0
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == len(recorded)
    for row in rows.itertuples():
        run = recorded[row.run_id]
        calls = run.calls
        assert row.steps == len(calls)
        assert row.input_tokens == sum(c.usage.input_tokens for c in calls)
        assert row.cache_read_tokens == sum(c.usage.cache_read_tokens for c in calls)
        assert row.cache_write_tokens == sum(c.usage.cache_write_tokens for c in calls)
        assert row.output_tokens == sum(c.usage.output_tokens for c in calls)
        assert row.thinking_tokens == sum(c.usage.thinking_tokens for c in calls)
        if run.cost_usd is not None:
            assert math.isclose(row.cost_usd, run.cost_usd, rel_tol=1e-9, abs_tol=1e-12)
        assert not row.stopped and not row.diverged and row.saved_usd == 0.0
    return summary
