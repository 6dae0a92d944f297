"""Replay on real recorded runs: the tau2-bench files and the mini-swe-agent samples.

Identity (limits that do not bind reproduce every run), and the figures of a
100,000 prompt-token budget and of the default detector with
``repeat_threshold: 2`` held against direct counts over the traces: per-run
prompt sums crossing the budget, and repeated canonical calls
(:func:`sim.harness.detector.canonical_call`) in the recorded tool calls and
repeated text turns (their text and reply hashes) in the recorded conversations.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from traces_helpers import data_folder

from sim.cli import main
from sim.cost.recorded import trusted
from sim.drivers.replay.reading import read_trace_folder
from sim.harness.detector import canonical_call

SCENARIO = str(Path(__file__).resolve().parents[1] / "scenarios" / "replay.yaml")
DETECTOR = ["--set", "harness.detector.enabled=true", "--set",
            "harness.detector.repeat_threshold=2"]


def _imported(tmp_path_factory, *parts: str) -> Path:
    from sim.traces import import_traces

    out = tmp_path_factory.mktemp(parts[0]) / "traces"
    import_traces([data_folder(*parts)], out)
    return out


@pytest.fixture(scope="module")
def tau2(tmp_path_factory) -> Path:
    """Every importable run of shared/data/traces/tau2/raw/, as a trace folder."""
    return _imported(tmp_path_factory, "tau2", "raw")


@pytest.fixture(scope="module")
def mini_swe(tmp_path_factory) -> Path:
    """The three mini-swe-agent samples, as a trace folder."""
    return _imported(tmp_path_factory, "mini-swe-agent")


def replay(traces: Path, out: Path, *options: str) -> tuple[pd.DataFrame, dict]:
    assert main(["replay", str(traces), SCENARIO, "--out", str(out), "--quiet",
                 *options]) == 0
    summary = json.loads((out / "summary.json").read_text())
    return pd.read_parquet(out / "results.parquet"), summary["cells"][0]["replay"]


def _expressible(run) -> bool:
    """Whether every recorded prompt grew at least by the previous call's output."""
    calls = run.calls
    return all(b.usage.prompt_tokens >= a.usage.prompt_tokens + a.usage.output_tokens
               + a.usage.thinking_tokens for a, b in itertools.pairwise(calls))


@pytest.mark.parametrize("source", ["tau2", "mini_swe"])
def test_limits_that_do_not_bind_reproduce_every_recorded_run(source, request, tmp_path):
    """Every imported run: the same calls, the same five token counts, the
    recorded cost where the run's price rests on it (a $0 recorded with
    tokens used is priced instead: :mod:`sim.cost.recorded`); the harness
    counts every prompt as recorded wherever the recorded growth can be
    expressed, and says so for each run where it cannot."""
    traces = request.getfixturevalue(source)
    runs = {r.run_id: r for r in read_trace_folder(traces)}
    rows, block = replay(traces, tmp_path / "out")
    assert len(rows) == len(runs) > 0
    for row in rows.itertuples():
        run = runs[row.run_id]
        calls = run.calls
        assert row.steps == len(calls)
        assert row.input_tokens == sum(c.usage.input_tokens for c in calls)
        assert row.cache_read_tokens == sum(c.usage.cache_read_tokens for c in calls)
        assert row.cache_write_tokens == sum(c.usage.cache_write_tokens for c in calls)
        assert row.output_tokens == sum(c.usage.output_tokens for c in calls)
        assert row.thinking_tokens == sum(c.usage.thinking_tokens for c in calls)
        if run.cost_usd is not None and row.price_basis == "recorded":
            assert math.isclose(row.cost_usd, run.cost_usd, rel_tol=1e-9, abs_tol=1e-12)
        assert not row.stopped and not row.diverged and row.saved_usd == 0.0
        assert row.prompt_exact == _expressible(run), row.run_id
    assert block["stopped"]["runs"] == 0 and block["interventions"]["runs"] == 0
    resolved = [r.resolved for r in runs.values()]
    assert (rows["outcome"] == "succeeded").sum() == sum(x is True for x in resolved)


def test_a_100k_prompt_token_budget_matches_a_direct_count(tau2, tmp_path):
    """Runs stopped, resolved runs lost and dollars saved equal the count of
    runs whose cumulative prompt tokens cross 100,000, and (for runs whose
    every call's recorded cost is trustworthy) the recorded cost of their
    calls from the crossing on."""
    budget = 100_000
    rows, block = replay(tau2, tmp_path / "out", "--set", f"harness.budgets.tokens={budget}")
    stopped, resolved, saved = {}, 0, []
    for run in read_trace_folder(tau2):
        total = 0
        for k, call in enumerate(run.calls):
            total += call.usage.prompt_tokens
            if total > budget:
                stopped[run.run_id] = k
                resolved += run.resolved is True
                if all(trusted(c.cost_usd, c.usage) for c in run.calls):
                    saved.extend(c.cost_usd for c in run.calls[k:])
                break
    assert len(stopped) > 0
    got = rows[rows["stopped"]]
    assert dict(zip(got["run_id"], got["stopped_at"], strict=True)) == stopped
    assert block["stopped"]["runs"] == len(stopped)
    assert block["stopped"]["resolved"] == resolved
    assert block["stopped"]["by_outcome"] == {"budget_exhausted:tokens": {
        "runs": len(stopped), "resolved": resolved, "unresolved": len(stopped) - resolved,
        "unknown": 0}}
    recorded = got[got["price_basis"] == "recorded"]
    assert math.isclose(recorded["saved_usd"].sum(), math.fsum(saved), rel_tol=1e-9)
    assert math.isclose(block["saved"]["cost_usd"], got["saved_usd"].sum(), rel_tol=1e-9)


def _keys(run):
    """Per call, the canonical keys the detector sees: each tool call's; for a
    text turn, its recorded text hash and the hash of the reply that followed
    (a text turn repeats only when both are recorded and both repeat; a
    missing hash is a fresh value), none for the final answer."""
    out = []
    for k, call in enumerate(run.calls):
        if call.tool_calls:
            out.append([canonical_call(t.name, json.loads(t.arguments)) for t in call.tool_calls])
        elif k < len(run.calls) - 1:
            text = call.text_sha256 or f"text of call {k}"
            reply = call.observation_sha256 or f"reply after call {k}"
            out.append([f"text turn\0{text}\0{reply}"])
        else:
            out.append([])
    return out


def _fires(window: list[str]) -> str | None:
    """repeat_threshold 2, and the default cycles (period 2 to 4, two repeats)."""
    if len(window) >= 2 and window[-1] == window[-2]:
        return "repetition"
    for period in range(2, 5):
        span = window[-2 * period:]
        if len(span) == 2 * period and span[:period] == span[period:] and len(set(span)) > 1:
            return "cycle"
    return None


def test_the_default_detector_with_repeat_threshold_2_matches_a_direct_count(tau2, tmp_path):
    """Firings per signal, runs stopped (the second detection after a nudge),
    resolved runs lost and dollars saved equal a count of repeated canonical
    calls in the recorded tool calls and of repeated text turns (same text
    hash, same reply hash)."""
    rows, block = replay(tau2, tmp_path / "out", *DETECTOR)
    assert block["fidelity"]["text_hashes"]
    firings: dict[str, list[int]] = {}
    stopped, lost, saved = set(), 0, []
    fired_runs: dict[str, set[str]] = {}
    for run in read_trace_folder(tau2):
        window: list[str] = []
        detections = 0
        for k, keys in enumerate(_keys(run)):
            step = None
            for key in keys:
                window = [*window, key][-8:]
                signal = _fires(window)
                if signal is not None:
                    step = step or signal
                    window = []
            if step is None:
                continue
            detections += 1
            firings.setdefault(step, []).append(k)
            fired_runs.setdefault(step, set()).add(run.run_id)
            if detections == 2:  # one nudge, then needs_human
                if k + 1 < len(run.calls):
                    stopped.add(run.run_id)
                    lost += run.resolved is True
                    if all(trusted(c.cost_usd, c.usage) for c in run.calls):
                        saved.extend(c.cost_usd for c in run.calls[k + 1:])
                break
    assert firings, "the traces hold repeated calls"
    signals = block["detector"]["signals"]
    assert {s: e["firings"] for s, e in signals.items()} == {
        s: len(v) for s, v in firings.items()}
    assert {s: e["runs"] for s, e in signals.items()} == {
        s: len(v) for s, v in fired_runs.items()}
    assert set(rows.loc[rows["stopped"], "run_id"]) == stopped
    assert block["stopped"]["resolved"] == lost
    got = rows[rows["stopped"] & (rows["price_basis"] == "recorded")]
    assert math.isclose(got["saved_usd"].sum(), math.fsum(saved), abs_tol=1e-12)


@pytest.mark.slow  # two replays of the real tau2 runs and a comparison: 13 s
def test_two_real_replays_compare_paired(tau2, tmp_path):
    """sim compare of a tight and a loose budget replay: paired, with a verdict."""
    replay(tau2, tmp_path / "loose")
    replay(tau2, tmp_path / "tight", "--set", "harness.budgets.tokens=100000")
    status = main(["compare", str(tmp_path / "loose"), str(tmp_path / "tight"), "--out",
                   str(tmp_path / "cmp"), "--quiet", "--resamples", "200"])
    result = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert result["paired"] and status == 1 and result["verdict"].startswith("regression")
