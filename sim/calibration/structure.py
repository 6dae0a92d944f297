"""Which task-class structure a calibration uses, chosen by cross-validated loss.

Three candidates, simplest first (:data:`CANDIDATES`): one class for every
run, one class per model (:func:`sim.calibration.classes.assign` with
``by="model"``; a model's runs that never read the cache are a class of their
own when it has enough of both kinds) and automatic clusters of run features (``classes="auto"``,
by BIC). Each is fitted on the K - 1 folds of every fold and scored by its
held-out loss there (:func:`sim.calibration.search.loss`: per-run KS distances,
exit-mix distance and resolved-share gap of the fold's held-out runs against
its world's simulation). :func:`choose` picks the lowest mean loss, except that
a simpler candidate whose loss exceeds the best one's by no more than one
standard error of the paired difference (over folds) wins: a simpler
structure is not given up for a gain the folds cannot tell from noise.
An explicit ``--classes`` or ``--by`` forces a structure (no choice is made).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.calibration import classes as cl
from sim.calibration.data import Traces


@dataclass(frozen=True)
class Structure:
    """A way of grouping runs into task classes: ``classes`` (a number or
    ``auto``) and ``by`` (``model`` or None) as :func:`sim.calibration.classes.assign`
    takes them; ``name`` for people."""

    name: str
    classes: int | str = "auto"
    by: str | None = None

    def labels(self, traces: Traces, seed: int, fit_on: np.ndarray | None = None) -> np.ndarray:
        """The class of each run of ``traces`` (clusters fitted to the runs
        ``fit_on`` marks, None: all; :func:`sim.calibration.classes.assign`)."""
        return cl.assign(traces, classes=self.classes, by=self.by, seed=seed, fit_on=fit_on)

    def flags(self) -> str:
        """The command-line options that force this structure."""
        return "--by model" if self.by == "model" else f"--classes {self.classes}"


ONE = Structure("one class", 1)
PER_MODEL = Structure("one class per model", "auto", "model")
CLUSTERS = Structure("clusters (by BIC)", "auto")
CANDIDATES: tuple[Structure, ...] = (ONE, PER_MODEL, CLUSTERS)


def forced(classes: int | str | None, by: str | None) -> Structure | None:
    """The structure the options force, or None (choose by cross-validation)."""
    if by == "model":
        return PER_MODEL
    if classes is None:
        return None
    if classes == 1:
        return ONE
    if classes == "auto":
        return CLUSTERS
    return Structure(f"{classes} clusters", classes)


def candidates(traces: Traces) -> list[Structure]:
    """The candidates worth fitting: one class per model only when the traces
    have more than one model (else it is one class)."""
    models = set(traces.runs["model"].replace("", "unknown"))
    return [c for c in CANDIDATES if c is not PER_MODEL or len(models) > 1]


@dataclass
class Choice:
    """The structure used, ``losses`` by candidate name (one per fold; empty
    when forced) and a sentence saying why."""

    chosen: Structure
    losses: dict[str, list[float]] = field(default_factory=dict)
    reason: str = ""

    @property
    def forced(self) -> bool:
        """Whether the options forced the structure."""
        return not self.losses

    def mean(self, name: str) -> float:
        """Mean held-out loss of a candidate."""
        return float(np.mean(self.losses[name]))

    def se(self, name: str) -> float:
        """Standard error of a candidate's mean held-out loss over folds."""
        x = np.asarray(self.losses[name], float)
        return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan


def choose(structures: list[Structure], losses: dict[str, list[float]]) -> Choice:
    """The choice among ``structures`` (simplest first) given their per-fold
    held-out ``losses`` (the same folds for all: differences are paired)."""
    means = {s.name: float(np.mean(losses[s.name])) for s in structures}
    best = min(structures, key=lambda s: (means[s.name], structures.index(s)))
    for s in structures:
        if s is best:
            why = (f"{s.name}: the lowest cross-validated loss ({means[s.name]:.3f})"
                   + (", simpler structures lose by more than a standard error"
                      if structures.index(s) > 0 else ""))
            return Choice(s, losses, why)
        diff = np.asarray(losses[s.name], float) - np.asarray(losses[best.name], float)
        se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else 0.0
        if diff.mean() <= se:
            return Choice(s, losses, (
                f"{s.name}: its cross-validated loss ({means[s.name]:.3f}) is within one "
                f"standard error ({se:.3f}, paired over folds) of the lowest "
                f"({best.name}, {means[best.name]:.3f}), and it is simpler"))
    raise AssertionError("the best structure is among the candidates")
