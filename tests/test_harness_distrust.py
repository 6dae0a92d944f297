"""The harness distrusts its driver (issue 13, item 4; DESIGN.md Rule 1).

A real provider or tool sends odd things. Results of the right type but with
impossible values, malformed tool calls and replies, usage past the budgets:
each becomes a structured outcome the loop handles, never an exception that
escapes and never a budget overshot beyond what the provider itself reported.

- a tool call whose arguments are not a JSON object goes back to the model as
  a validation error;
- a reply with no content, or content that is not text/thinking/tool_use
  blocks, is a malformed response: retried once, then failed:model_error;
- negative or non-finite usage or durations (and fields of the wrong type)
  fail the run as failed:invalid_response with a diagnostic;
- a reported usage past the tokens, output or money budget ends the run
  budget_exhausted at once, after accounting what was reported;
- money never decreases; NaN cannot disable a time budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scripted import (
    Reply,
    ScriptedDriver,
    final,
    make_params,
    make_state,
    run_script,
    tool_call,
)

from sim.harness import (
    OUTCOMES,
    ApprovalDecision,
    ApprovalRequest,
    Budgets,
    Checkpoint,
    HarnessState,
    ModelError,
    ModelRequest,
    ModelResponse,
    ParameterError,
    Prices,
    ProtocolError,
    RetryPolicy,
    TextBlock,
    ThinkingBlock,
    ToolError,
    ToolRequest,
    ToolResult,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
    Verdict,
    VerifierParams,
    VerifyRequest,
    Wait,
    agent_loop,
)
from sim.harness.budgets import worst_case_cost
from sim.harness.classifier import backoff_s

NAN, INF = math.nan, math.inf
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reply(*content: Any, usage: Any = None, latency: Any = 1.0, stop: str = "tool_use"):
    """A model item: a raw ModelResponse whose usage defaults to an honest one
    (the prompt the harness counted, 50 output tokens)."""
    def respond(request: ModelRequest) -> ModelResponse:
        honest = Usage(request.prompt_tokens, 50)
        return ModelResponse(list(content), honest if usage is None else usage, stop, latency)
    return respond


def _call(arguments: Any, name: str = "search", call_id: str = "toolu_x") -> ToolUseBlock:
    return ToolUseBlock(call_id, name, arguments, 10)


# --------------------------------------------------------- malformed tool calls
@pytest.mark.parametrize("arguments", [None, ["q", "x"], "q=x", 5, {1: "x"}, {"q": 1, 2: 3}],
                         ids=["None", "list", "string", "number", "int keys", "mixed keys"])
def test_a_tool_call_whose_arguments_are_not_an_object_goes_back_as_a_validation_error(
        arguments) -> None:
    """The call is not run; the model reads an error observation saying the
    arguments must be a JSON object, the failure counts for the tool, and the
    run goes on to the model's next reply."""
    run = run_script(model=[_reply(_call(arguments)), final()])
    s = run.state
    assert (s.status, s.reason) == ("succeeded", "model_complete")
    assert run.of(ToolRequest) == []
    (result,) = s.messages[2].content
    assert isinstance(result, ToolResultBlock) and result.is_error
    assert result.tool_use_id == "toolu_x" and "must be a JSON object" in result.content
    assert s.tool_failures == {"search": 1}


def test_repeated_malformed_calls_are_caught_by_the_detector() -> None:
    """A model that keeps sending the same malformed call is a loop like any
    other: nudged, then stopped as needs_human (the detector keys it too)."""
    run = run_script(model=[_reply(_call(None, call_id=f"t{i}")) for i in range(8)])
    assert (run.state.status, run.state.reason) == ("needs_human", "no_progress")
    assert run.state.nudges == 1


# ------------------------------------------------------------ malformed replies
def _malformed(content: Any):
    def respond(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content, Usage(request.prompt_tokens, 50), "end_turn", 1.0)
    return respond


MALFORMED = {
    "no content": None,
    "content not a list": "done",
    "an unknown block": [{"type": "image"}],
    "a tool result from the model": [ToolResultBlock("x", "y")],
    "a text block without text": [TextBlock(None, 3)],  # type: ignore[arg-type]
    "a tool call without an id": [ToolUseBlock("", "search", {}, 3)],
    "a tool call named by a list": [ToolUseBlock("a", ["search"], {}, 3)],  # type: ignore
    "two tool calls with one id": [_call({"q": "a"}), _call({"q": "b"})],
    "a block of negative size": [TextBlock("x", -4)],
    "a block of NaN size": [ThinkingBlock("x", NAN)],  # type: ignore[arg-type]
}


@pytest.mark.parametrize("content", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_reply_is_retried_once_like_a_server_error(content) -> None:
    """A reply whose content cannot be used is a malformed (or empty) response:
    its usage is still counted, the call is retried at once, and a good retry
    lets the run go on."""
    run = run_script(model=[_malformed(content), final()])
    s = run.state
    assert (s.status, s.reason) == ("succeeded", "model_complete")
    requests = run.step_requests
    assert [r.attempt for r in requests] == [0, 1]
    assert s.turns == 1 and s.input_tokens == 2 * requests[0].prompt_tokens
    assert run.events_of("retry")[0].data["kind"] in ("malformed", "empty")


def test_a_second_malformed_reply_fails_the_run_with_a_diagnostic() -> None:
    """Seed 000: retry once, then fail with a diagnostic naming the errors."""
    run = run_script(model=[_malformed(None), _malformed([{"type": "image"}])])
    s = run.state
    assert (s.status, s.reason) == ("failed", "model_error")
    errors = s.detail["diagnostic"]["errors"]
    assert errors[0].startswith("empty") and errors[1].startswith("malformed")


# ------------------------------------------------------- impossible usage, time
IMPOSSIBLE_USAGE = {
    "negative input": Usage(-5, 50),
    "negative output": Usage(100, -50),
    "negative cache read": Usage(0, 50, -100),
    "NaN output": Usage(100, NAN),  # type: ignore[arg-type]
    "infinite input": Usage(INF, 50),  # type: ignore[arg-type]
    "fractional tokens": Usage(100.5, 50),  # type: ignore[arg-type]
    "a string": Usage("100", 50),  # type: ignore[arg-type]
    "a bool": Usage(True, 50),  # type: ignore[arg-type]
    "no usage": None,
    "usage as a dict": {"input_tokens": 100},
}


@pytest.mark.parametrize("usage", IMPOSSIBLE_USAGE.values(), ids=IMPOSSIBLE_USAGE.keys())
def test_an_impossible_usage_fails_the_run_with_a_diagnostic(usage) -> None:
    """Usage that cannot be accounted ends the run as failed:invalid_response;
    the detail names the effect, the field and the value; nothing of it is
    counted (money stays 0, it can never decrease)."""
    def respond(request: ModelRequest) -> ModelResponse:
        return ModelResponse([_call({"q": "x"})], usage, "tool_use", 1.0)

    run = run_script(make_params(budgets=Budgets(money_usd=5.0)), model=[respond, final()])
    s = run.state
    assert (s.status, s.reason) == ("failed", "invalid_response")
    diagnostic = s.detail["diagnostic"]
    assert diagnostic["effect"] == "ModelRequest"
    assert diagnostic["field"].startswith("usage") and diagnostic["expected"]
    assert (s.money_usd, s.input_tokens, s.output_tokens) == (0.0, 0, 0)
    assert run.of(ToolRequest) == []
    terminal = run.events_of("terminal")[0].data
    assert terminal["reason"] == "invalid_response" and "diagnostic" in terminal


@pytest.mark.parametrize("seconds", [NAN, INF, -1.0, "3", None],
                         ids=["NaN", "inf", "negative", "string", "None"])
@pytest.mark.parametrize("where", ["model latency", "tool duration", "verifier duration",
                                   "approval wait", "backoff waited", "model error latency"])
def test_impossible_durations_fail_the_run_and_never_disable_time_budgets(seconds, where
                                                                          ) -> None:
    """A NaN, infinite, negative or non-numeric duration anywhere ends the
    run as failed:invalid_response naming the field; the time counters stay
    finite, so no time budget is ever disabled. (A Wait is answered with the
    seconds themselves: a string there is a wrong type, a ProtocolError.)"""
    params = make_params(budgets=Budgets(active_s=1_000.0, wall_s=2_000.0),
                         verifier=VerifierParams(enabled=True),
                         approval_required=frozenset({"irreversible"}))
    model: list[Any] = [tool_call("search", q="x"), final()]
    tools: list[Any] = []
    verdicts: list[Any] = []
    approvals: list[Any] = []
    if where == "model latency":
        model = [_reply(_call({"q": "x"}), latency=seconds), final()]
    elif where == "tool duration":
        tools = [ToolResult("ok", 3, seconds)]
    elif where == "verifier duration":
        verdicts = [Verdict(True, duration_s=seconds)]
    elif where == "approval wait":
        model = [tool_call("deploy", env="prod"), final()]
        approvals = [ApprovalDecision(True, seconds)]
    elif where == "model error latency":
        model = [ModelError("rate_limit", 429, latency_s=seconds), final()]
    else:
        model = [ModelError("rate_limit", 429), final()]
    driver = ScriptedDriver(model=model, tools=tools, verdicts=verdicts, approvals=approvals)
    if where == "backoff waited":
        answer = driver._answer
        driver._answer = lambda effect: seconds if isinstance(effect, Wait) else answer(effect)
        if isinstance(seconds, str):  # not a number at all: a wrong type, the driver's bug
            with pytest.raises(ProtocolError, match="Wait must be answered"):
                driver.drive(params, make_state(params))
            return
    state = driver.drive(params, make_state(params))
    if where == "backoff waited" and seconds is None:  # None is a full wait: fine
        assert state.status == "succeeded"
        return
    assert (state.status, state.reason) == ("failed", "invalid_response"), state.detail
    assert math.isfinite(state.active_s) and math.isfinite(state.parked_s)
    assert state.detail["diagnostic"]["value"] == repr(seconds)


def test_a_prompt_reported_above_the_token_budget_ends_the_run_at_once() -> None:
    """The issue's case: a provider reporting 10^9 prompt tokens against a
    20,000-token budget. What it reported is accounted, and the run ends
    budget_exhausted:tokens before anything else happens (the reply's tool
    call is not run, no further call is made)."""
    params = make_params(budgets=Budgets(tokens=20_000))
    run = run_script(params, model=[_reply(_call({"q": "x"}), usage=Usage(10**9, 50)),
                                    final()])
    s = run.state
    assert (s.status, s.reason) == ("budget_exhausted", "tokens")
    assert s.input_tokens == 10**9 and s.money_usd > 0
    assert [type(e) for e in run.effects] == [ModelRequest]


@pytest.mark.parametrize(("budget", "usage", "reason"), [
    (Budgets(output_tokens=5_000), Usage(1_200, 10**6), "output_tokens"),
    (Budgets(money_usd=1.0), Usage(1_200, 10**6), "money"),
    (Budgets(tokens=50_000, money_usd=1.0), Usage(10**7, 10**6), "tokens"),
])
def test_any_usage_reported_past_a_budget_ends_the_run_at_once(budget, usage, reason) -> None:
    """Output and money likewise (tokens first, then output, then money)."""
    run = run_script(make_params(budgets=budget),
                     model=[_reply(_call({"q": "x"}), usage=usage), final()])
    assert (run.state.status, run.state.reason) == ("budget_exhausted", reason)
    assert len(run.effects) == 1


def test_a_grader_usage_past_the_budget_ends_the_run_too() -> None:
    """A verdict's usage (a model grader) is accounted and checked the same way."""
    params = make_params(budgets=Budgets(tokens=30_000),
                         verifier=VerifierParams(enabled=True))
    run = run_script(params, model=[final()], verdicts=[Verdict(False, usage=Usage(10**6))])
    assert (run.state.status, run.state.reason) == ("budget_exhausted", "tokens")


@pytest.mark.parametrize("changes", [
    lambda: {"budgets": Budgets(active_s=NAN)}, lambda: {"budgets": Budgets(wall_s=NAN)},
    lambda: {"budgets": Budgets(money_usd=INF)}, lambda: {"budgets": Budgets(tokens=NAN)},
    lambda: {"model_timeout_s": NAN}, lambda: {"approval_timeout_s": INF},
    lambda: {"tools": (ToolSpec("t", timeout_s=NAN),)},
    lambda: {"verifier": VerifierParams(True, max_duration_s=NAN)},
    lambda: {"retry": RetryPolicy(base_s=NAN)}, lambda: {"retry": RetryPolicy(cap_s=INF)},
    lambda: {"prices": Prices(input=-3.0)}, lambda: {"prices": Prices(output=NAN)},
    lambda: {"prices": Prices(tiers=((100, Prices(input=-1.0)),))},
    lambda: {"prices": Prices(tiers=((200, Prices()), (100, Prices())))},
    lambda: {"retry": RetryPolicy(fallback_model="m", fallback_prices=Prices(cache_read=-0.1))},
    lambda: {"top_p": 0.0}, lambda: {"top_p": NAN},
    lambda: {"tools": (ToolSpec("t", input_schema="[1, 2]"),)},
    lambda: {"tools": (ToolSpec("t", input_schema="{not json"),)},
], ids=["budgets"] * 4 + ["model_timeout_s", "approval_timeout_s", "tools", "verifier"]
    + ["retry"] * 2 + ["prices"] * 4 + ["retry", "top_p", "top_p", "tools", "tools"])
def test_parameters_that_would_disable_a_budget_or_lower_money_are_refused(changes) -> None:
    """NaN or infinite budgets and timeouts, negative or NaN prices and
    unordered tiers cannot be built (a NaN compares False, which would switch
    a budget off; a negative price would make money decrease); an invalid
    section raises when it is built, hence the factories."""
    with pytest.raises(ParameterError):
        make_params(**changes())


def test_backoff_ignores_a_retry_after_that_is_not_a_finite_number_of_seconds() -> None:
    """backoff_s uses Retry-After only when finite and >= 0."""
    policy = RetryPolicy(base_s=1.0, cap_s=64.0)
    assert [backoff_s(policy, 3, r) for r in (NAN, INF, -2.0, 7.0)] == [4.0, 4.0, 4.0, 7.0]


# ------------------------------------------------------------------ the fuzzer
def _odd(valid: st.SearchStrategy[Any], *odd: Any) -> st.SearchStrategy[Any]:
    """Mostly valid values (nine in ten), sometimes one of the odd ones."""
    return st.one_of(*[valid] * 9, st.sampled_from(odd))


COUNT = _odd(st.integers(0, 3_000), -1, -10**9, 10**9, NAN, INF, 2.5, None, "7", True)
SECONDS = _odd(st.floats(0.0, 30.0), NAN, INF, -INF, -1.0, None, "1", False, 10**7)
ARGUMENTS = _odd(st.fixed_dictionaries({"q": st.sampled_from(["a", "b"])}),
                 None, [], ["q"], "q", 3, {1: 2}, {"q": object()})
BLOCK = st.one_of(
    st.builds(lambda a, n, name: ToolUseBlock("", name, a, n), ARGUMENTS, COUNT,
              _odd(st.sampled_from(["search", "read_file", "deploy", "nope"]), None, 5)),
    st.builds(lambda text, n: TextBlock(text, n), _odd(st.just("done"), None, 4), COUNT),
    st.builds(lambda n: ThinkingBlock("hm", n), COUNT),
    st.sampled_from([{"type": "image"}, "text", 42, ToolResultBlock("r", "x")]))


@dataclass(frozen=True)
class OddReply:
    """A generated reply: content (None or blocks), how its usage relates to
    the request, and its latency."""

    content: Any
    usage: str
    counts: tuple[Any, ...]
    latency: Any
    stop: str


REPLY = st.builds(
    OddReply, _odd(st.lists(BLOCK, max_size=3), None, "x"),
    st.sampled_from(["honest", "honest", "inflated prompt", "inflated output", "odd", "none"]),
    st.tuples(COUNT, COUNT, COUNT, COUNT, COUNT), SECONDS,
    st.sampled_from(["tool_use", "end_turn", "max_tokens", "refusal"]))
MODEL_ERROR = st.builds(
    ModelError, _odd(st.sampled_from(["rate_limit", "server", "overloaded", "malformed",
                                      "context_overflow", "auth"]), None, 3),
    _odd(st.none() | st.sampled_from([429, 500, 529]), "500", 4.5),
    _odd(st.none() | st.floats(0.0, 10.0), NAN, -1.0, INF), st.just("err"), SECONDS)
TOOL_OUTCOME = st.one_of(
    st.builds(ToolResult, _odd(st.sampled_from(["r1", "r2"]), None, 3), COUNT, SECONDS,
              _odd(st.none() | st.floats(0.0, 5.0), NAN, INF)),
    st.builds(ToolError, _odd(st.sampled_from(["transient", "validation", "fatal",
                                               "timeout"]), None),
              st.just("e"), COUNT, SECONDS, _odd(st.none() | st.just(503), "x"),
              _odd(st.none() | st.floats(0.0, 5.0), NAN, -3.0)))
VERDICT = st.builds(Verdict, _odd(st.booleans(), None, "yes"), st.just("no"), COUNT, SECONDS,
                    st.none() | st.builds(Usage, COUNT, COUNT))
APPROVAL = st.builds(ApprovalDecision, _odd(st.booleans(), None), SECONDS,
                     _odd(st.just(False), None, True), st.just(""))


@dataclass
class FuzzDriver:
    """Answers every effect with the right result type, from generated lists
    (then well-behaved defaults), and records the state's counters each time
    the loop asks for something."""

    model: list[Any]
    tools: list[Any]
    verdicts: list[Any]
    approvals: list[Any]
    seen: list[tuple[Any, dict[str, float]]] = field(default_factory=list)
    ids: int = 0

    def answer(self, effect: Any, state: HarnessState) -> Any:
        self.seen.append((effect, {
            "tokens": state.prompt_tokens, "output": state.output_tokens + state.thinking_tokens,
            "money": state.money_usd, "active": state.active_s, "wall": state.wall_s}))
        if isinstance(effect, ModelRequest):
            if effect.purpose == "compaction":
                return ModelResponse([TextBlock("summary", 20)], Usage(effect.prompt_tokens, 20),
                                     "end_turn", 1.0)
            item = self.model.pop(0) if self.model else OddReply(
                [TextBlock("done", 5)], "honest", (), 1.0, "end_turn")
            return item if isinstance(item, ModelError) else self.reply(item, effect)
        if isinstance(effect, ToolRequest):
            return self.tools.pop(0) if self.tools else ToolResult("ok", 5, 0.5)
        if isinstance(effect, VerifyRequest):
            return self.verdicts.pop(0) if self.verdicts else Verdict(True)
        if isinstance(effect, ApprovalRequest):
            return self.approvals.pop(0) if self.approvals else ApprovalDecision(True, 1.0)
        return None

    def reply(self, item: OddReply, request: ModelRequest) -> ModelResponse:
        content = item.content
        if isinstance(content, list):
            content = [self.named(b) for b in content]
        prompt = request.prompt_tokens
        usage = {"honest": Usage(prompt, 50), "inflated prompt": Usage(prompt + 10**8, 50),
                 "inflated output": Usage(prompt, 10**7), "odd": Usage(*item.counts),
                 "none": None}[item.usage]
        return ModelResponse(content, usage, item.stop, item.latency)

    def named(self, block: Any) -> Any:
        if isinstance(block, ToolUseBlock):
            self.ids += 1
            return ToolUseBlock(f"t{self.ids}", block.name, block.input, block.tokens)
        return block


@FUZZ
@given(model=st.lists(st.one_of(REPLY, REPLY, MODEL_ERROR), max_size=20),
       tools=st.lists(TOOL_OUTCOME, max_size=15), verdicts=st.lists(VERDICT, max_size=3),
       approvals=st.lists(APPROVAL, max_size=3),
       tokens=st.none() | st.integers(4_000, 60_000), money=st.none() | st.floats(0.01, 2.0),
       output=st.none() | st.integers(1_000, 20_000),
       active=st.none() | st.floats(10.0, 500.0), verify=st.booleans())
def test_whatever_the_driver_reports_the_run_ends_once_within_its_budgets(
        model, tools, verdicts, approvals, tokens, money, output, active, verify) -> None:
    """Drive the loop with generated results (right types, odd values): no
    exception escapes; the run ends in exactly one outcome of the table with
    one terminal event, last; every call is made only while its worst case
    fits the budgets; a counter ends above its budget only by what the last
    reported usage added, and then the run ended budget_exhausted for it (or
    an earlier budget); money and token counters never decrease; time stays
    finite; every message is the sum of its blocks."""
    params = make_params(
        budgets=Budgets(tokens=tokens, money_usd=money, output_tokens=output, active_s=active,
                        wall_s=None if active is None else 4 * active),
        verifier=VerifierParams(enabled=verify), approval_required=frozenset({"irreversible"}),
        context_window=30_000)
    state = make_state(params)
    driver = FuzzDriver(model, tools, verdicts, approvals)
    events: list[Any] = []
    gen = agent_loop(params, state, observers=(events.append,))
    result = None
    try:
        while True:
            result = driver.answer(gen.send(result), state)
    except StopIteration as stop:
        assert stop.value is state

    assert state.status in OUTCOMES and state.reason in OUTCOMES[state.status]
    assert [e.kind for e in events].count("terminal") == 1 and events[-1].kind == "terminal"
    event(f"{state.status}:{state.reason}")
    b = params.budgets
    for effect, c in driver.seen:  # each call was allowed by the budgets when it was made
        if isinstance(effect, ModelRequest):
            worst = worst_case_cost(params.prices, effect.prompt_tokens,
                                    effect.max_output_tokens)
            assert tokens is None or c["tokens"] + effect.prompt_tokens <= tokens
            assert output is None or c["output"] + effect.max_output_tokens <= output
            assert money is None or c["money"] + worst <= money * (1 + 1e-9)
            assert active is None or c["active"] + params.model_timeout_s <= active
        elif isinstance(effect, ToolRequest):
            assert active is None or c["active"] + effect.timeout_s <= active
        elif isinstance(effect, Wait):
            assert active is None or c["active"] + effect.seconds <= active
    over = [name for name, counter, limit in (
        ("tokens", state.prompt_tokens, b.tokens),
        ("output_tokens", state.output_tokens + state.thinking_tokens, b.output_tokens),
        ("money", state.money_usd / (1 + 1e-9), b.money_usd))
        if limit is not None and counter > limit]
    if over:
        assert (state.status, state.reason) == ("budget_exhausted", over[0])
        calls = [e for e, _ in driver.seen if not isinstance(e, Checkpoint)]
        assert isinstance(calls[-1], ModelRequest | VerifyRequest)  # nothing after it
    for key in ("tokens", "output", "money"):
        series = [c[key] for _, c in driver.seen]
        assert series == sorted(series)
    assert all(math.isfinite(x) for x in (state.money_usd, state.active_s, state.parked_s))
    assert state.money_usd >= 0
    for message in state.messages:
        assert message.tokens == sum(b.tokens for b in message.content)
    if state.reason == "invalid_response":
        assert set(state.detail["diagnostic"]) == {"effect", "field", "value", "expected"}


def test_the_scripted_driver_still_answers_like_a_good_provider() -> None:
    """Sanity for the fixtures above: a well-behaved reply is never odd."""
    assert run_script(model=[Reply((TextBlock("ok", 3),))]).state.reason == "model_complete"
