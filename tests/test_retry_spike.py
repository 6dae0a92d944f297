"""A transient retry storm (issue 40, "with backoff and jitter the storm is
gone"): a steady load below the rate limit and one spike of runs at once
(scenarios/spike.yaml), run under the retry policies it sweeps.

Exact checks of the spike's arrivals and of a bucket holding less than a
minute; statistical checks over independent replications (a seed each:
runs of one replication share the rate limiter, so the replication is the
unit of sampling), each a Welch t-test at ``ALPHA`` on the replications'
values (its sampling error is the replications' own spread):

* Retry-After honoured (whole seconds: every rejected run told the same
  second) keeps the spike's rejected runs in lockstep and kills them as
  failed:retries_exhausted; exponential backoff with full jitter does not;
* where the provider enforces its minute over seconds (a bucket of 2 s of
  refill), exponential backoff without jitter sends the rejected runs back in
  waves that lose the refill overflowing between them: runs die and the p95
  time to finish is long; full jitter spreads them (fewer dead, a shorter
  p95) at the price of more retries per task (half the mean backoff);
* after the spike has drained, full jitter's retries per first try are
  within sampling error of the same load without a spike, while during the
  spike they are not (the check can fail).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from scipy import stats

from sim.analysis.capacity import storm
from sim.bad_input import InputError
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.ratelimit import RateLimiter
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

SPIKE = "scenarios/spike.yaml"
ALPHA = 0.001  # significance of every test: a false alarm in 1,000 runs
SEEDS = range(6)  # independent replications of each cell
AT_S = 600.0  # the spike's instant (spike.yaml)
DRAINED_S = AT_S + 1800.0  # the spike's 13 minutes of extra work are done well before
LOCKSTEP = "{max_attempts: 20, honor_retry_after: true, tool_max_attempts: 1}"
NO_JITTER = ("{max_attempts: 20, base_s: 1.0, cap_s: 64.0, jitter: 0.0, "
             "honor_retry_after: false, tool_max_attempts: 1}")
JITTER = ("{max_attempts: 20, base_s: 1.0, cap_s: 64.0, jitter: 1.0, jitter_scope: run, "
          "honor_retry_after: false, tool_max_attempts: 1}")
SHORT_BUCKET_S = 2.0  # 60 RPM enforced over 2 s: a bucket of 2 requests


@dataclass(frozen=True)
class Replication:
    """What one replication measured: the spike's runs dead of exhausted
    retries, model retries per task, the p95 time to finish (s), and the
    model retries per first try among requests in [DRAINED_S, last arrival)
    and in [AT_S, AT_S + 600)."""

    died: int
    retries_per_task: float
    p95_s: float
    after: float
    during: float


@cache
def replicate(retry: str, seed: int, spike: bool = True,
              burst_s: float | None = None) -> Replication:
    """spike.yaml under ``retry`` with ``seed`` (without its spike: kind
    poisson, the same background draws), its rate limiter's bucket holding
    ``burst_s`` seconds of refill (None: a minute, as the scenario)."""
    arrivals = [] if spike else ["des.arrivals={kind: poisson}"]
    burst = [] if burst_s is None else [f"des.capacity.burst_s={burst_s}"]
    scenario = load_scenario(SPIKE, ["sweep={}", f"seed={seed}", f"harness.retry={retry}",
                                     *arrivals, *burst])
    cell = build_cell(cells_of(scenario)[0])
    schedule = arrival_schedule(scenario.des, scenario.tasks, cell.seed)
    engine = DesEngine(cell, scenario.des, schedule)
    assert engine.limiter is not None
    if burst_s is not None:  # the scenario's field reaches the limiter's buckets
        assert engine.limiter.requests is not None
        assert engine.limiter.requests.capacity == pytest.approx(
            scenario.des.capacity.requests_per_minute / 60.0 * burst_s)
    result = engine.run()
    section = storm(result)
    limiter = result.limiter
    assert limiter is not None
    asked, retried = np.asarray(limiter.asked_at), np.asarray(limiter.retried_at)
    last = max(r.arrival_s for r in result.records)

    def per_first_try(start: float, end: float) -> float:
        tries = int(((asked >= start) & (asked < end)).sum())
        again = int(((retried >= start) & (retried < end)).sum())
        return again / (tries - again)

    died = sum(r.outcome == "failed:retries_exhausted" and r.arrival_s == AT_S
               for r in result.records)
    return Replication(died, section["retries"] / len(result.records),
                       section["time_to_finish_s"]["p95"], per_first_try(DRAINED_S, last),
                       per_first_try(AT_S, AT_S + 600.0))


def sample(retry: str, field: str, spike: bool = True,
           burst_s: float | None = None) -> list[float]:
    """``field`` of every replication of one cell."""
    return [getattr(replicate(retry, seed, spike, burst_s), field) for seed in SEEDS]


def larger(a: Sequence[float], b: Sequence[float]) -> float:
    """One-sided Welch t-test p-value of mean(a) > mean(b)."""
    return float(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)


# ----------------------------------------------------------------- exact
def test_a_spike_adds_its_tasks_at_once_to_the_poisson_arrivals() -> None:
    """Kind spike: the Poisson arrivals of kind poisson (the same draws) with
    ``size`` more at ``at_s``, the first ``tasks`` in time order kept; two
    tenants of weights 1 and 3 share the spike's 8 tasks 2 and 6. A spike
    without its instant is refused naming the field."""
    tenants = "des.tenants=[{name: a, weight: 1, rate_per_hour: 60}, " \
              "{name: b, weight: 3, rate_per_hour: 60}]"
    base = ["engine=des", tenants]
    poisson = load_scenario("scenarios/bounded.yaml", base).des
    spike = load_scenario("scenarios/bounded.yaml", [
        *base, "des.arrivals={kind: spike, size: 8, at_s: 300}"]).des
    steady = arrival_schedule(poisson, 30, 5)
    spiked = arrival_schedule(spike, 30, 5)
    assert steady[0].time_s < 300.0 < steady[21].time_s  # the spike falls among the 30
    expected = sorted([a.time_s for a in steady] + [300.0] * 8)[:30]
    assert [a.time_s for a in spiked] == expected
    assert [a.index for a in spiked] == list(range(30))
    at_once = [a.tenant for a in spiked if a.time_s == 300.0]
    assert (at_once.count("a"), at_once.count("b")) == (2, 6)
    assert [(a.time_s, a.tenant) for a in spiked if a.time_s != 300.0] == \
        [(a.time_s, a.tenant) for a in steady[:22]]
    with pytest.raises(InputError, match=r"des\.arrivals.*spike needs a size and at_s"):
        load_scenario("scenarios/bounded.yaml", ["engine=des",
                                                 "des.arrivals={kind: spike, size: 8}"])


def test_a_bucket_of_two_seconds_admits_two_at_once_then_one_a_second() -> None:
    """60 requests/minute held as 2 s of refill: at t=0 two of five requests
    are admitted and three rejected with Retry-After 1 s; at t=1 one more
    (the refill of a second); a minute's bucket (the default) admits all
    five at t=0."""
    short = RateLimiter(60, None, burst_s=2.0)
    assert [short.admit(0.0, 100) for _ in range(5)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert [short.admit(1.0, 100) for _ in range(2)] == [0.0, 1.0]
    assert (short.admitted, short.rejected) == (3, 4)
    minute = RateLimiter(60, None)
    assert [minute.admit(0.0, 100) for _ in range(5)] == [0.0] * 5
    assert minute.requests is not None and minute.requests.capacity == 60


# ----------------------------------------------------------- statistical
def test_retry_after_in_whole_seconds_keeps_the_spike_in_lockstep_and_kills_it() -> None:
    """The scenario as shipped (a minute's bucket): honouring Retry-After
    (1 s to every rejected run) the spike's rejected runs come back together
    each second, one gets in, and most spend their 20 retries and die; with
    exponential backoff and full jitter fewer die, beyond sampling error."""
    lockstep, jitter = sample(LOCKSTEP, "died"), sample(JITTER, "died")
    assert np.mean(lockstep) > 20  # of the spike's 40 runs
    assert larger(lockstep, jitter) < ALPHA


def test_without_jitter_waves_lose_a_short_buckets_refill_and_jitter_spreads_them() -> None:
    """A bucket of 2 s: exponential backoff without jitter sends the spike's
    rejected runs back in waves that find 2 requests' room, so runs die and
    the p95 time to finish is long; full jitter spreads the waves: fewer runs
    die and the p95 is shorter, beyond sampling error, while each task makes
    more retries (full jitter halves the mean backoff, so a run waiting out
    the spike retries more often)."""
    def of(retry: str, field: str) -> list[float]:
        return sample(retry, field, burst_s=SHORT_BUCKET_S)

    assert larger(of(NO_JITTER, "died"), of(JITTER, "died")) < ALPHA
    assert larger(of(NO_JITTER, "p95_s"), of(JITTER, "p95_s")) < ALPHA
    assert larger(of(JITTER, "retries_per_task"), of(NO_JITTER, "retries_per_task")) < ALPHA


@pytest.mark.parametrize("burst_s", [None, SHORT_BUCKET_S])
def test_with_full_jitter_nothing_of_the_spike_is_left_once_it_drained(
        burst_s: float | None) -> None:
    """Requests from 30 minutes after the spike to the last arrival: with
    full jitter their retries per first try are those of the same load
    without a spike within sampling error (two-sided Welch test not rejected
    at ALPHA), while in the spike's first 10 minutes they are larger beyond
    it. With a minute's bucket the steady load meets no 429 at all: both are
    exactly 0 after the spike."""
    after = sample(JITTER, "after", burst_s=burst_s)
    calm = sample(JITTER, "after", spike=False, burst_s=burst_s)
    during = sample(JITTER, "during", burst_s=burst_s)
    calm_during = sample(JITTER, "during", spike=False, burst_s=burst_s)
    assert larger(during, calm_during) < ALPHA
    if burst_s is None:
        assert after == calm == [0.0] * len(SEEDS)
    else:
        assert stats.ttest_ind(after, calm, equal_var=False).pvalue > ALPHA
        assert np.mean(calm) > 0  # the 2 s bucket answers some 429s even without a spike
