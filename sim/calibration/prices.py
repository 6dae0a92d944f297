"""Prices per model, estimated from the recorded costs (see :func:`estimate_prices`).

These are the **simulated world's** prices: the flat prices (USD per million
tokens, no tiers, reasoning billed as output, as the world draws them) at
which a calibrated scenario charges the calls it invents, fitted so that
simulated runs cost what the recorded runs were billed. Every run's recorded
total is data here, a $0 run included (a model billed nothing is free in the
world), and a model the catalogue lacks gets a least-squares fit. That is
another question than the one price of a recorded call
(:func:`sim.cost.recorded.model_price`, which every command uses to price a
recorded call whose cost is missing or an untrustworthy $0, and which leaves
such a $0 out): the two may differ on the same runs (tests/test_one_price.py).
Tokens are priced by the one rule, :meth:`~sim.harness.prices.Prices.cost`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.calibration.data import Traces
from sim.harness.prices import Prices


@dataclass
class PriceEstimate:
    """USD per million tokens of one model, and where they came from."""

    model: str
    input: float
    output: float
    cache_read: float
    cache_write: float
    source: str



def estimate_prices(traces: Traces, models: list[str], when=None) -> dict[str, PriceEstimate]:
    """Prices per model (USD per million tokens), so that they reproduce the
    recorded cost per run, discounts the traces do not break out (unreported
    cache hits) included:

    - a model the catalogue knows, with recorded costs: the catalogue's prices
      scaled by one factor, the recorded total over the catalogue's total for
      the same runs (the catalogue keeps the ratios between input, output and
      cache prices, which the runs' token counts are too collinear to tell);
    - a model the catalogue does not know, with recorded costs: non-negative
      least squares of the recorded run costs on the runs' token counts (input,
      output + reasoning, cache read, cache write);
    - no recorded costs: the catalogue's (0 when it does not know the model).
    """
    out = {}
    for model in models:
        r = traces.runs[(traces.runs["model"] == model) & np.isfinite(traces.runs["cost"])]
        if len(r) < 2:
            out[model] = _catalogue(model, when)
            continue
        c = traces.calls[traces.calls["run_id"].isin(set(r["run_id"]))]
        sums = c.groupby("run_id", sort=False)[["input_tokens", "output", "reasoning",
                                                "cache_read_tokens",
                                                "cache_write_tokens"]].sum()
        sums = sums.reindex(r["run_id"]).fillna(0)
        cols = {"input": sums["input_tokens"], "output": sums["output"] + sums["reasoning"],
                "cache_read": sums["cache_read_tokens"], "cache_write": sums["cache_write_tokens"]}
        cost = r["cost"].to_numpy(float)
        scaled = _scaled_catalogue(model, when, cols, cost)
        if scaled is not None:
            out[model] = scaled
            continue
        out[model] = _least_squares(model, cols, cost)
    return out


def _r2(cost: np.ndarray, fitted: np.ndarray) -> float:
    total = float(((cost - cost.mean()) ** 2).sum())
    return 1 - float(((cost - fitted) ** 2).sum()) / total if total > 0 else 1.0


def _scaled_catalogue(model: str, when, cols: dict[str, pd.Series],
                      cost: np.ndarray) -> PriceEstimate | None:
    """The catalogue's prices scaled to the recorded costs; None when the
    catalogue does not know ``model`` or prices its runs at nothing."""
    p = _listed(model, when)
    if p is None:
        return None
    tokens = zip(*(cols[k].to_numpy(float).tolist() for k in
                   ("input", "output", "cache_read", "cache_write")), strict=True)
    listed = np.array([p.cost(round(i), round(o), round(r), round(w))  # the one price rule
                       for i, o, r, w in tokens], dtype=float)
    if not listed.sum() > 0:
        return None
    factor = float(cost.sum() / listed.sum())
    return PriceEstimate(model, round(p.input * factor, 6), round(p.output * factor, 6),
                         round(p.cache_read * factor, 6), round(p.cache_write * factor, 6),
                         f"the catalogue's x {factor:.4g}, the recorded costs of {len(cost)} "
                         f"runs over the catalogue's (R^2 {_r2(cost, listed * factor):.4f})")


def _least_squares(model: str, cols: dict[str, pd.Series], cost: np.ndarray) -> PriceEstimate:
    """Non-negative least squares of ``cost`` on the token columns."""
    from scipy.optimize import nnls

    used = [k for k, v in cols.items() if (v > 0).any()]
    a = np.column_stack([cols[k].to_numpy(float) / 1e6 for k in used])
    coef, _ = nnls(a, cost)
    if not cost.any() and a.any():  # every run $0 although it used tokens
        return PriceEstimate(model, 0.0, 0.0, 0.0, 0.0,
                             f"the recorded costs of {len(cost)} runs, all $0 although they "
                             f"used tokens, and no price list has the model: free in this "
                             f"world (right for a self-hosted model; if an exporter lacked its "
                             f"price, give its prices here)")
    prices = dict(zip(used, (float(v) for v in coef), strict=True))
    prices.setdefault("input", 0.0)
    prices.setdefault("output", 0.0)
    prices.setdefault("cache_read", 0.1 * prices["input"])
    prices.setdefault("cache_write", 1.25 * prices["input"])
    return PriceEstimate(model, round(prices["input"], 6), round(prices["output"], 6),
                         round(prices["cache_read"], 6), round(prices["cache_write"], 6),
                         f"least squares on the recorded costs of {len(cost)} runs, not in the "
                         f"catalogue (R^2 {_r2(cost, a @ coef):.4f})")


def _listed(model: str, when) -> Prices | None:
    """The catalogue's flat prices of ``model`` on ``when`` (those below its
    first tier), read by the one catalogue source every price path uses
    (:func:`sim.cost.recorded.catalogue`); None when the catalogue does not
    know it."""
    from sim.cost.recorded import catalogue

    tiers = catalogue(when)(model)
    return None if tiers is None else tiers.base


def _catalogue(model: str, when) -> PriceEstimate:
    p = _listed(model, when)
    if p is None:
        return PriceEstimate(model, 0.0, 0.0, 0.0, 0.0,
                             "no recorded costs and not in the catalogue: priced at 0")
    return PriceEstimate(model, p.input, p.output, p.cache_read, p.cache_write,
                         "the catalogue's (no recorded costs)")
