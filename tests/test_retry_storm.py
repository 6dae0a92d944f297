"""Retry storms at a provider's rate limit in the DES (issue 40, item 4),
checked against theory: exact token-bucket arithmetic for a burst, the
request count that retries without backoff multiply, the spread of full
jitter (a KS test against its uniform law), no 429s below the limit, and
Little's law on the DES time series while a rate limit binds."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from scipy import stats

from sim.analysis.capacity import check_drained, littles_law, request_rate, storm
from sim.bad_input import InputError
from sim.engines.des import DesEngine, DesResult, arrival_schedule
from sim.harness.effects import ModelRequest, Wait
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

BOUNDED = "scenarios/bounded.yaml"
ALPHA = 0.001  # significance of the statistical tests: a false alarm in 1,000 runs
BURST = ["des.arrivals={kind: batch}", "des.tenants=[{name: a}]"]


def simulate(overrides: list[str], tasks: int, tracer: Any = None) -> DesResult:
    """Run ``tasks`` tasks of bounded.yaml in the DES with ``overrides``;
    assert the drained-run invariants and return the result."""
    scenario = load_scenario(BOUNDED, ["engine=des", f"tasks={tasks}", *overrides])
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, tasks, cell.seed)
    result = DesEngine(cell, scenario.des, arrivals, tracer).run()
    problems = check_drained(result, scenario.des, arrivals)
    assert not problems, problems
    return result


class WaitTracer:
    """Records, for every retry of a model call, the run, the call's turn, the
    retry number and the backoff waited before it (seconds), as an observer
    of the pump that drives each run (the DES's tracer hook)."""

    def __init__(self) -> None:
        self.retries: list[tuple[int, int, int, float]] = []

    def __call__(self, index: int, state: Any, clock: Callable[[], float]) -> Any:
        retries = self.retries

        class Waits:
            waited = 0.0

            def effect(self, effect: Any) -> None:
                if isinstance(effect, Wait):
                    self.waited = effect.seconds
                elif isinstance(effect, ModelRequest) and effect.attempt:
                    retries.append((index, effect.turn, effect.attempt, self.waited))

            def result(self, effect: Any, result: Any) -> None:
                pass

            def end(self, state: Any) -> None:
                pass

        return Waits()

    def burst(self, attempt: int) -> list[float]:
        """The waits before retry ``attempt`` of the runs' first calls (turn 0:
        the calls of the burst at t=0)."""
        return [w for _, turn, k, w in self.retries if turn == 0 and k == attempt]


# ------------------------------------------------------------- below the limit
def test_poisson_arrivals_below_the_limit_get_no_429s() -> None:
    """No retries (max_attempts 0), Poisson arrivals of 300 tasks/hour, about
    13 calls each (about 1.1 requests/s) against 600 requests/minute (10/s, a
    bucket of 600): a 429 would need 600 requests beyond the refill at once,
    a Poisson tail far below 10^-100: none is answered 429 and no run dies."""
    result = simulate(["des.tenants=[{name: a, rate_per_hour: 300}]",
                       "des.capacity.requests_per_minute=600",
                       "harness.retry.max_attempts=0"], tasks=300)
    section = storm(result)
    assert section["requests"] > 1000
    assert (section["rejected"], section["share_429"], section["runs_died"]) == (0, 0.0, 0)


# ----------------------------------------------------------- a burst, exactly
def test_a_burst_is_admitted_as_capacity_plus_refill_exactly() -> None:
    """100 runs at t=0 against 60 requests/minute (a bucket of C=60 refilled
    at r=1/s), no backoff and Retry-After honoured: the 40 rejected runs
    retry together every whole second. Model calls take 20 s (time to first
    token), so within [0, 20) no admitted run asks again: the requests
    admitted by time t are exactly C + floor(r t)."""
    result = simulate([*BURST, "des.capacity.requests_per_minute=60",
                       "harness.retry={backoff: false, max_attempts: 1000}",
                       "world.latency={ttft_s: 20}"], tasks=100)
    limiter = result.limiter
    assert limiter is not None
    rejected = sorted(limiter.rejected_at)
    for t in (0.0, 1.0, 5.0, 12.5, 19.0, 19.99):
        asked = sum(a <= t for a in limiter.asked_at)
        refused = sum(a <= t for a in rejected)
        assert asked - refused == 60 + math.floor(t), t
    # the 40 lockstep runs, one admitted a second: 40 - k of them rejected at t=k
    for k in range(20):
        assert sum(a == float(k) for a in rejected) == 40 - k, k


def test_retries_without_backoff_multiply_the_request_rate() -> None:
    """100 runs at t=0, a bucket of 60, retries at once (no backoff,
    Retry-After ignored), max_attempts 3: at t=0 the provider sees 100 first
    tries and 40 x 3 retries, 220 requests, 2.2 times the burst (1 + m (N -
    C) / N); 160 are answered 429 and the 40 runs die as
    failed:retries_exhausted, all at t=0."""
    result = simulate([*BURST, "des.capacity.requests_per_minute=60",
                       "harness.retry={backoff: false, honor_retry_after: false, "
                       "max_attempts: 3}"], tasks=100)
    limiter = result.limiter
    assert limiter is not None
    assert sum(a == 0.0 for a in limiter.asked_at) == 220
    assert sum(a == 0.0 for a in limiter.rejected_at) == 160
    died = [r for r in result.records
            if r.outcome == "failed:retries_exhausted" and r.end_s == 0.0]
    assert len(died) == 40
    starts, rate, refused = request_rate(result)
    assert (starts[0], rate[0], refused[0]) == (0.0, 220.0, 160.0)
    assert sum(a == 0.0 for a in limiter.retried_at) == 120  # the retries, counted apart
    section = storm(result)
    assert (section["peak_requests_per_s"], section["peak_retries_per_s"]) == (220.0, 120.0)
    assert section["retries"] == len(limiter.retried_at)
    assert section["amplification"] == pytest.approx(
        section["requests"] / (section["requests"] - section["retries"]))


# ------------------------------------------------------------ jitter spreads
@pytest.mark.parametrize("retry", [1, 2])
def test_full_jitter_spreads_a_rejected_burst_uniformly(retry: int) -> None:
    """200 runs at t=0 against a bucket of 50; exponential backoff with full
    jitter drawn per run (jitter 1, jitter_scope run), base 0.5 s, cap 8 s,
    Retry-After ignored: the delays before retry k of the runs rejected k
    times are uniform on (0, min(8, 0.5 * 2**(k-1))) (KS test, alpha 0.001)."""
    tracer = WaitTracer()
    simulate([*BURST, "des.capacity.requests_per_minute=50",
              "harness.retry={base_s: 0.5, cap_s: 8, jitter: 1.0, jitter_scope: run, "
              "honor_retry_after: false, max_attempts: 20}"], tasks=200, tracer=tracer)
    delays = tracer.burst(retry)
    assert len(delays) == 150 if retry == 1 else len(delays) >= 100  # most are rejected again
    ceiling = min(8.0, 0.5 * 2 ** (retry - 1))
    assert stats.kstest(delays, stats.uniform(0, ceiling).cdf).pvalue > ALPHA


def test_call_scope_jitter_keeps_a_burst_in_lockstep() -> None:
    """The same burst with jitter keyed by the call only (jitter_scope call):
    every rejected run draws the same first delay, so they retry together."""
    tracer = WaitTracer()
    simulate([*BURST, "des.capacity.requests_per_minute=50",
              "harness.retry={base_s: 0.5, cap_s: 8, jitter: 1.0, "
              "honor_retry_after: false, max_attempts: 20}"], tasks=200, tracer=tracer)
    first = tracer.burst(1)
    assert len(first) == 150 and len(set(first)) == 1


# ------------------------------------------------------------ Little's law
def test_littles_law_holds_while_a_rate_limit_binds() -> None:
    """Poisson arrivals of 600 tasks/hour (about 2.1 requests/s) against 150
    requests/minute (2.5/s) with full jitter: bursts are answered 429 and
    retried, and the time-average number in the system (from the DES's time
    series) still equals the scenario's arrival rate times the measured mean
    time in system (records), within the window's tolerance."""
    result = simulate(["des.tenants=[{name: a, rate_per_hour: 600}]",
                       "des.capacity.requests_per_minute=150",
                       "harness.retry={jitter: 1.0, jitter_scope: run, max_attempts: 50, "
                       "honor_retry_after: false}"], tasks=600)
    assert storm(result)["rejected"] > 0
    law = littles_law(result)
    assert law is not None and law["steady"]
    assert law["holds"], law


# ---------------------------------------------------------------- bursts
def test_burst_arrivals_come_size_at_a_time_every_interval() -> None:
    """kind burst, size 10, every_s 30: 25 tasks arrive 10 at 0 s, 10 at 30 s
    and 5 at 60 s; a burst without its interval is refused naming the field."""
    scenario = load_scenario(BOUNDED, ["engine=des", "des.arrivals={kind: burst, size: 10, "
                                                     "every_s: 30}"])
    times = [a.time_s for a in arrival_schedule(scenario.des, 25, 1)]
    assert times == [0.0] * 10 + [30.0] * 10 + [60.0] * 5
    with pytest.raises(InputError, match=r"des\.arrivals.*burst needs a size and every_s"):
        load_scenario(BOUNDED, ["engine=des", "des.arrivals={kind: burst, size: 10}"])


def test_bursts_below_the_bucket_are_never_rejected() -> None:
    """Bursts of 5 runs every 600 s against a bucket of 60 requests (refilled
    at 1/s): a burst's first calls take 5 tokens of 60, and the runs of one
    burst make about 13 calls each over a few minutes (about 0.3/s, below the
    refill): no 429 at all."""
    result = simulate(["des.arrivals={kind: burst, size: 5, every_s: 600}",
                       "des.tenants=[{name: a}]", "des.capacity.requests_per_minute=60",
                       "harness.retry.max_attempts=0"], tasks=20)
    section = storm(result)
    assert (section["rejected"], section["runs_died"]) == (0, 0)
    assert section["peak_requests_per_s"] == 5.0
