"""What the wire needs beyond ``normalize``: a provider's own rules, and the
history as it is sent.

Every provider call is built from its :class:`~sim.harness.effects.ModelRequest`
alone (model, provider, system prompt, tool definitions, tool choice, output
cap, sampling parameters, thinking budget, cache lifetime, history).

:func:`check_provider` adds the provider's own rules to the harness's
validation before a run starts (seed 000: fail fast on incompatible
settings): the Anthropic Messages API (version 2026-10-21, sent by SDK 2.x)
takes no sampling parameters, so a temperature above 0 or a ``top_p`` is
refused rather than silently dropped (0, the harness default, is simply not
sent); its extended thinking needs a budget of at least 1,024 tokens strictly
below ``max_tokens``; a thinking budget has no OpenAI Chat Completions form.

:func:`conversation` is the history as it goes on the wire, before
:func:`~sim.harness.context.normalize`: empty assistant turns (a truncated
reply whose cut-off tool call the loop dropped) are left out, and a
compaction request gets the instruction to summarise.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sim.harness.effects import ModelRequest
from sim.harness.messages import Message
from sim.harness.params import HarnessParams, ParameterError

PROVIDERS: tuple[str, ...] = ("anthropic", "openai")
MIN_THINKING_BUDGET = 1_024
SUMMARY_INSTRUCTION = (
    "Summarise the work above for your own later use: what was tried, what was found "
    "(names, paths, values, errors) and what remains to do. Answer with the summary only.")
SPAN_OPENING = "(The earlier part of an agent's work on a task follows.)"


def check_provider(params: HarnessParams) -> HarnessParams:
    """``params`` (valid for the harness) checked against its provider's
    rules; raises :class:`ParameterError` listing every problem (dotted paths)."""
    problems = list(_provider_problems(params))
    if problems:
        raise ParameterError(problems)
    return params


def _provider_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    thinking = p.thinking
    if p.provider == "anthropic":
        if p.temperature > 0:
            yield "temperature", ("the Anthropic Messages API takes no temperature (API "
                                  f"version 2026-10-21): leave it at 0, got {p.temperature}")
        if p.top_p is not None:
            yield "top_p", "the Anthropic Messages API takes no top_p (API version 2026-10-21)"
    if not thinking.enabled:
        return
    if p.provider == "openai":
        yield "thinking.enabled", ("a thinking budget has no OpenAI Chat Completions form "
                                   "(reasoning models reason without one): disable thinking")
        return
    if thinking.budget_tokens < MIN_THINKING_BUDGET:
        yield "thinking.budget_tokens", (f"Anthropic needs at least {MIN_THINKING_BUDGET} "
                                         f"thinking tokens, got {thinking.budget_tokens}")
    if thinking.budget_tokens >= p.max_output_tokens:
        yield "thinking.budget_tokens", (f"must be below max_output_tokens "
                                         f"({p.max_output_tokens}) for Anthropic, got "
                                         f"{thinking.budget_tokens}")


def conversation(request: ModelRequest) -> list[Message | dict[str, Any]]:
    """The request's history ready for ``normalize``: without empty assistant
    turns; for a compaction (``purpose`` ``"compaction"``, the oldest span of
    the history) opened by a user note when the span starts with the
    assistant, and closed by :data:`SUMMARY_INSTRUCTION`."""
    turns: list[Message | dict[str, Any]] = [
        m for m in request.messages if m.content or m.role != "assistant"]
    if request.purpose != "compaction":
        return turns
    first = turns[0] if turns else None
    if isinstance(first, Message) and first.role == "assistant":
        turns.insert(0, {"role": "user", "content": SPAN_OPENING})
    turns.append({"role": "user", "content": SUMMARY_INSTRUCTION})
    return turns
