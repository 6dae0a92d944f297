"""One model call, with the retries the harness makes itself (step 6).

:func:`call_model` asks the driver for a reply and checks what comes back
(:func:`~sim.harness.guards.receive`, then the content); transient errors
(429, timeouts, overload) are retried after the delay the retry policy gives
(:class:`~sim.harness.params.RetryPolicy`: backoff and jitter, Retry-After),
without a model step, while the policy's limits allow: ``max_attempts``
retries, the call's time budget ``max_retry_s``, and the retry bucket shared
with the client's other runs (:class:`~sim.harness.retry_budget.RetryBudget`,
which every success refills a little); past them the run fails as
``failed:retries_exhausted`` (its detail's ``exhausted`` names
``max_retry_s`` or ``retry_quota`` when one of those ended it). A server
error or a malformed reply is retried at once, up to
``retry.model_error_retries`` times; then the run fails with a diagnostic
that hashes the request's messages (privacy) and lists the errors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from sim.harness import events as ev
from sim.harness.budgets import LimitExceeded
from sim.harness.classifier import SERVER, TRANSIENT, backoff_s, classify_model_error, jitter_draw
from sim.harness.context import normalize
from sim.harness.effects import Effect, ModelError, ModelRequest, ModelResponse, Result
from sim.harness.guards import Run, account, check_abort, receive, stop, wait
from sim.harness.messages import Message
from sim.harness.params import HarnessParams
from sim.harness.protocol import MAX_SECONDS, content_problem, usable_reply
from sim.harness.state import CANCELLED, FAILED

MAX_DIAGNOSTIC_ERRORS = 20
"""The most errors a failed run's diagnostic lists (the first ones, each cut
to 500 characters): a run retried a thousand times keeps a small record."""


@dataclass(slots=True)
class _Tries:
    """The retries of one call so far (made at its first error): the retry
    number of the next try, the server errors and rate limits met, the
    errors' texts for a diagnostic, the seconds since the first try began
    (tries' latencies and delays), the last delay (seconds, None before the
    first) and the shared retry bucket's tokens its retries took."""

    attempt: int = 0
    server_errors: int = 0
    rate_limits: int = 0
    errors: list[str] = field(default_factory=list)
    spent_s: float = 0.0
    delay_s: float | None = None
    taken: float = 0.0


def call_model(run: Run, messages: list[Message], prompt_tokens: int, max_output: int,
               purpose: str) -> Generator[Effect, Result, ModelResponse | ModelError]:
    """Call the model, retrying here what the harness can fix itself.

    Each answer is checked (:func:`~sim.harness.guards.receive`) and counted:
    its latency as active time, its usage and price; a reply past the model
    timeout becomes a timeout error, one with unusable content a malformed
    reply. Returns the :class:`ModelResponse`, or a context-overflow
    :class:`ModelError` for the caller to handle; ends the run on spent
    retries, a fatal or repeated server error, or a budget that refuses the
    next try. A reply whose content is unusable counts as a server error.
    The first try's budgets are checked by the caller.
    """
    request = model_request(run, messages, prompt_tokens, max_output, purpose)
    answer = yield request
    if took_reply(answer, run):
        return answer
    return (yield from answered(run, request, answer))


def model_request(run: Run, messages: list[Message], prompt_tokens: int, max_output: int,
                  purpose: str, attempt: int = 0) -> ModelRequest:
    """The request of one try (``attempt``: its retry number) of a call for
    ``purpose``: a step's call is cached and may think; a summary is neither
    and asks for text (``tool_choice`` none), and so does a finalize call
    (``on_limit: finalize``). Both still declare the tools: Anthropic refuses
    a request whose history holds tool_use or tool_result blocks without
    them ("Requests which include tool_use or tool_result blocks must define
    tools", anthropics/anthropic-sdk-python#494)."""
    params, state = run.params, run.state
    if purpose == "step":
        return ModelRequest(state.model, messages, prompt_tokens, max_output, purpose,
                            state.turns, attempt, run.cache_ttl_s, run.thinking,
                            params.system_prompt, params.tool_definitions, params.tool_choice,
                            params.temperature, params.top_p, params.provider)
    return ModelRequest(state.model, messages, prompt_tokens, max_output, purpose, state.turns,
                        attempt, None, 0, params.system_prompt, params.tool_definitions, "none",
                        params.temperature, params.top_p, params.provider)


def step_request(run: Run) -> ModelRequest | None:
    """A step's call, once the budgets allow it (step 4: else the run ends,
    :meth:`~sim.harness.budgets.Limits.check_before_model_call`):
    None when the prompt exceeds the context window (step 5), else the first
    try's request (step 6), what ``model_request(run, state.messages,
    state.context_tokens, params.max_output_tokens, "step")`` returns, built
    field by field (every field set, as ``__init__`` sets them): CPython 3.11
    calls a dataclass's ``__init__`` through a slow path, and this runs once
    per step."""
    params, state = run.params, run.state
    prompt = state.context_tokens
    run.limits.check_before_model_call(state, prompt, params.max_output_tokens)
    if prompt > params.context_window:
        return None
    request: ModelRequest = _new(ModelRequest)
    request.model = state.model
    request.messages = state.messages
    request.prompt_tokens = prompt
    request.max_output_tokens = params.max_output_tokens
    request.purpose = "step"
    request.turn = state.turns
    request.attempt = 0
    request.cache_ttl_s = run.cache_ttl_s
    request.thinking_budget = run.thinking
    request.system_prompt = params.system_prompt
    request.tools = params.tool_definitions
    request.tool_choice = params.tool_choice
    request.temperature = params.temperature
    request.top_p = params.top_p
    request.provider = params.provider
    return request


_new = object.__new__


def took_reply(answer: Result, run: Run) -> TypeGuard[ModelResponse]:
    """The common answer on a fast path: True when ``answer`` is a
    well-formed :class:`ModelResponse` with usable content, within the model
    timeout (when a time budget is set), which is then counted as
    :func:`answered` would count it (latency, abort check, usage and price);
    False, with nothing done, for anything else (:func:`answered` takes it)."""
    if not (type(answer) is ModelResponse and usable_reply(answer)):
        return False
    latency = answer.latency_s
    limits = run.limits
    if limits.timed and not (type(latency) is float and latency <= limits.model_timeout_s):
        return False
    state = run.state
    state.active_s += latency
    if state.abort_requested:  # cancelled in flight: the driver aborted the call
        stop(CANCELLED, "external_signal")
    account(run, answer.model or state.model, answer.usage)
    budget = run.retry_budget
    if budget is not None:  # a first-try success refills the shared retry bucket
        budget.give_back(budget.quota.success_refund)
    return True


def answered(run: Run, request: ModelRequest, answer: Result
             ) -> Generator[Effect, Result, ModelResponse | ModelError]:
    """The rest of :func:`call_model` once ``answer`` came back for
    ``request``, its first try: the checks, and the retries."""
    state = run.state
    messages, prompt_tokens, max_output = (request.messages, request.prompt_tokens,
                                           request.max_output_tokens)
    tries: _Tries | None = None
    while True:
        if run.limits.timed:  # a reply after the model timeout is a timeout: no budget overshot
            answer = timed_out_reply(run.params, answer)
        result = receive(request, answer)
        state.active_s += result.latency_s
        check_abort(state)  # cancelled in flight: the driver aborted the call
        if isinstance(result, ModelResponse):
            account(run, result.model or state.model, result.usage)
            problem = content_problem(result.content)
            if problem is None:
                _succeeded(run, tries)
                return result
            result = ModelError(problem[0], message=problem[1], latency_s=result.latency_s)
        tries = _noted(tries, result)
        tries.spent_s += result.latency_s
        cls = classify_model_error(result)
        if cls == SERVER:  # seed 000: retry once immediately, then fail with a diagnostic
            _server_error(run, tries, result, messages)
        elif cls != TRANSIENT:
            if result.kind == "context_overflow":
                return result
            stop(FAILED, "model_error", diagnostic=diagnostic(messages, tries.errors))
        else:
            delay = _transient_error(run, tries, result, messages)
            yield from wait(run, delay, "model", result.kind)
            tries.spent_s += delay
        # every retry is a model call too: check it against the budgets, at the
        # prices of the model it goes to (it may follow a slow error or a switch
        # to the fallback model)
        run.limits.check_before_model_call(state, prompt_tokens, max_output)
        request = model_request(run, messages, prompt_tokens, max_output, request.purpose,
                                tries.attempt)
        answer = yield request


def _succeeded(run: Run, tries: _Tries | None) -> None:
    """A call succeeded: refill the shared retry bucket (when there is one)
    with what its retries took, or ``success_refund`` if it made none."""
    budget = run.retry_budget
    if budget is not None:
        budget.give_back(tries.taken if tries is not None and tries.taken
                         else budget.quota.success_refund)


def _noted(tries: _Tries | None, error: ModelError) -> _Tries:
    """``tries`` (made at the first error) with ``error`` noted for a diagnostic."""
    if tries is None:
        tries = _Tries()
    if len(tries.errors) < MAX_DIAGNOSTIC_ERRORS:
        tries.errors.append(f"{error.kind} {error.status}: {error.message}"[:500])
    return tries


def _server_error(run: Run, tries: _Tries, error: ModelError, messages: list[Message]) -> None:
    """Count a server error (or malformed reply) for an immediate retry, or
    end the run when ``retry.model_error_retries`` are spent."""
    tries.server_errors += 1
    if tries.server_errors > run.params.retry.model_error_retries:
        stop(FAILED, "model_error", diagnostic=diagnostic(messages, tries.errors))
    tries.attempt += 1
    if run.emit:
        run.emit(ev.RETRY, {"target": "model", "kind": error.kind, "delay_s": 0.0})


def _transient_error(run: Run, tries: _Tries, error: ModelError,
                     messages: list[Message]) -> float:
    """The delay in seconds before retrying a transient error
    (:func:`~sim.harness.classifier.backoff_s`), after a switch to the
    fallback model when rate limits say so; ends the run when the attempts,
    the run's retry budget, the call's time budget (``max_retry_s``: the next
    try would begin after it) or the shared retry bucket are spent (checked
    in that order; the bucket is asked last, so a refused retry takes
    nothing from it)."""
    params, state = run.params, run.state
    policy = params.retry
    if error.kind == "rate_limit" or error.status == 429:
        tries.rate_limits += 1
        state.rate_limit_retries += 1
        if (tries.rate_limits >= policy.fallback_after and policy.fallback_model
                and state.model != policy.fallback_model):
            state.model = policy.fallback_model  # seed 000: degraded mode
            tries.attempt = 0
            if run.emit:
                run.emit(ev.ALERT, {"alert": "fallback_model", "model": state.model})
    if tries.attempt >= policy.max_attempts:
        stop(FAILED, "retries_exhausted", diagnostic=diagnostic(messages, tries.errors))
    if not run.limits.may_retry(state):  # the run's retry budget
        raise LimitExceeded("retries")
    attempt = tries.attempt + 1
    key = f"{run.retry_key}model{state.turns}" if policy.jitter_scope == "run" else \
        f"model{state.turns}"
    delay = backoff_s(policy, attempt, error.retry_after_s,
                      jitter_draw(key, attempt) if policy.jitter else 1.0, tries.delay_s)
    if policy.max_retry_s is not None and tries.spent_s + delay > policy.max_retry_s:
        stop(FAILED, "retries_exhausted", diagnostic=diagnostic(messages, tries.errors),
             exhausted="max_retry_s")
    budget = run.retry_budget
    if budget is not None:
        cost = budget.cost(error.kind)
        if not budget.take(cost):
            stop(FAILED, "retries_exhausted", diagnostic=diagnostic(messages, tries.errors),
                 exhausted="retry_quota")
        tries.taken += cost
    tries.attempt = attempt
    tries.delay_s = delay
    return delay


def timed_out_reply(params: HarnessParams, answer: Result) -> Result:
    """``answer``, or a timeout error in its place when it reports a latency
    past ``params.model_timeout_s``: the harness gave up on the call then, so
    it counts that many seconds (the worst case its time budgets allowed for).
    An impossible latency (beyond :data:`~sim.harness.protocol.MAX_SECONDS`,
    NaN) is left for the checks, which end the run as failed:invalid_response."""
    latency = getattr(answer, "latency_s", None)
    if (isinstance(answer, ModelResponse | ModelError) and isinstance(latency, int | float)
            and not isinstance(latency, bool)
            and params.model_timeout_s < latency <= MAX_SECONDS):
        return ModelError("timeout", None, None,
                          f"no reply within model_timeout_s ({params.model_timeout_s:g} s)",
                          params.model_timeout_s)
    return answer


_CONTENT_JSON = json.JSONEncoder(sort_keys=True, default=str).encode
"""``json.dumps(content, sort_keys=True, default=str)`` with the encoder made
once (``dumps`` with options makes a new one at every call)."""


def diagnostic(messages: list[Message], errors: list[str]) -> dict[str, Any]:
    """The failing request with each message's content replaced by its SHA-256
    hash (privacy), plus the raw errors."""
    wire = normalize(messages, "anthropic")
    hashes = [{"role": m["role"], "sha256": hashlib.sha256(
        _content_text(m["content"]).encode()).hexdigest()}
        for m in wire]
    return {"request": hashes, "errors": errors}


def _content_text(content: Any) -> str:
    """``content`` as canonical JSON for its hash; a message holding a tool
    call whose arguments nest too deep to print (the policy refused it, but the
    reply stays in the history) is hashed as ``<nested too deep>``, as the
    detector keys such calls; content JSON cannot encode (a cycle) by its repr."""
    try:
        return _CONTENT_JSON(content)
    except RecursionError:
        return "<nested too deep>"
    except ValueError:
        try:
            return repr(content)
        except RecursionError:
            return "<nested too deep>"
