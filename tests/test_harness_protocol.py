"""The protocol between loop and driver: each effect takes only its result
types, and a driver that sends another type gets one clear ProtocolError
naming the effect and what it sent (never an AttributeError from deep inside
the loop)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import (
    DEPLOY,
    FAST,
    ScriptedDriver,
    final,
    make_params,
    make_state,
    tool_call,
)
from test_harness_distrust import BLOCK, COUNT, FUZZ, SECONDS, TOOL_OUTCOME

from sim.harness import (
    ANSWERS,
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    ModelError,
    ModelRequest,
    ModelResponse,
    ProtocolError,
    TextBlock,
    ToolError,
    ToolRequest,
    ToolResult,
    ToolUseBlock,
    Usage,
    UserReply,
    UserTurn,
    Verdict,
    VerifierParams,
    VerifyRequest,
    Wait,
    agent_loop,
)
from sim.harness.effects import ChildResults, CollectChildren, SpawnRequest
from sim.harness.protocol import WELL_FORMED, _diagnose, result_problem

WRONG = [ToolError("transient", "503", 1), ToolResult("ok", 1), ModelError("server", 500),
         ModelResponse([], Usage(), "end_turn"), Verdict(True), ApprovalDecision(True),
         "a string", 3.5, None, [1, 2], {"content": []}]


def _first(kind: type, params, script):
    """A loop advanced to its first effect of ``kind`` (answering the others
    as the scripted driver does); returns (generator, effect)."""
    driver = ScriptedDriver(**script)
    gen = agent_loop(params, make_state(params))
    effect = next(gen)
    while not isinstance(effect, kind):
        effect = gen.send(driver._answer(effect))
    return gen, effect


CASES = {
    ModelRequest: (make_params(), {"model": [final()]}),
    ToolRequest: (make_params(), {"model": [tool_call("search", q="x"), final()]}),
    Checkpoint: (make_params(), {"model": [tool_call("search", q="x"), final()]}),
    Wait: (make_params(), {"model": [ModelError("rate_limit", 429), final()]}),
    VerifyRequest: (make_params(verifier=VerifierParams(enabled=True)), {"model": [final()]}),
    ApprovalRequest: (make_params(approval_required=frozenset({DEPLOY.effect})),
                      {"model": [tool_call("deploy", env="prod"), final()]}),
}


@pytest.mark.parametrize("kind", list(CASES), ids=lambda k: k.__name__)
@pytest.mark.parametrize("wrong", WRONG, ids=lambda w: type(w).__name__)
def test_a_result_of_the_wrong_type_raises_one_protocol_error(kind: type, wrong) -> None:
    """Answering an effect with a type it does not take raises ProtocolError
    (a TypeError), whose message names the effect and the type received;
    allowed answers (ANSWERS) are not errors."""
    params, script = CASES[kind]
    gen, effect = _first(kind, params, script)
    if isinstance(wrong, ANSWERS[kind]):
        return  # an allowed answer: covered by every other test
    with pytest.raises(ProtocolError) as caught:
        gen.send(wrong)
    message = str(caught.value)
    assert kind.__name__ in message and type(wrong).__name__ in message
    assert caught.value.effect is effect and caught.value.result is wrong
    assert isinstance(caught.value, TypeError)


def test_the_protocol_error_of_the_issue_names_the_effect() -> None:
    """The issue's case: a ToolError sent to a model request used to give
    AttributeError: 'ToolError' object has no attribute 'latency_s'; now it is
    a ProtocolError saying ModelRequest must be answered with ModelResponse or
    ModelError."""
    gen, _ = _first(ModelRequest, *CASES[ModelRequest])
    with pytest.raises(ProtocolError, match="ModelRequest must be answered with ModelResponse "
                                            "or ModelError, got ToolError"):
        gen.send(ToolError("transient", "503", 1))


def test_every_effect_type_has_its_answers() -> None:
    """ANSWERS covers every effect; a Wait may be answered with the seconds
    really waited, a checkpoint only with None, a task-giver's turn only with
    its reply."""
    assert set(ANSWERS) == {ModelRequest, ToolRequest, Wait, ApprovalRequest, VerifyRequest,
                            UserTurn, Checkpoint, SpawnRequest, CollectChildren}
    assert ANSWERS[SpawnRequest] == ANSWERS[CollectChildren] == (ChildResults,)
    assert ANSWERS[UserTurn] == (UserReply,)
    assert ANSWERS[Checkpoint] == (type(None),)
    assert float in ANSWERS[Wait] and type(None) in ANSWERS[Wait]


@FAST
@given(answers=st.lists(st.sampled_from([*WRONG, "ok"]), min_size=1, max_size=30))
def test_only_protocol_errors_escape_a_driver_sending_anything(answers) -> None:
    """A driver that answers every effect with arbitrary objects makes the
    loop either finish normally or raise ProtocolError; no other exception
    escapes."""
    params = make_params(verifier=VerifierParams(enabled=True))
    gen = agent_loop(params, make_state(params))
    driver = ScriptedDriver(model=[tool_call("search", q="x")] * 40, default_reply=final())
    effect = next(gen)
    queue = list(answers)
    try:
        while True:
            answer = queue.pop(0) if queue else "ok"
            effect = gen.send(driver._answer(effect) if answer == "ok" else answer)
    except StopIteration:
        pass
    except ProtocolError as error:
        assert type(effect).__name__ in str(error)


# ------------------------------------------------------- the one-pass checks
def _with_ids(content, ids):
    """``content`` with its tool_use blocks given ids from ``ids`` (in turn), so
    generated replies can repeat an id."""
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        if isinstance(block, ToolUseBlock):
            block = ToolUseBlock(ids[len(out) % len(ids)], block.name, block.input, block.tokens)
        out.append(block)
    return out


USAGE = st.one_of(st.builds(Usage, COUNT, COUNT, COUNT, COUNT, COUNT),
                  st.sampled_from([None, (1, 2), "usage"]))
RESPONSE = st.builds(
    lambda content, ids, usage, latency: ModelResponse(_with_ids(content, ids), usage,
                                                       "tool_use", latency),
    st.one_of(st.lists(BLOCK, max_size=3), st.sampled_from([None, "x", ()])),
    st.lists(st.sampled_from(["a", "b", "c", ""]), min_size=1, max_size=3), USAGE, SECONDS)


@FUZZ
@given(response=RESPONSE)
def test_the_quick_reply_check_finds_exactly_what_the_thorough_check_finds(response) -> None:
    """result_problem's quick test of a ModelResponse lets through exactly the
    replies in which the field-by-field check finds nothing impossible, and
    reports the same problem otherwise (one validation path, a quick entry)."""
    assert result_problem(response) == _diagnose(response)


@FUZZ
@given(outcome=TOOL_OUTCOME)
def test_the_quick_tool_outcome_check_finds_exactly_what_the_thorough_check_finds(
        outcome) -> None:
    """The same for a ToolResult or ToolError."""
    assert result_problem(outcome) == _diagnose(outcome)


MODEL_ERROR = st.builds(
    ModelError, st.sampled_from(["rate_limit", "server", "timeout", None, 3]),
    st.sampled_from([429, 500, None, "429", True]),
    st.one_of(*[st.none() | st.floats(0.0, 120.0) | st.integers(0, 60)] * 4,
              st.sampled_from([float("nan"), float("inf"), -1.0, "5", False])),
    st.sampled_from(["rate limit exceeded", "", None]), SECONDS)


@FUZZ
@given(error=MODEL_ERROR)
def test_the_quick_model_error_check_finds_exactly_what_the_thorough_check_finds(
        error) -> None:
    """The same for a ModelError (a 429 or a server error, answered on the
    retry path)."""
    assert result_problem(error) == _diagnose(error)


VERDICT = st.builds(
    Verdict, st.sampled_from([True, False, 1, None]), st.sampled_from(["", "no", None, 3]),
    COUNT, SECONDS, st.one_of(st.none(), USAGE))


@FUZZ
@given(verdict=VERDICT)
def test_the_fast_verdict_check_finds_exactly_what_the_thorough_check_finds(verdict) -> None:
    """result_problem's quick check of a Verdict lets through exactly the
    verdicts in which the field-by-field check finds nothing impossible, and
    reports the same problem otherwise."""
    assert result_problem(verdict) == _diagnose(verdict)


def test_the_quick_checks_leave_subclasses_and_numpy_like_numbers_to_the_thorough_path(
        ) -> None:
    """A subclass of a result type or a number type that is not a plain int
    or float is never accepted by a quick check (the thorough checks decide)."""
    class Sub(ModelResponse):
        __slots__ = ()

    class Count(int):
        pass

    assert type(Sub([TextBlock("x", 1)], Usage(1, 1), "end_turn")) not in WELL_FORMED
    assert not WELL_FORMED[ModelResponse](
        ModelResponse([TextBlock("x", 1)], Usage(Count(1), 1), "end_turn"))
    assert not WELL_FORMED[ToolResult](ToolResult("ok", Count(3)))
    assert result_problem(ToolResult("ok", Count(3))) is None  # the thorough check decides


def test_a_checkpoint_is_immutable_and_equal_to_a_fresh_one() -> None:
    """The shared checkpoints the loop yields cannot be altered by a driver
    and equal Checkpoint(turn) for every turn, shared or not."""
    from dataclasses import FrozenInstanceError

    from sim.harness.effects import checkpoint

    for turn in (0, 1, 1023, 1024, 5000):
        assert checkpoint(turn) == Checkpoint(turn)
    assert checkpoint(3) is checkpoint(3)
    with pytest.raises(FrozenInstanceError):
        checkpoint(3).turn = 4  # type: ignore[misc]
