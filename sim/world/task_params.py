"""What the world's tasks are like: how much work each needs (difficulty),
which cannot be solved, and how runs end when they end by competing risks."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from sim.world.distributions import BaseDistribution, Fixed, Lognormal, Mixture
from sim.world.param_types import Prob, Strict

__all__ = ["ChoiceDifficulty", "Difficulty", "EndingsParams", "FixedDifficulty",
           "LognormalDifficulty", "UnsolvableParams"]


class LognormalDifficulty(Strict):
    """Productive steps a task needs: ``max(min, round(exp(N(mu, sigma))))``,
    a draw above 10^9 cut to 10^9. The default shape: a ``difficulty``
    mapping without ``distribution`` is this one."""

    distribution: Literal["lognormal"] = "lognormal"
    mu: float = Field(2.3, description="mean of log(steps)")
    sigma: float = Field(0.6, gt=0, description="standard deviation of log(steps)")
    min: int = Field(3, ge=1, description="smallest number of productive steps")

    @cached_property
    def dist(self) -> BaseDistribution:
        """The distribution before rounding and the floor: lognormal with median
        ``exp(mu)`` and log-sd ``sigma`` (``mu`` held below the float range's
        end: every draw of a larger one exceeds ``MAX_NEED`` anyway)."""
        return Lognormal(median=math.exp(min(self.mu, 700.0)), sigma=self.sigma)


class FixedDifficulty(Strict):
    """Every task needs exactly ``steps`` productive steps."""

    distribution: Literal["fixed"] = "fixed"
    steps: int = Field(10, ge=1, description="productive steps every task needs")

    @cached_property
    def dist(self) -> BaseDistribution:
        """A point mass at ``steps``."""
        return Fixed(value=self.steps)


class ChoiceDifficulty(Strict):
    """A task needs ``values[k]`` productive steps with probability
    ``weights[k] / sum(weights)`` (a mix of task classes, e.g. 95% short and
    5% long)."""

    distribution: Literal["choice"] = "choice"
    values: tuple[int, ...] = Field(min_length=1, description="productive steps of each class")
    weights: tuple[float, ...] = Field(min_length=1, description="relative share of each class")

    @model_validator(mode="after")
    def _matching(self) -> ChoiceDifficulty:
        if len(self.values) != len(self.weights):
            raise ValueError(f"values ({len(self.values)}) and weights ({len(self.weights)}) "
                             f"must have the same length")
        if min(self.values) < 1:
            raise ValueError("values must be >= 1")
        if min(self.weights) < 0 or sum(self.weights) <= 0:
            raise ValueError("weights must be >= 0 with a positive sum")
        return self

    @cached_property
    def dist(self) -> BaseDistribution:
        """A mixture of point masses at ``values`` with ``weights``."""
        return Mixture(components=tuple(Fixed(value=v) for v in self.values),
                       weights=self.weights)


Difficulty = Annotated[LognormalDifficulty | FixedDifficulty | ChoiceDifficulty,
                       Field(discriminator="distribution")]


class UnsolvableParams(Strict):
    """Tasks that cannot be solved: the model works ``need_scale`` times the
    drawn need before it claims success, and the claim is wrong."""

    share: Prob = Field(0.0, description="share of tasks that cannot be solved")
    need_scale: float = Field(1.0, gt=0, description="work an unsolvable task takes before "
                                                     "the model gives its (wrong) answer, as a "
                                                     "multiple of the drawn need")


MIN_FRAILTY = 1e-6
"""The smallest non-zero frailty variance: its gamma has shape one over it (a
finite 1e6; a subnormal variance would make it infinite). Calibration writes
frailties rounded to 6 decimals, so never one below it but 0."""


class EndingsParams(Strict):
    """How a run ends, as competing risks per step with per-run heterogeneity
    (null in a world: runs end when their drawn need is done, as before).

    At its ``n``-th model call (1-based, loop steps only) a run in step bin
    ``b`` (the last ``edges[b] <= n``) ends with probability
    ``1 - exp(-Z (resolve[b] + give_up[b] + error[b]))``, by a cause drawn in
    proportion to the three hazards (per step, dimensionless):

    - ``resolve``: the model gives a correct final answer (in a conversation, a
      report of finished work); the run is resolved, ending after ``n`` steps;
    - ``give_up``: it gives a wrong final answer (a false claim, or giving up);
      the run ends unresolved after ``n`` steps;
    - ``error``: the call meets a model-API fault that persists through every
      retry; the run fails (``failed:model_error``) after ``n - 1`` steps.

    ``Z`` is the run's frailty, drawn once per run from the difficulty stream:
    gamma with mean 1 and variance ``frailty`` (0: every run has ``Z = 1``),
    times ``S ** size_link`` for a run whose size multiplier
    (``tokens.run_scale``) is ``S``: with ``size_link`` negative, runs whose
    outputs and observations are larger (whose prompt grows faster per step)
    last longer, positive shorter (0: length and growth independent; no draw
    is added either way).
    The harness's limits are not causes: they are the harness's budgets and
    cut runs short wherever they apply. Otherwise the model behaves as
    ``policy`` says (messages, tool errors, loops, productive calls), but a
    run's need no longer ends it."""

    edges: tuple[int, ...] = Field(
        (1,), min_length=1, description="first step of each step bin (1-based model calls, "
                                        "increasing, starting at 1)")
    resolve: tuple[Annotated[float, Field(ge=0.0, le=100.0)], ...] = Field(
        (0.1,), min_length=1, description="per-step hazard of a correct final answer in each "
                                          "bin")
    give_up: tuple[Annotated[float, Field(ge=0.0, le=100.0)], ...] = Field(
        (0.0,), min_length=1, description="per-step hazard of a wrong final answer (giving up, "
                                          "a false claim) in each bin")
    error: tuple[Annotated[float, Field(ge=0.0, le=100.0)], ...] = Field(
        (0.0,), min_length=1, description="per-step hazard of a persistent model-API fault in "
                                          "each bin")
    frailty: float = Field(0.0, ge=0.0, le=10.0, description=(
        f"variance of the per-run gamma hazard multiplier (mean 1; 0: none; else at least "
        f"{MIN_FRAILTY:g})"))

    size_link: float = Field(0.0, ge=-5.0, le=5.0, description=(
        "exponent of the run's size multiplier (tokens.run_scale) in its hazards (0: none; "
        "negative: runs that grow faster per step last longer)"))

    @field_validator("frailty")
    @classmethod
    def _frailty(cls, value: float) -> float:
        """0 or at least :data:`MIN_FRAILTY`: the gamma's shape is one over it."""
        if 0.0 < value < MIN_FRAILTY:
            raise ValueError(f"must be 0 (no frailty) or at least {MIN_FRAILTY:g}: the "
                             f"gamma's shape is 1/frailty")
        return value

    @model_validator(mode="after")
    def _bins(self) -> EndingsParams:
        n = len(self.edges)
        if self.edges[0] != 1:
            raise ValueError(f"edges must start at 1, got {self.edges[0]}")
        if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"edges must increase, got {list(self.edges)}")
        for name in ("resolve", "give_up", "error"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} values for {n} bins "
                                 f"(edges)")
        return self
