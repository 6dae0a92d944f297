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

from sim.harness import (
    ANSWERS,
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    ModelError,
    ModelRequest,
    ModelResponse,
    ProtocolError,
    ToolError,
    ToolRequest,
    ToolResult,
    Usage,
    UserReply,
    UserTurn,
    Verdict,
    VerifierParams,
    VerifyRequest,
    Wait,
    agent_loop,
)

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
                            UserTurn, Checkpoint}
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
