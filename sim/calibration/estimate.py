"""Direct estimates: what the traces tell without simulating.

For each task class (:mod:`sim.calibration.classes`), from its runs:

- **first prompt**: the runs' first prompts (empirical; the prefix the smallest);
- **sizes**: ``log size = run effect + call effect``. The run effect is a
  random effect estimated from the outputs (the variance between runs of the
  mean log output less its within-run part, method of moments; each run's
  effect shrunk toward 0 by ``tau^2 / (tau^2 + s^2 / n)``); it becomes the
  per-run size multiplier (lognormal, median 1, log-sd tau). Every size is
  divided by its run's multiplier and fitted by maximum likelihood (lognormal):
  outputs of calls with tool calls, outputs of calls without (answers and
  messages), the tool results of a call by its first tool, the task-giver's
  replies (observation tokens after a message);
- **observations by step**: the tokens entering the history after a call
  besides its output (tool results and replies, and the framing around
  them) differ by step (a run's first tool result, a greeting's reply):
  their mean per step bin over the mean the world draws per call multiplies
  the sizes drawn at that step (``tokens.by_step``,
  :func:`step_sizes`);
- **rates per fresh decision** (a call that is not a repeat of the previous
  call, nor, with fitted endings, a run's final answer: the ending's, not a
  decision's): ``talk`` (messages to the task-giver other than the run's last
  call), ``validation`` (calls whose tool results were errors), a loop's
  entry and its escapes, from the runs of identical consecutive calls (a
  loop's entry followed by repeats), and the per-call rate of faults that
  ended runs (``persistent``: such runs / calls). After each repeat the model
  stays or escapes: a repeat that the recorded detector answered with a nudge
  (:mod:`sim.calibration.detection`) is a trial of ``escape_after_nudge``,
  any other one that is not the run's last call a trial of ``self_escape``
  (the share of trials followed by a different call; 0.5 without trials, 0
  for ``self_escape`` when only nudges were seen). A loop whose model escapes
  at once is not seen, so the entry rate is the loops seen / (fresh decisions
  x (1 - ``self_escape``)). A run's end cuts its loop short (a censored
  trial, not an escape): loops the recorded harness stopped are no escapes;
- **exits**: ``self_end`` is the share of the runs ended by the agent among
  those ended by the agent or the task-giver; the unsolvable share is the
  unresolved share among them; an unsolvable task's ``need_scale`` is the
  ratio of median productive steps, unresolved to resolved;
- **need**: productive steps (tool calls that are neither errors nor repeats)
  plus the final call, divided by ``need_scale`` for unresolved runs: a
  lognormal by maximum likelihood on their logarithms;
- **endings**: competing risks per step (resolution, giving up or a false
  claim, a fatal fault) with a per-run frailty, the recorded harness's own
  stops censored (:mod:`sim.calibration.survival`, with lifelines), and the
  link between a run's length and its size multiplier (the exponent of the
  run's effect above in its hazards, ``endings.size_link``);
- **cache**: a class whose traces read the cache and never write it has the
  provider's automatic caching. A cached class's hits are fitted as the
  provider makes them (``world.cache.hits``, :func:`cache_hits`): the share
  of runs of two calls or more any of whose calls reads (``run_share``: hits
  cluster by run), and in those runs the share of first calls that read
  (``first_hit``) and the token share they read;
  the share of later calls that read, by call bin (calls 2, 3-5, 6-10,
  11-20, 21-50, 51-100, 101+, bins of fewer than :data:`MIN_HIT_CELL` calls
  merged into the one before) and by gap bin (the seconds since the previous
  call ended, split in two where the hit shares differ most when the split
  is significant, :func:`_gap_cut`), each cell
  shrunk toward its call bin's share by :data:`HIT_SHRINK` pseudo-calls;
  of the hits, the tokens read per token of the previous prompt
  (``read_ratio``, token-weighted over the hits that read at least
  :data:`PARTIAL_CUT` of it) and the share that read less (``partial``, with
  the empirical distribution of what they read). The gap bins' prior edges
  are the TTLs providers document (:data:`PROVIDER_TTLS_S`), and the entry's
  lifetime (``ttl_s``) is the first of them after which the calls stop
  hitting, when the gaps reach that far (:func:`_fitted_ttl`). Classes of one
  provider family share strength: each class's hit parameters are shrunk
  toward the family's pooled fit by an empirical-Bayes weight of its count
  of the parameter's units (runs, first calls, later calls, hits), the prior
  strength from the classes' spread in that unit (:func:`cache_hits`,
  :func:`prior_runs`); a class none of whose runs
  reads (``run_share`` 0: a model or deployment that does not cache) is kept
  out of that pooling. The
  older per-call shares (``miss``, the share read, ``first_prompt_cached``)
  are still estimated for the notes;
- **latency**: ``latency_s = ttft + output / decode + prompt / prefill`` by
  NNLS over timed calls; replies' and tools' times from the gaps between calls.

Across classes: **prices** per model by non-negative least squares of the
recorded call costs on the token counts (the cache prices, when the traces
never use the cache, at 0.1 and 1.25 times the input price), else the
catalogue's; the harness's **limits** as the traces state them: a step limit,
else the most steps a run stopped by the step limit reached, else a message
limit over the mean messages per call. Runs with no calls count where they
can (endings, limits, exits) and add nothing to per-call estimates.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from sim.calibration.data import Traces
from sim.calibration.detection import DetectorFit, fit_detector
from sim.calibration.limits import limits
from sim.calibration.prices import PriceEstimate, estimate_prices
from sim.calibration.survival import EndingsFit, fit_endings
from sim.world.distributions import BaseDistribution, Empirical, Fixed, Lognormal, Mixture

# ---------------------------------------------- per-value fits (tokens, seconds)

def _lognormal(values, floor: float = 1.0) -> BaseDistribution:
    """Lognormal MLE of ``values`` (each at least ``floor``); fixed when they
    are all equal; fixed at ``floor`` when there are none."""
    x = np.maximum(np.asarray(values, dtype=float), floor)
    if x.size == 0:
        return Fixed(value=floor)
    if np.ptp(x) == 0:
        return Fixed(value=float(x[0]))
    return Lognormal.fit(x)


MIXTURE_MIN = 40
"""Fewest values for which a size may be a two-lognormal mixture."""
MIXTURE_POINTS = 20_000
"""More values than this: the two-lognormal mixture is fitted to this many
evenly spaced quantiles of them (the empirical distribution compressed, so a
fit's time does not grow with the traces); its BIC is still on every value."""


def _size(values, floor: float = 1.0) -> BaseDistribution:
    """A size distribution of ``values``: a lognormal, or a mixture of two
    lognormals when it has the lower BIC (at least :data:`MIXTURE_MIN` values;
    both by maximum likelihood on the logarithms)."""
    single = _lognormal(values, floor)
    x = np.log(np.maximum(np.asarray(values, dtype=float), floor))
    if x.size < MIXTURE_MIN or not isinstance(single, Lognormal) or single.sigma == 0:
        return single
    points = x if x.size <= MIXTURE_POINTS else np.quantile(
        x, (np.arange(MIXTURE_POINTS) + 0.5) / MIXTURE_POINTS)
    mixed = Mixture.fit(np.exp(points), k=2)
    if len(mixed.components) < 2:
        return single

    def loglik(d) -> float:
        parts = d.components if isinstance(d, Mixture) else (d,)
        weights = d.probabilities if isinstance(d, Mixture) else (1.0,)
        dens = sum(w * np.exp(-0.5 * ((x - math.log(c.median)) / max(c.sigma, 1e-9)) ** 2)
                   / (max(c.sigma, 1e-9) * math.sqrt(2 * math.pi))
                   for w, c in zip(weights, parts, strict=True))
        return float(np.log(np.maximum(dens, 1e-300)).sum())

    bic1 = -2 * loglik(single) + 2 * math.log(x.size)
    bic2 = -2 * loglik(mixed) + 5 * math.log(x.size)
    return mixed if bic2 < bic1 else single


def _duration(values) -> tuple[float, float]:
    """``(median seconds, log-sd)`` of positive durations, robustly: the median
    and the interquartile range of the logs / 1.349 (gaps between calls mix
    tool time with the harness's own, so their tails are not the tool's)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if x.size < 2:
        return (float(x[0]) if x.size else 0.001, 0.0)
    logs = np.log(x)
    q25, q50, q75 = np.percentile(logs, [25, 50, 75])
    return float(np.exp(q50)), float(min((q75 - q25) / 1.349, 3.0))


def _run_effects(calls: pd.DataFrame, final: np.ndarray | None = None
                 ) -> tuple[pd.Series, float]:
    """Each run's shrunken log size effect (indexed by run_id) and tau, from
    the logs of its outputs: an answer's less the answers' offset from tool
    calls (the mean within-run difference, runs with both kinds weighted
    alike), then all less the mean of the runs' means (runs weighted alike,
    as the world draws one multiplier per run). Call-weighted means per kind
    lean toward long runs, so when a run's size and its length are linked
    they would set short runs' effects (mostly the answer) against long
    runs' (mostly tool calls) and hide the link. ``final`` (a mask of the
    calls that are final answers, sized apart from messages,
    :func:`final_answers`): final answers and messages each less their own
    offset, so that a run whose only answer is a short final one is not
    taken for a run of small sizes."""
    y = np.log(np.maximum(calls["output"].to_numpy(float), 1.0))
    kind = calls["text"].to_numpy(bool)
    run = calls["run_id"].to_numpy()
    if final is not None:
        kinds = np.where(final, 2, np.where(kind, 1, 0))
        by_kinds = pd.DataFrame({"run": run, "k": kinds, "y": y}).groupby(
            ["run", "k"], sort=False)["y"].mean().unstack()
        base = 0 if 0 in by_kinds.columns else 1
        for k in (1, 2):
            if k == base or k not in by_kinds.columns or base not in by_kinds.columns:
                continue
            pair = by_kinds[[base, k]].dropna()
            y[kinds == k] -= (float((pair[k] - pair[base]).mean()) if len(pair)
                              else float(by_kinds[k].mean() - by_kinds[base].mean()))
    elif kind.any() and not kind.all():
        by_kind = pd.DataFrame({"run": run, "k": kind, "y": y}).groupby(
            ["run", "k"], sort=False)["y"].mean().unstack()
        both = by_kind.dropna()
        offset = (float((both[True] - both[False]).mean()) if len(both)
                  else float(by_kind[True].mean() - by_kind[False].mean()))
        y[kind] -= offset
    frame = pd.DataFrame({"run": run, "y": y})
    frame["y"] -= float(frame.groupby("run", sort=False)["y"].mean().mean())
    g = frame.groupby("run", sort=False)["y"]
    n, mean = g.size(), g.mean()
    dev = frame["y"] - g.transform("mean")
    dof = max(1, len(frame) - len(n))
    within = float((dev ** 2).sum() / dof)
    tau2 = max(0.0, float(mean.var(ddof=1)) - float((within / n).mean())) if len(n) > 1 else 0.0
    shrink = tau2 / (tau2 + within / n) if tau2 > 0 else n * 0.0
    return shrink * mean, math.sqrt(tau2)


FINAL_MIN = 10
"""Fewest final answers, and fewest messages, for which final answers may be
sized apart from messages."""
FINAL_ALPHA = 0.05
"""Level of the likelihood-ratio test that sizes final answers apart."""


def final_answers(calls: pd.DataFrame, scale: np.ndarray, tau: float
                  ) -> tuple[np.ndarray | None, str]:
    """``(mask of the calls that are final answers, note)`` when a run's final
    answer (its last call, without tool calls) is sized apart from its
    messages to the task-giver (``tokens.final_output``), else ``(None,
    note)``. Kept when both have at least :data:`FINAL_MIN` calls and the
    likelihood-ratio test of two lognormals against one (their call-level
    sizes, :func:`call_level`; 2 degrees of freedom) rejects at
    :data:`FINAL_ALPHA`: agents whose last words are a short sign-off or a
    transfer, where messages carry the conversation."""
    from scipy import stats

    text = calls["text"].to_numpy(bool)
    final = text & calls["last"].to_numpy(bool)
    message = text & ~final
    if int(final.sum()) < FINAL_MIN or int(message.sum()) < FINAL_MIN:
        return None, ""
    logs = np.log(call_level(calls["output"].to_numpy(float)[text], scale[text], tau))
    is_final = final[text]
    a, b = logs[is_final], logs[~is_final]

    def nll(x: np.ndarray) -> float:
        return 0.5 * x.size * math.log(max(float(x.var()), 1e-12))

    lr = 2.0 * (nll(logs) - nll(a) - nll(b))
    p = float(stats.chi2.sf(lr, 2))
    note = (f"final answers ({a.size}, log mean {a.mean():.2f}, sd {a.std():.2f}) against "
            f"messages ({b.size}, {b.mean():.2f}, {b.std():.2f}): likelihood ratio {lr:.1f}, "
            f"p {p:.2g}")
    if p >= FINAL_ALPHA:
        return None, note + ": sized alike"
    return final, note + ": sized apart (tokens.final_output)"


def call_level(values: np.ndarray, scale: np.ndarray, tau: float, floor: float = 1.0
               ) -> np.ndarray:
    """Sizes as one call of a run with multiplier 1 would have them: each value
    divided by its run's (shrunken) multiplier ``scale``, its log deviation
    from the mean then rescaled so that the log variance is the observed one
    less ``tau^2`` (method of moments for ``log size = run effect + call
    effect``; dividing by a shrunken estimate alone would also remove part of
    the call's own variation)."""
    x = np.maximum(np.asarray(values, dtype=float), floor)
    if x.size < 2:
        return x
    logs = np.log(x)
    target = max(float(logs.var()) - tau ** 2, 0.01 * float(logs.var()))
    z = logs - np.log(scale)
    dev = z - z.mean()
    current = float(dev.var())
    if current <= 0:
        return np.exp(z)
    return np.exp(z.mean() + dev * math.sqrt(target / current))


def _nnls_latency(calls: pd.DataFrame) -> tuple[float, float, float | None]:
    from scipy.optimize import nnls

    c = calls[np.isfinite(calls["latency_s"])]
    if len(c) < 3:
        return 0.5, 75.0, None
    a = np.column_stack([np.ones(len(c)), (c["output"] + c["reasoning"]).to_numpy(float),
                         c["prompt"].to_numpy(float)])
    coef, _ = nnls(a, c["latency_s"].to_numpy(float))
    ttft, per_out, per_in = (float(v) for v in coef)
    decode = 1.0 / per_out if per_out > 1e-9 else 1e9
    prefill = 1.0 / per_in if per_in > 1e-12 else None
    return ttft, decode, prefill


def _gaps(calls: pd.DataFrame) -> pd.Series:
    """Seconds between the end of each call and the start of the next call of
    its run (NaN for a run's last call or without timestamps)."""
    nxt = calls.groupby("run_id", sort=False)["started_s"].shift(-1)
    return nxt - calls["started_s"] - calls["latency_s"]


# ------------------------------------------------------- the direct estimates

MAX_TOOLS = 20
"""Tools kept by name (the most called); the rest share one tool, ``other_tools``."""
OTHER_TOOLS = "other_tools"


@dataclass
class ToolEstimate:
    """One tool: its share of calls, result size and duration."""

    name: str
    calls: int
    result: BaseDistribution
    duration: tuple[float, float]  # (median seconds, log-sd)


@dataclass
class ClassEstimate:
    """The direct estimates of one task class (see the module docstring)."""

    name: str
    runs: int
    model: str
    first_prompts: list[int]
    output_tool: BaseDistribution
    output_text: BaseDistribution
    run_sigma: float
    tool_calls: dict[str, int]
    reply: BaseDistribution
    talk: float
    validation: float
    loop: float
    self_escape: float
    escape_after_nudge: float
    persistent: float
    self_end: float
    unsolvable: float
    need_scale: float
    need_mu: float
    need_sigma: float
    ttft_s: float
    decode_tps: float
    prefill_tps: float | None
    reply_latency: tuple[float, float] | None
    thinking: BaseDistribution | None
    automatic_cache: bool = False
    first_prompt_cached: float = 0.0
    cache_miss: float = 0.0
    cache_share: BaseDistribution | None = None
    cache_hits: dict[str, Any] | None = None
    by_step: dict[str, Any] | None = None
    endings: EndingsFit | None = None
    output_final: BaseDistribution | None = None
    run_effects: pd.Series | None = None
    """Each run's log size effect (by run id)."""
    notes: dict[str, str] = field(default_factory=dict)


@dataclass
class Estimates:
    """Everything estimated directly, for :mod:`sim.calibration.build`."""

    classes: list[ClassEstimate]
    tools: list[ToolEstimate]
    prices: dict[str, PriceEstimate]
    step_limit: int | None
    error_limit: int | None
    cost_limit: float | None
    conversation: bool
    cached: bool
    max_output: int
    max_prompt: int
    notes: dict[str, str] = field(default_factory=dict)
    token_limit: int | None = None  # prompt tokens (output_limit: output tokens)
    output_limit: int | None = None
    detector: DetectorFit | None = None
    context_window: int | None = None


# ------------------------------------------------------------------ classes
def estimate_class(name: str, traces: Traces, tools: list[str], *,
                   with_endings: bool = True) -> ClassEstimate:
    """The direct estimates of the class made of all of ``traces``' runs
    (``with_endings`` False: no competing-risks endings, the need decides)."""
    runs, calls = traces.runs, traces.calls
    notes: dict[str, str] = {}
    effects, tau = _run_effects(calls)
    final, final_note = final_answers(
        calls, np.exp(calls["run_id"].map(effects).to_numpy(float)), tau)
    if final is not None:
        effects, tau = _run_effects(calls, final)
        notes["final_output"] = final_note
    scale = np.exp(calls["run_id"].map(effects).to_numpy(float))
    text = calls["text"].to_numpy(bool)
    out = calls["output"].to_numpy(float)
    output_tool = _size(call_level(out[~text], scale[~text], tau))
    spoken = text if final is None else text & ~final
    output_text = _size(call_level(out[spoken], scale[spoken], tau))
    output_final = None if final is None else _size(call_level(out[final], scale[final], tau))
    notes["output"] = (f"lognormal (or two-lognormal mixture, by BIC) MLE of "
                       f"{int((~text).sum())} tool-call and {int(text.sum())} answer/message "
                       f"outputs, each divided by its run's multiplier")
    notes["run_scale"] = (f"random effect of log output between {traces.n} runs (method of "
                          f"moments): tau = {tau:.3f}")

    last = calls["last"].to_numpy(bool)
    repeat = calls["repeat"].to_numpy(bool)
    errors = calls["errors"].to_numpy() > 0
    nudged = (calls["nudged"].to_numpy(bool) if "nudged" in calls
              else np.zeros(len(calls), dtype=bool))
    talk, validation, loop, self_escape, escape, notes["rates"] = _rates(
        text, last, repeat, errors, nudged, with_endings)
    cats = runs["category"].to_numpy(object)
    faults = int((cats == "model_error").sum())
    # a run that failed before its first reply made one (failed) call too
    attempts = len(calls) + int((runs["steps"].to_numpy() == 0).sum())
    persistent = min(1.0, faults / max(attempts, 1))
    notes["rates"] += f"; {faults} runs ended by faults over {len(calls)} calls"

    natural = np.isin(cats, ("agent", "task_giver"))
    agent = int((cats == "agent").sum())
    self_end = agent / int(natural.sum()) if natural.any() else 1.0
    if not (cats == "task_giver").any():
        self_end = 1.0
    productive = (calls.assign(p=(~text & ~repeat & ~errors))
                  .groupby("run_id", sort=False)["p"].sum()
                  .reindex(runs["run_id"]).fillna(0.0).to_numpy(float) + 1.0)
    resolved = runs["resolved"].to_numpy(object)
    known = np.array([r is not None for r in resolved]) & natural
    good = known & np.array([r is True for r in resolved])
    bad = known & np.array([r is False for r in resolved])
    unsolvable = bad.sum() / known.sum() if known.any() else 0.0
    need_scale = 1.0
    if good.any() and bad.any():
        need_scale = float(np.clip(np.median(productive[bad]) / np.median(productive[good]),
                                   1.0, 5.0))
    need = np.where(bad, productive / need_scale, productive)
    logs = np.log(np.maximum(need[runs["steps"].to_numpy() > 0], 1.0))
    if logs.size == 0:
        logs = np.zeros(1)
    need_mu, need_sigma = float(logs.mean()), max(float(logs.std()), 0.05)
    notes["exits"] = (f"{agent} of {int(natural.sum())} natural ends by the agent; "
                      f"{int(bad.sum())} of {int(known.sum())} unresolved")
    notes["need"] = (f"lognormal MLE of productive steps + 1 of {traces.n} runs (unresolved "
                     f"ones / {need_scale:.2f})")

    tool_of = np.where(calls["tool"].isin(tools), calls["tool"], OTHER_TOOLS)
    counts = pd.Series(tool_of[~text & ~repeat]).value_counts()
    tool_calls = {str(k): int(v) for k, v in counts.items()}

    obs = calls["observation"].to_numpy(float)
    said = text & ~last & (obs > 0)
    reply = _size(call_level(obs[said], scale[said], tau))
    ttft, decode, prefill = _nnls_latency(calls)
    gaps = _gaps(calls).to_numpy(float)
    reply_gaps = gaps[text & ~last]
    reply_latency = _duration(reply_gaps) if np.isfinite(reply_gaps).any() else None
    reasoning = calls["reasoning"].to_numpy(float)
    thought = reasoning > 0
    thinking = (_lognormal(call_level(reasoning[thought], scale[thought], tau))
                if thought.any() else None)
    model = runs["model"].value_counts().index[0] if len(runs) else ""
    automatic, writes, warm, miss, share = _cache(calls, notes)
    by_step = step_sizes(calls)
    if by_step is not None:
        notes["by_step"] = by_step.pop("note")
    hits = cache_hits(calls) if (automatic or writes) else None
    if hits is not None:
        notes["cache"] = hits.pop("note")
    endings = (fit_endings(runs, runs["run_id"].map(effects).fillna(0.0).to_numpy(float))
               if with_endings else None)
    if endings is not None:
        notes["endings"] = endings.note
    return ClassEstimate(
        name=name, runs=traces.n, model=str(model),
        first_prompts=_first_prompts(runs),
        output_tool=output_tool, output_text=output_text, output_final=output_final,
        run_sigma=tau,
        tool_calls=tool_calls, reply=reply, talk=talk, validation=validation, loop=loop,
        self_escape=self_escape, escape_after_nudge=escape, persistent=persistent,
        self_end=self_end,
        unsolvable=float(unsolvable), need_scale=need_scale, need_mu=need_mu,
        need_sigma=need_sigma, ttft_s=ttft, decode_tps=decode, prefill_tps=prefill,
        reply_latency=reply_latency, thinking=thinking, automatic_cache=automatic,
        first_prompt_cached=warm if (automatic or writes) else 0.0, cache_miss=miss,
        cache_share=share, cache_hits=hits, by_step=by_step, endings=endings,
        run_effects=effects, notes=notes)


def _rates(text: np.ndarray, last: np.ndarray, repeat: np.ndarray, errors: np.ndarray,
           nudged: np.ndarray, endings: bool) -> tuple[float, float, float, float, float, str]:
    """``(talk, validation, loop, self_escape, escape_after_nudge, note)`` per
    fresh decision (see the module docstring), the three rates scaled to sum
    to at most 0.95 (calls in run order; ``nudged``: a nudge followed the call;
    ``endings``: a run's final answer is its fitted ending, not a decision)."""
    fresh = int((~repeat).sum()) - (int((text & last).sum()) if endings else 0)
    talk_calls = int((text & ~last).sum())
    error_calls = int((~text & ~repeat & errors).sum())
    repeats = int(repeat.sum())
    starts = repeat & ~np.concatenate(([False], repeat[:-1]))
    episodes = int(starts.sum())
    stayed = np.concatenate((repeat[1:], [False]))  # the next call repeats this one
    trial = repeat & ~last  # a repeat the run went on after: stay or escape
    own, after_nudge = trial & ~nudged, trial & nudged
    n_own, n_nudge = int(own.sum()), int(after_nudge.sum())
    self_escape = float((own & ~stayed).sum() / n_own) if n_own else 0.0 if n_nudge else 0.5
    escape = float((after_nudge & ~stayed).sum() / n_nudge) if n_nudge else 0.5
    loop = (episodes / (fresh * (1 - self_escape)) if repeats and self_escape < 1
            else episodes / max(fresh, 1))
    talk = talk_calls / max(fresh, 1)
    validation = error_calls / max(fresh, 1)
    if loop + talk + validation > 0.95:
        total = loop + talk + validation
        loop, talk, validation = (0.95 * v / total for v in (loop, talk, validation))
    note = (f"per fresh decision over {fresh} calls: {talk_calls} messages, "
            f"{error_calls} tool errors, {episodes} loops with {repeats} repeats; "
            f"escapes: {int((own & ~stayed).sum())} of {n_own} repeats on its own, "
            f"{int((after_nudge & ~stayed).sum())} of {n_nudge} nudges")
    return talk, validation, loop, self_escape, escape, note


def _cache(calls: pd.DataFrame, notes: dict[str, str]
           ) -> tuple[bool, int, float, float, BaseDistribution | None]:
    """``(automatic, cache writes, first prompt share cached, miss, share read)``
    of a class's calls (see the module docstring); the note in ``notes``."""
    later = ~calls["call"].eq(calls.groupby("run_id", sort=False)["call"].transform("min"))
    reads = calls["cache_read_tokens"].to_numpy() > 0
    writes = int(calls["cache_write_tokens"].sum())
    automatic = bool(writes == 0 and reads.any())
    first = calls[~later]
    warm = float(np.clip((first["cache_read_tokens"] / np.maximum(first["prompt"], 1)).mean(),
                         0.0, 1.0))
    miss, share = 0.0, None
    if automatic or writes:
        miss, share = _cache_reads(calls[later])
        notes["cache"] = (f"{'automatic' if automatic else 'harness'} caching: "
                          + (f"{reads[later.to_numpy()].mean():.0%} of later calls read the "
                             f"cache (miss {miss:.3f}); " if later.any() else
                             "no run has a later call; ")
                          + ("" if share is None else
                             f"median {float(np.median(share.values)):.0%} of the prompt read "
                             f"when it hits (10th percentile "
                             f"{float(np.quantile(share.values, 0.1)):.0%}); ")
                          + f"first prompts {warm:.0%} cached")
    return automatic, writes, warm, miss, share


CALL_EDGES = (2, 3, 6, 11, 21, 51, 101)
"""The call bins a cached class's hits are fitted in (first call of each, 1-based)."""
MIN_HIT_CELL = 30
"""Fewest calls a call bin or a gap bin of the hits keeps (else merged)."""
HIT_SHRINK = 10.0
"""Pseudo-calls that pull a cell's hit share toward its call bin's share."""
PARTIAL_CUT = 0.9
"""A hit reading less than this share of the previous prompt is a partial one."""


def merged_bins(edges: list[float], values: np.ndarray, least: int = MIN_HIT_CELL
                ) -> list[float]:
    """``edges`` (bin starts, increasing; no value lies below the first) with
    bins of fewer than ``least`` of ``values`` merged: from the first bin on,
    bins join the next until they hold that many, and a short last bin joins
    the one before."""
    counts = np.histogram(values, bins=[*edges, math.inf])[0]
    kept, held = [edges[0]], 0
    for lo, count in zip(edges, counts, strict=True):
        if held >= least:
            kept.append(lo)
            held = 0
        held += int(count)
    if held < least and len(kept) > 1:
        kept.pop()
    return kept


STEP_EDGES = (1, 2, 3, 6, 11, 21, 51, 101)
"""The step bins observations are sized in (first model call of each, 1-based)."""


def step_sizes(calls: pd.DataFrame, expected: np.ndarray | None = None
               ) -> dict[str, Any] | None:
    """The ``world.tokens.by_step`` mapping of a class's calls: per step bin
    (:data:`STEP_EDGES`, bins of fewer than :data:`MIN_HIT_CELL` observations
    merged), the mean tokens entering the history after a call besides its
    output (the next prompt less this one and its output: tool results,
    messages and their framing, each call's at least 0) over the mean the
    world draws for a call (``expected``, per
    call: the fitted reply's or its tool's result's mean; None: the observed
    mean at every step), so that the world's observations have the traces'
    mean in every bin (factors to 1%); a ``note`` says what it was fitted from.
    None when nothing enters, when every factor is 1 (to 1%), or one bin stays
    and the world's mean is the traces'."""
    g = calls.groupby("run_id", sort=False)
    n = g.cumcount().to_numpy() + 1
    # what entered the history after a call besides the model's own output: its tool
    # results and messages, and the framing the provider counts around them
    entered = (g["prompt"].shift(-1) - calls["prompt"] - calls["output"]
               - calls["reasoning"]).to_numpy(float)
    answered = np.isfinite(entered)
    obs = np.maximum(entered[answered], 0.0)
    n = n[answered]
    if obs.size == 0 or obs.mean() <= 0:
        return None
    mean = float(obs.mean()) if expected is None else float(expected[answered].mean())
    edges = [int(e) for e in merged_bins(list(STEP_EDGES), n.astype(float))]
    if (len(edges) < 2 and expected is None) or mean <= 0:
        return None
    b = np.searchsorted(edges, n, side="right") - 1
    # to 1%: finer is noise, and a factor a hair off 1 moves a world of fixed sizes off
    # its lattice of prompts (sizes rounded up a token), which per-run KS reads as a misfit
    factors = [round(min(float(obs[b == i].mean()) / mean, 1e3), 2) for i in range(len(edges))]
    if all(f == 1.0 for f in factors):
        return None  # no step differs from the world's own mean
    note = (f"observations by step bin {edges}: mean tokens after a call over the "
            f"world's mean per call ({mean:.0f}), {obs.size} calls: {factors}")
    return {"edges": edges, "observation": factors, "note": note}


def expected_observation(calls: pd.DataFrame, est: ClassEstimate, tools: list[ToolEstimate]
                         ) -> np.ndarray:
    """Per call of a class, the mean tokens the world draws after it (tokens):
    a message's reply or its tool's result (the tool's fitted mean, or
    ``other_tools``'), times the mean of the run's size multiplier."""
    means = {t.name: t.result.mean for t in tools}
    other = means.get(OTHER_TOOLS, float(np.mean(list(means.values()))) if means else 0.0)
    tool = calls["tool"].to_numpy(object)
    result = np.array([means.get(t, other) for t in tool], dtype=float)
    out = np.where(calls["text"].to_numpy(bool), est.reply.mean, result)
    return out * math.exp(est.run_sigma ** 2 / 2)


GAP_SPLIT_CHI2 = 10.83
"""The likelihood-ratio statistic (chi-square, 1 df: 0.1%) a gap split must beat."""


def _gap_cut(gaps: np.ndarray, hit: np.ndarray) -> float | None:
    """The gap (seconds, to 0.1 s) that best splits later calls into two bins
    of different hit shares (the largest binomial likelihood over the
    midpoints of consecutive deciles of ``gaps``, each side at least
    :data:`MIN_HIT_CELL` calls), or None when no split beats
    :data:`GAP_SPLIT_CHI2`."""
    if gaps.size < 2 * MIN_HIT_CELL:
        return None

    def loglik(h: np.ndarray) -> float:
        k, n = float(h.sum()), float(h.size)
        return sum(c * math.log(c / n) for c in (k, n - k) if c > 0)

    whole = loglik(hit)
    deciles = np.unique(np.quantile(gaps, np.linspace(0.1, 0.9, 9)))
    best, best_stat = None, GAP_SPLIT_CHI2
    for a, b in itertools.pairwise(deciles):
        cut = round(float(a + b) / 2, 1)
        low = gaps < cut
        if cut <= 0 or min(int(low.sum()), int((~low).sum())) < MIN_HIT_CELL:
            continue
        stat = 2 * (loglik(hit[low]) + loglik(hit[~low]) - whole)
        if stat > best_stat:
            best, best_stat = cut, stat
    return best


PROVIDER_TTLS_S = (300.0, 600.0, 3600.0, 86400.0)
"""The cache lifetimes providers document (seconds): Anthropic's 5 minutes
(default) and 1 hour (``ttl: "1h"``); OpenAI's automatic cache 5-10 minutes of
inactivity, at most 1 hour in memory, 24 hours extended. Prior gap-bin edges
of the hits and the candidates for a fitted TTL."""
EXPIRED_SHARE = 0.1
"""Calls after a gap of at least a candidate TTL whose hit share is below this
times the share before it: the entry expired there."""


def _hit_frame(calls: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per call of ``calls`` (run order): its 1-based index in its run ``n``,
    ``prompt``, ``read``, the previous prompt ``prev``, the ``gap`` (seconds
    since the previous call ended; NaN untimed), ``hit``, ``cached`` (its run
    reads at some call) and ``judged`` (one row per run of two calls or more,
    or per run when none has two)."""
    g = calls.groupby("run_id", sort=False)
    n = g.cumcount().to_numpy() + 1
    read = calls["cache_read_tokens"].to_numpy(float)
    hit = read > 0
    run_reads = pd.Series(hit).groupby(calls["run_id"].to_numpy(), sort=False).transform("any")
    size = g["prompt"].transform("size").to_numpy()
    several = (n == 1) & (size >= 2)
    return {"n": n, "prompt": calls["prompt"].to_numpy(float), "read": read,
            "prev": g["prompt"].shift(1).to_numpy(float),
            "gap": _gaps(calls).groupby(calls["run_id"], sort=False).shift(1).to_numpy(float),
            "hit": hit, "cached": run_reads.to_numpy(bool),
            "judged": several if several.any() else n == 1}


def _fitted_ttl(gap: np.ndarray, hit: np.ndarray, edges: list[float]) -> float | None:
    """The cache lifetime later calls show (seconds), or None when their gaps
    cannot tell (no candidate of :data:`PROVIDER_TTLS_S` is a kept gap edge):
    the smallest candidate that is a gap edge and after which the hit share
    is below :data:`EXPIRED_SHARE` times the share before it; when hits go on
    after every candidate edge, the smallest candidate above the longest gap
    that hit (twice that gap beyond the last candidate). ``gap`` and ``hit``
    of the timed later calls of cached runs."""
    kept = [t for t in PROVIDER_TTLS_S if t in edges]
    if not kept:
        return None
    for t in kept:
        after, before = gap >= t, gap < t
        if not before.any() or hit[after].mean() < EXPIRED_SHARE * hit[before].mean():
            return t
    longest = float(gap[hit].max())
    return next((t for t in PROVIDER_TTLS_S if t > longest), 2.0 * longest)


def _hit_fit(f: dict[str, np.ndarray], call_edges: list[int], gap_edges: list[float]
             ) -> dict[str, Any]:
    """The hit parameters of the calls ``f`` (:func:`_hit_frame`) in the given
    call and gap bins (see :func:`cache_hits`), with their counts
    (``_runs``, ``_first``, ``_later``: runs judged, first and later calls)."""
    n, prompt, read, prev, gap, hit, cached, judged = (
        f[k] for k in ("n", "prompt", "read", "prev", "gap", "hit", "cached", "judged"))
    run_share = float(cached[judged].mean()) if judged.any() else 1.0
    first = (n == 1) & (prompt > 0) & cached
    later = (n >= 2) & (prompt > 0) & cached
    first_hit = float(hit[first].mean()) if first.any() else 0.0
    hit_first = first & hit
    first_share = float(read[hit_first].sum() / prompt[hit_first].sum()) if hit_first.any() \
        else 1.0
    timed = later & np.isfinite(gap)
    b = np.searchsorted(call_edges, n, side="right") - 1
    k = np.searchsorted(gap_edges, np.maximum(np.nan_to_num(gap, nan=0.0), 0.0),
                        side="right") - 1
    table = []
    for i in range(len(call_edges)):
        row_calls = later & (b == i)
        p_row = float(hit[row_calls].mean()) if row_calls.any() else 1.0
        row = []
        for j in range(len(gap_edges)):
            cell = (row_calls & timed & (k == j)) if len(gap_edges) > 1 else row_calls
            m = int(cell.sum())
            row.append((int(hit[cell].sum()) + HIT_SHRINK * p_row) / (m + HIT_SHRINK))
        table.append(row)
    hits = later & hit & (prev > 0)
    ratio = read[hits] / prev[hits]
    full = ratio >= PARTIAL_CUT
    read_ratio = float(np.clip(read[hits][full].sum() / prev[hits][full].sum(), 0.0, 2.0)) \
        if full.any() else 1.0
    partial = float((~full).mean()) if hits.any() else 0.0
    out: dict[str, Any] = {
        "run_share": run_share, "first_hit": first_hit, "first_share": min(first_share, 1.0),
        "hit": table, "read_ratio": read_ratio, "partial": partial, "partial_share": None,
        "_runs": int(judged.sum()), "_first": int(first.sum()), "_later": int(later.sum()),
        "_hits": int(hits.sum()), "_later_hit": float(hit[later].mean()) if later.any() else 0.0}
    if (~full).any():
        shares = np.clip(ratio[~full], 0.0, 1.0)
        points = np.quantile(shares, np.linspace(0.0, 1.0, 101)) if shares.size > 101 \
            else shares
        out["partial_share"] = Empirical(values=tuple(round(float(v), 6)
                                                      for v in points)).model_dump()
    return out


UNCACHED_HITS: dict[str, Any] = {
    "run_share": 0.0, "first_hit": 0.0, "first_share": 1.0, "edges": [2], "gap_edges_s": [0.0],
    "hit": [[1.0]], "read_ratio": 1.0, "partial": 0.0}
"""The hits of a class with prompts none of whose runs reads the cache: no run cached."""


POOLED_BY: dict[str, tuple[str, ...]] = {
    "_runs": ("run_share",), "_first": ("first_hit", "first_share"), "_later": ("hit",),
    "_hits": ("read_ratio", "partial")}
"""The units a class's hit parameters are counted in, for their pooling: runs
(of two calls or more), first calls and later calls of cached runs, and the
later calls that hit."""

UNIT_NAMES = {"_runs": "runs", "_first": "first calls", "_later": "later calls",
              "_hits": "hits"}


def cache_hits(calls: pd.DataFrame, pooled: pd.DataFrame | None = None,
               strength: float | dict[str, float] = math.inf) -> dict[str, Any] | None:
    """The ``world.cache.hits`` mapping of a cached class's calls (module
    docstring), with a ``note`` saying what it was fitted from; None when no
    call has a prompt, :data:`UNCACHED_HITS` (``run_share`` 0) when no run
    reads. ``calls`` in run order, each run's calls in order.

    Gap bins start at 0, at the split :func:`_gap_cut` finds below the first
    provider TTL (if any), and at each of :data:`PROVIDER_TTLS_S` (the prior
    edges), bins of fewer than :data:`MIN_HIT_CELL` timed later calls merged;
    the entry's lifetime ``ttl_s`` is fitted where the gaps can tell
    (:func:`_fitted_ttl`), else left to the world (the harness's TTL).

    ``pooled``: the calls of every class of the same provider family and
    caching kind (this one's among them). Then each hit parameter
    (``run_share``, ``first_hit``, ``first_share``, every cell of ``hit``,
    ``read_ratio``, ``partial``) is partially pooled: ``w * own + (1 - w) *
    pooled``, the pooled value fitted on the pooled calls in this class's
    bins, with ``w = n / (n + M)`` for a class of ``n`` units of the
    parameter (:data:`POOLED_BY`: runs of two calls or more for
    ``run_share``, first calls for ``first_*``, later calls for ``hit``, hits
    for ``read_ratio`` and ``partial``; a class with none of a parameter's
    units takes the pooled value): a beta-binomial posterior mean's
    weight, the pooled fit counted as ``M`` units of prior evidence
    (``strength``, per unit as :data:`POOLED_BY` names them, or one figure
    for all; estimated from the classes' spread, :func:`prior_runs`), so a
    class of few runs borrows strength from the others and one of hundreds
    keeps its own fit. A TTL the class's own gaps cannot tell is the pooled
    calls'.
    """
    f = _hit_frame(calls)
    n, prompt, gap, hit, cached = f["n"], f["prompt"], f["gap"], f["hit"], f["cached"]
    first = (n == 1) & (prompt > 0) & cached
    later = (n >= 2) & (prompt > 0) & cached
    if not first.any() and not later.any():
        if not (prompt > 0).any():
            return None
        return {**UNCACHED_HITS, "note": (
            f"the provider's hits: none of {int(f['judged'].sum())} runs reads the cache "
            f"(a fact of the class's model or deployment, not a draw: kept out of its "
            f"family's pooling)")}
    call_edges = [int(e) for e in merged_bins(list(CALL_EDGES), n[later].astype(float))]
    timed = later & np.isfinite(gap)
    gaps = np.maximum(gap[timed], 0.0)
    cut = _gap_cut(gaps, hit[timed])
    prior = [0.0, *([] if cut is None or cut >= PROVIDER_TTLS_S[0] else [cut]),
             *PROVIDER_TTLS_S]
    gap_edges = [float(e) for e in merged_bins(prior, gaps)]
    ttl = _fitted_ttl(gaps, hit[timed], gap_edges)
    own = _hit_fit(f, call_edges, gap_edges)
    fit = own
    pseudo = {unit: float(strength if not isinstance(strength, dict) else strength[unit])
              for unit in POOLED_BY}
    w = {unit: own[unit] / (own[unit] + m) if math.isfinite(m) and own[unit] + m > 0 else 0.0
         for unit, m in pseudo.items()}  # no own units and no prior: the pooled fit
    if pooled is not None:
        shared = _hit_fit(_hit_frame(pooled), call_edges, gap_edges)
        fit = {k: (w[unit] * own[k] + (1 - w[unit]) * shared[k])
               for unit, keys in POOLED_BY.items() for k in keys if k != "hit"}
        wl = w["_later"]
        fit["hit"] = [[wl * a + (1 - wl) * c for a, c in zip(ro, rp, strict=True)]
                      for ro, rp in zip(own["hit"], shared["hit"], strict=True)]
        fit["partial_share"] = own["partial_share"] or shared["partial_share"]
        if ttl is None:
            pf = _hit_frame(pooled)
            pl = (pf["n"] >= 2) & (pf["prompt"] > 0) & pf["cached"] & np.isfinite(pf["gap"])
            pg = np.maximum(pf["gap"][pl], 0.0)
            ttl = _fitted_ttl(pg, pf["hit"][pl], [float(e) for e in merged_bins(
                [0.0, *PROVIDER_TTLS_S], pg)])
    out: dict[str, Any] = {
        "run_share": round(fit["run_share"], 6), "first_hit": round(fit["first_hit"], 6),
        "first_share": round(fit["first_share"], 6),
        "edges": call_edges, "gap_edges_s": gap_edges,
        "hit": [[round(v, 6) for v in row] for row in fit["hit"]],
        "read_ratio": round(fit["read_ratio"], 6), "partial": round(fit["partial"], 6)}
    if fit["partial_share"] is not None:
        out["partial_share"] = fit["partial_share"]
    if ttl is not None:
        out["ttl_s"] = ttl
    pooling = "" if pooled is None else (
        "; partially pooled with the classes of its provider family (" + "; ".join(
            f"weight {w[u]:.2f} on its own {own[u]} {UNIT_NAMES[u]} against {pseudo[u]:.1f}"
            f" pseudo-{UNIT_NAMES[u]}" for u in POOLED_BY) + ")")
    out["note"] = (
        f"the provider's hits: {own['run_share']:.0%} of {own['_runs']} runs read the cache at "
        f"all; in those, {own['first_hit']:.0%} of {own['_first']} first calls read "
        f"({own['first_share']:.0%} of their prompt); of {own['_later']} later calls, "
        f"{own['_later_hit']:.0%} read, by call bin "
        f"{call_edges} and gap bin {gap_edges} (seconds); a hit reads "
        f"{own['read_ratio']:.3f} x the previous prompt, {own['partial']:.1%} of hits read "
        f"less than {PARTIAL_CUT:.0%} of it; TTL "
        + ("not told by the gaps (the harness's)" if ttl is None else f"{ttl:.0f} s")
        + pooling)
    return out


def _first_prompts(runs: pd.DataFrame) -> list[int]:
    """The first prompts of the runs with calls, sorted ([1] when none has)."""
    steps = runs["steps"].to_numpy()
    return sorted(int(v) for v in runs["first_prompt"].to_numpy()[steps > 0]) or [1]


def _cache_reads(later: pd.DataFrame) -> tuple[float, BaseDistribution | None]:
    """``(miss probability, share read when it hits)`` of a class's later
    calls: the share of them with no cache read, and the empirical
    distribution (101 quantiles) of ``cache_read_tokens / prompt`` over the
    others (None when none reads)."""
    prompt = later["prompt"].to_numpy(float)
    read = later["cache_read_tokens"].to_numpy(float)
    ok = prompt > 0
    if not ok.any():
        return 0.0, None
    hit = ok & (read > 0)
    miss = float(1.0 - hit.sum() / ok.sum())
    if not hit.any():
        return miss, None
    shares = np.clip(read[hit] / prompt[hit], 0.0, 1.0)
    points = np.quantile(shares, np.linspace(0.0, 1.0, 101)) if shares.size > 101 else shares
    return round(miss, 6), Empirical(values=tuple(round(float(v), 6) for v in points))


# ------------------------------------------------------------------- across
def estimate_tools(traces: Traces, scale_by_run: dict[str, float] | None = None,
                   tau_by_run: dict[str, float] | None = None) -> list[ToolEstimate]:
    """The tools by name (the :data:`MAX_TOOLS` most called, then
    ``other_tools``): result sizes of the calls they started (all tool results
    of that call, at call level: :func:`call_level` with the runs' multipliers
    and the mean tau^2 of their classes), durations as recorded, else from the
    gaps after those calls. The calls of the runs' subagents count too
    (:attr:`~sim.calibration.data.Traces.all_calls`: the children's class
    calls tools from the same list)."""
    calls = traces.all_calls
    tooled = calls[~calls["text"]].copy()
    counts = tooled["tool"].value_counts()
    keep = list(counts.index[:MAX_TOOLS])
    tooled["name"] = np.where(tooled["tool"].isin(keep), tooled["tool"], OTHER_TOOLS)
    scale = (tooled["run_id"].map(scale_by_run).fillna(1.0).to_numpy(float)
             if scale_by_run else np.ones(len(tooled)))
    tooled["scale"] = scale
    tooled["tau2"] = (tooled["run_id"].map(tau_by_run).fillna(0.0).to_numpy(float) ** 2
                      if tau_by_run else 0.0)
    gaps = _gaps(calls).loc[tooled.index]
    tooled["gap"] = np.where(np.isfinite(tooled["tool_s"]), tooled["tool_s"], gaps)
    out = []
    for name, group in tooled.groupby("name", sort=False):
        sizes = call_level(group["results"].to_numpy(float), group["scale"].to_numpy(float),
                           math.sqrt(float(group["tau2"].mean())), floor=0.5)
        out.append(ToolEstimate(str(name), len(group), _lognormal(sizes, floor=0.5),
                                _duration(group["gap"].to_numpy(float))))
    out.sort(key=lambda t: (-t.calls, t.name))
    return out


def cache_family(model: str) -> str:
    """The provider family of a model name, whose classes share one provider's
    cache: the name's first word (after any ``provider/`` route and ``ft:``
    prefix), the OpenAI o-series counted as ``gpt`` (``claude-opus-4-6`` and
    ``claude-sonnet-4-6``: ``claude``; ``deepseek/deepseek-chat``: ``deepseek``)."""
    name = model.lower().rsplit("/", 1)[-1].removeprefix("ft:")
    word = re.split(r"[-:._ ]", name, maxsplit=1)[0]
    return "gpt" if re.fullmatch(r"o\d+|chatgpt", word) else word


def prior_runs(runs: np.ndarray, shares: np.ndarray) -> float:
    """The empirical-Bayes prior strength (pseudo-units) of classes' shares
    ``shares`` over ``runs`` units each (runs, or calls: a share of calls
    counts them as independent, so runs that differ among themselves read as
    classes that differ, and pool less): a beta-binomial's
    ``M = p(1 - p) / tau^2 - 1``, ``p`` the pooled share and ``tau^2`` the
    between-class variance by the method of moments (DerSimonian-Laird):
    ``(sum R_i (p_i - p)^2 - (k - 1) p (1 - p)) / (N - sum R_i^2 / N)``; infinite
    (pool fully) when that is not positive or no class has a unit, at least 0."""
    total = float(runs.sum())
    if total <= 0:
        return math.inf
    p = float((runs * shares).sum() / total)
    spread = float((runs * (shares - p) ** 2).sum()) - (len(runs) - 1) * p * (1 - p)
    denominator = total - float((runs ** 2).sum()) / total
    if spread <= 0 or denominator <= 0 or p * (1 - p) == 0:
        return math.inf
    return max(p * (1 - p) / (spread / denominator) - 1.0, 0.0)


SPREAD_OF = {"_runs": "run_share", "_first": "first_hit", "_later": "_later_hit",
             "_hits": "partial"}
"""The share whose spread across a family's classes sets the prior strength of
the parameters counted in each unit (:data:`POOLED_BY`)."""


def _pool_hits(by_class: list[ClassEstimate], class_calls: list[pd.DataFrame]) -> None:
    """Refits the cache hits of each class that has them, partially pooled
    with the other classes of the same provider family (:func:`cache_family`)
    and caching kind (automatic, or breakpoints) when there are two or more
    (:func:`cache_hits` with ``pooled`` and the group's :func:`prior_runs`,
    one per unit of :data:`POOLED_BY`, from the spread of the share
    :data:`SPREAD_OF` names: classes that all cache every run may still
    differ in how much a hit reads). A class none of whose runs reads
    (``run_share`` 0) is neither pooled nor pooled with: a model or deployment
    that does not cache is a fact, not a draw to borrow strength for."""
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, est in enumerate(by_class):
        if est.cache_hits is not None and est.cache_hits["run_share"] > 0:
            key = (cache_family(est.model), est.automatic_cache)
            groups.setdefault(key, []).append(i)
    for group in groups.values():
        if len(group) < 2:
            continue
        own = [_hit_fit(_hit_frame(class_calls[i]), [2], [0.0]) for i in group]
        strength = {unit: prior_runs(np.array([float(o[unit]) for o in own]),
                                     np.array([o[SPREAD_OF[unit]] for o in own]))
                    for unit in POOLED_BY}
        pooled = pd.concat([class_calls[i] for i in group], ignore_index=True)
        for i in group:
            hits = cache_hits(class_calls[i], pooled, strength)
            if hits is not None:
                by_class[i].notes["cache"] = hits.pop("note")
            by_class[i].cache_hits = hits


def class_order(models: np.ndarray, labels: np.ndarray) -> list[Any]:
    """The classes ``labels`` names (one per run, ``models`` the runs' models),
    the main one first: by the runs of the class's model (its most common
    one) over all classes, then by the class's runs, then by name. The main
    class is then the largest of the model most runs used, whatever classes
    its runs are split into (a model's uncached runs, a class of their own,
    do not hand the harness's model to another). The labels as given (any
    sortable type)."""
    total = pd.Series(models).value_counts()
    order = []
    for name in sorted(set(labels)):
        mine = pd.Series(models[labels == name]).value_counts()
        model = sorted(mine.index[mine == mine.iloc[0]])[0]
        order.append((-int(total[model]), -int(mine.sum()), name))
    return [name for _, _, name in sorted(order)]


def estimate(traces: Traces, labels: np.ndarray, when=None, *,
             endings: bool = True) -> Estimates:
    """All direct estimates of ``traces`` with runs in the classes ``labels``
    (``endings`` False: the world of old, whose runs end when their need is
    done, without the competing-risks endings)."""
    detector = fit_detector(traces)
    if detector is not None:  # which calls the recorded harness nudged, for the escapes
        traces = Traces(traces.folder, traces.runs,
                        traces.calls.assign(nudged=detector.nudged), traces.dropped,
                        traces.repaired, traces.subagent_calls)
    runs, calls = traces.runs, traces.calls
    effects_all: dict[str, float] = {}
    taus: dict[str, float] = {}
    by_class: list[ClassEstimate] = []
    class_calls: list[pd.DataFrame] = []
    tool_names = list(calls.loc[~calls["text"], "tool"].value_counts().index[:MAX_TOOLS])
    for name in class_order(runs["model"].astype(str).to_numpy(object), labels):
        ids = runs["run_id"].to_numpy()[labels == name]
        sub = traces.subset(ids)
        est = estimate_class(str(name), sub, tool_names, with_endings=endings)
        by_class.append(est)
        class_calls.append(sub.calls)
        effects, tau = ((est.run_effects, est.run_sigma) if est.run_effects is not None
                        else _run_effects(sub.calls))
        effects_all.update({cast(str, run): math.exp(v) for run, v in effects.items()})
        taus.update(dict.fromkeys(effects.index, tau))
    tools = estimate_tools(traces, effects_all, taus)
    for est, sub_calls in zip(by_class, class_calls, strict=True):
        est.by_step = step_sizes(sub_calls, expected_observation(sub_calls, est, tools))
        if est.by_step is not None:
            est.notes["by_step"] = est.by_step.pop("note")
    _pool_hits(by_class, class_calls)
    models = list(dict.fromkeys(c.model for c in by_class))
    prices = estimate_prices(traces, models, when)

    known = limits(traces)
    conversation = bool((runs["category"] == "task_giver").any()
                        or (calls["text"] & ~calls["last"]).any())
    cached = bool((calls["cache_write_tokens"] > 0).any())  # breakpoints: writes are reported
    return Estimates(
        classes=by_class, tools=tools, prices=prices, step_limit=known.steps,
        error_limit=known.tool_errors, cost_limit=known.money_usd,
        conversation=conversation, cached=cached,
        max_output=int((calls["output"] + calls["reasoning"]).max()),
        max_prompt=int(calls["prompt"].max()), notes=known.notes,
        token_limit=known.tokens, output_limit=known.output_tokens, detector=detector,
        context_window=known.context_window)
