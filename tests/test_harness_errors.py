"""Error classifier and retry policy: the harness retries what it can fix
(with backoff, a retry budget and a fallback model) without a model step; the
model sees errors that need a new plan; some errors end the run."""

from __future__ import annotations

import hashlib
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    FAST,
    TASK,
    calls,
    final,
    last_user_blocks,
    make_params,
    run_script,
    tool_call,
    use,
)

from sim.harness import (
    Budgets,
    Checkpoint,
    ModelError,
    ModelRequest,
    Prices,
    RetryPolicy,
    ToolError,
    ToolRequest,
    ToolResult,
    Wait,
    normalize,
)
from sim.harness.classifier import (
    FATAL,
    MAX_WAIT_S,
    NEEDS_PLAN,
    SERVER,
    TRANSIENT,
    backoff_s,
    classify_model_error,
    classify_tool_error,
    jitter_draw,
)

DISABLED = "Proceed without it or use an alternative approach."


# -------------------------------------------------------------- classifier
@pytest.mark.parametrize(("kind", "status", "expected"), [
    ("transient", None, TRANSIENT), ("timeout", None, TRANSIENT),
    ("rate_limit", None, TRANSIENT), ("connection", None, TRANSIENT),
    ("validation", None, NEEDS_PLAN), ("not_found", None, NEEDS_PLAN),
    ("permission", None, NEEDS_PLAN), ("fatal", None, FATAL),
    ("weird", 429, TRANSIENT), ("weird", 503, TRANSIENT), ("weird", 408, TRANSIENT),
    ("weird", 404, NEEDS_PLAN), ("weird", 400, NEEDS_PLAN), ("weird", None, FATAL),
    ("weird", 302, FATAL),
])
def test_tool_error_classes(kind: str, status: int | None, expected: str) -> None:
    """Tool errors by kind (transient, timeout, rate_limit, connection ->
    transient; validation, not_found, permission -> needs_plan; fatal ->
    fatal), and an unknown kind by its status (429/408/5xx transient, other
    4xx needs_plan, otherwise fatal)."""
    assert classify_tool_error(ToolError(kind, "m", 1, status=status)) == expected


@pytest.mark.parametrize(("kind", "status", "expected"), [
    ("rate_limit", 429, TRANSIENT), ("overloaded", 529, TRANSIENT), ("timeout", None, TRANSIENT),
    ("connection", None, TRANSIENT), ("server", 500, SERVER), ("malformed", None, SERVER),
    ("empty", None, SERVER), ("invalid_request", 400, FATAL), ("auth", 401, FATAL),
    ("context_overflow", 400, NEEDS_PLAN),
    ("weird", 500, SERVER), ("weird", 503, SERVER), ("weird", 529, TRANSIENT),
    ("weird", 429, TRANSIENT), ("weird", 408, TRANSIENT), ("weird", 400, NEEDS_PLAN),
    ("weird", None, FATAL),
])
def test_model_error_classes(kind: str, status: int | None, expected: str) -> None:
    """Model errors by kind, and an unknown kind by status: 5xx other than 529
    is a server error (retried once), 429/529/408 transient."""
    assert classify_model_error(ModelError(kind, status)) == expected


# ----------------------------------------------------------------- backoff
def test_backoff_doubles_from_one_second_up_to_the_cap() -> None:
    """The default policy waits 1, 2, 4, ..., 64 seconds, then stays at 64."""
    policy = RetryPolicy()
    assert [backoff_s(policy, k) for k in range(1, 10)] == [1, 2, 4, 8, 16, 32, 64, 64, 64]


POLICIES = st.builds(lambda base, factor, jitter: RetryPolicy(base_s=base, cap_s=base * factor,
                                                              jitter=jitter),
                     st.floats(0.01, 10.0), st.floats(1.0, 100.0), st.floats(0.0, 1.0))


@FAST
@given(policy=POLICIES, attempt=st.integers(1, 5_000), draw=st.floats(0.0, 1.0))
def test_backoff_never_exceeds_the_cap(policy: RetryPolicy, attempt: int, draw: float) -> None:
    """Whatever the attempt number (even far beyond any sane retry count) and
    jitter, the computed delay is in [0, cap]; with jitter j it is at least
    (1 - j) times the unjittered delay."""
    delay = backoff_s(policy, attempt, None, draw)
    assert 0.0 <= delay <= policy.cap_s
    nominal = backoff_s(RetryPolicy(policy.base_s, policy.cap_s), attempt)
    assert delay >= (1.0 - policy.jitter) * nominal - 1e-12


@FAST
@given(base=st.floats(0.01, 10.0), factor=st.floats(1.0, 100.0), n=st.integers(1, 2_000))
def test_backoff_without_jitter_is_monotone(base: float, factor: float, n: int) -> None:
    """Without jitter, each retry waits at least as long as the previous one."""
    policy = RetryPolicy(base_s=base, cap_s=base * factor)
    delays = [backoff_s(policy, k) for k in range(1, n + 1, max(1, n // 50))]
    assert all(a <= b for a, b in itertools.pairwise(delays))


@FAST
@given(policy=POLICIES, attempt=st.integers(1, 50), retry_after=st.floats(0.0, 1e4))
def test_retry_after_overrides_exactly(policy: RetryPolicy, attempt: int,
                                       retry_after: float) -> None:
    """A server's Retry-After is waited exactly, whatever the computed delay,
    up to the longest wait (MAX_WAIT_S)."""
    assert backoff_s(policy, attempt, retry_after, 0.3) == min(retry_after, MAX_WAIT_S)


@FAST
@given(key=st.text(max_size=20), attempt=st.integers(0, 100))
def test_jitter_draw_is_deterministic_in_unit_interval(key: str, attempt: int) -> None:
    """The jitter draw needs no random source: same key and attempt, same
    draw, always in [0, 1)."""
    d = jitter_draw(key, attempt)
    assert 0.0 <= d < 1.0 and d == jitter_draw(key, attempt)


# ------------------------------------------------------------- tool retries
def test_transient_tool_errors_are_retried_with_waits_and_no_model_step() -> None:
    """A transient tool error is retried by the harness: Wait(1), Wait(2)
    between attempts, no extra model call, and the model only sees the final
    success."""
    run = run_script(model=[tool_call("search", q="x"), final()],
                     tools=[ToolError("transient", "503", 5), ToolError("timeout", "slow", 5),
                            ToolResult("found it", 3)])
    kinds = [type(e).__name__ for e in run.effects]
    assert kinds == ["ModelRequest", "ToolRequest", "Wait", "ToolRequest", "Wait",
                     "ToolRequest", "Checkpoint", "ModelRequest"]
    assert [w.seconds for w in run.of(Wait)] == [1.0, 2.0]
    assert [r.attempt for r in run.of(ToolRequest)] == [0, 1, 2]
    result = run.step_requests[1].messages[-1].content[0]
    assert (result.content, result.is_error) == ("found it", False)
    assert (run.state.turns, run.state.retries, run.state.tool_calls) == (2, 2, 3)


def test_tool_retry_after_is_honoured() -> None:
    """A tool error's Retry-After sets the wait before the retry."""
    run = run_script(model=[tool_call("search", q="x"), final()],
                     tools=[ToolError("rate_limit", "slow down", 5, retry_after_s=7.5)])
    assert [w.seconds for w in run.of(Wait)] == [7.5]


@pytest.mark.parametrize("max_attempts", [0, 1, 3])
def test_after_max_attempts_the_model_sees_an_actionable_error(max_attempts: int) -> None:
    """A tool that keeps failing transiently is tried 1 + max_attempts times;
    then the model gets an is_error observation saying the harness already
    retried and suggesting another approach."""
    params = make_params(retry=RetryPolicy(max_attempts=max_attempts))
    run = run_script(params, model=[tool_call("search", q="x"), final()],
                     tools=[ToolError("transient", "503 upstream", 5)] * 10)
    assert len(run.of(ToolRequest)) == max_attempts + 1
    assert len(run.of(Wait)) == max_attempts
    block = run.step_requests[1].messages[-1].content[0]
    assert block.is_error
    assert "503 upstream" in block.content and "already retried" in block.content


def test_tool_max_attempts_bounds_tool_retries_apart_from_model_retries() -> None:
    """retry.tool_max_attempts, when set, bounds the retries of a tool call
    while max_attempts still bounds those of a model call."""
    params = make_params(retry=RetryPolicy(max_attempts=4, tool_max_attempts=1))
    run = run_script(params, model=[ModelError("overloaded", 529)] * 3
                     + [tool_call("search", q="x"), final()],
                     tools=[ToolError("transient", "503", 5)] * 5)
    assert len(run.of(ToolRequest)) == 2
    assert [r.attempt for r in run.step_requests][:4] == [0, 1, 2, 3]
    assert run.state.status == "succeeded"


def test_retry_budget_limits_harness_retries_over_the_run() -> None:
    """budgets.retries caps harness retries over the whole run: with 2, the
    first call gets two retries and the second call none."""
    params = make_params(budgets=Budgets(retries=2))
    run = run_script(params, model=[tool_call("search", q="a"), tool_call("search", q="b"),
                                    final()],
                     tools=[ToolError("transient", "503", 5)] * 6)
    assert run.state.retries == 2
    assert [r.attempt for r in run.of(ToolRequest)] == [0, 1, 2, 0]
    assert last_user_blocks(run.state)[0].is_error


def test_tool_retries_can_be_switched_off() -> None:
    """retry_tool_errors False: a transient error goes straight to the model."""
    params = make_params(retry=RetryPolicy(retry_tool_errors=False))
    run = run_script(params, model=[tool_call("search", q="a"), final()],
                     tools=[ToolError("transient", "503", 5)])
    assert run.of(Wait) == [] and len(run.of(ToolRequest)) == 1


@pytest.mark.parametrize(("kind", "hint"), [("validation", "Fix the arguments"),
                                            ("not_found", "list what exists"),
                                            ("permission", "not allowed")])
def test_errors_that_need_a_new_plan_go_straight_to_the_model(kind: str, hint: str) -> None:
    """Validation, not-found and permission errors are not retried: the model
    reads an actionable message (an error text is a prompt)."""
    run = run_script(model=[tool_call("search", q="a"), final()],
                     tools=[ToolError(kind, "bad date range", 5)])
    assert run.of(Wait) == []
    block = run.step_requests[1].messages[-1].content[0]
    assert block.is_error and hint in block.content and "bad date range" in block.content


def test_fatal_tool_error_ends_the_run() -> None:
    """A fatal tool error ends the run as failed:tool_fatal naming the tool."""
    run = run_script(model=[tool_call("search", q="a"), final()],
                     tools=[ToolError("fatal", "sandbox gone", 5)])
    s = run.state
    assert (s.status, s.reason) == ("failed", "tool_fatal")
    assert s.detail == {"tool": "search", "error": "sandbox gone"}


def test_three_consecutive_failures_tell_the_model_to_do_without_the_tool() -> None:
    """After the 3rd consecutive failure of one tool the harness injects "Tool
    search has failed 3 consecutive times. Proceed without it or use an
    alternative approach." (once); a success resets the count, so three more
    failures inject it again."""
    bad = ToolError("validation", "bad query", 5)
    script = [tool_call("search", q=str(i)) for i in range(7)] + [final()]
    run = run_script(model=script, tools=[bad, bad, bad, "ok", bad, bad, bad])
    injected = [(i, b.text) for i, r in enumerate(run.step_requests)
                for b in r.messages[-1].content if getattr(b, "origin", "") == "tool_disabled"]
    text = f"Tool search has failed 3 consecutive times. {DISABLED}"
    assert injected == [(3, text), (7, text)]
    assert run.state.tool_failures == {"search": 3}


def test_failures_are_counted_per_tool() -> None:
    """Failures of different tools do not add up; a success of another tool
    does not reset a tool's count."""
    bad = ToolError("validation", "no", 5)
    script = [tool_call("search", q="1"), tool_call("read_file", path="a"),
              tool_call("search", q="2"), tool_call("read_file", path="b"), final()]
    run = run_script(model=script, tools=[bad, bad, bad, "ok"])
    assert run.state.tool_failures == {"search": 2}
    assert not any(getattr(b, "origin", "") == "tool_disabled"
                   for m in run.state.messages for b in m.content)


def test_rejected_calls_count_as_failures_of_that_tool() -> None:
    """A call rejected by the policy (missing argument) is a failure of the
    tool: three in a row trigger the do-without message."""
    run = run_script(model=[tool_call("read_file")] * 3 + [final()])
    assert any(getattr(b, "origin", "") == "tool_disabled" for b in last_user_blocks(run.state))


# ------------------------------------------------------------ model retries
def test_rate_limits_are_retried_with_backoff_without_a_step() -> None:
    """A 429 is retried after a Wait (Retry-After when given); the step count
    does not move and the reply that finally arrives is used."""
    run = run_script(model=[ModelError("rate_limit", 429, retry_after_s=3.0),
                            ModelError("overloaded", 529), final()])
    assert [w.seconds for w in run.of(Wait)] == [3.0, 2.0]
    assert [r.attempt for r in run.of(ModelRequest)] == [0, 1, 2]
    assert (run.state.status, run.state.turns, run.state.retries) == ("succeeded", 1, 2)
    assert run.state.rate_limit_retries == 1


def test_rate_limit_retries_switch_to_the_fallback_model_and_its_prices() -> None:
    """After fallback_after rate-limit retries the harness switches to the
    fallback model (an alert event says so), the rest of the run uses it, and
    its calls are priced with fallback_prices."""
    primary, fallback = Prices(input=3.0, output=15.0), Prices(input=0.25, output=1.25)
    params = make_params(prices=primary, retry=RetryPolicy(
        fallback_after=2, fallback_model="haiku", fallback_prices=fallback))
    run = run_script(params, model=[ModelError("rate_limit", 429)] * 2
                     + [tool_call("search", q="x"), final()])
    models = [r.model for r in run.of(ModelRequest)]
    assert models == [params.model, params.model, "haiku", "haiku"]
    s = run.state
    assert s.model == "haiku"
    assert s.money_usd == pytest.approx(fallback.cost(s.input_tokens, s.output_tokens))
    alerts = run.events_of("alert")
    assert [a.data for a in alerts] == [{"alert": "fallback_model", "model": "haiku"}]


def test_without_fallback_exhausted_model_retries_fail_the_run() -> None:
    """With no fallback model, a model call failing transiently beyond
    max_attempts retries ends the run as failed:retries_exhausted with the
    errors in the diagnostic."""
    params = make_params(retry=RetryPolicy(max_attempts=2))
    run = run_script(params, model=[ModelError("overloaded", 529, message="busy")] * 5)
    s = run.state
    assert (s.status, s.reason) == ("failed", "retries_exhausted")
    assert len(run.of(ModelRequest)) == 3
    assert s.detail["diagnostic"]["errors"] == ["overloaded 529: busy"] * 3


def test_retry_budget_also_bounds_model_retries() -> None:
    """budgets.retries applies to model retries too; spending it ends the run
    as budget_exhausted:retries (resumable with a larger budget), unlike
    exhausting one call's max_attempts (failed:retries_exhausted)."""
    params = make_params(budgets=Budgets(retries=1))
    run = run_script(params, model=[ModelError("timeout")] * 5)
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "retries")
    assert run.state.retries == 1 and len(run.of(ModelRequest)) == 2


def test_server_error_is_retried_once_immediately_then_fails_with_a_hashed_diagnostic() -> None:
    """A model server error is retried once at once (no Wait, no retry
    budget); a second consecutive one ends the run as failed:model_error with a
    diagnostic: the request's messages as role plus SHA-256 of their content
    (no raw content anywhere in state.detail) and the raw errors."""
    run = run_script(model=[tool_call("read_file", path="secret.txt"),
                            ModelError("server", 500, message="internal"),
                            ModelError("malformed", None, message="bad json")],
                     tools=[ToolResult("SECRET-CONTENT-42", 5)])
    s = run.state
    assert (s.status, s.reason) == ("failed", "model_error")
    assert run.of(Wait) == [] and s.retries == 0
    assert [r.attempt for r in run.step_requests] == [0, 0, 1]
    diagnostic = s.detail["diagnostic"]
    wire = normalize(run.step_requests[-1].messages, "anthropic")
    assert diagnostic["request"] == [
        {"role": m["role"], "sha256": hashlib.sha256(
            json.dumps(m["content"], sort_keys=True, default=str).encode()).hexdigest()}
        for m in wire]
    assert diagnostic["errors"] == ["server 500: internal", "malformed None: bad json"]
    dumped = json.dumps(s.detail)
    assert "SECRET-CONTENT-42" not in dumped and TASK not in dumped
    assert "secret.txt" not in dumped


def test_a_single_server_error_costs_nothing_but_the_retry() -> None:
    """One server error followed by a good reply: the run goes on, no step is
    spent on the failure, and a retry event records the immediate retry."""
    run = run_script(model=[ModelError("server", 503), final()])
    assert (run.state.status, run.state.turns) == ("succeeded", 1)
    assert [e.data["delay_s"] for e in run.events_of("retry")] == [0.0]


def test_fatal_model_error_fails_at_once() -> None:
    """An auth or invalid-request error is not retried: failed:model_error."""
    run = run_script(model=[ModelError("auth", 401, message="bad key"), final()])
    assert (run.state.status, run.state.reason) == ("failed", "model_error")
    assert len(run.of(ModelRequest)) == 1


def test_retries_leave_the_step_structure_intact() -> None:
    """Retries inside one step still produce exactly one checkpoint per step."""
    run = run_script(model=[ModelError("rate_limit", 429), calls(use("search", q="a")),
                            final()],
                     tools=[ToolError("transient", "503", 5), "ok"])
    assert [c.turn for c in run.of(Checkpoint)] == [1]
