"""``sim tune``'s answer: ties go to the harness in force, and the headline is
one statement (what is safe to set now, what might save more and how many
runs would decide it).

Folders are written with the trace writer: ``ok`` successes of 3 calls and
``bad`` failures of 50 calls, so a step cap of 3 stops exactly the failures."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from sim.cli import main
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
from sim.traces.writer import write_runs
from sim.tuning.search import tune

START = datetime(2025, 1, 1, tzinfo=UTC)


def _run(i: int, calls: int, resolved: bool | None) -> RunRecord:
    return RunRecord(
        run_id=f"r{i}", source="sim", file="headline", model="gpt-4o",
        calls=[CallRecord(Usage(input_tokens=1000 * (k + 1), output_tokens=50),
                          tool_calls=[ToolCallRecord(name="t", id=f"c{k}", arguments="{}")],
                          model="gpt-4o") for k in range(calls)],
        resolved=resolved, exit="error" if resolved is False else "done", started_at=START)


def folder(tmp_path: Path, ok: int, bad: int, bad_calls: int = 50) -> Path:
    """``ok`` resolved runs of 3 calls, then ``bad`` failed runs of ``bad_calls``."""
    out = tmp_path / f"traces_{ok}_{bad}_{bad_calls}"
    out.mkdir()
    write_runs(out, [_run(i, 3, True) for i in range(ok)]
               + [_run(ok + i, bad_calls, False) for i in range(bad)])
    return out


def test_a_tie_with_the_harness_in_force_keeps_it(tmp_path):
    """When every run has the same length, a step cap at that length costs
    exactly what no cap costs and (keeping 90%) keeps successes: tune keeps
    the harness in force (it used to recommend the cap, a change that changes
    nothing), exit 0."""
    result = tune(folder(tmp_path, 40, 0), knobs="steps", keep_successes=0.9)
    assert result.status == 0
    assert result.recommendation.row["phase"] == "in force"
    assert dict(result.recommendation.setting) == {"steps": None}
    frame = result.frontier.set_index("setting")
    assert frame.loc["steps=3", "objective_ratio"] == 1.0  # the tie the rule breaks
    assert frame.loc["steps=3", "keeps_successes"]


def test_a_setting_that_saves_surely_is_set_in_one_statement(tmp_path, capsys):
    """600 successes of 3 calls and 30 failures of 50: steps=3 stops the 30
    failures and loses none of 600 successes (upper bound under 1%): exit 0,
    the headline says 'Set steps=3' with the saving, and nothing says
    INCONCLUSIVE."""
    traces = folder(tmp_path, 600, 30)
    status = main(["tune", str(traces), "--knobs", "steps", "--out", str(tmp_path / "o"),
                   "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    first = printed.splitlines()[0]
    assert first.startswith("Set steps=3: USD per run (mean)"), first
    assert "losing 0 of 600 recorded successes" in first
    assert "INCONCLUSIVE" not in printed and "Recommended:" not in printed


def test_thin_evidence_keeps_the_harness_and_says_what_might_save_more(tmp_path, capsys):
    """20 successes and 5 long failures: steps=3 loses none of 20 but its
    upper bound is far above 1%. One statement: INCONCLUSIVE, keep the
    harness in force, steps=3 might save more, and the runs that would decide;
    the same headline heads recommended.yaml and tune.json."""
    traces = folder(tmp_path, 20, 5)
    out = tmp_path / "o"
    status = main(["tune", str(traces), "--knobs", "steps", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 3
    first = printed.splitlines()[0]
    assert first.startswith("INCONCLUSIVE (exit 3): keep the harness in force (steps=unlimited)")
    assert "Might save more: steps=3 (replayed" in first
    assert "would decide (against 25 now)" in first
    assert printed.count("INCONCLUSIVE") == 1 and "Recommended:" not in printed
    assert first in (out / "recommended.yaml").read_text()
    assert first in (out / "tune.json").read_text()


def test_runs_that_record_no_outcome_are_said_to_be_unjudged_not_failed(tmp_path, capsys):
    """30 runs whose source records no outcome (``resolved`` empty, as an
    OpenTelemetry or Langfuse export): no success can be kept, so exit 3 as
    when none succeeded, but the headline and ``thin`` say that the runs do
    not say whether they succeeded, not that none did; the refused cheaper
    setting is not said to lose "n/a" of successes; tune.json counts 0
    judged runs. The same folder with 1 failed run is "none succeeded"."""
    unjudged = tmp_path / "unjudged"
    unjudged.mkdir()
    write_runs(unjudged, [_run(i, 3 + i % 7, None) for i in range(30)])
    out = tmp_path / "o"
    status = main(["tune", str(unjudged), "--knobs", "steps", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 3, printed
    first = printed.splitlines()[0]
    assert "no recorded run says whether it succeeded" in first, first
    assert "no recorded run succeeded" not in printed
    assert "n/a of successes" not in printed and "with no recorded success" in printed
    written = json.loads((out / "tune.json").read_text())
    assert written["judged_runs"] == 0 and "resolved is empty" in written["thin"]

    failed = tmp_path / "failed"
    failed.mkdir()
    write_runs(failed, [_run(0, 5, False)] + [_run(i, 3 + i % 7, None) for i in range(1, 30)])
    result = tune(failed, knobs="steps")
    assert result.status == 3 and result.judged_runs == 1
    assert result.thin is not None and result.thin.startswith("no recorded run succeeded")
