"""The building blocks of the world's parameters: probabilities, token sizes,
rates, effect classes and durations (pydantic, strict: unknown fields are
errors, values are frozen)."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim.world.distributions import BaseDistribution, Distribution, Exponential, Fixed, Lognormal

__all__ = ["MAX_NEED", "MIN_RATE", "DurationParams", "Effect", "Prob", "Size", "Strict"]

Prob = Annotated[float, Field(ge=0.0, le=1.0)]
MAX_NEED = 10**9
"""The most productive steps a lognormal draw gives (larger draws are cut to it)."""
MIN_RATE = 1e-6
"""The smallest speed or rate a field takes (per second, minute or hour), so
that one over it is a finite time."""
Size = Annotated[int, Field(ge=0)] | Distribution
"""A size in tokens: a number (every draw the same) or a distribution
(:mod:`sim.world.distributions`), drawn per use and rounded to whole tokens."""
Effect = Literal["read", "reversible_write", "external", "irreversible"]


class Strict(BaseModel):
    """A frozen model that refuses unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DurationParams(Strict):
    """A duration in seconds. ``lognormal`` (the default): median ``median_s``,
    log-sd ``sigma``; ``exponential``: mean ``mean_s`` (memoryless, for
    queueing checks against theory); ``fixed``: always ``median_s``."""

    distribution: Literal["lognormal", "exponential", "fixed"] = Field(
        "lognormal", description="lognormal, exponential or fixed")
    median_s: float = Field(1.0, gt=0, description="median duration (seconds; lognormal, "
                                                   "fixed)")
    sigma: float = Field(0.5, ge=0, description="standard deviation of log(duration) "
                                                "(lognormal)")
    mean_s: float | None = Field(None, gt=0, description="mean duration (seconds; "
                                                         "exponential)")

    @model_validator(mode="after")
    def _parameterised(self) -> DurationParams:
        if self.distribution == "exponential" and self.mean_s is None:
            raise ValueError("an exponential duration needs mean_s")
        if self.distribution != "exponential" and self.mean_s is not None:
            raise ValueError(f"mean_s applies to exponential durations, not "
                             f"{self.distribution}")
        return self

    @cached_property
    def dist(self) -> BaseDistribution:
        """The duration as a distribution object (seconds)."""
        if self.distribution == "exponential":
            return Exponential(mean=self.mean_s)
        if self.distribution == "fixed":
            return Fixed(value=self.median_s)
        return Lognormal(median=self.median_s, sigma=self.sigma)

    @property
    def mean(self) -> float:
        """The analytic mean (seconds)."""
        return self.dist.mean

    def sample(self, draws) -> float:
        """One duration from ``draws`` (a :class:`~sim.world.streams.Draws`):
        lognormal uses one standard normal draw, exponential one uniform draw,
        fixed none."""
        return self.dist.sample(draws)
