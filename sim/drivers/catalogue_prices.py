"""A scenario's price spec applied to the models recorded runs name.

:class:`CataloguePrices` answers ``prices(model)`` for a replay: the
catalogue's prices of that call-level model on the scenario's prices date (or
a named price set, or overrides on them), a recorded name tried as
:func:`sim.cost.prices.catalogue_names` says (as every price path does); None
when the catalogue does not know it (the replay then prices it from the recorded costs:
:func:`sim.drivers.replay.price_models`, :mod:`sim.cost.recorded`), listed in
``unpriced`` so that it is never priced silently. Used by ``sim replay`` and
``sim tune``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sim.bad_input import InputError
from sim.cost.prices import prices_day

if TYPE_CHECKING:
    from sim.harness.params import Prices
    from sim.scenario.model import HarnessConfig


class CataloguePrices:
    """A model's prices: the scenario's price spec applied to a recorded
    call-level model (its catalogue prices, a named set, or overrides on them;
    a recorded name is tried as :func:`sim.cost.prices.catalogue_names` says);
    None when the model is not in the catalogue (the replay then prices it
    from recorded costs: :func:`sim.drivers.replay.price_models`), and listed
    in ``unpriced``."""

    def __init__(self, h: HarnessConfig) -> None:
        from sim.scenario.model import PricesConfig

        spec: Any = h.prices
        if isinstance(spec, PricesConfig):
            spec = {k: v for k, v in spec.model_dump().items() if v is not None}
        self.spec = spec
        self.when = prices_day(h.prices_date)
        self.harness = h
        self.cache: dict[str | None, Prices | None] = {}
        self.unpriced: set[str] = set()

    @property
    def named(self) -> str | None:
        """The named price set the scenario prices every model at (``seed001``),
        None when its prices are the catalogue's (with overrides or not)."""
        return self.spec if isinstance(self.spec, str) else None

    def __call__(self, model: str | None) -> Prices | None:
        from sim.cost import resolve_price_tiers
        from sim.cost.prices import catalogue_names

        if model not in self.cache:
            h = self.harness
            self.cache[model] = None
            for attempt, provider in catalogue_names(model or h.model):
                try:
                    tiers = resolve_price_tiers(attempt, self.spec, provider=provider,
                                                cache_ttl=h.prompt_cache or "5m", when=self.when)
                except InputError:
                    continue
                self.cache[model] = replace(tiers.base, tiers=tiers.tiers)
                break
            if self.cache[model] is None:
                self.unpriced.add(model or "(none)")
        return self.cache[model]
