"""Harness parameters: frozen, hashable, and validated before the first call."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted import FAST, make_params

from sim.harness import (
    Budgets,
    ContextParams,
    DetectorParams,
    HarnessParams,
    ModelRequest,
    ParameterError,
    Prices,
    RetryPolicy,
    ThinkingConfig,
    ToolSpec,
    VerifierParams,
    agent_loop,
)

FROZEN_CLASSES = (HarnessParams, Budgets, ContextParams, DetectorParams, Prices, RetryPolicy,
                  ThinkingConfig, ToolSpec, VerifierParams)


def _instance(cls: type) -> object:
    return make_params() if cls is HarnessParams else (
        ToolSpec("t") if cls is ToolSpec else cls())


@FAST
@given(cls=st.sampled_from(FROZEN_CLASSES), data=st.data())
def test_every_parameter_field_rejects_mutation(cls: type, data: st.DataObject) -> None:
    """Assigning any field of any parameter dataclass raises FrozenInstanceError
    and leaves the value unchanged (immutability is enforced in code)."""
    obj = _instance(cls)
    name = data.draw(st.sampled_from([f.name for f in dataclasses.fields(cls)]))
    before = getattr(obj, name)
    value = data.draw(st.one_of(st.none(), st.integers(), st.text(max_size=5)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, name, value)
    assert getattr(obj, name) == before


def test_nested_parameters_are_frozen_too() -> None:
    """Budgets inside HarnessParams cannot be changed in place either; only a
    copy with with_budgets() has new budgets, and the original is untouched."""
    p = make_params(budgets=Budgets(steps=5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.budgets.steps = 50  # type: ignore[misc]
    q = p.with_budgets(steps=50, tokens=1_000)
    assert (p.budgets.steps, p.budgets.tokens) == (5, None)
    assert (q.budgets.steps, q.budgets.tokens) == (50, 1_000)


def test_params_are_hashable_values() -> None:
    """Equal parameters hash equally (tools are a tuple, approval classes a
    frozenset), so a parameter set can key a cache or a sweep cell."""
    a = make_params(approval_required=frozenset({"irreversible"}))
    b = make_params(approval_required=frozenset({"irreversible"}))
    assert a == b and hash(a) == hash(b)


def test_prefix_counts_system_prompt_and_tool_definitions() -> None:
    """The stable prefix is the system prompt plus every tool's definition."""
    p = make_params(system_prompt_tokens=300, tools=(ToolSpec("a", definition_tokens=150),
                                                     ToolSpec("b", definition_tokens=250)))
    assert p.prefix_tokens == 700


def test_default_parameters_are_valid() -> None:
    """The defaults and the test parameters pass validation (validate returns self)."""
    assert HarnessParams().validate() == HarnessParams()
    p = make_params()
    assert p.validate() is p


INVALID = {  # built lazily: an invalid section raises when it is built
    "thinking with temperature > 0": lambda: dict(
        thinking=ThinkingConfig(True, 500), temperature=0.7),
    "thinking with forced use of one tool": lambda: dict(
        thinking=ThinkingConfig(True, 500), tool_choice="tool:search"),
    "thinking with forced use of any tool": lambda: dict(
        thinking=ThinkingConfig(True, 500), tool_choice="any"),
    "thinking budget over max_output_tokens": lambda: dict(
        thinking=ThinkingConfig(True, 2_000), max_output_tokens=1_000),
    "thinking enabled with no budget": lambda: dict(thinking=ThinkingConfig(True, 0)),
    "max_output_tokens over the context window": lambda: dict(
        max_output_tokens=60_000, context_window=50_000),
    "zero max_output_tokens": lambda: dict(max_output_tokens=0),
    "forced use of an unknown tool": lambda: dict(tool_choice="tool:nope"),
    "unknown tool_choice": lambda: dict(tool_choice="sometimes"),
    "duplicate tool names": lambda: dict(tools=(ToolSpec("a"), ToolSpec("a"))),
    "unknown effect class needing approval": lambda: dict(approval_required=frozenset({"scary"})),
    "prefix larger than the window": lambda: dict(system_prompt_tokens=60_000),
    "backoff cap below base": lambda: dict(retry=RetryPolicy(base_s=10, cap_s=5)),
    "repeat threshold of one": lambda: dict(detector=DetectorParams(repeat_threshold=1)),
    "unknown provider": lambda: dict(provider="acme"),
}


@pytest.mark.parametrize("changes", INVALID.values(), ids=INVALID.keys())
def test_validate_fails_fast_on_incompatible_settings(changes: dict) -> None:
    """validate() raises ParameterError for each incompatible setting."""
    with pytest.raises(ParameterError):
        make_params(**changes()).validate()


def test_thinking_without_conflicts_is_valid() -> None:
    """Extended thinking at temperature 0 with automatic tool choice and a
    budget within max_output_tokens is accepted."""
    make_params(thinking=ThinkingConfig(True, 800), tool_choice="auto").validate()


def test_error_message_names_the_problem() -> None:
    """The ParameterError says what is wrong (thinking plus temperature)."""
    with pytest.raises(ParameterError, match="temperature"):
        make_params(thinking=ThinkingConfig(True, 500), temperature=1.0).validate()


BUDGET_NAMES = tuple(f.name for f in dataclasses.fields(Budgets) if "gt" in f.metadata)
"""The budgets that must be positive when set (from their declared bounds)."""


@FAST
@given(name=st.sampled_from(BUDGET_NAMES), value=st.integers(-1_000, 0))
def test_zero_or_negative_budgets_are_rejected(name: str, value: int) -> None:
    """Every budget must be positive when set; zero or negative raises."""
    with pytest.raises(ParameterError, match=name):
        make_params(budgets=Budgets(**{name: value})).validate()


def test_negative_retry_budget_is_rejected_and_zero_allowed() -> None:
    """budgets.retries may be 0 (no harness retries) but not negative."""
    make_params(budgets=Budgets(retries=0)).validate()
    with pytest.raises(ParameterError):
        make_params(budgets=Budgets(retries=-1)).validate()


@pytest.mark.parametrize("changes", INVALID.values(), ids=INVALID.keys())
def test_invalid_parameters_cannot_reach_the_loop(changes: dict) -> None:
    """Parameters are validated once, when built: invalid ones raise
    ParameterError at construction (also through dataclasses.replace), so no
    loop is ever started with them and the loop never re-validates."""
    with pytest.raises(ParameterError):
        make_params(**changes())
    with pytest.raises(ParameterError):
        dataclasses.replace(make_params(), **changes())


def test_valid_params_reach_the_first_model_call(params, state) -> None:
    """With valid parameters the first effect is a model request for step 0."""
    gen = agent_loop(params, state)
    first = next(gen)
    assert isinstance(first, ModelRequest)
    assert (first.purpose, first.turn, first.model) == ("step", 0, params.model)
    gen.close()
