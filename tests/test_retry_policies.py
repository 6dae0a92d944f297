"""Retry policies as harnesses ship them (issue 40, item 4): no backoff,
exponential backoff with AWS's full, equal and decorrelated jitter,
Retry-After honoured or not, a retry count or a time budget, and a retry
token bucket shared by a client's runs. Every delay and every bucket level
below is computed by hand from the policy's formulas."""

from __future__ import annotations

from typing import Any

import pytest
from scripted import final, make_params, make_state, run_script

from sim.harness import ModelError, ModelRequest, ModelResponse, Wait, agent_loop
from sim.harness.classifier import backoff_s, jitter_draw
from sim.harness.messages import TextBlock, Usage
from sim.harness.params import ParameterError, RetryPolicy, RetryQuota
from sim.harness.retry_budget import RetryBudget

RATE_LIMITED = ModelError("rate_limit", 429, retry_after_s=7.0, latency_s=0.5)


# --------------------------------------------------------------- delays
def test_exponential_backoff_without_jitter_doubles_up_to_the_cap() -> None:
    """min(base * 2**(k-1), cap): 0.5, 1, 2, 4, 4 for base 0.5 and cap 4."""
    policy = RetryPolicy(base_s=0.5, cap_s=4.0)
    assert [backoff_s(policy, k) for k in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]


@pytest.mark.parametrize("u", [0.0, 0.25, 0.9])
def test_full_jitter_is_uniform_from_zero_to_the_exponential_delay(u: float) -> None:
    """jitter 1 (AWS full jitter): u * min(cap, base * 2**(k-1))."""
    policy = RetryPolicy(base_s=1.0, cap_s=8.0, jitter=1.0)
    for k, ceiling in zip(range(1, 6), [1.0, 2.0, 4.0, 8.0, 8.0], strict=True):
        assert backoff_s(policy, k, None, u) == pytest.approx(u * ceiling, abs=1e-12)


@pytest.mark.parametrize("u", [0.0, 0.5, 0.99])
def test_equal_jitter_keeps_half_the_delay_and_draws_the_other_half(u: float) -> None:
    """jitter 0.5 (AWS equal jitter): t/2 + u * t/2 with t = min(cap, base * 2**(k-1))."""
    policy = RetryPolicy(base_s=2.0, cap_s=10.0, jitter=0.5)
    for k, t in zip(range(1, 5), [2.0, 4.0, 8.0, 10.0], strict=True):
        assert backoff_s(policy, k, None, u) == pytest.approx(t / 2 + u * t / 2, abs=1e-12)


def test_decorrelated_jitter_draws_between_base_and_three_times_the_last_delay() -> None:
    """min(cap, base + u * (3 * previous - base)), previous = base before the first."""
    policy = RetryPolicy(base_s=1.0, cap_s=10.0, jitter=1.0, decorrelated=True)
    first = backoff_s(policy, 1, None, 0.5)
    assert first == pytest.approx(1.0 + 0.5 * (3.0 - 1.0))  # 2.0
    second = backoff_s(policy, 2, None, 0.25, first)
    assert second == pytest.approx(1.0 + 0.25 * (6.0 - 1.0))  # 2.25
    assert backoff_s(policy, 3, None, 1.0, 9.0) == 10.0  # the cap


def test_retry_after_overrides_the_backoff_only_when_honoured() -> None:
    """A Retry-After of 7 s is waited when honoured; ignored, the backoff applies."""
    honour = RetryPolicy(base_s=1.0, cap_s=8.0)
    ignore = RetryPolicy(base_s=1.0, cap_s=8.0, honor_retry_after=False)
    assert backoff_s(honour, 3, 7.0) == 7.0
    assert backoff_s(ignore, 3, 7.0) == 4.0


def test_no_backoff_retries_at_once_or_after_the_retry_after() -> None:
    """backoff false: 0 s (Retry-After ignored), or the Retry-After (honoured)."""
    at_once = RetryPolicy(backoff=False, honor_retry_after=False)
    after_ra = RetryPolicy(backoff=False)
    assert [backoff_s(at_once, k, 7.0) for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    assert backoff_s(after_ra, 2, 7.0) == 7.0
    assert backoff_s(after_ra, 2, None) == 0.0


def test_bad_policies_are_refused_naming_the_field() -> None:
    """Decorrelated jitter without jitter 1, and an unknown jitter scope, are refused."""
    with pytest.raises(ParameterError, match="decorrelated"):
        RetryPolicy(decorrelated=True, jitter=0.5)
    with pytest.raises(ParameterError, match="jitter_scope"):
        RetryPolicy(jitter_scope="tenant")
    with pytest.raises(ParameterError, match="retry_cost"):
        RetryQuota(retry_cost=0)


# ---------------------------------------------------- the harness's retry path
def test_max_retries_two_makes_three_requests_then_fails_as_retries_exhausted() -> None:
    """max_attempts 2 (the SDKs' max_retries default): the first try and two
    retries, waits of 1 and 2 s (Retry-After ignored), then failed:retries_exhausted."""
    params = make_params(retry=RetryPolicy(max_attempts=2, honor_retry_after=False))
    run = run_script(params, model=[RATE_LIMITED] * 3)
    assert len(run.of(ModelRequest)) == 3
    assert [w.seconds for w in run.of(Wait)] == [1.0, 2.0]
    assert (run.state.status, run.state.reason) == ("failed", "retries_exhausted")


def test_run_scope_jitter_spreads_runs_and_call_scope_does_not() -> None:
    """With jitter_scope run, two runs' first delays use their own keys
    (u = jitter_draw(key + 'model0', 1)); with call, both draw alike."""
    delays: dict[str, list[float]] = {}
    for scope in ("call", "run"):
        params = make_params(retry=RetryPolicy(jitter=1.0, jitter_scope=scope,
                                               honor_retry_after=False, cap_s=8.0))
        delays[scope] = [_drive(params, [RATE_LIMITED, final()], key=key)[1][0]
                         for key in ("0:", "1:")]
    assert delays["call"] == [jitter_draw("model0", 1)] * 2
    assert delays["run"] == [jitter_draw("0:model0", 1), jitter_draw("1:model0", 1)]
    assert delays["run"][0] != delays["run"][1]


def test_a_time_budget_stops_the_retry_that_would_start_after_it() -> None:
    """max_retry_s 4, tries of 0.5 s, backoff 1, 2, 4: after try 1 (0.5) a
    1 s wait (1.5), after try 2 (2.0) a 2 s wait (4.0, within), after try 3
    (4.5) a 4 s wait would end at 8.5 > 4: three requests, exhausted max_retry_s."""
    params = make_params(retry=RetryPolicy(max_attempts=10, honor_retry_after=False,
                                           max_retry_s=4.0))
    state, waits, requests, _ = _drive(params, [RATE_LIMITED] * 3)
    assert (requests, waits) == (3, [1.0, 2.0])
    assert (state.status, state.reason, state.detail["exhausted"]) == (
        "failed", "retries_exhausted", "max_retry_s")


# ------------------------------------------------------- the shared bucket
# (the bucket's own rules: tests/test_harness_retry_budget.py)
def test_runs_share_one_bucket_and_an_empty_bucket_ends_the_run() -> None:
    """Capacity 10, cost 5: run A's two retries empty it (its third 429 is
    not retried: failed:retries_exhausted, exhausted retry_quota, with
    max_attempts 5 unspent); run B's first 429 then gets no retry at all."""
    bucket = RetryBudget(RetryQuota(capacity=10, retry_cost=5, success_refund=1))
    params = make_params(retry=RetryPolicy(max_attempts=5, honor_retry_after=False))
    a, a_waits, a_requests, _ = _drive(params, [RATE_LIMITED] * 3, bucket)
    assert (a_requests, a_waits, bucket.level) == (3, [1.0, 2.0], 0)
    assert (a.status, a.reason, a.detail["exhausted"]) == ("failed", "retries_exhausted",
                                                           "retry_quota")
    b, b_waits, b_requests, _ = _drive(params, [RATE_LIMITED], bucket)
    assert (b_requests, b_waits, b.reason) == (1, [], "retries_exhausted")
    assert (bucket.taken, bucket.refused) == (2, 2)


def test_a_success_refills_the_bucket_with_what_its_retries_took() -> None:
    """A call that succeeds after one retry (cost 5) puts 5 back; a first-try
    success puts success_refund (1) back, up to the capacity."""
    bucket = RetryBudget(RetryQuota(capacity=20, retry_cost=5, success_refund=1))
    bucket.level = 10.0
    params = make_params(retry=RetryPolicy(honor_retry_after=False))
    state, waits, _, _ = _drive(params, [RATE_LIMITED, final()], bucket)
    assert state.status == "succeeded" and waits == [1.0]
    assert bucket.level == 10.0  # 10 - 5 + 5
    _drive(params, [final()], bucket)
    assert bucket.level == 11.0


# ---------------------------------------------------------------- helpers
def _drive(params: Any, answers: list[Any], bucket: RetryBudget | None = None,
           key: str = "") -> tuple[Any, list[float], int, list[ModelRequest]]:
    """Run the loop answering model requests from ``answers`` (a Reply
    becomes a well-formed response) and Waits with None: the final state, the
    waits' seconds, the number of model requests and the requests."""
    state = make_state(params)
    loop = agent_loop(params, state, retry_budget=bucket, retry_key=key)
    waits: list[float] = []
    requests: list[ModelRequest] = []
    queue = list(answers)
    result: Any = None
    try:
        while True:
            effect = loop.send(result)
            if isinstance(effect, ModelRequest):
                requests.append(effect)
                item = queue.pop(0)
                result = item if isinstance(item, ModelError) else ModelResponse(
                    [TextBlock("Done: the test passes.", 10)],
                    Usage(effect.prompt_tokens, 10), "end_turn", 1.0)
            elif isinstance(effect, Wait):
                waits.append(effect.seconds)
                result = None
            else:
                result = None
    except StopIteration as end:
        return end.value, waits, len(requests), requests
