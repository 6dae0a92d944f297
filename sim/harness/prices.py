"""Model prices in USD per million tokens, with cliff tiers (one frozen dataclass)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sim.harness.fields import PYDANTIC_CONFIG, param, validated

MAX_PRICE = 1_000_000.0
"""The highest price a field may hold, USD per million tokens (a dollar a
token: thousands of times any listed model's), so that no sum of costs over
counts the trace model allows leaves the finite floats."""


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices of one model in USD per million tokens, with optional cliff tiers.

    ``thinking`` defaults to the output price when None (most providers bill
    thinking as output). ``tiers`` holds cliff tiers ``((start_tokens,
    Prices), ...)`` in ascending ``start_tokens`` (genai-prices' semantics): a
    call whose prompt (uncached + cache-read + cache-write tokens) has *more
    than* ``start_tokens`` tokens pays that tier's prices on all its tokens;
    otherwise this object's own prices apply. Tier prices are flat (no tiers
    of their own). This is the one tiered-price type: the harness prices calls
    with it and :mod:`sim.cost` reads the catalogue into it. Every price is a
    finite number >= 0, so money never decreases."""

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    input: float = param(3.0, "uncached input (USD/Mtok)", ge=0, le=MAX_PRICE)
    output: float = param(15.0, "output (USD/Mtok)", ge=0, le=MAX_PRICE)
    cache_read: float = param(0.3, "cache reads (USD/Mtok)", ge=0, le=MAX_PRICE)
    cache_write: float = param(3.75, "cache writes (USD/Mtok)", ge=0, le=MAX_PRICE)
    thinking: float | None = param(None, "thinking (USD/Mtok; null: the output price)", ge=0,
                                   le=MAX_PRICE)
    tiers: tuple[tuple[int, Prices], ...] = param(
        (), "cliff tiers: [prompt tokens above which they apply, prices], ascending")

    def __post_init__(self) -> None:
        validated(self, self._tier_problems())

    def _tier_problems(self) -> Iterator[tuple[str, str]]:
        """Tiers ascend by their start and hold flat prices."""
        last = -1
        for k, (start, tier_prices) in enumerate(self.tiers):
            if isinstance(start, bool) or not isinstance(start, int) or start <= last:
                yield f"tiers[{k}]", (f"tier starts must be integers >= 0 in ascending "
                                      f"order, got {start!r}")
            else:
                last = start
            if tier_prices.tiers:
                yield f"tiers[{k}].tiers", "a tier's prices cannot have tiers of their own"

    def at(self, prompt_tokens: int) -> Prices:
        """The prices of one call whose prompt has ``prompt_tokens`` tokens: the
        highest tier it exceeds, else this object itself (whose own fields
        apply; :meth:`cost` never reads ``tiers``)."""
        prices = self
        for start, tier in self.tiers:
            if prompt_tokens <= start:
                break
            prices = tier
        return prices

    @property
    def base(self) -> Prices:
        """The prices below the first tier, without tiers (self when untiered)."""
        return replace(self, tiers=()) if self.tiers else self

    def with_overrides(self, **overrides: float | None) -> Prices:
        """A copy with the given fields (USD per million tokens) replaced, in
        the base prices and in every tier."""
        changes: dict[str, Any] = dict(overrides)
        return replace(self, **changes, tiers=tuple(
            (start, replace(tier, **changes)) for start, tier in self.tiers))

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_write: int = 0, thinking: int = 0) -> float:
        """Cost in USD of the given token counts at this object's own prices."""
        think_price = self.output if self.thinking is None else self.thinking
        return (input_tokens * self.input + output_tokens * self.output
                + cache_read * self.cache_read + cache_write * self.cache_write
                + thinking * think_price) / 1e6

    def call_cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0,
                  cache_write: int = 0, thinking: int = 0) -> float:
        """Cost in USD of one call's usage: :meth:`cost` at the tier its prompt
        (``input_tokens + cache_read + cache_write``) reaches (:meth:`at`)."""
        prices = self.at(input_tokens + cache_read + cache_write) if self.tiers else self
        return prices.cost(input_tokens, output_tokens, cache_read, cache_write, thinking)
