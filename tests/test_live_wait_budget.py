"""Live back-offs are bounded (issue 41): against the local fake provider
server, a Retry-After beyond the driver's cap is clamped to it (said once),
and a run whose next back-off would take its sleeping past ``max_wait_s``
(``sim live --max-wait``) ends at once as ``failed:retries_exhausted``, its
detail saying ``retry wait budget exhausted``, instead of sleeping. A server
answering ``Retry-After: 1000000000`` costs seconds, not 25 minutes. The
header's forms (an HTTP date, negative, NaN, a number too large for a float)
are read as the driver then bounds them."""

from __future__ import annotations

import email.utils
import math
import time

import pytest
from fake_providers import Fail, FakeProvider

from sim.drivers.live.calls import retry_after_s
from sim.drivers.live.driver import MAX_WAIT_PER_RUN_S, RETRY_AFTER_CAP_S, WAIT_BUDGET_EXHAUSTED
from sim.harness import RetryPolicy
from tests.test_live_http import WIRE_IDS, WIRES, drive, params_for, three_steps, toolbox

PATIENT = RetryPolicy(base_s=0.05, cap_s=0.2, max_attempts=20)
"""Retries enough that the wait budget, not the attempts, ends a run."""


def limited(retry_after: str, n: int = 20) -> list[Fail]:
    return [Fail(429, "rate limited", headers={"retry-after": retry_after})] * n


@pytest.mark.parametrize(("provider", "stream"), WIRES, ids=WIRE_IDS)
def test_a_retry_after_of_a_billion_seconds_ends_the_run_within_seconds(provider, stream,
                                                                       tmp_path):
    """Retry-After 1e9 is clamped to the cap (said once); the clamped wait
    is past a 1 s budget, so the run ends after the first request as
    failed:retries_exhausted, without sleeping, the detail naming why."""
    box, said = toolbox(), []
    params = params_for(provider, box, retry=PATIENT)
    with FakeProvider(limited("1000000000")) as server:
        started = time.monotonic()
        state, _, _ = drive(server, provider, stream, params, box, tmp_path, max_wait_s=1.0,
                            warn=said.append)
        elapsed = time.monotonic() - started
        requests = len(server.requests)
    assert (state.status, state.reason) == ("failed", "retries_exhausted")
    assert state.detail == {"why": WAIT_BUDGET_EXHAUSTED, "waited_s": 0.0,
                            "wait_s": RETRY_AFTER_CAP_S, "max_wait_s": 1.0}
    assert requests == 1 and elapsed < 30.0  # no sleep: the clamped wait alone is 120 s
    assert len(said) == 2
    assert said[0].startswith("the provider asked to wait 1e+09 s before a retry; waiting 120 s")
    assert WAIT_BUDGET_EXHAUSTED in said[1] and "failed:retries_exhausted" in said[1]


def test_the_budget_sums_the_waits_of_a_run(tmp_path):
    """Retry-After 0.3 s each time and a budget of 1 s: three waits (0.9 s)
    are slept, the fourth would pass the budget, so the run ends after four
    requests, having slept about 0.9 s."""
    box = toolbox()
    params = params_for("openai", box, retry=PATIENT)
    with FakeProvider(limited("0.3")) as server:
        started = time.monotonic()
        state, _, _ = drive(server, "openai", False, params, box, tmp_path, max_wait_s=1.0)
        elapsed = time.monotonic() - started
        requests = len(server.requests)
    assert (state.status, state.reason) == ("failed", "retries_exhausted")
    assert state.detail["why"] == WAIT_BUDGET_EXHAUSTED
    assert state.detail["wait_s"] == 0.3
    assert 0.9 <= state.detail["waited_s"] < 1.0
    assert requests == 4 and 0.9 <= elapsed < 10.0


def test_a_clamped_retry_after_is_waited_and_the_run_goes_on(tmp_path):
    """A cap of 0.2 s and no budget: two answers of Retry-After 1e9 are each
    waited 0.2 s (the clamp said once), then the run succeeds."""
    box, said = toolbox(), []
    params = params_for("openai", box, retry=PATIENT)
    steps = three_steps()
    with FakeProvider([*limited("1000000000", 2), *steps]) as server:
        started = time.monotonic()
        state, _, _ = drive(server, "openai", False, params, box, tmp_path, max_wait_s=None,
                            retry_after_cap_s=0.2, warn=said.append)
        elapsed = time.monotonic() - started
    assert (state.status, state.reason, state.turns) == ("succeeded", "model_complete", 3)
    assert 0.4 <= elapsed < 10.0
    assert len(said) == 1 and "waiting 0.2 s" in said[0]


@pytest.mark.parametrize(("header", "waits_cap"), [
    ("1" + "0" * 400, True),  # a huge integer: beyond a float, the largest float, clamped
    ("1e400", True),
    (None, True),  # an HTTP date in the year 2999 (filled in below)
    ("-5", False),  # negative: ignored, the harness's own short backoff
    ("nan", False),
])
def test_retry_after_forms_are_clamped_or_ignored(header, waits_cap, tmp_path):
    """Far-future dates and numbers too large for a float are clamped to the
    cap, hence refused by a budget below it; negative and NaN are ignored
    (the harness backs off on its own, 0.05 s), so the run goes on."""
    if header is None:
        header = email.utils.format_datetime(
            email.utils.parsedate_to_datetime("Tue, 01 Jan 2999 00:00:00 GMT"))
    value = retry_after_s({"retry-after": header})
    assert (value is not None and value > RETRY_AFTER_CAP_S) == waits_cap
    assert value is None or math.isfinite(value)  # the harness accepts finite waits only
    box = toolbox()
    params = params_for("openai", box, retry=PATIENT)
    with FakeProvider([*limited(header, 1), *three_steps()]) as server:
        started = time.monotonic()
        state, _, _ = drive(server, "openai", False, params, box, tmp_path, max_wait_s=1.0)
        elapsed = time.monotonic() - started
    expected = ("failed", "retries_exhausted") if waits_cap else ("succeeded", "model_complete")
    assert (state.status, state.reason) == expected
    assert elapsed < 10.0


def _status(main, argv: list[str]) -> int:
    """The exit status of ``sim ARGV`` (argparse may exit instead of returning)."""
    try:
        return int(main(argv))
    except SystemExit as exited:
        return int(exited.code or 0)


def test_the_cli_flag_names_the_drivers_default(capsys):
    """``sim live --help`` states the default budget and cap the driver uses."""
    from sim.cli import main

    assert _status(main, ["live", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {MAX_WAIT_PER_RUN_S:g}: sim.drivers.live.driver.MAX_WAIT_PER_RUN_S)" in text
    assert f"beyond {RETRY_AFTER_CAP_S:g} s (RETRY_AFTER_CAP_S)" in text


def test_a_negative_or_infinite_max_wait_is_refused_with_exit_2(tmp_path, capsys):
    """``--max-wait -1`` and ``--max-wait inf`` are bad input: exit 2, the flag named."""
    from sim.cli import main

    for value in ("-1", "inf"):
        assert _status(main, ["live", str(tmp_path / "tasks.yaml"), "--provider", "openai",
                              "--model", "gpt-4o", "--max-wait", value]) == 2
        assert "--max-wait" in capsys.readouterr().err


def test_sim_live_with_max_wait_ends_the_run_and_says_why(tmp_path, monkeypatch, capsys):
    """``sim live --max-wait 1 --quiet`` against a server answering Retry-After
    1e9: the run ends at once as failed:retries_exhausted (its trace's exit),
    stderr says the clamp and the budget though progress is quiet, and the
    batch exits 1, as when every run failed at the provider."""
    import yaml

    from sim.cli import main
    from sim.traces import read_traces

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump({"tasks": [{"id": "t", "instruction": "Say DONE.",
                                                "tools": ["shell"], "workdir": "."}]}))
    out = tmp_path / "traces"
    with FakeProvider(limited("1000000000")) as server:
        started = time.monotonic()
        status = main(["live", str(tasks), "--provider", "openai", "--model", "gpt-4o",
                       "--base-url", server.openai_url, "--out", str(out), "--max-wait", "1",
                       "--quiet"])
        elapsed = time.monotonic() - started
        requests = len(server.requests)
    err = capsys.readouterr().err
    assert requests == 1 and elapsed < 30.0
    runs, _ = read_traces(out)
    assert list(runs["exit"]) == ["failed:retries_exhausted"]
    assert "the provider asked to wait 1e+09 s" in err and WAIT_BUDGET_EXHAUSTED in err
    assert status == 1  # every run failed at the provider (sim.cli.live.EXIT_ALL_FAILED)
    assert "every run (1 of 1) failed at the provider (failed:retries_exhausted" in err
