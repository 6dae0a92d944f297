"""``python -m sim traces summary`` (sim/traces/summary.py): the figures of a
trace folder, checked on folders built so that each figure is known."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from traces_helpers import call, run

import sim.cli
from sim.bad_input import InputError
from sim.cost import lookup_price_tiers
from sim.traces.model import CallRecord, Usage
from sim.traces.summary import prompt_fit, summarize
from sim.traces.writer import TraceWriter


def folder_of(tmp_path, runs):
    writer = TraceWriter(tmp_path)
    for r in runs:
        writer.add(r)
    writer.close()
    return tmp_path


def test_the_prompt_fit_recovers_an_exact_line_per_run():
    """prompt(n) = P + h*n exactly: the fit returns P and h with R^2 = 1."""
    ids, index, prompt = [], [], []
    for run_id, (p, h, n) in {"a": (1000, 50, 5), "b": (2000, 100, 4), "c": (3000, 10, 6)}.items():
        ids += [run_id] * n
        index += list(range(n))
        prompt += [p + h * i for i in range(n)]
    fit = prompt_fit(np.array(ids, dtype=object), np.array(index), np.array(prompt))
    assert fit == {"runs": 3, "P": 2000.0, "h": 50.0, "r2": 1.0}


def test_short_and_constant_runs_are_not_fitted():
    ids = np.array(["short", "short", "flat", "flat", "flat"], dtype=object)
    fit = prompt_fit(ids, np.array([0, 1, 0, 1, 2]), np.array([10, 20, 7, 7, 7]))
    assert fit == {"runs": 0, "P": None, "h": None, "r2": None}


def test_noise_lowers_r2_as_the_formula_says():
    """R^2 = 1 - SS_res/SS_tot for a line through noisy points."""
    rng = np.random.default_rng(3)
    n = np.arange(20)
    y = np.round(500 + 30 * n + rng.normal(0, 40, n.size)).astype(np.int64)
    fit = prompt_fit(np.array(["r"] * n.size, dtype=object), n, y)
    h, p = np.polyfit(n, y, 1)
    r2 = 1 - np.sum((y - p - h * n) ** 2) / np.sum((y - y.mean()) ** 2)
    assert (fit["P"], fit["h"], fit["r2"]) == pytest.approx((p, h, r2), rel=1e-9)


def test_summary_figures_of_a_known_folder(tmp_path):
    runs = [run(f"r{i}", [100 + 10 * k for k in range(steps)], exit=label, resolved=ok)
            for i, (steps, label, ok) in enumerate([(3, "done", True), (5, "done", False),
                                                    (4, "limit", None), (10, None, True)])]
    runs[0].calls[0] = call(100, read=60, write=20)
    summary = summarize(folder_of(tmp_path, runs))
    assert (summary["runs"], summary["calls"]) == (4, 22)
    assert summary["steps"] == {"p50": 5, "p95": 10, "max": 10, "mean": 5.5}
    assert summary["prompt_fit"] == {"runs": 4, "P": 100.0, "h": 10.0, "r2": 1.0}
    assert summary["output_per_call"] == {"p50": 10, "p95": 10}
    prompt = sum(c.usage.prompt_tokens for r in runs for c in r.calls)
    assert summary["cache"] == {"prompt_tokens": prompt, "read_share": 60 / prompt,
                                "write_share": 20 / prompt}
    assert summary["exit"] == {"done": 0.5, "(none)": 0.25, "limit": 0.25}
    assert summary["resolved"] == {"known": 3, "share": 2 / 3}
    assert "skipped" not in summary  # no import.json beside a hand-written folder


def test_recorded_cost_is_compared_with_the_catalogue_price_of_the_same_usage(tmp_path):
    """Each call priced at its model's catalogue prices on the run's start day."""
    model = "claude-sonnet-4-5"
    day = datetime(2025, 11, 1, tzinfo=UTC)
    calls = [CallRecord(Usage(input_tokens=i, cache_read_tokens=r, cache_write_tokens=w,
                              output_tokens=o))
             for i, r, w, o in ((1000, 2000, 500, 300), (300, 3000, 200, 100))]
    priced = run("priced", [], model=model, cost_usd=0.05, started_at=day)
    priced.calls = calls
    unknown = run("unknown", [10], model="no-such-model-xyz", cost_usd=1.0, started_at=day)
    free = run("free", [10], model=model)  # records no cost
    summary = summarize(folder_of(tmp_path, [priced, unknown, free]))
    tiers = lookup_price_tiers(model, when=day)
    expected = sum(tiers.at(u.prompt_tokens).cost(u.input_tokens, u.output_tokens,
                                                  u.cache_read_tokens, u.cache_write_tokens)
                   for u in (c.usage for c in calls))
    entry = summary["cost"]["by_model"][model]
    assert entry["runs"] == 1 and entry["recorded_usd"] == 0.05
    assert entry["catalogue_usd"] == pytest.approx(expected, rel=1e-12)
    assert entry["ratio"] == pytest.approx(0.05 / expected)
    assert summary["cost"]["not_in_catalogue"] == ["no-such-model-xyz"]
    assert summary["cost"]["runs_without_cost"] == 1


def test_recorded_cost_is_compared_at_the_price_of_the_runs_hour(tmp_path):
    """A time-of-day price (DeepSeek's: peak 00:30 to 16:30 UTC, off-peak
    otherwise, half the price) is read at each run's start: a run started at
    09:05 UTC is compared with the peak price, one at 18:40 with the
    off-peak one (at 00:00 UTC, the rule before, both read off-peak)."""
    model = "deepseek-chat"
    usage = Usage(input_tokens=20_000, cache_read_tokens=80_000, output_tokens=1_000)
    starts = {"peak": datetime(2026, 3, 9, 9, 5, tzinfo=UTC),
              "off_peak": datetime(2026, 3, 9, 18, 40, tzinfo=UTC)}
    runs = []
    for name, start in starts.items():
        r = run(name, [], model=model, cost_usd=0.01, started_at=start)
        r.calls = [CallRecord(usage)]
        runs.append(r)
    summary = summarize(folder_of(tmp_path, runs))
    at = {name: lookup_price_tiers(model, when=start).cost(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens)
        for name, start in starts.items()}
    assert at["peak"] == pytest.approx(2 * at["off_peak"], rel=1e-12)
    entry = summary["cost"]["by_model"][model]
    assert entry["runs"] == 2
    assert entry["catalogue_usd"] == pytest.approx(at["peak"] + at["off_peak"], rel=1e-12)


def test_an_empty_folder_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no runs"):
        summarize(folder_of(tmp_path, []))


def test_the_summary_command_prints_text_and_json(tmp_path, capsys):
    folder = folder_of(tmp_path, [run("a", [100, 110, 125], exit="done")])
    assert sim.cli.main(["traces", "summary", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "steps per run        p50 3  p95 3  max 3" in text
    assert "exit                 done 100.0%" in text
    assert sim.cli.main(["traces", "summary", str(folder), "--format", "json"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["runs"] == 1 and parsed["steps"]["p50"] == 3


def test_the_summary_of_a_folder_that_is_not_a_trace_folder_is_exit_2(tmp_path, capsys):
    assert sim.cli.main(["traces", "summary", str(tmp_path)]) == 2
    assert "missing runs.parquet" in capsys.readouterr().err


def test_the_import_command_reports_on_stderr_and_json_on_stdout(tmp_path, capsys):
    doc = {"simulations": [{"id": "s", "messages": [
        {"role": "assistant", "content": "ok",
         "usage": {"prompt_tokens": 10, "completion_tokens": 2}}]}]}
    source = tmp_path / "doc.json"
    source.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert sim.cli.main(["traces", "import", str(source), "--out", str(out), "--quiet",
                         "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"] == 1
    assert captured.err.startswith("warning: tau2: cost unknown for 100.0% of 1 calls\n"
                                   "imported 1 runs (1 calls)")
    summary = summarize(out)
    assert summary["skipped"] == {"files": {"count": 0, "by_reason": {}},
                                  "runs": {"count": 0, "by_reason": {}}}


def test_the_summary_shows_the_imports_repairs_by_field(tmp_path):
    """Impossible values the import nulled are shown by dotted field and
    reason, in the JSON summary and in the text."""
    import json as _json

    from sim.traces import import_traces
    from sim.traces.summary import format_summary, summarize

    sim = {"id": "s", "termination_reason": "user_stop", "agent_cost": -2.0,
           "start_time": "0001-01-01T00:00:00",
           "messages": [{"role": "assistant", "content": "ok",
                         "usage": {"prompt_tokens": 50, "completion_tokens": 5}}]}
    path = tmp_path / "doc.json"
    path.write_text(_json.dumps({"simulations": [sim]}))
    import_traces([path], tmp_path / "out")
    summary = summarize(tmp_path / "out")
    assert summary["repaired"] == {"count": 2, "by_field": {
        "runs.cost_usd": {"negative: set to null": 1},
        "runs.started_at": {"start outside 2000-2099: set to null": 1}}}
    text = format_summary(summary)
    assert "repaired 2 impossible values (runs kept):" in text
    assert "  runs.cost_usd: 1 negative: set to null" in text


def test_a_folder_of_zero_call_runs_reads_and_summarises(tmp_path):
    """Runs that failed before their first reply are runs: read back and
    summarised (no call figures) without an error."""
    from sim.traces import read_traces
    from sim.traces.model import RunRecord
    from sim.traces.summary import format_summary, summarize
    from sim.traces.writer import write_runs

    write_runs(tmp_path, [RunRecord(run_id=f"r{i}", source="sim", file="x", calls=[],
                                    exit="infrastructure_error") for i in range(3)])
    runs, calls = read_traces(tmp_path)
    assert runs["steps"].tolist() == [0, 0, 0] and len(calls) == 0
    summary = summarize(tmp_path)
    assert summary["runs"] == 3 and summary["calls"] == 0
    assert summary["exit"] == {"infrastructure_error": 1.0}
    assert "runs 3" in format_summary(summary)
