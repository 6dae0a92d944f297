"""Each run's cost for calibration: its one price (:mod:`sim.cost.recorded`).

Cost trackers record $0 for a model whose price they do not know (tau2-bench
submissions recorded $0 for most runs of a model newer than their LiteLLM).
Such a run was not free: compared as $0 with a world that prices its tokens,
every run of that model reads as a misfit of the cost per run, and fitted
prices are pulled towards nothing. :func:`price_unrecorded` gives every run the
price every other command gives it (:func:`run_prices`): its recorded cost
where trustworthy, else its tokens at its model's fitted prices (the
catalogue's scaled to the model's recorded costs), else at the catalogue's; a
run of a model neither knows keeps its recorded figure (a fine-tune recorded
at $0 is then simulated at $0 too; calibrate has no scenario prices to fall
back on). The count per basis is kept in ``Traces.repaired``.
"""

from __future__ import annotations

from collections import Counter
from datetime import date

import numpy as np

from sim.calibration.data import Traces
from sim.cost import recorded
from sim.cost.recorded import BASIS_TEXT, RECORDED, UNPRICED, Listed, RunPrices
from sim.harness.messages import Usage
from sim.harness.prices import Prices

REASON = ("runs recording $0 while using tokens (or no cost), priced {basis}")
"""The ``Traces.repaired`` reason, per basis."""

KEPT_FREE = ("runs recording $0 while using tokens, kept at $0: no price list has their "
             "model ({models}; right for a self-hosted model, but an exporter that lacked the "
             "price records $0 too: then re-export with the cost, or give the model's prices "
             "in the written scenario's harness.model_prices)")
"""The ``Traces.repaired`` reason of runs whose untrustworthy $0 stays: nothing prices them."""


def run_prices(traces: Traces, listed: Listed | None = None, scenario: Prices | None = None,
               when: date | None = None) -> RunPrices:
    """Each run's one price (USD) and basis, in ``traces.runs``' order
    (:func:`sim.cost.recorded.run_prices`), from its calls' usage and recorded
    costs (``cost``, NaN: not recorded) and the run's own recorded ``cost``.
    ``listed``: the price source (default: the catalogue at ``when``, a day or
    an instant; today when None); ``scenario``: the prices of a model it lacks
    (default: none, such runs are ``unpriced``)."""
    runs, calls = traces.runs, traces.calls
    own = (calls["model"].tolist() if "model" in calls else [None] * len(calls))
    usages = (Usage(int(i), int(o), int(r), int(w), int(t)) for i, o, r, w, t in zip(
        calls["input_tokens"], calls["output"], calls["cache_read_tokens"],
        calls["cache_write_tokens"], calls["reasoning"], strict=True))
    return recorded.run_prices(
        list(zip(runs["run_id"], runs["model"].astype(str), _costs(runs["cost"]), strict=True)),
        zip(calls["run_id"], (m if isinstance(m, str) and m else None for m in own), usages,
            _costs(calls["cost"]), strict=True),
        listed or recorded.catalogue(when), scenario)


def _costs(column) -> list[float | None]:
    return [None if np.isnan(c) else float(c) for c in column.to_numpy(float)]


def price_unrecorded(traces: Traces, when: date | None = None,
                     listed: Listed | None = None, scenario: Prices | None = None) -> Traces:
    """``traces`` with each run's ``cost`` its one price (:func:`run_prices`)
    where that is not its recorded cost and is known; unchanged when no run's
    changes. ``Traces.repaired`` counts the runs repriced per basis, and the
    runs whose untrustworthy $0 (tokens used) stays because nothing prices
    their model (:data:`KEPT_FREE`, naming the models)."""
    priced = run_prices(traces, listed, scenario, when)
    usd, bases = np.array(priced.usd, dtype=float), priced.basis
    change = [i for i, b in enumerate(bases) if b not in (RECORDED, UNPRICED)
              and np.isfinite(usd[i])]
    recorded = traces.runs["cost"].to_numpy(float)
    free = [i for i, b in enumerate(bases) if b == UNPRICED and recorded[i] == 0]
    if not change and not free:
        return traces
    runs = traces.runs.copy()
    cost = recorded.copy()
    cost[change] = usd[change]
    runs["cost"] = cost
    out = Traces(traces.folder, runs, traces.calls, dict(traces.dropped), dict(traces.repaired),
                 traces.subagent_calls)
    for basis, n in Counter(bases[i] for i in change).items():
        out.repaired[REASON.format(basis=BASIS_TEXT[basis])] = n
    if free:
        models = sorted({str(m) for m in runs["model"].to_numpy(object)[free]})
        out.repaired[KEPT_FREE.format(models=", ".join(models))] = len(free)
    return out
