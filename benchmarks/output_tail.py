"""Which output-size model the traces support, by held-out likelihood
(issue 38): ``python -m benchmarks.output_tail TRACES [--folds 5] [--seed 0]``.

Per model with at least 200 calls, the calls' output tokens (at least 1) are
split by run into ``--folds`` folds (runs shuffled, seeded); each fold's
outputs are scored under three models fitted on the other folds, on the
logarithm of the output (so the three are comparable):

- ``lognormal``: a normal on log output (maximum likelihood);
- ``mixture``: a two-lognormal mixture
  (:meth:`sim.world.distributions.Mixture.fit`, as calibration fits sizes);
- ``body+tail``: the lognormal below the training outputs' 90th percentile
  ``u`` (renormalised to 0.9) and a generalised Pareto above it (0.1 of the
  mass, fitted by scipy to the log excesses over ``u``): a heavier or lighter
  tail than the body's.

It prints the summed held-out log-likelihood of each (higher is better;
``-inf``: some held-out output lies where the model gives no density, e.g.
beyond a bounded Pareto tail) and the winner. The raw per-call outputs are
used (not divided by each run's size multiplier, as calibration divides
them): a check of the tail's shape, not of the fitted world.

Measured on tau2-bench's shipped runs (5 folds, seed 0), summed held-out
log-likelihood (lognormal / mixture / body+tail): the mixture wins for 6 of
the 7 models with 200 calls or more (gpt-4.1 -2499.3 / -2233.1 / -2479.1;
the fine-tuned gpt-4.1 -2810.1 / -2453.1 / -2778.0; gpt-5.4 and gpt-4o: the
tail -inf); for claude-opus-4-6 the three are within 1.2 nats (-1979.0 /
-1978.8 / -1977.8 in 1,767 calls): no model has a tail the mixture misses.
The two-lognormal mixture calibration picks by BIC is what held-out
likelihood picks.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from sim.calibration.data import load
from sim.world.distributions import Mixture

MIN_CALLS = 200
TAIL_Q = 0.9


def lognormal_ll(train: np.ndarray, test: np.ndarray) -> float:
    """Held-out log-likelihood of log ``test`` under a normal fitted to log ``train``."""
    lx = np.log(train)
    return float(stats.norm.logpdf(np.log(test), lx.mean(), lx.std()).sum())


def mixture_ll(train: np.ndarray, test: np.ndarray) -> float:
    """The same under a two-lognormal mixture fitted to ``train``."""
    d = Mixture.fit(train, k=2)
    lt = np.log(test)
    dens = sum(w * stats.norm.pdf(lt, math.log(c.median), max(c.sigma, 1e-9))
               for w, c in zip(d.probabilities, d.components, strict=True))
    return float(np.log(np.maximum(dens, 1e-300)).sum())


def body_tail_ll(train: np.ndarray, test: np.ndarray) -> float:
    """The same under a lognormal body below the 90th percentile and a
    generalised Pareto tail above it (see the module docstring)."""
    lx = np.log(train)
    u = float(np.quantile(lx, TAIL_Q))
    mu, sigma = float(lx.mean()), float(lx.std())
    below = float(stats.norm.cdf(u, mu, sigma))
    xi, _, scale = stats.genpareto.fit(lx[lx > u] - u, floc=0)
    lt = np.log(test)
    body = math.log(TAIL_Q) + stats.norm.logpdf(lt, mu, sigma) - math.log(below)
    tail = math.log(1 - TAIL_Q) + stats.genpareto.logpdf(np.maximum(lt - u, 0.0), xi, 0,
                                                          scale)
    return float(np.where(lt <= u, body, tail).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    traces = load(args.traces)
    calls = traces.calls
    model = calls["run_id"].map(dict(zip(traces.runs["run_id"], traces.runs["model"],
                                         strict=True)))
    rng = np.random.default_rng(args.seed)
    names = ("lognormal", "mixture", "body+tail")
    print(f"{'model':<40} {'calls':>6} " + " ".join(f"{n:>11}" for n in names) + "  best")
    for name, count in model.value_counts().items():
        if count < MIN_CALLS:
            continue
        mine = calls[(model == name).to_numpy()]
        runs = mine["run_id"].unique()
        rng.shuffle(runs)
        x = np.maximum(mine["output"].to_numpy(float), 1.0)
        total = np.zeros(len(names))
        for k in range(args.folds):
            held = mine["run_id"].isin(set(runs[k::args.folds])).to_numpy()
            with np.errstate(divide="ignore"):
                total += [f(x[~held], x[held]) for f in (lognormal_ll, mixture_ll,
                                                         body_tail_ll)]
        print(f"{str(name)[:40]:<40} {count:>6} " + " ".join(f"{v:>11.1f}" for v in total)
              + f"  {names[int(np.argmax(total))]}")


if __name__ == "__main__":
    main()
