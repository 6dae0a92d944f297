"""How runs end: competing risks per step, fitted with survival methods.

A run ends after its ``T``-th model call by one cause: ``resolve`` (it ended
itself or the task-giver ended it, and it was resolved), ``give_up`` (ended
the same way, unresolved: a wrong answer, giving up, a false claim) or
``error`` (a model-API fault it did not survive: the call ``T = steps + 1``
failed). Every other ending (the recorded harness's own step, message,
error, cost, token or time limit, a detector stop, an unknown label) is a
**censored** observation at ``T = steps``: the run survived that many calls
and would have gone on; the limit is the harness's budget, not the world's.
A run stopped while in a loop (its last calls repeats of one call) is
censored where the loop began (``T = steps - trailing_repeats``): a model in
a loop is at risk of no ending until it is out (``world.policy.ends_in_loop``
false in a calibrated world), so its loop's calls are no time at risk.
A natural ending whose resolution is unknown counts as ``resolve`` with
weight ``p`` and ``give_up`` with weight ``1 - p``, ``p`` the resolved share
of the natural endings that are known (1 when none is).

The world (:class:`~sim.world.params.EndingsParams`) has piecewise-constant
per-step hazards over step bins and a per-run gamma frailty ``Z`` (mean 1,
variance ``theta``) shared by the causes, so the cause mix of each bin does
not depend on ``Z``:

- **bins**: edges at quantiles of the event times (about
  :data:`EVENTS_PER_BIN` events each, at most :data:`MAX_BINS`), with a
  first bin of hazard 0 before the earliest event;
- **per-step counts**: events by cause and runs at risk at each step, from
  lifelines' ``survival_table_from_events`` (censoring handled there); the
  Nelson-Aalen cumulative hazard of each cause (lifelines'
  ``NelsonAalenFitter``, other causes and the harness's stops censored) is
  kept for checks (:attr:`EndingsFit.cumulative`);
- **frailty**: ``theta`` by maximum likelihood of the all-cause lengths under
  the piecewise model with gamma frailty, ``S(t) = (1 + theta L(t))^(-1/theta)``
  with ``L`` the baseline's cumulative hazard (censored runs contribute
  ``S(T)``, events ``S(T - 1) - S(T)``), estimated directly from the lengths'
  over-dispersion against the piecewise hazard; kept only when the
  likelihood-ratio test against ``theta = 0`` rejects at 5% and there are at
  least :data:`MIN_FRAILTY_EVENTS` events (else 0); the baseline hazard of
  each bin is the maximum-likelihood one under that ``theta`` (with
  ``theta = 0``: events / run-steps at risk in the bin, the discrete-time
  estimate ``-log(1 - d / E)`` per step);
- **size link**: given each run's log size multiplier ``x`` (the shrunken
  random effect of its outputs, :mod:`sim.calibration.estimate`), the
  exponent ``b`` of ``S = exp(x)`` in the run's hazards (its cumulative
  hazard ``L(t) exp(b x)``, proportional hazards with ``x`` as covariate) by
  maximum likelihood, the bins' hazards (and a fitted frailty's variance)
  refitted with it; kept when the likelihood-ratio test against ``b = 0``
  rejects at 5% and there are at least :data:`MIN_FRAILTY_EVENTS` events
  (else 0): runs whose sizes, and so whose growth per step, are larger last
  longer (``b < 0``) or shorter;
- **causes**: each bin's total hazard split by its events' causes.

The simulate-and-compare search (:mod:`sim.calibration.search`) does not
refit any of this; it may scale the hazards, the frailty and the give-up
hazard (:class:`~sim.calibration.build.Adjustment`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

EVENTS_PER_BIN = 12
"""Events per step bin the bins aim at."""
MAX_BINS = 10
"""Most step bins (the first, before the earliest event, aside)."""
MIN_FRAILTY_EVENTS = 40
"""Fewest events for which the frailty variance is estimated (else 0)."""
MAX_FRAILTY = 5.0
"""Largest frailty variance the fit considers."""
MAX_SIZE_LINK = 5.0
"""Largest exponent (either sign) of the size multiplier in the hazards."""
CAUSES: tuple[str, ...] = ("resolve", "give_up", "error")
_NATURAL = ("agent", "task_giver")


@dataclass
class EndingsFit:
    """The fitted endings of one class (see the module docstring): bin edges
    (first step of each bin, 1-based), per-step hazards by cause in each bin,
    the frailty variance, the counts they came from (events by cause; per
    bin, events and run-steps at risk), and each cause's Nelson-Aalen
    cumulative hazard at steps ``1..max``."""

    edges: list[int]
    hazards: dict[str, list[float]]
    frailty: float
    events: dict[str, float]
    censored: int
    bin_events: list[float] = field(default_factory=list)
    bin_exposure: list[float] = field(default_factory=list)
    cumulative: dict[str, np.ndarray] = field(default_factory=dict)
    note: str = ""
    size_link: float = 0.0

    def section(self, hazard_scale: float = 1.0, frailty_scale: float = 1.0,
                give_up_scale: float = 1.0) -> dict:
        """The world's ``endings`` section, hazards multiplied by
        ``hazard_scale`` (the give-up hazard also by ``give_up_scale``) and the
        frailty variance by ``frailty_scale`` (each hazard cut to 100 per step);
        ``size_link`` only when it is not 0."""
        def scaled(name: str, k: float) -> list[float]:
            return [round(min(100.0, h * k), 8) for h in self.hazards[name]]

        return {"edges": list(self.edges),
                "resolve": scaled("resolve", hazard_scale),
                "give_up": scaled("give_up", hazard_scale * give_up_scale),
                "error": scaled("error", hazard_scale),
                "frailty": round(min(MAX_FRAILTY, self.frailty * frailty_scale), 6),
                **({"size_link": round(self.size_link, 6)} if self.size_link else {})}


def observations(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(times, cause index, weight)`` rows of ``runs`` (columns ``steps``,
    ``category``, ``resolved``): cause -1 for a censored run; a natural ending
    of unknown resolution gives two rows (see the module docstring)."""
    times, causes, weights, _ = observation_rows(runs)
    return times, causes, weights


def observation_rows(runs: pd.DataFrame
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`observations` and, per row, the position of its run in ``runs``."""
    steps = runs["steps"].to_numpy(np.int64)
    stuck = (runs["trailing_repeats"].to_numpy(np.int64) if "trailing_repeats" in runs
             else np.zeros(len(steps), dtype=np.int64))
    cats = runs["category"].to_numpy(object)
    resolved = runs["resolved"].to_numpy(object)
    natural = np.isin(cats, _NATURAL)
    known = natural & np.array([r is not None for r in resolved], dtype=bool)
    good = known & np.array([r is True for r in resolved], dtype=bool)
    p = float(good.sum() / known.sum()) if known.any() else 1.0
    times, causes, weights, index = [], [], [], []
    for i, (t, c, r, nat, k) in enumerate(zip(steps, cats, resolved, natural, stuck,
                                              strict=True)):
        if nat:
            t = max(int(t), 1)
            if r is None:
                for cause, w in ((0, p), (1, 1.0 - p)):
                    if w > 0:
                        times.append(t)
                        causes.append(cause)
                        weights.append(w)
                        index.append(i)
                continue
            times.append(t)
            causes.append(0 if r else 1)
        elif c == "model_error":
            times.append(int(t) + 1)
            causes.append(2)
        else:  # censored: at risk of an ending until its final loop began
            times.append(max(1, int(t) - int(k)) if t > 0 else 0)
            causes.append(-1)
        weights.append(1.0)
        index.append(i)
    return (np.asarray(times, dtype=np.int64), np.asarray(causes, dtype=np.int64),
            np.asarray(weights, dtype=float), np.asarray(index, dtype=np.int64))


def _bins(times: np.ndarray, causes: np.ndarray, weights: np.ndarray) -> list[int]:
    """Bin edges: 1, the earliest event time (when above 1), then quantiles of
    the event times so that each bin holds about :data:`EVENTS_PER_BIN`."""
    ev = causes >= 0
    if not ev.any():
        return [1]
    t = times[ev]
    w = weights[ev]
    first = int(t.min())
    edges = [1] if first <= 1 else [1, first]
    k = int(np.clip(round(float(w.sum()) / EVENTS_PER_BIN), 1, MAX_BINS))
    if k > 1:
        order = np.argsort(t, kind="stable")
        cum = np.cumsum(w[order]) / w.sum()
        for q in np.arange(1, k) / k:
            edge = int(t[order][np.searchsorted(cum, q)]) + 1
            if edges[-1] < edge <= int(t.max()):  # the last bin keeps some events
                edges.append(edge)
    return edges


def _counts(times: np.ndarray, causes: np.ndarray, weights: np.ndarray, horizon: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Runs at risk at steps ``0..horizon`` (lifelines' survival table: the
    risk set at each recorded time, carried back to the steps before it) and
    events by cause at each step (rows: :data:`CAUSES`)."""
    from lifelines.utils import survival_table_from_events

    table = survival_table_from_events(times, causes >= 0, weights=weights)
    risk = table["at_risk"]
    risk.index = risk.index.to_numpy(float).astype(np.int64)
    at_risk = (risk.reindex(np.arange(horizon + 1)).bfill().fillna(0.0)
               .to_numpy(float))
    events = np.zeros((len(CAUSES), horizon + 1))
    for k in range(len(CAUSES)):
        sel = causes == k
        if sel.any():
            np.add.at(events[k], np.clip(times[sel], 0, horizon), weights[sel])
    events[:, 0] = 0.0
    return at_risk, events


def _nelson_aalen(times: np.ndarray, causes: np.ndarray, weights: np.ndarray, horizon: int
                  ) -> dict[str, np.ndarray]:
    """Each cause's Nelson-Aalen cumulative hazard at steps ``1..horizon``
    (lifelines; the other causes and censored runs as censoring)."""
    from lifelines import NelsonAalenFitter

    out = {}
    grid = np.arange(1, horizon + 1)
    for k, name in enumerate(CAUSES):
        fitter = NelsonAalenFitter(nelson_aalen_smoothing=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitter.fit(times, causes == k, weights=weights)
        out[name] = np.asarray(fitter.cumulative_hazard_at_times(grid), dtype=float)
    return out


def _frailty_loglik(theta: float, lam: np.ndarray, step_bin: np.ndarray,
                    times: np.ndarray, event: np.ndarray, weights: np.ndarray,
                    mult: np.ndarray | None = None) -> float:
    """Log-likelihood of the all-cause lengths: per-step hazards ``lam`` of
    each bin, gamma frailty of variance ``theta`` (0: none), each row's
    cumulative hazard times ``mult`` (its run's ``exp(b x)``; None: 1)."""
    cum = np.concatenate(([0.0], np.cumsum(lam[step_bin[1:]])))  # L(t), t = 0..horizon
    t = np.clip(times, 0, len(cum) - 1)
    scale = 1.0 if mult is None else mult

    def log_s(x: np.ndarray) -> np.ndarray:
        if theta <= 1e-9:
            return -x
        return -np.log1p(theta * x) / theta

    ls_t = log_s(cum[t] * scale)
    ls_prev = log_s(cum[np.maximum(t - 1, 0)] * scale)
    with np.errstate(divide="ignore"):
        ev = ls_prev + np.log(-np.expm1(np.minimum(ls_t - ls_prev, -1e-300)))
    ll = np.where(event, ev, ls_t)
    return float((weights * ll).sum())


def fit_endings(runs: pd.DataFrame, size_effect: np.ndarray | None = None
                ) -> EndingsFit | None:
    """The competing-risks endings of ``runs`` (see the module docstring), or
    None when no run ended by a cause (every run censored, or no runs);
    ``size_effect``, per run of ``runs``, its log size multiplier (None: no
    size link is fitted)."""
    from scipy.optimize import minimize

    if runs.empty:
        return None
    times, causes, weights, row_run = observation_rows(runs)
    if not (causes >= 0).any():
        return None
    horizon = int(max(times.max(), 1))
    edges = _bins(times, causes, weights)
    at_risk, events = _counts(times, causes, weights, horizon)
    step_bin = np.zeros(horizon + 1, dtype=np.int64)
    for b, e in enumerate(edges):
        step_bin[e:] = b
    nb = len(edges)
    d = np.array([[events[k][step_bin == b].sum() for b in range(nb)]
                  for k in range(len(CAUSES))])
    exposure = np.array([at_risk[1:][step_bin[1:] == b].sum() for b in range(nb)])
    total = d.sum(axis=0)
    q = np.where(exposure > 0, np.minimum(total / np.maximum(exposure, 1e-12), 1 - 1e-9), 0.0)
    lam0 = -np.log1p(-q)
    event = causes >= 0
    theta = 0.0
    lam = lam0
    note = "no frailty"
    n_events = float(weights[event].sum())
    if n_events >= MIN_FRAILTY_EVENTS and nb >= 1:
        live = lam0 > 0

        def negll(x: np.ndarray) -> float:
            th = math.exp(x[0]) if x[0] > -20 else 0.0
            lam_x = np.zeros(nb)
            lam_x[live] = np.exp(x[1:])
            return -_frailty_loglik(th, lam_x, step_bin, times, event, weights)

        x0 = np.concatenate(([math.log(0.3)], np.log(lam0[live])))
        base = -_frailty_loglik(0.0, lam0, step_bin, times, event, weights)
        best = minimize(negll, x0, method="L-BFGS-B",
                        bounds=[(math.log(1e-4), math.log(MAX_FRAILTY))]
                        + [(-20.0, 5.0)] * int(live.sum()))
        if best.success or np.isfinite(best.fun):
            lr = 2 * (base - float(best.fun))
            if lr > 3.841:
                theta = float(math.exp(best.x[0]))
                lam = np.zeros(nb)
                lam[live] = np.exp(best.x[1:])
                note = (f"gamma frailty variance {theta:.3f} by maximum likelihood "
                        f"(likelihood ratio {lr:.1f} against none)")
            else:
                note = f"no frailty (likelihood ratio {lr:.2f} against none, under 3.84)"
    else:
        note = f"no frailty ({n_events:.0f} events, fewer than {MIN_FRAILTY_EVENTS})"
    link = 0.0
    if size_effect is not None and n_events >= MIN_FRAILTY_EVENTS:
        x = np.asarray(size_effect, dtype=float)[row_run]
        if np.isfinite(x).all() and float(np.ptp(x)) > 0:
            link, theta, lam, link_note = _size_link(theta, lam, step_bin, times, event,
                                                     weights, x)
            note += f"; {link_note}"
    share = np.where(total > 0, d / np.maximum(total, 1e-12), 0.0)
    hazards = {name: [float(lam[b] * share[k][b]) for b in range(nb)]
               for k, name in enumerate(CAUSES)}
    counts = {name: float(d[k].sum()) for k, name in enumerate(CAUSES)}
    censored = int((causes < 0).sum())
    note = (f"competing risks per step over {nb} step bins from {len(runs)} runs: "
            f"{counts['resolve']:.0f} resolved, {counts['give_up']:.0f} unresolved, "
            f"{counts['error']:.0f} faults, {censored} stopped by the recorded harness's "
            f"limits (censored); {note}")
    return EndingsFit(edges=list(edges), hazards=hazards, frailty=theta, events=counts,
                      censored=censored, bin_events=[float(v) for v in total],
                      bin_exposure=[float(v) for v in exposure],
                      cumulative=_nelson_aalen(times, causes, weights, horizon), note=note,
                      size_link=link)


def _size_link(theta: float, lam: np.ndarray, step_bin: np.ndarray, times: np.ndarray,
               event: np.ndarray, weights: np.ndarray, x: np.ndarray
               ) -> tuple[float, float, np.ndarray, str]:
    """``(b, theta, hazards, note)``: the exponent of the size multiplier
    ``exp(x)`` in each row's hazards by maximum likelihood with the bins'
    hazards refitted, and the frailty variance refitted with them when
    ``theta`` (the fit without the link) is not 0 (a frailty fitted alone
    takes up the spread of lengths the sizes explain: held, it would shrink
    ``b`` toward 0); or ``(0, theta, lam, note)`` when the likelihood-ratio
    test against ``b = 0`` does not reject at 5%."""
    from scipy.optimize import minimize

    live = lam > 0
    if not live.any():
        return 0.0, theta, lam, "no size link (no hazard)"
    base = -_frailty_loglik(theta, lam, step_bin, times, event, weights)
    free = theta > 0  # the frailty refitted with the link

    def unpack(v: np.ndarray) -> tuple[float, float, np.ndarray]:
        lam_v = np.zeros(len(lam))
        lam_v[live] = np.exp(v[1 + free:])
        return float(v[0]), math.exp(v[1]) if free else theta, lam_v

    def negll(v: np.ndarray) -> float:
        b, th, lam_v = unpack(v)
        return -_frailty_loglik(th, lam_v, step_bin, times, event, weights, np.exp(b * x))

    start = [0.0] + ([math.log(theta)] if free else []) + list(np.log(lam[live]))
    bounds = ([(-MAX_SIZE_LINK, MAX_SIZE_LINK)]
              + ([(math.log(1e-4), math.log(MAX_FRAILTY))] if free else [])
              + [(-20.0, 5.0)] * int(live.sum()))
    best = minimize(negll, np.array(start), method="L-BFGS-B", bounds=bounds)
    lr = 2 * (base - float(best.fun))
    if not np.isfinite(best.fun) or lr <= 3.841:
        return 0.0, theta, lam, (f"no size link (likelihood ratio {lr:.2f} against none, "
                                 f"under 3.84)")
    b, th, fitted = unpack(best.x)
    return b, th, fitted, (f"hazards x size multiplier ^ {b:.3f} by maximum likelihood "
                           f"(likelihood ratio {lr:.1f} against none"
                           + (f"; frailty variance refitted with it: {th:.3f})" if free
                              else ")"))
