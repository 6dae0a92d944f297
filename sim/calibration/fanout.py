"""Fitting fan-out: how many subagents a run starts, when, and how long they run.

A trace folder records subagents in ``calls.agent``: the calls of one
distinct non-null ``agent`` id of a run are one **child** (its calls belong to
the parent's run; null is the run's own agent, the **parent**). From the
calibration's calls (:mod:`sim.calibration.data`, in run and call order):

- a child **belongs to the spawn call** that is the last parent call before
  its first call (call order, which the importers keep in time order): the
  children whose first call comes before the parent's next call share a
  spawn. A child whose first call precedes every parent call is given to the
  parent's first call (counted in ``FanoutFit.early``);
- the parent's **productive calls** are its calls with a tool call that are
  neither a repeat of the previous call nor answered by a tool error, and its
  spawn calls always (the world's ``world.fanout`` turns a productive call into
  a spawn call, :class:`sim.world.params.FanoutParams`); a call's step is its
  1-based position among the parent's own calls;
- ``spawn``: spawn calls over productive calls. ``spawn_by_step``: the same per
  step bin, bins from :data:`sim.calibration.estimate.STEP_EDGES` with bins of
  fewer than :data:`MIN_BIN_CALLS` productive calls merged into the next (a
  short last bin into the one before), kept only when a chi-square test of
  equal rates across the bins rejects at :data:`BY_STEP_ALPHA` (else one rate);
- ``children``: the probability mass of the number of children per spawn
  call (index 0 is 0); the spawns with more children than the largest count
  seen at least :data:`MIN_TAIL` times are one tail bucket: their mass is put
  at their mean count (rounded), so the mean children per spawn is about kept;
- the **child class** (``worker``): the children's call sequences as runs of
  their own, fitted as a task class by
  :func:`sim.calibration.estimate.estimate_class` without fitted endings (a
  child's exit is not recorded: it ends when its need is done);
- **the harness**: ``harness.subagents`` (the subagent tool's name, and
  ``max_concurrent`` the most children of one spawn seen running at once: a
  child runs from its first call's start to its last call's end, when the
  calls are timed; else left at the harness's default), so that the fitted
  world's spawns are run;
- **intervals**: percentile bootstrap over parent runs (:data:`BOOTSTRAP`
  resamples) for ``spawn`` and the mean children per run.

:func:`predicted_children` gives the distribution of children per run a fit
predicts for runs of given productive steps (spawns binomial per step bin,
children per spawn from the PMF, drawn with numpy); :func:`validate` compares
each fold's held-out runs with the fit of the other folds (children per run,
spawn rate per step bin, child steps), beside the sampling floor of the
other folds' runs taken as the forecast, as
:mod:`sim.calibration.accuracy` does for the rest of the world.
:func:`simulated_rows` is the comparison against the simulated world's own
children, once the world spawns them (it takes the simulated runs' children
per run and child steps).

Units: calls (steps), children (counts), probabilities per productive call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sim.calibration.data import Traces
from sim.calibration.estimate import STEP_EDGES, ClassEstimate, estimate_class, merged_bins
from sim.calibration.questions import FANOUT, Row

TOOL = "agent"
"""The subagent tool's name the fitted world uses (``world.fanout.tool``)."""
CHILD_CLASS = "worker"
"""The task class the fitted children draw from (``world.fanout.child_class``)."""
MIN_BIN_CALLS = 30
"""Fewest productive parent calls a step bin of ``spawn_by_step`` keeps (else merged)."""
BY_STEP_ALPHA = 0.01
"""The chi-square test's level at which spawn rates by step bin are kept."""
MIN_TAIL = 5
"""Fewest spawns a count of children needs to keep its own PMF entry past the
last such count (the rarer larger counts form one tail bucket)."""
BOOTSTRAP = 400
"""Bootstrap resamples of the runs for the intervals."""
LEVEL = 0.95
"""The intervals' coverage."""


@dataclass(frozen=True)
class Spawns:
    """What the calls say of fan-out, per parent productive call and per child.

    ``steps``: per productive parent call, its run (``run``, an index into
    ``runs``) and 1-based parent step (``step``), whether it is a spawn call
    (``spawn``) and its children (``children``, 0 when not a spawn);
    ``kids``: per child, its run index, its spawn call's step, its calls
    (``calls``) and when it ran (``start``, ``end``: seconds from the run's
    start, NaN when untimed); ``runs``: the run ids in order; ``early``: children whose
    first call precedes every call of their parent."""

    runs: np.ndarray
    steps: pd.DataFrame
    kids: pd.DataFrame
    early: int = 0

    def per_run(self) -> pd.DataFrame:
        """Per run (index: run position): ``productive`` calls, ``spawns``,
        ``children``."""
        g = self.steps.groupby("run", sort=True)
        out = pd.DataFrame({"productive": g.size(), "spawns": g["spawn"].sum(),
                            "children": g["children"].sum()})
        return out.reindex(range(len(self.runs)), fill_value=0).astype(np.int64)


def has_agents(calls: pd.DataFrame) -> bool:
    """Whether any call was made by a subagent (a non-null ``agent``)."""
    return "agent" in calls and bool(calls["agent"].notna().any())


def _agents(calls: pd.DataFrame) -> np.ndarray:
    """The ``agent`` column as objects, None for the parent's calls."""
    if "agent" not in calls:
        return np.full(len(calls), None, dtype=object)
    values = calls["agent"].to_numpy(object)
    return np.array([None if v is None or (isinstance(v, float) and math.isnan(v))
                     or v is pd.NA else str(v) for v in values], dtype=object)


def spawns(traces: Traces) -> Spawns:
    """The spawn calls and children of ``traces`` (see the module docstring)."""
    runs = traces.runs["run_id"].to_numpy(object)
    position = {r: i for i, r in enumerate(runs)}
    calls = traces.all_calls
    agent = _agents(calls)
    parent = np.array([a is None for a in agent], dtype=bool)
    run_ids = calls["run_id"].to_numpy(object)
    run = np.array([position.get(r, -1) for r in run_ids], dtype=np.int64)
    # each call's count of parent calls so far in its run (a parent call: its own 1-based step)
    frame = pd.DataFrame({"run": run, "parent": parent.astype(np.int64)})
    before = frame.groupby("run", sort=False)["parent"].cumsum().to_numpy(np.int64)
    child_rows = np.flatnonzero(~parent & (run >= 0))
    start = pd.to_numeric(calls["started_s"], errors="coerce").to_numpy(float)
    end = start + pd.to_numeric(calls["latency_s"], errors="coerce").to_numpy(float)
    kids = pd.DataFrame({"run": run[child_rows], "agent": agent[child_rows],
                         "after": before[child_rows], "start": start[child_rows],
                         "end": end[child_rows]})
    g = kids.groupby(["run", "agent"], sort=True)
    kids = pd.DataFrame({"step": g["after"].first(), "calls": g.size(),
                         "start": g["start"].min(), "end": g["end"].max()}).reset_index()
    early = int((kids["step"] == 0).sum())
    kids["step"] = kids["step"].clip(lower=1).astype(np.int64)
    per_spawn = kids.groupby(["run", "step"], sort=True).size()
    tools = calls["tools"].to_numpy(np.int64) > 0
    ok = ~calls["repeat"].to_numpy(bool) & (calls["errors"].to_numpy(np.int64) == 0)
    spawn_key = set(per_spawn.index)
    is_spawn = np.array([(int(r), int(s)) in spawn_key for r, s in zip(run, before, strict=True)],
                        dtype=bool) & parent
    productive = parent & (run >= 0) & ((tools & ok) | is_spawn)
    steps = pd.DataFrame({"run": run[productive], "step": before[productive],
                          "spawn": is_spawn[productive]})
    lookup = per_spawn.to_dict()
    steps["children"] = [int(lookup.get((int(r), int(s)), 0)) if sp else 0
                         for r, s, sp in zip(steps["run"], steps["step"], steps["spawn"],
                                             strict=True)]
    # a spawn whose parent call is not in the calls (a child before any parent call of a run
    # whose parent made none) still counts: its run's first step
    present = set(zip(steps.loc[steps["spawn"], "run"].tolist(),
                      steps.loc[steps["spawn"], "step"].tolist(), strict=True))
    missing = sorted(spawn_key - present)
    if missing:
        extra = pd.DataFrame({"run": [r for r, _ in missing], "step": [s for _, s in missing],
                              "spawn": True, "children": [int(lookup[k]) for k in missing]})
        steps = pd.concat([steps, extra], ignore_index=True)
    steps = steps.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
    return Spawns(runs, steps, kids, early)


def step_bins(steps: np.ndarray) -> list[int]:
    """The step bins' first steps: :data:`~sim.calibration.estimate.STEP_EDGES`
    with bins of fewer than :data:`MIN_BIN_CALLS` of ``steps`` merged into the
    next, a short last bin into the one before."""
    return [int(e) for e in merged_bins(list(STEP_EDGES), steps.astype(float), MIN_BIN_CALLS)]


def children_pmf(counts: np.ndarray) -> list[float]:
    """The PMF of children per spawn (index: count; index 0 is 0) of the spawns'
    ``counts``, the rare large counts as one tail bucket at their mean
    (rounded; see the module docstring). Probabilities to 6 decimals, the
    largest adjusted so that they sum to 1 exactly."""
    counts = np.asarray(counts, np.int64)
    if counts.size == 0:
        return [0.0, 1.0]
    seen = np.bincount(counts)
    common = [k for k in range(1, seen.size) if seen[k] >= MIN_TAIL]
    top = max(common) if common else 1
    tail = counts[counts > top]
    kept = counts[counts <= top]
    at = math.floor(float(tail.mean()) + 0.5) if tail.size else 0  # the tail's mean, rounded
    mass = np.bincount(kept, minlength=max(top, at) + 1).astype(float)
    if tail.size:
        mass[at] += tail.size
    pmf = [round(float(v), 6) for v in mass / counts.size]
    pmf[0] = 0.0
    big = int(np.argmax(pmf))
    pmf[big] = round(pmf[big] + 1.0 - sum(pmf), 6)
    return pmf


@dataclass
class ClassFanout:
    """One parent task class's fan-out: ``runs``, ``productive`` calls,
    ``spawns``, ``children``."""

    runs: int
    productive: int
    spawns: int
    children: int

    @property
    def spawn(self) -> float:
        """Spawn calls per productive call."""
        return self.spawns / self.productive if self.productive else 0.0

    @property
    def per_run(self) -> float:
        """Mean children per run."""
        return self.children / self.runs if self.runs else 0.0


@dataclass(frozen=True)
class StepBin:
    """The recorded and fitted spawn rate in one bin of the parents' steps:
    steps ``first`` to ``last`` (1-based, None: no end), its productive
    parent ``calls`` and ``spawns`` among them, the recorded ``rate`` (spawns
    over calls) with its percentile bootstrap ``interval`` over parent runs
    (:data:`LEVEL`), and the ``fitted`` rate (:meth:`FanoutFit.spawn_at` the
    bin's first step)."""

    first: int
    last: int | None
    calls: int
    spawns: int
    rate: float
    interval: tuple[float, float]
    fitted: float

    @property
    def inside(self) -> bool:
        """Whether the fitted rate is within the recorded rate's interval."""
        return self.interval[0] <= self.fitted <= self.interval[1]

    def summary(self) -> dict[str, Any]:
        """The bin as JSON-ready numbers."""
        return {"first": self.first, "last": self.last, "calls": self.calls,
                "spawns": self.spawns, "rate": self.rate, "interval": list(self.interval),
                "fitted": self.fitted, "inside": self.inside}


@dataclass
class FanoutFit:
    """A fitted fan-out (see the module docstring): ``spawn`` per productive
    call, ``edges``/``spawn_by_step`` (None: one rate), the ``children`` PMF,
    the ``child`` class's direct estimates, intervals (``spawn_ci``,
    ``per_run_ci``: bootstrap over runs), the counts it was fitted from, and
    per parent task class (``by_class``, when ``labels`` were given), and
    the recorded against the fitted spawn rate per step bin (``by_step``:
    :func:`step_table`)."""

    spawn: float
    children: list[float]
    child: ClassEstimate | None
    runs: int
    productive: int
    spawns: int
    kids: int
    child_steps: np.ndarray
    edges: list[int] | None = None
    spawn_by_step: list[float] | None = None
    bin_calls: list[int] | None = None
    spawn_ci: tuple[float, float] = (math.nan, math.nan)
    per_run_ci: tuple[float, float] = (math.nan, math.nan)
    early: int = 0
    concurrent: int | None = None
    by_class: dict[str, ClassFanout] = field(default_factory=dict)
    by_step: list[StepBin] = field(default_factory=list)

    @property
    def per_run(self) -> float:
        """Mean children per run."""
        return self.kids / self.runs if self.runs else 0.0

    @property
    def mean_children(self) -> float:
        """Mean children per spawn call (of the PMF)."""
        return float(sum(k * p for k, p in enumerate(self.children)))

    def spawn_at(self, step: int) -> float:
        """The fitted chance that a productive ``step``-th (1-based) parent call spawns."""
        if self.edges is None or self.spawn_by_step is None:
            return self.spawn
        b = int(np.searchsorted(self.edges, step, side="right")) - 1
        return self.spawn_by_step[max(b, 0)]

    def as_world(self) -> dict[str, Any]:
        """The ``world.fanout`` block (:class:`sim.world.params.FanoutParams`)."""
        block: dict[str, Any] = {"tool": TOOL, "spawn": round(self.spawn, 6)}
        if self.edges is not None and self.spawn_by_step is not None:
            block["edges"] = list(self.edges)
            block["spawn_by_step"] = [round(p, 6) for p in self.spawn_by_step]
        block["children"] = list(self.children)
        block["child_class"] = CHILD_CLASS if self.child is not None else None
        return block

    def harness(self) -> dict[str, Any]:
        """The ``harness.subagents`` block: the tool, and the most children
        seen running at once when the calls are timed
        (:class:`sim.harness.params.SubagentParams`)."""
        block: dict[str, Any] = {"tool": TOOL}
        if self.concurrent is not None:
            block["max_concurrent"] = self.concurrent
        return block

    def summary(self, rows: list[Row] | None = None) -> dict[str, Any]:
        """``calibration.json``'s ``fanout``: the block, the counts, the
        intervals, the parent classes' rates and the held-out ``rows``."""
        return {"world": self.as_world(), "runs": self.runs, "productive": self.productive,
                "spawns": self.spawns, "children": self.kids, "per_run": self.per_run,
                "concurrent": self.concurrent, "spawn_interval": list(self.spawn_ci),
                "per_run_interval": list(self.per_run_ci), "early": self.early,
                "bin_calls": self.bin_calls,
                "by_class": {name: {"runs": c.runs, "productive": c.productive,
                                    "spawns": c.spawns, "children": c.children,
                                    "spawn": c.spawn, "per_run": c.per_run}
                             for name, c in self.by_class.items()},
                "by_step": [b.summary() for b in self.by_step],
                "held_out": [r.summary() | {"key": r.key} for r in rows or []]}

    def note(self) -> str:
        """What the block was fitted from, for the scenario's comment."""
        lo, hi = self.spawn_ci
        plo, phi = self.per_run_ci
        text = (f"fitted from calls.agent: {self.kids} children of {self.runs} runs in "
                f"{self.spawns} spawn calls of {self.productive} productive parent calls; "
                f"spawn {self.spawn:.4f} (95% bootstrap {lo:.4f}-{hi:.4f}), children per run "
                f"{self.per_run:.3f} ({plo:.3f}-{phi:.3f})")
        if self.edges is not None:
            text += f"; spawn by step bin {self.edges} (chi-square p < {BY_STEP_ALPHA})"
        if self.concurrent is not None:
            text += f"; at most {self.concurrent} children of one spawn ran at once"
        if self.early:
            text += f"; {self.early} children began before their parent's first call"
        return text


def fit_fanout(traces: Traces, *, labels: np.ndarray | None = None,
               tools: list[str] | None = None, seed: int = 0,
               with_child: bool = True) -> FanoutFit | None:
    """The fan-out of ``traces`` (None when no call has an ``agent``).
    ``labels``: the parent runs' task classes (for ``by_class``); ``tools``:
    the tool names the child class keeps (None: its own most called);
    ``seed``: the bootstrap's; ``with_child`` False skips the child class."""
    if not has_agents(traces.all_calls):
        return None
    found = spawns(traces)
    steps = found.steps
    per_run = found.per_run()
    productive, n_spawns = len(steps), int(steps["spawn"].sum())
    spawn = n_spawns / productive if productive else 0.0
    counts = steps.loc[steps["spawn"], "children"].to_numpy(np.int64)
    fit = FanoutFit(spawn=spawn, children=children_pmf(counts), child=None,
                    runs=len(found.runs), productive=productive, spawns=n_spawns,
                    kids=len(found.kids), child_steps=found.kids["calls"].to_numpy(np.int64),
                    early=found.early)
    _by_step(fit, steps)
    fit.spawn_ci, fit.per_run_ci = _intervals(per_run, seed)
    fit.by_step = step_table(found, fit, seed)
    fit.concurrent = most_at_once(found.kids)
    if labels is not None:
        for name in sorted(set(labels)):
            rows = per_run[np.asarray(labels) == name]
            fit.by_class[str(name)] = ClassFanout(len(rows), int(rows["productive"].sum()),
                                                  int(rows["spawns"].sum()),
                                                  int(rows["children"].sum()))
    if with_child and len(found.kids):
        fit.child = estimate_class(CHILD_CLASS, child_traces(traces),
                                   tools if tools is not None else _top_tools(traces),
                                   with_endings=False)
    return fit


def most_at_once(kids: pd.DataFrame) -> int | None:
    """The most children of one spawn running at once (a child from its
    ``start`` to its ``end``; one ending as another starts is not at once),
    over the spawns whose children are all timed; None when none is."""
    best: int | None = None
    for _, group in kids.groupby(["run", "step"], sort=False):
        start, end = group["start"].to_numpy(float), group["end"].to_numpy(float)
        if not (np.isfinite(start).all() and np.isfinite(end).all()):
            continue
        events = sorted([(t, 1) for t in start] + [(t, -1) for t in end],
                        key=lambda e: (e[0], e[1]))  # an end before a start at one time
        running = peak = 0
        for _, change in events:
            running += change
            peak = max(peak, running)
        best = peak if best is None else max(best, peak)
    return best


def _top_tools(traces: Traces) -> list[str]:
    calls = traces.all_calls
    return list(calls.loc[~calls["text"].to_numpy(bool), "tool"].value_counts().index[:20])


def _by_step(fit: FanoutFit, steps: pd.DataFrame) -> None:
    """Set ``fit.edges``/``spawn_by_step`` when the spawn rates differ by step bin."""
    from scipy.stats import chi2_contingency

    step = steps["step"].to_numpy(np.int64)
    edges = step_bins(step)
    if len(edges) < 2:
        return
    b = np.searchsorted(edges, step, side="right") - 1
    spawn = steps["spawn"].to_numpy(bool)
    calls = np.bincount(b, minlength=len(edges))
    hits = np.bincount(b, weights=spawn.astype(float), minlength=len(edges))
    table = np.array([hits, calls - hits])
    if (table.sum(axis=1) == 0).any():
        return
    p = float(chi2_contingency(table, correction=False)[1])
    if p >= BY_STEP_ALPHA:
        return
    fit.edges = edges
    fit.spawn_by_step = [float(h / c) for h, c in zip(hits, calls, strict=True)]
    fit.bin_calls = [int(c) for c in calls]


def _intervals(per_run: pd.DataFrame, seed: int) -> tuple[tuple[float, float],
                                                          tuple[float, float]]:
    """Percentile bootstrap intervals over runs of the spawn rate and the mean
    children per run."""
    n = len(per_run)
    if n < 2:
        return (math.nan, math.nan), (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    pick = rng.integers(n, size=(BOOTSTRAP, n))
    prod = per_run["productive"].to_numpy(float)[pick].sum(axis=1)
    spawns_ = per_run["spawns"].to_numpy(float)[pick].sum(axis=1)
    kids = per_run["children"].to_numpy(float)[pick].mean(axis=1)
    rate = np.divide(spawns_, prod, out=np.zeros_like(spawns_), where=prod > 0)
    q = [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2]
    lo, hi = np.quantile(rate, q)
    klo, khi = np.quantile(kids, q)
    return (float(lo), float(hi)), (float(klo), float(khi))


def step_table(found: Spawns, fit: FanoutFit, seed: int) -> list[StepBin]:
    """The recorded spawn rate per step bin (:func:`step_bins` of the parents'
    productive calls, whether or not the fit keeps rates by bin) against the
    fit's, each recorded rate with a percentile bootstrap interval over parent
    runs (:data:`BOOTSTRAP` resamples drawn with
    ``numpy.random.default_rng([seed, 1])``, apart from :func:`_intervals`'
    draws); a bin no resample has calls in gets NaN bounds. Empty without
    productive calls."""
    steps = found.steps
    if not len(steps):
        return []
    step = steps["step"].to_numpy(np.int64)
    edges = step_bins(step)
    b = np.searchsorted(edges, step, side="right") - 1
    run = steps["run"].to_numpy(np.int64)
    n = len(found.runs)
    calls = np.zeros((n, len(edges)))
    hits = np.zeros((n, len(edges)))
    np.add.at(calls, (run, b), 1.0)
    np.add.at(hits, (run, b), steps["spawn"].to_numpy(float))
    pick = np.random.default_rng([seed, 1]).integers(n, size=(BOOTSTRAP, n))
    boot_calls, boot_hits = calls[pick].sum(axis=1), hits[pick].sum(axis=1)
    q = [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2]
    out = []
    for i, first in enumerate(edges):
        total, spawned = int(calls[:, i].sum()), int(hits[:, i].sum())
        seen = boot_calls[:, i] > 0
        rates = boot_hits[seen, i] / boot_calls[seen, i]
        lo, hi = (np.quantile(rates, q) if rates.size and n > 1 else (math.nan, math.nan))
        out.append(StepBin(first, edges[i + 1] - 1 if i + 1 < len(edges) else None, total,
                           spawned, spawned / total if total else math.nan,
                           (float(lo), float(hi)), fit.spawn_at(first)))
    return out


def child_traces(traces: Traces) -> Traces:
    """The children of ``traces`` as runs of their own (run id
    ``<run>/<agent>``, calls renumbered from 0), with the per-run columns
    :func:`sim.calibration.estimate.estimate_class` reads: a child records no
    exit or resolution (category ``other``)."""
    calls = traces.all_calls
    agent = _agents(calls)
    mine = np.array([a is not None for a in agent], dtype=bool)
    sub = calls[mine].copy()
    sub["run_id"] = [f"{r}/{a}" for r, a in zip(sub["run_id"], agent[mine], strict=True)]
    sub = sub.sort_values(["run_id", "call"], kind="stable").reset_index(drop=True)
    g = sub.groupby("run_id", sort=False)
    sub["call"] = g.cumcount().astype(float)
    ids = sub["run_id"].to_numpy(object)
    first = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, bool)
    last = np.r_[ids[1:] != ids[:-1], True] if len(ids) else np.zeros(0, bool)
    sub["repeat"] = sub["repeat"].to_numpy(bool) & ~first
    sub["last"] = last
    order = pd.unique(ids)
    sums = g[["prompt", "output", "reasoning", "tools", "errors"]].sum().reindex(order)
    models = g["model"].first().reindex(order) if "model" in sub else None
    runs = pd.DataFrame({
        "run_id": order,
        "model": ("" if models is None else models.fillna("").astype(str).to_numpy(object)),
        "steps": g.size().reindex(order).to_numpy(np.int64),
        **{c: sums[c].to_numpy(np.int64) for c in sums.columns},
        "cost": g["cost"].sum(min_count=1).reindex(order).to_numpy(float),
        "exit": "", "category": "other", "resolved": None,
        "first_prompt": g["prompt"].first().reindex(order).to_numpy(np.int64),
    })
    return Traces(traces.folder, runs, sub, {}, {})


# ------------------------------------------------------------ out of sample

def predicted_children(fit: FanoutFit, productive: list[np.ndarray], draws: int,
                       seed: int) -> np.ndarray:
    """Children per run the fit predicts for runs whose productive parent calls
    are at the 1-based steps ``productive[i]`` (one array per run):
    ``draws`` replicates of every run (flattened, run-major), each productive
    call a spawn with :meth:`FanoutFit.spawn_at` its step, each spawn's
    children drawn from the PMF. Drawn with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    pmf = np.asarray(fit.children, float)
    out = np.zeros((len(productive), draws), np.int64)
    for i, steps in enumerate(productive):
        if steps.size == 0:
            continue
        p = np.array([fit.spawn_at(int(s)) for s in steps], float)
        spawned = rng.random((draws, steps.size)) < p[None, :]
        n = spawned.sum(axis=1)
        total = int(n.sum())
        if total:
            kids = rng.choice(pmf.size, size=total, p=pmf / pmf.sum())
            owner = np.repeat(np.arange(draws), n)
            out[i] = np.bincount(owner, weights=kids, minlength=draws).astype(np.int64)
    return out.ravel()


KS_C = 1.628
"""The two-sample KS coefficient at level 1% (c(alpha) = sqrt(-ln(alpha / 2) / 2))."""


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ks_2samp

    return float(ks_2samp(a, b).statistic)


def _ks_limit(n: int, m: int) -> float:
    return KS_C * math.sqrt((n + m) / (n * m))


def validate(traces: Traces, fold_of: np.ndarray, seed: int, draws: int = 20
             ) -> list[Row]:
    """Each fold's held-out runs against the fan-out fitted on the other folds
    (its parameters directly: :func:`predicted_children` for the children
    per run, the fitted spawn rate of each step bin, the fitted child need as
    steps), each error beside the floor of the other folds' runs taken as the
    forecast. Empty when the traces have no agents."""
    if not has_agents(traces.all_calls):
        return []
    ids = traces.runs["run_id"].to_numpy(object)
    k = int(fold_of.max()) + 1
    cells: dict[str, list[tuple[float, float, float]]] = {q: [] for q in FANOUT}
    for fold in range(k):
        train = traces.subset(ids[fold_of != fold])
        held = traces.subset(ids[fold_of == fold])
        fit = fit_fanout(train, seed=seed + fold, with_child=True)
        if fit is None:
            continue
        h = spawns(held)
        t = spawns(train)
        held_runs = h.per_run()["children"].to_numpy(float)
        by_run = dict(tuple(h.steps.groupby("run", sort=True)["step"]))
        productive = [by_run[i].to_numpy(np.int64) if i in by_run else np.zeros(0, np.int64)
                      for i in range(len(h.runs))]
        pred = predicted_children(fit, productive, draws, seed + fold).astype(float)
        train_runs = t.per_run()["children"].to_numpy(float)
        cells["children"].append((_ks(held_runs, pred), _ks(held_runs, train_runs),
                                  _ks_limit(held_runs.size, held_runs.size)))
        for step_lo, rate in _bin_rates(fit, h):
            n, observed = rate
            p = fit.spawn_at(step_lo)
            floor = _train_rate(t, fit, step_lo)
            se = math.sqrt(max(p * (1 - p), 1e-12) / n)
            cells["spawn_rate"].append((abs(observed - p), abs(observed - floor), 3 * se))
        held_kids = h.kids["calls"].to_numpy(float)
        if held_kids.size and fit.child is not None:
            drawn = _child_steps(fit.child, held_kids.size * draws, seed + fold)
            cells["child_steps"].append((_ks(held_kids, drawn),
                                         _ks(held_kids, t.kids["calls"].to_numpy(float)),
                                         _ks_limit(held_kids.size, held_kids.size)))
    rows = []
    for key, values in cells.items():
        if values:
            arr = np.array(values, float)
            rows.append(Row(key, float(arr[:, 0].mean()), float(arr[:, 1].mean()),
                                  len(values), float(arr[:, 2].max())))
    return rows


def _bins(fit: FanoutFit) -> list[int]:
    return list(fit.edges) if fit.edges is not None else [1]


def _bin_rates(fit: FanoutFit, found: Spawns) -> list[tuple[int, tuple[int, float]]]:
    """Per fitted step bin with held-out calls: ``(first step, (calls, observed rate))``."""
    edges = _bins(fit)
    step = found.steps["step"].to_numpy(np.int64)
    b = np.searchsorted(edges, step, side="right") - 1
    spawn = found.steps["spawn"].to_numpy(bool)
    out = []
    for i, lo in enumerate(edges):
        n = int((b == i).sum())
        if n:
            out.append((lo, (n, float(spawn[b == i].mean()))))
    return out


def _train_rate(found: Spawns, fit: FanoutFit, step_lo: int) -> float:
    """The training runs' raw spawn rate in the bin starting at ``step_lo``."""
    edges = _bins(fit)
    step = found.steps["step"].to_numpy(np.int64)
    b = np.searchsorted(edges, step, side="right") - 1
    i = edges.index(step_lo)
    sel = b == i
    return float(found.steps["spawn"].to_numpy(bool)[sel].mean()) if sel.any() else 0.0


def _child_steps(child: ClassEstimate, n: int, seed: int) -> np.ndarray:
    """``n`` child run lengths the child class's need gives: a lognormal need
    (``need_mu``, ``need_sigma``) rounded, at least one call, as
    :func:`sim.world.difficulty.sample_need` draws it (the world's child
    calls until its need is done; the final answer is one of its steps)."""
    rng = np.random.default_rng(seed)
    need = np.exp(rng.normal(child.need_mu, child.need_sigma, size=n))
    return np.maximum(np.round(need), 1.0)


def simulated_rows(real_children: list[np.ndarray], sim_children: list[np.ndarray],
                   real_steps: list[np.ndarray], sim_steps: list[np.ndarray]
                   ) -> list[Row]:
    """The comparison against the simulated world, once it spawns: per fold,
    the held-out runs' children per run and child steps against the fold
    world's simulated runs' (KS), the floor the other folds' held-out runs
    pooled, as :func:`sim.calibration.accuracy.ks_rows` does for the per-run
    metrics."""
    rows = []
    for key, real, sim in (("children", real_children, sim_children),
                           ("child_steps", real_steps, sim_steps)):
        k = len(real)
        cells = []
        for i in range(k):
            others = np.concatenate([r for j, r in enumerate(real) if j != i] or [np.zeros(0)])
            if real[i].size and sim[i].size and others.size:
                cells.append((_ks(real[i], sim[i]), _ks(real[i], others),
                              _ks_limit(real[i].size, sim[i].size)))
        if cells:
            arr = np.array(cells, float)
            rows.append(Row(key, float(arr[:, 0].mean()), float(arr[:, 1].mean()),
                                  len(cells), float(arr[:, 2].max())))
    return rows
