"""Verifiers: checks of a claimed success that the model cannot write.

A verifier runs on the world's side because it reads the task's ground truth
(like a test suite run against the real repository). The harness only decides
when to ask (:class:`~sim.harness.effects.VerifyRequest`) and what to do with
the :class:`~sim.harness.effects.Verdict`.

Choose one in a scenario by registered name (``oracle``, ``noisy``) or by
import path ``package.module:Class``; a class is built with the scenario's
``verifier.options`` as keyword arguments and must provide
``check(correct: bool, draws: Draws) -> bool``.
"""

from __future__ import annotations

from typing import Protocol

from sim.world.streams import Draws


class Verifier(Protocol):
    """A check of a claim against ground truth."""

    def check(self, correct: bool, draws: Draws) -> bool:
        """True when the claim passes. ``correct`` is the hidden truth."""


class OracleVerifier:
    """A perfect check: passes exactly the correct claims."""

    def check(self, correct: bool, draws: Draws) -> bool:
        """True when the claim is correct."""
        return correct


class NoisyVerifier:
    """An imperfect check: rejects a correct claim with ``false_reject`` and
    accepts a wrong one with ``false_accept`` (probabilities)."""

    def __init__(self, false_accept: float = 0.0, false_reject: float = 0.0) -> None:
        for name, p in (("false_accept", false_accept), ("false_reject", false_reject)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        self.false_accept = false_accept
        self.false_reject = false_reject

    def check(self, correct: bool, draws: Draws) -> bool:
        """Pass or fail the claim, with the configured error rates."""
        u = draws.uniform()
        return u >= self.false_reject if correct else u < self.false_accept


VERIFIERS: dict[str, type] = {"oracle": OracleVerifier, "noisy": NoisyVerifier}
