"""Provider failures map onto the harness's ModelError kinds, one table for both
providers, and the server's Retry-After is read in each of its forms."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.drivers.live.calls import (
    Failure,
    model_error,
    retry_after_s,
    transport_failure,
)
from sim.harness.classifier import TRANSIENT, classify_model_error


@pytest.mark.parametrize(("failure", "kind"), [
    (Failure("slow down", 429, "rate_limit_error"), "rate_limit"),
    (Failure("Rate limit reached", 429, "requests", "rate_limit_exceeded"), "rate_limit"),
    (Failure("Overloaded", 529, "overloaded_error"), "overloaded"),
    (Failure("Overloaded", 200, "overloaded_error"), "overloaded"),  # an error event mid-stream
    (Failure("Internal server error", 500, "api_error"), "server"),
    (Failure("bad gateway", 502), "server"),
    (Failure("unavailable", 503, "server_error"), "server"),
    (Failure("gateway timeout", 504), "timeout"),
    (Failure("request timeout", 408), "timeout"),
    (Failure("timed out", timeout=True), "timeout"),
    (Failure("connection refused", connection=True), "connection"),
    (Failure("prompt is too long: 210000 tokens > 200000 maximum", 400,
             "invalid_request_error"), "context_overflow"),
    (Failure("request too large", 413, "request_too_large"), "context_overflow"),
    (Failure("This model's maximum context length is 128000 tokens.", 400,
             "invalid_request_error", "context_length_exceeded"), "context_overflow"),
    (Failure("You exceeded your current quota", 429, "insufficient_quota",
             "insufficient_quota"), "invalid_request"),
    (Failure("invalid x-api-key", 401, "authentication_error"), "auth"),
    (Failure("forbidden", 403, "permission_error"), "auth"),
    (Failure("messages: roles must alternate", 400, "invalid_request_error"),
     "invalid_request"),
    (Failure("model not found", 404, "not_found_error"), "invalid_request"),
])
def test_failures_map_to_the_harness_error_kinds(failure, kind):
    """Each row of the module's table."""
    error = model_error(failure, 0.25)
    assert error.kind == kind
    assert error.latency_s == 0.25
    assert error.status == (failure.status if failure.status and failure.status >= 400
                            else None)


def test_the_harness_retries_what_waiting_fixes_and_only_that():
    """Rate limits, overloads, timeouts and lost connections are transient
    for the harness's classifier; a spent quota or a bad request is not."""
    transient = [Failure("", 429), Failure("", 529), Failure("", timeout=True),
                 Failure("", connection=True), Failure("", 200, "overloaded_error")]
    assert {classify_model_error(model_error(f, 0)) for f in transient} == {TRANSIENT}
    for failure in (Failure("", 429, code="insufficient_quota"), Failure("", 400),
                    Failure("", 401)):
        assert classify_model_error(model_error(failure, 0)) == "fatal"


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after": "3"}, 3.0), ({"Retry-After": "1.5"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after": "soon"}, None), ({"retry-after": "-4"}, None),
    ({"retry-after": "nan"}, None), ({}, None),
])
def test_retry_after_in_seconds_or_milliseconds(headers, seconds):
    """retry-after-ms wins over retry-after; unreadable, negative or
    non-finite values are ignored."""
    assert retry_after_s(headers) == seconds


def test_retry_after_as_an_http_date():
    """An HTTP date gives the seconds until then (never negative)."""
    now = 1_800_000_000.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_s({"retry-after": later}, now=now) == pytest.approx(30.0)
    earlier = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_s({"retry-after": earlier}, now=now) == 0.0


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x-other"]),
                       st.text(max_size=30)))
def test_retry_after_never_raises_and_is_never_negative(headers):
    """Whatever a server sends, the wait is None or a finite non-negative number."""
    value = retry_after_s(headers)
    assert value is None or 0 <= value < float("inf")


def test_errors_of_the_http_layer_become_timeouts_or_lost_connections():
    """A stream can raise the HTTP library's own errors unwrapped."""
    import httpx2

    assert transport_failure(httpx2.ReadTimeout("slow")).timeout
    assert transport_failure(httpx2.RemoteProtocolError("peer closed")).connection
    assert transport_failure(ConnectionResetError()).connection
    assert transport_failure(KeyError("not transport")) is None
