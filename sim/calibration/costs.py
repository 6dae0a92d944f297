"""Costs a trace records as $0 for runs that used tokens.

Cost trackers record $0 for a model whose price they do not know (tau2-bench
submissions recorded $0 for most runs of a model newer than their LiteLLM).
Such a run was not free: compared as $0 with a world that prices its tokens,
every run of that model reads as a misfit of the cost per run, and fitted
prices are pulled towards nothing. :func:`price_unrecorded` prices those runs'
tokens at the prices the model's other runs show (the catalogue's prices
scaled to their recorded costs, :func:`~sim.calibration.estimate.estimate_prices`),
or the catalogue's when no run of the model records a cost; a run of a model
neither knows keeps its $0 (a fine-tune recorded at $0 is then simulated at
$0 too). The count is kept in ``Traces.repaired``.
"""

from __future__ import annotations

import numpy as np

from sim.calibration.data import Traces
from sim.calibration.estimate import estimate_prices
from sim.harness.prices import Prices

REASON = "runs recording $0 while using tokens, priced at their model's fitted prices"
TOKEN_COLUMNS = ("input_tokens", "output", "reasoning", "cache_read_tokens",
                 "cache_write_tokens")


def unrecorded(traces: Traces) -> np.ndarray:
    """Mask of the runs whose recorded cost is $0 although they used tokens."""
    runs = traces.runs
    used = (runs["prompt"] + runs["output"] + runs["reasoning"]).to_numpy() > 0
    return (runs["cost"].to_numpy(float) == 0.0) & used


def price_unrecorded(traces: Traces, when=None) -> Traces:
    """``traces`` with the cost of each run of :func:`unrecorded` replaced by its
    tokens (input, output + reasoning, cache read, cache write, summed over its
    calls) at its model's prices (module docstring), USD; unchanged when there
    are none."""
    mask = unrecorded(traces)
    if not mask.any():
        return traces
    runs = traces.runs.copy()
    ids = runs["run_id"].to_numpy()
    models = sorted({str(m) for m in runs.loc[mask, "model"]})
    priced = traces.subset(ids[~mask])
    prices = estimate_prices(priced, models, when)
    sums = traces.calls.groupby("run_id", sort=False)[list(TOKEN_COLUMNS)].sum()
    sums = sums.reindex(ids).fillna(0)
    repaired = 0
    for i in np.flatnonzero(mask):
        p = prices[str(runs.at[i, "model"])]
        row = sums.iloc[i]
        usd = Prices(input=p.input, output=p.output, cache_read=p.cache_read,
                     cache_write=p.cache_write).cost(  # reasoning at the output price
            int(row["input_tokens"]), int(row["output"]), int(row["cache_read_tokens"]),
            int(row["cache_write_tokens"]), int(row["reasoning"]))
        if usd > 0:
            runs.at[i, "cost"] = float(usd)
            repaired += 1
    out = Traces(traces.folder, runs, traces.calls, dict(traces.dropped),
                 dict(traces.repaired))
    if repaired:
        out.repaired[REASON] = repaired
    return out
