"""The budget explorer: a harness setting (five dials) in, a cached
small-sample simulation and its three figures out.

A :class:`Setting` is the token budget, the step cap, the detector's repeat
threshold and nudges, and the verifier on or off; everything else comes from
the scenario. :class:`Explorer` simulates a setting on the scenario's tasks
(same seed, so task *i* is the same task whatever the dials: differences come
from the harness, not luck) and caches the rows by (setting, tasks), so going
back to a setting, or moving one dial and back, costs no simulation.

A view of a setting holds the setting's rows, the scenario's own setting as a
reference, and a *ladder* of token budgets at the setting's other dials (the
frontier: what the token budget buys at these dials). Moving the token budget
along the ladder needs no new simulation; moving another dial simulates the
ladder anew (a few hundred milliseconds per cell at 1,000 tasks).

Units as everywhere: tokens are counts, cost is USD per task, shares are in
[0, 1], times in seconds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, cast

import pandas as pd
from matplotlib.figure import Figure

from sim.api import simulate, summarize, with_overrides
from sim.bad_input import InputError
from sim.output import figures
from sim.scenario.model import Scenario
from sim.task_record import FALSE_SUCCESS

TOKEN_LADDER: tuple[int | None, ...] = (200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, None)
"""Token budgets of the frontier (prompt tokens per run; None: no budget)."""

TOKEN_CHOICES: tuple[int | None, ...] = (100_000, 200_000, 300_000, 500_000, 750_000,
                                         1_000_000, 1_500_000, 2_000_000, 3_000_000,
                                         5_000_000, None)
"""Token budgets offered by the dial (the scenario's own is added)."""

STEP_CHOICES: tuple[int | None, ...] = (5, 10, 15, 20, 30, 40, 50, 75, 100, None)
"""Step caps offered by the dial (model calls per run; the scenario's own is added)."""

TABLE_COLUMNS = ("tasks", "succeeded", FALSE_SUCCESS, "needs_human:no_progress",
                 "budget_exhausted:tokens", "budget_exhausted:steps", "steps_p95",
                 "cost_mean", "cost_p95", "cost_max")
"""Columns of :meth:`View.summary` (shares, steps, USD per task)."""


def tokens_label(tokens: int | None) -> str:
    """``750k``, ``1.5M``, or ``none`` for no budget."""
    if tokens is None:
        return "none"
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:g}M"
    return f"{tokens / 1_000:g}k" if tokens >= 1_000 else str(tokens)


def choices(options: tuple[int | None, ...], own: int | None) -> tuple[int | None, ...]:
    """``options`` with ``own`` added, ascending, None (unlimited) last."""
    values = set(options) | {own}
    return (*sorted(v for v in values if v is not None), *((None,) if None in values else ()))


@dataclass(frozen=True)
class Setting:
    """The five dials: ``tokens`` (prompt tokens over the run, None: no
    budget), ``steps`` (model calls, None: no cap), ``repeat_threshold``
    (identical calls in a row that count as a loop), ``nudges`` (detections
    answered with a nudge before the run stops as needs_human) and
    ``verifier`` (claimed successes checked or not); ``detector`` turns the
    no-progress detector on or off (a calibrated world starts with it off:
    the recorded harness's detector is unknown)."""

    tokens: int | None
    steps: int | None
    repeat_threshold: int
    nudges: int
    verifier: bool
    detector: bool = True

    @classmethod
    def of(cls, scenario: Scenario) -> Setting:
        """The setting a scenario is written with."""
        h = scenario.harness
        return cls(tokens=h.budgets.tokens, steps=h.budgets.steps,
                   repeat_threshold=h.detector.repeat_threshold, nudges=h.detector.nudges,
                   verifier=h.verifier.name != "none", detector=h.detector.enabled)

    def replace(self, **dials: Any) -> Setting:
        """This setting with some dials moved (``tokens=500_000``)."""
        unknown = sorted(set(dials) - set(vars(self)))
        if unknown:
            raise InputError(f"no dial named {', '.join(unknown)}; the dials are "
                             f"{', '.join(vars(self))}")
        return replace(self, **dials)

    def label(self) -> str:
        """A short name: ``tokens=2M steps=50 repeat=3 nudges=1 verifier=on``
        (``detector=off`` in place of the repeats and nudges when it is off)."""
        return f"tokens={tokens_label(self.tokens)} {self.others(' ')}"

    def others(self, sep: str = ", ") -> str:
        """The dials other than the token budget: ``steps=50, repeat=3, ...``."""
        steps = "none" if self.steps is None else str(self.steps)
        detector = ([f"repeat={self.repeat_threshold}", f"nudges={self.nudges}"]
                    if self.detector else ["detector=off"])
        return sep.join([f"steps={steps}", *detector,
                         f"verifier={'on' if self.verifier else 'off'}"])


@dataclass(frozen=True)
class View:
    """What one setting looks like: ``rows`` of the setting, ``reference``
    rows of the scenario's own setting, the ``ladder`` summary (one row per
    token budget at the setting's other dials, see :func:`sim.api.summarize`)
    and ``chosen`` (the ladder cell of the setting itself). ``simulated`` and
    ``cached`` count cells run and cells found in the cache for this view;
    ``seconds`` is the time the simulation took."""

    setting: Setting
    tasks: int
    rows: pd.DataFrame
    reference: pd.DataFrame
    reference_label: str
    ladder: pd.DataFrame
    chosen: str
    simulated: int
    cached: int
    seconds: float

    def summary(self) -> pd.DataFrame:
        """The setting (row ``your setting``) and the reference (its label):
        see :func:`side_by_side`."""
        return side_by_side({"your setting": self.rows, self.reference_label: self.reference})

    def table(self) -> pd.DataFrame:
        """:meth:`summary` for reading (see :func:`readable`)."""
        return readable(self.summary())


def side_by_side(sides: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per side ({label: task rows}, in order), columns
    :data:`TABLE_COLUMNS` and any other outcome a side reached (after the
    other outcomes): tasks, outcome shares in [0, 1], steps p95 and costs in
    USD per task; an outcome no task reached shows 0."""
    both = pd.concat([rows.assign(cell=label) for label, rows in sides.items()],
                     ignore_index=True)
    frame = summarize(both).set_index("cell")
    more = [c for c in frame.columns if ":" in c and c not in TABLE_COLUMNS]
    at = TABLE_COLUMNS.index("steps_p95")
    columns = [*TABLE_COLUMNS[:at], *more, *TABLE_COLUMNS[at:]]
    return frame.reindex(columns=columns, fill_value=0.0)


def readable(summary: pd.DataFrame) -> pd.DataFrame:
    """A :func:`side_by_side` summary for reading: one column per side, one
    row per measure, shares in percent and costs in dollars (text)."""
    rows = {}
    for name, values in summary.items():
        column = str(name)  # the summary's columns are named by strings
        if column == "tasks" or column.startswith("steps"):
            rows[column.replace("_", " ")] = [f"{int(v):,}" for v in values]
        elif column.startswith("cost_"):
            rows[f"{column[5:]} cost per task"] = [f"${v:,.2f}" for v in values]
        else:
            rows[column] = [f"{100 * v:.1f}%" for v in values]
    return pd.DataFrame(rows, index=summary.index).T.rename_axis(columns=None)


class Explorer:
    """Settings of one scenario, simulated on ``tasks`` tasks (the small
    sample) or ``full_tasks`` (the full-size run; default the scenario's
    ``tasks``), with the rows cached by (setting, tasks), at most
    ``cache_size`` entries (least recently used dropped first).

    >>> from sim.api import load_scenario
    >>> explorer = Explorer(load_scenario("scenarios/bounded.yaml"), tasks=50)
    >>> view = explorer.view(explorer.reference.replace(tokens=300_000))
    >>> view.simulated, explorer.view(view.setting).simulated
    (7, 0)
    """

    def __init__(self, scenario: Scenario, *, tasks: int = 1000, full_tasks: int | None = None,
                 ladder: tuple[int | None, ...] = TOKEN_LADDER, workers: int | None = 1,
                 full_workers: int | None = None, cache_size: int = 512,
                 name: str | None = None) -> None:
        if tasks < 1:
            raise InputError(f"tasks must be >= 1, got {tasks}")
        self.scenario = scenario.model_copy(update={"sweep": {}})
        self.name = name or scenario.name or "scenario"
        self.reference = Setting.of(scenario)
        self.setting = self.reference
        self.tasks = tasks
        self.full_tasks = full_tasks or scenario.tasks
        self.ladder = tuple(ladder)
        self.workers = workers
        self.full_workers = full_workers
        self.cache_size = cache_size
        self.token_choices = choices(TOKEN_CHOICES, self.reference.tokens)
        self.step_choices = choices(STEP_CHOICES, self.reference.steps)
        self._cache: OrderedDict[tuple[Setting, int], pd.DataFrame] = OrderedDict()
        own = scenario.harness.verifier
        self._verifier = (own.name, dict(own.options)) if own.name != "none" else ("oracle", {})

    # ------------------------------------------------------------ simulation

    def overrides(self, setting: Setting) -> dict[str, object]:
        """The scenario overrides (dotted paths) that give ``setting``; the
        verifier, when on, is the scenario's own (``oracle`` if it has none)."""
        name, options = self._verifier if setting.verifier else ("none", {})
        return {"harness.budgets.tokens": setting.tokens, "harness.budgets.steps": setting.steps,
                "harness.detector.enabled": setting.detector,
                "harness.detector.repeat_threshold": setting.repeat_threshold,
                "harness.detector.nudges": setting.nudges,
                "harness.verifier.name": name, "harness.verifier.options": options}

    def scenario_for(self, setting: Setting) -> Scenario:
        """The scenario with ``setting``'s dials (validated)."""
        return with_overrides(self.scenario, self.overrides(setting))

    def cached(self, setting: Setting, tasks: int) -> bool:
        """Whether the rows of ``setting`` on ``tasks`` tasks are in the cache."""
        return (setting, tasks) in self._cache

    def rows(self, setting: Setting, tasks: int | None = None) -> pd.DataFrame:
        """One row per task of ``setting`` (columns of :class:`sim.task_record.
        TaskRecord`), from the cache or simulated (and cached). Treat the
        frame as read-only: it is shared with the cache."""
        tasks = tasks or self.tasks
        key = (setting, tasks)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        workers = self.workers if tasks == self.tasks else self.full_workers
        rows = simulate(self.scenario_for(setting), tasks=tasks, workers=workers)
        self._cache[key] = rows
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return rows

    def view(self, setting: Setting | None = None, *, full: bool = False) -> View:
        """Simulate (or find in the cache) ``setting`` (default the current
        one), the reference and the token ladder at the setting's other dials,
        on the small sample or, with ``full``, on ``full_tasks`` tasks."""
        setting = setting or self.setting
        tasks = self.full_tasks if full else self.tasks
        budgets = choices(self.ladder, setting.tokens)
        ladder = [replace(setting, tokens=t) for t in budgets]
        wanted = [*ladder, self.reference]
        missing = len({s for s in wanted if not self.cached(s, tasks)})
        start = time.perf_counter()
        frames = [self.rows(s, tasks).assign(cell=f"tokens={tokens_label(s.tokens)}")
                  for s in ladder]
        reference = self.rows(self.reference, tasks)
        seconds = time.perf_counter() - start
        return View(setting=setting, tasks=tasks, rows=self.rows(setting, tasks),
                    reference=reference,
                    reference_label=f"{self.name} as written",
                    ladder=summarize(pd.concat(frames, ignore_index=True)),
                    chosen=f"tokens={tokens_label(setting.tokens)}",
                    simulated=missing, cached=len(set(wanted)) - missing, seconds=seconds)

    # --------------------------------------------------------------- figures

    def draw(self, view: View) -> dict[str, Figure]:
        """The view's figures: ``outcomes`` (shares of the setting and the
        reference), ``cost_ccdf`` (both cost tails) and ``frontier`` (the token
        ladder at the setting's other dials, the setting in orange)."""
        labels = {"your setting": view.rows, view.reference_label: view.reference}
        shares = {k: cast("dict[str, float]", v["outcome"].value_counts(normalize=True).to_dict())
                  for k, v in labels.items()}  # {outcome: share}
        n = f"{view.tasks:,} tasks each"
        out = {
            "outcomes": figures.outcome_bars(
                shares, title=f"Outcome shares ({n})\nyour setting: {view.setting.label()}"),
            "cost_ccdf": figures.cost_ccdf(
                {k: v["cost_usd"] for k, v in labels.items()},
                title="Cost tail: share of tasks costing more than x"),
            "frontier": self._frontier(view),
        }
        return out

    def _frontier(self, view: View) -> Figure:
        s = view.setting
        fig = figures.frontier(view.ladder, title=f"What the token budget buys at {s.others()}")
        chosen = view.ladder.index[view.ladder["cell"] == view.chosen][0]
        row = view.ladder.loc[chosen]
        for ax, column in zip(fig.axes[:2], ("cost_mean", "cost_p95"), strict=True):
            ax.scatter([row[column]], [100 * row["succeeded"]], s=55, color="#d4622a",
                       edgecolors="white", linewidths=0.8, zorder=4,
                       label=f"your setting ({chosen + 1})")
            ax.legend(fontsize=7, loc="lower right")
        return fig

    def show(self, view: View, *parts: str) -> None:
        """Display ``parts`` of the view as cell outputs: ``table`` (see
        :meth:`View.table`) and the figures of :meth:`draw` by name (default:
        all of them, table first)."""
        from IPython.display import display

        known = ("table", "outcomes", "cost_ccdf", "frontier")
        unknown = sorted(set(parts) - set(known))
        if unknown:
            raise InputError(f"no part named {', '.join(unknown)}; the parts are "
                             f"{', '.join(known)}")
        parts = parts or known
        figs = self.draw(view) if set(parts) - {"table"} else {}
        display(*[view.table() if p == "table" else figs[p] for p in parts])

    def status(self, view: View) -> str:
        """One line: what was simulated and how long it took."""
        return (f"{view.tasks:,} tasks per cell; {view.simulated} cell"
                f"{'s' if view.simulated != 1 else ''} simulated, {view.cached} from the cache, "
                f"in {view.seconds:.2f} s")
