"""Provider failures as the harness's :class:`~sim.harness.effects.ModelError` kinds.

Each provider module turns its SDK's exception into a :class:`Failure` (HTTP
status, the provider's error type or code, message, response headers, and
whether it was a timeout or a lost connection); :func:`model_error` then maps
it, one table for both providers:

=====================================================  ====================
failure                                                kind
=====================================================  ====================
timeout (client deadline, HTTP 408, 504)               ``timeout``
no connection, connection lost mid-stream               ``connection``
429, or error type ``rate_limit_error``                 ``rate_limit``
529, or error type ``overloaded_error``                 ``overloaded``
prompt over the context window (Anthropic "prompt is
too long", ``request_too_large``; OpenAI
``context_length_exceeded``)                            ``context_overflow``
a spend cap or exhausted quota (a 429 that waiting
does not fix)                                           ``invalid_request``
other 5xx, or error type ``api_error``                  ``server``
401, 403                                                ``auth``
other 4xx                                               ``invalid_request``
=====================================================  ====================

An error event in the middle of an Anthropic stream arrives with the
stream's HTTP status (200): its error type decides, and ``status`` is None.
``retry_after_s`` comes from ``retry-after-ms`` or ``retry-after`` (seconds or
an HTTP date); a number too large for a float (``1e400``, 400 digits) reads
as the largest float, which the live driver clamps like any Retry-After
beyond its cap. The SDKs' own retries are off (``max_retries=0``): the harness
retries, at one layer (seed 001).
"""

from __future__ import annotations

import email.utils
import importlib
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from sim.harness.effects import ModelError

_BY_TYPE = {"rate_limit_error": "rate_limit", "overloaded_error": "overloaded",
            "api_error": "server", "authentication_error": "auth",
            "permission_error": "auth", "timeout_error": "timeout"}
_CONTEXT_CODES = ("context_length_exceeded", "request_too_large", "string_above_max_length")
_CONTEXT_PHRASES = ("prompt is too long", "maximum context length", "context window",
                    "too many tokens", "context_length_exceeded")
_QUOTA_CODES = ("insufficient_quota", "enforced_spend_limit_reached", "billing_hard_limit")


@dataclass(slots=True)
class Failure:
    """A failed call, in provider-neutral terms. ``status`` is the HTTP status
    (None without a response); ``error_type`` the provider's error type
    (``error.type``) and ``code`` its code (OpenAI's ``error.code``,
    Anthropic's ``error.details.error_code``)."""

    message: str
    status: int | None = None
    error_type: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: bool = False
    connection: bool = False


def transport_failure(error: BaseException) -> Failure | None:
    """A :class:`Failure` for an error of the SDKs' HTTP library (``httpx2``,
    or ``httpx`` for older SDKs) or of the socket, which a stream can raise
    unwrapped while it is read; None for any other error."""
    timeouts, transports = _transport_errors()
    if isinstance(error, (*timeouts, TimeoutError)):
        return Failure(f"timed out: {error}", timeout=True)
    if isinstance(error, (*transports, OSError)):
        return Failure(f"connection lost: {type(error).__name__}: {error}", connection=True)
    return None


def _transport_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    timeouts: list[type] = []
    transports: list[type] = []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transports.append(module.TransportError)
    return tuple(timeouts), tuple(transports)


def model_error(failure: Failure, latency_s: float) -> ModelError:
    """The harness's view of ``failure`` (see the module table)."""
    status = failure.status if failure.status and failure.status >= 400 else None
    return ModelError(_kind(failure, status), status, retry_after_s(failure.headers),
                      failure.message, latency_s)


def _kind(f: Failure, status: int | None) -> str:
    if f.timeout or status in (408, 504):
        return "timeout"
    if f.connection:
        return "connection"
    text = f.message.lower()
    if f.code in _QUOTA_CODES:
        return "invalid_request"
    if (f.code in _CONTEXT_CODES or f.error_type in _CONTEXT_CODES or status == 413
            or (status in (400, None) and any(p in text for p in _CONTEXT_PHRASES))):
        return "context_overflow"
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    by_type = _BY_TYPE.get(f.error_type or "")
    if by_type is not None:
        return by_type
    if status is not None and status >= 500:
        return "server"
    if status in (401, 403):
        return "auth"
    if status is None:
        return "server"  # an error event of unknown type mid-stream
    return "invalid_request"


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms`` (milliseconds), else
    ``retry-after`` as seconds or as an HTTP date (finite: a number too large
    for a float is the largest float); None when absent, unreadable,
    negative or NaN."""
    lower = {k.lower(): v for k, v in headers.items()}
    raw = lower.get("retry-after-ms")
    if raw is not None:
        seconds = _number(raw)
        if seconds is not None:
            return seconds / 1000.0
    raw = lower.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if math.isnan(value) or value < 0:
        return None
    return min(value, sys.float_info.max)
