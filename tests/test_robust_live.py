"""Issue 25's live reproducers, as specs: a provider that misbehaves (a
Retry-After of a billion seconds, usage of 1e300, 10**30, NaN or -5, tool
arguments nested 100,000 deep, a stream cut short) never hangs the live
driver, never raises out of it and never costs a run's trace; a crash of one
run is that run's failed:driver_error, not the batch's; the --otel path is
checked before any run.

Real SDKs, real HTTP to the local fake server (tests/fake_providers.py,
taught to misbehave), the real harness.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
import yaml
from fake_providers import Fail, FakeProvider, RawJSON, Reply
from test_live_http import WIRE_IDS, WIRES, drive, params_for, toolbox

from sim.cli import main
from sim.harness import Budgets
from sim.harness.classifier import MAX_WAIT_S
from sim.harness.state import OUTCOMES
from sim.traces import read_traces

MODEL = "claude-sonnet-4-20250514"

USAGE = {"1e300": {"input_tokens": 1e300}, "10**30": {"output_tokens": 10**30},
         "NaN": {"input_tokens": float("nan")}, "negative": {"input_tokens": -5},
         "10**400 as text": {"output_tokens": 10**400}}


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
@pytest.mark.parametrize("usage", list(USAGE), ids=list(USAGE))
def test_absurd_usage_is_a_structured_failure_naming_the_field(provider, stream, usage,
                                                               tmp_path) -> None:
    """failed:invalid_response with the usage field named; the counters stay
    finite (nothing impossible is counted)."""
    box = toolbox()
    params = params_for(provider, box)
    with FakeProvider([Reply([("text", "DONE")], usage=USAGE[usage])]) as server:
        state, _, _ = drive(server, provider, stream, params, box, tmp_path)
    assert (state.status, state.reason) == ("failed", "invalid_response"), state.detail
    assert state.detail["diagnostic"]["field"].startswith("usage.")
    assert math.isfinite(state.money_usd) and state.input_tokens < 2**40


@pytest.mark.parametrize("usage", ["1e300", "NaN"])
def test_a_run_with_absurd_usage_keeps_its_trace(usage, tmp_path, monkeypatch, capsys) -> None:
    """``live`` exits 0 and runs.parquet holds every run, the absurd one as
    failed:invalid_response (it crashed with OverflowError/ValueError and
    wrote no runs.parquet)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    out = tmp_path / "out"
    script = [Reply([("text", "DONE")], usage=USAGE[usage]), Reply([("text", "DONE")])]
    with FakeProvider(script) as server:
        status = main(["live", str(_tasks(tmp_path, 2)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(out), "--quiet"])
    assert status == 0, capsys.readouterr().err
    runs, calls = read_traces(out)
    assert list(runs["exit"]) == ["failed:invalid_response", "succeeded:model_complete"]
    assert (calls["input_tokens"] >= 0).all() if "input_tokens" in calls else True


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_tool_arguments_nested_100000_deep_are_a_malformed_reply_not_a_crash(
        provider, stream, tmp_path) -> None:
    """A reply whose tool arguments nest 100,000 deep is malformed (retried
    once like a server error); the run goes on to its answer."""
    box = toolbox()
    params = params_for(provider, box)
    script = [Reply([("tool_use", "c1", "lookup", RawJSON.nested(100_000))], "tool_use"),
              Reply([("text", "DONE")])]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, provider, stream, params, box, tmp_path)
    assert (state.status, state.reason) == ("succeeded", "model_complete")


@pytest.mark.parametrize("headers", [{"retry-after": "1000000000"},
                                     {"retry-after-ms": "1e308"},
                                     {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}],
                         ids=["1e9 s", "1e308 ms", "year 9999"])
def test_a_huge_retry_after_never_sleeps_past_a_time_budget(headers, tmp_path) -> None:
    """With a 60 s active-time budget the wait (capped at MAX_WAIT_S) would
    overshoot it: the run ends at once as budget_exhausted:active_time."""
    box = toolbox()
    params = params_for("anthropic", box, budgets=Budgets(active_s=60.0))
    start = time.monotonic()
    with FakeProvider([Fail(429, headers=headers), Reply([("text", "DONE")])]) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path)
    assert (state.status, state.reason) == ("budget_exhausted", "active_time")
    assert time.monotonic() - start < 20


def test_a_huge_retry_after_without_a_time_budget_waits_the_cap_then_retries(
        tmp_path, monkeypatch) -> None:
    """Without a time budget the wait is the driver's Retry-After cap
    (RETRY_AFTER_CAP_S, 2 minutes; the harness's MAX_WAIT_S is 5), not 10^9 s:
    the driver sleeps exactly the cap (the sleep is patched)."""
    from sim.drivers.live import driver as live_driver

    slept: list[float] = []

    async def fake_sleep(self, seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(live_driver.LiveDriver, "_sleep", fake_sleep, raising=False)
    box = toolbox()
    params = params_for("anthropic", box)
    with FakeProvider([Fail(429, headers={"retry-after": "1000000000"}),
                       Reply([("text", "DONE")])]) as server:
        state, _, _ = drive(server, "anthropic", True, params, box, tmp_path)
    assert (state.status, state.reason) == ("succeeded", "model_complete")
    assert slept == [live_driver.RETRY_AFTER_CAP_S] and live_driver.RETRY_AFTER_CAP_S < MAX_WAIT_S


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_stream_cut_short_is_retried_not_fatal(provider, stream, tmp_path) -> None:
    box = toolbox()
    params = params_for(provider, box)
    script = [Reply([("text", "DONE")], cut_after=3), Reply([("text", "DONE")])]
    with FakeProvider(script) as server:
        state, _, _ = drive(server, provider, stream, params, box, tmp_path)
    assert state.status in OUTCOMES and state.reason in OUTCOMES[state.status]
    assert state.status == "succeeded" or state.reason in ("model_error", "invalid_response")


# ------------------------------------------------------------- the CLI
def _tasks(folder: Path, n: int) -> Path:
    doc = {"system_prompt": "Be careful.",
           "tasks": [{"id": f"t{i}", "instruction": "Say DONE.", "tools": []}
                     for i in range(n)]}
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_an_unwritable_otel_path_is_refused_before_any_run(tmp_path, monkeypatch,
                                                           capsys) -> None:
    """``--otel afile/x.json`` (afile a file): exit 2 at once, no request made."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    (tmp_path / "afile").write_text("x")
    with FakeProvider([Reply([("text", "DONE")])]) as server:
        status = main(["live", str(_tasks(tmp_path, 1)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(tmp_path / "out"),
                       "--otel", str(tmp_path / "afile" / "x.json"), "--quiet"])
        assert server.requests == []
    assert status == 2
    assert "--otel" in capsys.readouterr().err


def test_a_crash_of_one_run_is_its_failed_outcome_and_the_others_are_kept(
        tmp_path, monkeypatch, capsys) -> None:
    """The driver raising in the second of three runs: that run is
    failed:driver_error, the batch goes on, and every run is in the traces."""
    from sim.drivers.live import driver as live_driver

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    real = live_driver.LiveDriver.run
    calls = {"n": 0}

    async def flaky(self, params, state, run_id, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the driver broke")
        return await real(self, params, state, run_id, **kw)

    monkeypatch.setattr(live_driver.LiveDriver, "run", flaky)
    out = tmp_path / "out"
    with FakeProvider([Reply([("text", "DONE")])] * 3) as server:
        status = main(["live", str(_tasks(tmp_path, 3)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(out), "--quiet",
                       "--format", "json"])
    assert status == 0, capsys.readouterr().err
    runs, _ = read_traces(out)
    assert list(runs["exit"]) == ["succeeded:model_complete", "failed:driver_error",
                                  "succeeded:model_complete"]
    printed = json.loads(capsys.readouterr().out)
    assert [r["exit"] for r in printed["runs"]][1] == "failed:driver_error"


def test_finished_runs_are_on_disk_before_the_batch_ends(tmp_path, monkeypatch) -> None:
    """The trace folder is rewritten after every run: while the second run is
    going, the first is already in it (a crash of the process loses nothing)."""
    from sim.drivers.live import driver as live_driver

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    out = tmp_path / "out"
    seen: list[int] = []
    real = live_driver.LiveDriver.run

    async def watching(self, params, state, run_id, **kw):
        seen.append(len(read_traces(out)[0]) if out.exists() else 0)
        return await real(self, params, state, run_id, **kw)

    monkeypatch.setattr(live_driver.LiveDriver, "run", watching)
    with FakeProvider([Reply([("text", "DONE")])] * 3) as server:
        status = main(["live", str(_tasks(tmp_path, 3)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(out), "--quiet"])
    assert status == 0
    assert seen == [0, 1, 2]
    assert len(read_traces(out)[0]) == 3


@pytest.mark.parametrize("code", ["ENOSPC", "EROFS"])
def test_live_on_a_full_or_read_only_disk_is_exit_2(code, tmp_path, monkeypatch,
                                                     capsys) -> None:
    """The trace folder cannot be written: exit 2 with one clear line, no
    traceback, nothing half-written."""
    import errno
    import os

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    number = getattr(errno, code)

    def failing(*args, **kwargs):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr("sim.traces.writer.TraceWriter.close", failing)
    out = tmp_path / "out"
    with FakeProvider([Reply([("text", "DONE")])]) as server:
        status = main(["live", str(_tasks(tmp_path, 1)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"cannot write {out}" in err and "Traceback" not in err
    assert not out.exists()


def test_an_unwritable_checkpoint_store_is_refused_before_any_run(tmp_path, monkeypatch,
                                                                   capsys) -> None:
    """``--checkpoints`` under a file (or on a read-only disk): exit 2, no request."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    (tmp_path / "afile").write_text("x")
    with FakeProvider([Reply([("text", "DONE")])]) as server:
        status = main(["live", str(_tasks(tmp_path, 1)), "--provider", "anthropic", "--model",
                       MODEL, "--base-url", server.base_url, "--out", str(tmp_path / "out"),
                       "--checkpoints", str(tmp_path / "afile" / "c.sqlite"), "--quiet"])
        assert server.requests == []
    err = capsys.readouterr().err
    assert status == 2 and "--checkpoints" in err and "Traceback" not in err
