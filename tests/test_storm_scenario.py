"""The shipped storm scenario (issue 40, item 4): it loads as documented,
its sweep writes the same bytes on one or two workers, its base cell is a
storm (runs die of exhausted retries), the report names the cap that
keeps the storm away for each retry policy, and the Python API's per-cell
results carry each cell's storm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.analysis.capacity import storm_knee
from sim.api import read_results, sweep
from sim.cli import main
from sim.output.markdown import storm_markdown
from sim.scenario.model import load_scenario
from sim.sweeps.cells import cells_of

ROOT = Path(__file__).parents[1]
STORM = ROOT / "scenarios" / "storm.yaml"
FILES = ("results.parquet", "summary.json", "report.md")
CAPS = "[null, 16, 12, 10, 8, 4]"


def test_the_scenario_loads_as_its_header_says() -> None:
    """40 runs at t=0 (a batch) against 60 requests/minute; the base cell
    retries twice without jitter, ignoring Retry-After; the sweep crosses 3
    retry policies with 6 caps on concurrent model calls (18 cells)."""
    scenario = load_scenario(str(STORM), [])
    des = scenario.des
    assert (scenario.engine, scenario.tasks, des.arrivals.kind) == ("des", 40, "batch")
    assert des.capacity.requests_per_minute == 60
    retry = scenario.harness.retry
    assert (retry.max_attempts, retry.jitter, retry.honor_retry_after) == (2, 0.0, False)
    assert len(cells_of(scenario)) == 18
    assert scenario.sweep["des.capacity.model_slots"] == [None, 16, 12, 10, 8, 4]


def test_a_smaller_sweep_writes_the_same_bytes_on_one_or_two_workers(tmp_path: Path) -> None:
    """The three policies at caps 8 and 16: identical results.parquet,
    summary.json and report.md with --workers 1 and --workers 2."""
    small = tmp_path / "storm.yaml"
    text = STORM.read_text()
    assert CAPS in text
    small.write_text(text.replace(CAPS, "[8, 16]"))
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert main(["sweep", str(small), "--workers", workers, "--quiet",
                     "--out", str(out)]) == 0
        outs.append({name: (out / name).read_bytes() for name in FILES})
    assert outs[0] == outs[1]
    summary = json.loads(outs[0]["summary.json"])
    rows = storm_knee(summary["cells"], "des.capacity.model_slots")
    assert len(rows) == 3 and all(row["caps"] == [8, 16] for row in rows)
    # the report's "Retry storm" section has one row per policy, naming its answer
    report = outs[0]["report.md"].decode()
    section = report[report.index("## Retry storm"):].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(table) == 3
    for row, line in zip(rows, table, strict=True):
        answer = str(row["knee"]) if row["ok"] else "none of the swept caps"
        assert line.split(" | ")[-2] == answer


def test_the_base_cell_is_a_storm_and_a_cap_of_8_calms_it(tmp_path: Path) -> None:
    """The file without its sweep (no cap, 2 retries, no jitter): requests
    are answered 429 and runs die as failed:retries_exhausted; with at most
    8 model calls at once (8 calls of about 8 s: about 1 request/s, the
    account's 60 per minute) none is answered 429 and none dies."""
    sections = {}
    for name, extra in (("storm", []), ("capped", ["--set", "des.capacity.model_slots=8"])):
        out = tmp_path / name
        assert main(["run", str(STORM), "--quiet", "--workers", "1", "--out", str(out),
                     *extra]) == 0
        cell = json.loads((out / "summary.json").read_text())["cells"][0]
        sections[name] = cell["capacity"]["storm"]
    storm, capped = sections["storm"], sections["capped"]
    assert storm["runs_died"] > 0 and storm["share_429"] > 0.01
    assert storm["peak_requests_per_s"] >= 40  # the 40 first calls at t=0
    assert storm["retries"] > 0 and storm["amplification"] > 1
    assert (capped["rejected"], capped["runs_died"], capped["retries"]) == (0, 0, 0)
    assert capped["amplification"] == 1.0
    assert capped["peak_requests_per_s"] <= 8


def _cell(policy: str, cap: int | None, share: float, died: int) -> dict[str, Any]:
    """A summary cell of a storm sweep with the given storm numbers."""
    return {"params": {"harness.retry.max_attempts": policy, "des.capacity.model_slots": cap},
            "capacity": {"storm": {"share_429": share, "runs_died": died,
                                   "time_to_finish_s": {"p95": 100.0}}}}


def test_the_knee_is_the_largest_calm_cap_and_none_is_said_so() -> None:
    """Policy a: calm at 4 and 8 (0.5% < 1%, no deaths), a storm from 12
    (2%) and with no cap: the knee is 8, the storm from 12. Policy b: a run
    dies at every cap: no swept cap keeps the storm away."""
    cells = [_cell("a", None, 0.30, 3), _cell("a", 12, 0.02, 0), _cell("a", 8, 0.005, 0),
             _cell("a", 4, 0.0, 0), _cell("b", 4, 0.0, 1), _cell("b", None, 0.5, 9)]
    a, b = storm_knee(cells, "des.capacity.model_slots")
    assert a["settings"] == {"harness.retry.max_attempts": "a"}
    assert (a["caps"], a["calm"]) == ([4, 8, 12, None], [True, True, False, False])
    assert (a["ok"], a["knee"], a["storm_from"]) == (True, 8, 12)
    assert (b["caps"], b["ok"], b["storm_from"]) == ([4, None], False, 4)


def test_the_report_finds_a_swept_cap_on_concurrent_runs_too() -> None:
    """A sweep over a tenant's max_concurrency (runs at once) gets its own
    "Retry storm" section naming its knee; a sweep without a cap gets none."""
    cells = [{**c, "params": {"des.tenants.0.max_concurrency": c["params"][
        "des.capacity.model_slots"], "harness.retry.max_attempts": 2}}
        for c in (_cell("a", 8, 0.0, 0), _cell("a", 16, 0.2, 5))]
    section = storm_markdown(cells)
    assert section[0] == "## Retry storm"
    assert "`des.tenants.0.max_concurrency`" in section[1]
    assert section[1].splitlines()[-1].endswith("| 8 | 16 |")
    assert storm_markdown([{**cells[0], "params": {"harness.retry.max_attempts": 2}}]) == []


def test_the_python_sweep_and_read_results_carry_each_cells_storm(tmp_path: Path) -> None:
    """sim.sweep's per-cell results (and sim.read_results's of a folder) hold
    each cell's capacity.storm as storm_<key> columns (a nested one as
    storm_<key>_<stat>), the numbers summary.json's cells hold for the same
    sweep; a sweep without a rate limit has no storm column."""
    overrides = {"sweep": {"des.capacity.model_slots": [8, None]}}
    _, summary = sweep(str(STORM), overrides, tasks=40, workers=1)
    out = tmp_path / "storm"
    small = tmp_path / "storm.yaml"
    small.write_text(STORM.read_text().split("\nsweep:")[0]
                     + "\nsweep:\n  des.capacity.model_slots: [8, null]\n")
    assert main(["sweep", str(small), "--workers", "1", "--quiet", "--out", str(out)]) == 0
    cells = json.loads((out / "summary.json").read_text())["cells"]
    for frame in (summary, read_results(out).summary):
        assert len(frame) == 2
        for (_, row), cell in zip(frame.iterrows(), cells, strict=True):
            storm = cell["capacity"]["storm"]
            assert row["storm_share_429"] == storm["share_429"]
            assert row["storm_runs_died"] == storm["runs_died"]
            assert row["storm_retries"] == storm["retries"]
            assert row["storm_time_to_finish_s_p95"] == storm["time_to_finish_s"]["p95"]
    assert summary["storm_runs_died"].tolist()[0] == 0  # a cap of 8 calms it (see above)
    assert summary["storm_runs_died"].tolist()[1] > 0
    _, plain = sweep("scenarios/bounded.yaml", {"sweep": {"harness.detector.nudges": [0, 1]}},
                         tasks=20, workers=1)
    assert not [c for c in plain.columns if c.startswith("storm_")]
