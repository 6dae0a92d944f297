"""The retry bucket shared by a client's runs (sim.harness.retry_budget,
issue 40 item 4), alone: what a retry takes, when one is refused, what a
success puts back, how the bucket refills with the clock it is given, and
that its level never leaves [0, capacity] and is accounted for. Every level
below is computed by hand from :class:`~sim.harness.params.RetryQuota`'s
rules; the bucket's use by the retry path is in tests/test_retry_policies.py.
(A test_harness* file: CI's harness coverage gate counts these.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.harness.params import RetryQuota
from sim.harness.retry_budget import RetryBudget


def never_read() -> float:
    """A clock the bucket must not read."""
    raise AssertionError("the clock was read")


def test_a_full_bucket_allows_capacity_over_cost_retries_then_refuses() -> None:
    """Capacity 12, retry cost 5: 12 -> 7 -> 2, a third retry refused (2 <
    5, nothing taken), counted in refused."""
    bucket = RetryBudget(RetryQuota(capacity=12, retry_cost=5, success_refund=1))
    assert bucket.level == 12
    assert bucket.take(5) and bucket.level == 7
    assert bucket.take(5) and bucket.level == 2
    assert not bucket.take(5) and bucket.level == 2
    assert not bucket.take(5)
    assert (bucket.taken, bucket.refused, bucket.refunded) == (2, 2, 0.0)


def test_a_timeout_takes_timeout_cost_and_any_other_error_retry_cost() -> None:
    """retry_cost 5, timeout_cost 10: a timeout's retry costs 10; a 429's,
    an overload's or any other kind's costs 5."""
    bucket = RetryBudget(RetryQuota(retry_cost=5, timeout_cost=10))
    assert bucket.cost("timeout") == 10
    assert [bucket.cost(kind) for kind in ("rate_limit", "overloaded", "server")] == [5, 5, 5]


def test_a_retry_costing_exactly_the_level_is_allowed_and_empties_the_bucket() -> None:
    """Capacity 10, cost 5: two retries take it to exactly 0 (allowed: the
    rule is level < cost refuses), a third is refused."""
    bucket = RetryBudget(RetryQuota(capacity=10, retry_cost=5))
    assert bucket.take(5) and bucket.take(5) and bucket.level == 0
    assert not bucket.take(5) and bucket.refused == 1


def test_refunds_stop_at_the_capacity_and_count_only_what_fit() -> None:
    """Capacity 12 at level 2: a refund of 1 gives 3, one of 100 fills it to
    12 and counts 9 refunded (10 in all), one into a full bucket counts 0."""
    bucket = RetryBudget(RetryQuota(capacity=12, retry_cost=5))
    bucket.take(5)
    bucket.take(5)
    bucket.give_back(1)
    assert bucket.level == 3 and bucket.refunded == 1
    bucket.give_back(100)
    assert bucket.level == 12 and bucket.refunded == 10
    bucket.give_back(1)
    assert bucket.level == 12 and bucket.refunded == 10


def test_the_bucket_refills_with_the_clock_it_is_given() -> None:
    """refill_per_s 2, capacity 10: emptied at t=0, 3 tokens at t=1.5 (a
    retry of 10 refused), full (10, not 200) by t=100; a refund first adds
    the refill since the last look."""
    now = [0.0]
    bucket = RetryBudget(RetryQuota(capacity=10, retry_cost=10, refill_per_s=2.0),
                         lambda: now[0])
    assert bucket.take(10) and bucket.level == 0
    now[0] = 1.5
    assert not bucket.take(10)
    assert bucket.level == pytest.approx(3.0)
    now[0] = 2.0
    bucket.give_back(1)
    assert bucket.level == pytest.approx(5.0)  # 3 + 0.5 s x 2 + 1
    now[0] = 100.0
    assert bucket.take(10) and bucket.level == 0


def test_the_refill_starts_at_the_clock_when_the_bucket_was_made() -> None:
    """A bucket made at t=50 (refill 1/s, capacity 4, cost 4) and emptied at
    once holds 1 token at t=51, not the 51 tokens since time 0."""
    now = [50.0]
    bucket = RetryBudget(RetryQuota(capacity=4, retry_cost=4, refill_per_s=1.0),
                         lambda: now[0])
    assert bucket.last == 50.0
    assert bucket.take(4)
    now[0] = 51.0
    assert not bucket.take(4) and bucket.level == pytest.approx(1.0)


def test_without_a_refill_rate_the_clock_is_never_read() -> None:
    """refill_per_s 0 (AWS standard mode): making, taking and refunding never
    read the clock; a bucket with a refill rate and no clock never refills."""
    bucket = RetryBudget(RetryQuota(capacity=10, retry_cost=5), never_read)
    assert bucket.take(5) and not bucket.take(6)
    bucket.give_back(1)
    assert bucket.level == 6
    clockless = RetryBudget(RetryQuota(capacity=10, retry_cost=5, refill_per_s=3.0))
    assert clockless.take(5) and clockless.take(5) and not clockless.take(5)
    assert clockless.level == 0


OPERATIONS = st.lists(st.tuples(st.sampled_from(["take", "give"]),
                                st.floats(0.0, 50.0, allow_nan=False)), max_size=40)


@given(capacity=st.floats(1.0, 100.0), cost=st.floats(0.5, 60.0), operations=OPERATIONS)
def test_the_level_stays_within_the_bucket_and_is_accounted_for(
        capacity: float, cost: float, operations: list[tuple[str, float]]) -> None:
    """Whatever retries and refunds come, without a refill: the level stays in
    [0, capacity]; a retry is allowed exactly when the level holds its cost;
    and level = capacity - cost x taken + refunded."""
    bucket = RetryBudget(RetryQuota(capacity=capacity, retry_cost=cost))
    for op, amount in operations:
        if op == "take":
            before = bucket.level
            assert bucket.take(cost) == (before >= cost)
        else:
            bucket.give_back(amount)
        assert 0.0 <= bucket.level <= capacity
    assert bucket.level == pytest.approx(capacity - cost * bucket.taken + bucket.refunded)
    assert bucket.taken + bucket.refused == sum(op == "take" for op, _ in operations)
