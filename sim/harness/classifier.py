"""Error classifier and retry policy: who handles each failure.

Three classes (seed 001): ``transient`` errors the harness retries itself with
backoff, without a model step (429, 529, 5xx of tools, timeouts, connection
errors); ``needs_plan`` errors the model must see, written so it can act on
them (validation, not found, permission); ``fatal`` errors that end the run.
Model server errors (5xx, malformed or empty responses) have their own path
(seed 000): one immediate retry, then the run fails with a diagnostic.

Retries happen at this layer only: drivers and tool clients must not retry.
"""

from __future__ import annotations

import math

from sim.harness.effects import ModelError, ToolError
from sim.harness.params import RetryPolicy

MAX_WAIT_S = 300.0
"""The longest backoff the harness waits before a retry (seconds): a
server's Retry-After or ``retry.cap_s`` beyond it is cut to it."""

TRANSIENT = "transient"
NEEDS_PLAN = "needs_plan"
FATAL = "fatal"
SERVER = "server"

_TOOL_CLASSES = {
    "transient": TRANSIENT, "timeout": TRANSIENT, "rate_limit": TRANSIENT,
    "connection": TRANSIENT, "validation": NEEDS_PLAN, "not_found": NEEDS_PLAN,
    "permission": NEEDS_PLAN, "fatal": FATAL, "subagent": NEEDS_PLAN,
}
_MODEL_CLASSES = {
    "rate_limit": TRANSIENT, "overloaded": TRANSIENT, "timeout": TRANSIENT,
    "connection": TRANSIENT, "server": SERVER, "malformed": SERVER, "empty": SERVER,
    "invalid_request": FATAL, "auth": FATAL, "context_overflow": NEEDS_PLAN,
}


def classify_tool_error(error: ToolError) -> str:
    """``transient``, ``needs_plan`` or ``fatal`` for a tool error. An unknown
    kind is judged by its status: 429 and 5xx transient, other 4xx needs_plan,
    otherwise fatal."""
    cls = _TOOL_CLASSES.get(error.kind)
    if cls is not None:
        return cls
    return _by_status(error.status)


def classify_model_error(error: ModelError) -> str:
    """``transient``, ``server``, ``needs_plan`` (context overflow) or ``fatal``
    for a model error, by kind, else by HTTP status."""
    cls = _MODEL_CLASSES.get(error.kind)
    if cls is not None:
        return cls
    status = error.status
    if status is not None and 500 <= status < 600 and status != 529:
        return SERVER
    return _by_status(status)


def _by_status(status: int | None) -> str:
    if status is None:
        return FATAL
    if status in (408, 429, 529) or 500 <= status < 600:
        return TRANSIENT
    if 400 <= status < 500:
        return NEEDS_PLAN
    return FATAL


def backoff_s(policy: RetryPolicy, attempt: int, retry_after_s: float | None = None,
              jitter_draw: float = 1.0, previous_s: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based), by the
    rules stated on :class:`~sim.harness.params.RetryPolicy`.

    A server's Retry-After (finite, >= 0) overrides the computed delay when
    ``policy.honor_retry_after``; without ``policy.backoff`` the delay is 0.
    Otherwise ``min(base * 2**(attempt-1), cap)``, scaled by ``1 - jitter *
    (1 - jitter_draw)`` where ``jitter_draw`` in [0, 1] comes from the caller
    (the harness owns no random source); with ``policy.decorrelated``,
    ``min(cap, base + jitter_draw * (3 * previous_s - base))``
    (``previous_s``: the delay before the previous retry, None for the
    first: ``base``). No wait is longer than :data:`MAX_WAIT_S` (a
    Retry-After of 10^9 seconds, or a far-future HTTP date, is waited for 5
    minutes, then the call is retried as usual; time budgets still refuse a
    wait that would overshoot them).
    """
    if (retry_after_s is not None and 0 <= retry_after_s < math.inf
            and policy.honor_retry_after):
        return float(min(retry_after_s, MAX_WAIT_S))  # min first: an int may not fit a float
    if not policy.backoff:
        return 0.0
    if policy.decorrelated:
        base = policy.base_s
        high = 3.0 * (base if previous_s is None else previous_s)
        return float(min(base + jitter_draw * max(0.0, high - base), policy.cap_s, MAX_WAIT_S))
    exponent = min(attempt - 1, 1023)  # 2.0 ** 1024 overflows; the cap binds long before
    delay = min(policy.base_s * 2.0 ** exponent, policy.cap_s, MAX_WAIT_S)
    if policy.jitter:
        delay *= 1.0 - policy.jitter * (1.0 - jitter_draw)
    return delay


def jitter_draw(key: str, attempt: int) -> float:
    """A deterministic draw in [0, 1) from a call's key and attempt number, so
    jittered backoff needs no random source and replays identically."""
    h = 2166136261
    for ch in f"{key}#{attempt}":
        h = ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
    return h / 4294967296.0


def actionable_tool_error(name: str, error: ToolError, attempts: int) -> str:
    """The observation the model reads for a tool error: what failed, why and
    what to do next (an error text is a prompt)."""
    cls = classify_tool_error(error)
    what = error.message or error.kind
    if cls == TRANSIENT:
        return (f"{name} failed {attempts} time(s) with a temporary error ({what}); the "
                f"harness already retried it. Try a different approach or tool, or continue "
                f"without this result.")
    if error.kind == "validation":
        return f"{name} rejected its arguments: {what}. Fix the arguments and call it again."
    if error.kind == "not_found":
        return f"{name}: not found: {what}. Check the name or path; list what exists first."
    if error.kind == "permission":
        return (f"{name}: permission denied: {what}. This action is not allowed; choose an "
                f"action within your permissions.")
    if error.kind == "subagent":
        return (f"{name}: {what}. Use the results that came back, retry the failed part "
                f"differently, or continue without it.")
    return f"{name} failed: {what}."
