"""Verifiers: checks of a claimed success that the model cannot write.

A verifier runs on the world's side because it reads the task's ground truth
(like a test suite run against the real repository). The harness only decides
when to ask (:class:`~sim.harness.effects.VerifyRequest`) and what to do with
the :class:`~sim.harness.effects.Verdict`.

Choose one in a scenario by registered name (``oracle``, ``noisy``,
``model_grader``) or by import path ``package.module:Class``; a class is built
with the scenario's ``verifier.options`` as keyword arguments.

The protocol has two levels:

- every verifier provides ``check(correct: bool, draws: Draws) -> bool``: pass
  or fail a claim whose hidden truth is ``correct``, drawing any randomness
  from ``draws``; such a check is free and instantaneous;
- a verifier whose check costs something (a model grader spends tokens, money
  and time) also provides ``assess(claim: Claim, draws: Draws, world: World)
  -> Check``, returning the decision with the usage and duration of the check;
  the harness prices that usage like any model call.

:func:`run_check` asks a verifier at whichever level it provides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sim.harness.messages import Usage
from sim.world.streams import Draws

if TYPE_CHECKING:
    from sim.world.params import WorldParams


class World(Protocol):
    """What a verifier reads of the world it runs in (:class:`sim.world.world.World`
    provides it): the grader's parameters, the model's timing (seconds,
    seconds per token) and the bound on a final answer's size (tokens)."""

    params: WorldParams
    ttft_s: float
    decode_s_per_token: float
    prefill_s_per_token: float
    answer_bound: int | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A claimed success as the verifier sees it: ``correct`` is the hidden
    truth, ``answer`` the final answer's text and ``answer_tokens`` its size
    (tokens), ``turn`` the number of model steps taken so far."""

    correct: bool
    answer: str = ""
    answer_tokens: int = 0
    turn: int = 0


@dataclass(frozen=True, slots=True)
class Check:
    """A verifier's decision: ``passed``, plus the ``usage`` of a model call the
    check made (None when it made none) and its ``duration_s`` (seconds)."""

    passed: bool
    usage: Usage | None = None
    duration_s: float = 0.0


class Verifier(Protocol):
    """A check of a claim against ground truth."""

    def check(self, correct: bool, draws: Draws) -> bool:
        """True when the claim passes. ``correct`` is the hidden truth."""


def run_check(verifier: Verifier, claim: Claim, draws: Draws, world: World) -> Check:
    """Ask ``verifier`` about ``claim``: its ``assess`` when it has one, else its
    free ``check`` (no usage, no duration)."""
    assess = getattr(verifier, "assess", None)
    if assess is None:
        return Check(bool(verifier.check(claim.correct, draws)))
    return assess(claim, draws, world)


class OracleVerifier:
    """A perfect check: passes exactly the correct claims."""

    def check(self, correct: bool, draws: Draws) -> bool:
        """True when the claim is correct."""
        return correct


def _probability(name: str, p: float) -> float:
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    return float(p)


class NoisyVerifier:
    """An imperfect check: rejects a correct claim with ``false_reject`` and
    accepts a wrong one with ``false_accept`` (probabilities)."""

    def __init__(self, false_accept: float = 0.0, false_reject: float = 0.0) -> None:
        self.false_accept = _probability("false_accept", false_accept)
        self.false_reject = _probability("false_reject", false_reject)

    def check(self, correct: bool, draws: Draws) -> bool:
        """Pass or fail the claim, with the configured error rates (one uniform draw)."""
        u = draws.uniform()
        return u >= self.false_reject if correct else u < self.false_accept


class ModelGraderVerifier(NoisyVerifier):
    """A second model call that grades the claim against a rubric: weaker than
    a mechanical check (it accepts a wrong claim with ``false_accept`` and
    rejects a correct one with ``false_reject``), and not free.

    Each check is one uncached model call whose prompt is the world's
    ``grader.prompt`` tokens (rubric, task statement, evidence) plus the
    answer, and whose output is ``grader.output`` tokens (the verdict); it
    takes the world's model latency for that call (time to first token plus
    decode and prefill time). Its usage goes back in the verdict for the
    harness to count and price at the run model's prices.
    """

    def __init__(self, false_accept: float = 0.1, false_reject: float = 0.05) -> None:
        super().__init__(false_accept, false_reject)

    def assess(self, claim: Claim, draws: Draws, world: World) -> Check:
        """Grade ``claim``: the noisy decision, the call's usage and duration."""
        grader = world.params.grader
        prompt = grader.prompt + claim.answer_tokens
        usage = Usage(input_tokens=prompt, output_tokens=grader.output)
        duration = (world.ttft_s + grader.output * world.decode_s_per_token
                    + prompt * world.prefill_s_per_token)
        return Check(self.check(claim.correct, draws), usage, duration)

    def worst_case(self, world: World) -> tuple[int, int, float]:
        """The largest call a check makes: (prompt tokens, output tokens,
        seconds), the answer being at most one model output long. The harness
        refuses the check when this could overshoot a budget."""
        grader = world.params.grader
        prompt = grader.prompt + (world.answer_bound or 0)
        duration = (world.ttft_s + grader.output * world.decode_s_per_token
                    + prompt * world.prefill_s_per_token)
        return prompt, grader.output, duration


VERIFIERS: dict[str, type] = {"oracle": OracleVerifier, "noisy": NoisyVerifier,
                              "model_grader": ModelGraderVerifier}
