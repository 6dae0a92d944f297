"""What agent runs cost: catalogue prices (:mod:`sim.cost.prices`) and closed
forms for deterministic runs (:mod:`sim.cost.closed_forms`).

Units everywhere: tokens are exact integer counts, money is USD (float), prices
are USD per million tokens (:class:`~sim.harness.params.Prices`, the one price
type, tiers included: the harness prices each call with it). Every public name
of both modules is importable from here.
"""

from __future__ import annotations

from sim.cost.closed_forms import (
    CACHE_MODES,
    CacheMode,
    RunCost,
    RunTokens,
    Tokens,
    cached_run_cost,
    cached_run_tokens,
    input_split,
    input_tokens,
    run_breakdown,
    run_cost,
    run_tokens,
)
from sim.cost.prices import (
    CACHE_TTLS,
    NAMED_PRICES,
    PRICE_FIELDS,
    lookup_price_tiers,
    lookup_prices,
    resolve_price_tiers,
    resolve_prices,
)

__all__ = [
    "CACHE_MODES", "CACHE_TTLS", "NAMED_PRICES", "PRICE_FIELDS", "CacheMode", "RunCost",
    "RunTokens", "Tokens", "cached_run_cost", "cached_run_tokens", "input_split",
    "input_tokens", "lookup_price_tiers", "lookup_prices", "resolve_price_tiers",
    "resolve_prices", "run_breakdown", "run_cost", "run_tokens"]
