"""Subagents in a cell: the parents' terminal states and their children's.

:class:`FanoutTable` tallies, per cell, how the parents (root runs) ended
and how their children ended, with the children's count, tokens and cost
beside the parents' own, and the session's total (a parent plus its
descendants), from each parent's final harness state (:func:`tally`; the
tasks are run by :func:`sim.sweeps.fanout.fanout_table`: analysis runs no
engine). :func:`rows_summary` gives the same tallies from a sweep's result
rows (the subagent columns of results.parquet), as summary.json's
``children`` section. Units: tokens are counts (prompt, cached or not, plus
output and thinking), cost is USD, time is seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.analysis import stats
from sim.harness.state import HarnessState

__all__ = ["FanoutTable", "rows_summary", "tally"]


@dataclass
class FanoutTable:
    """One cell's parents and children: ``parents`` and ``children`` map an
    outcome (``status:reason``, or ``succeeded`` / ``false_success`` for a
    parent) to a count; ``spawned`` is the children started, ``*_tokens`` and
    ``*_cost_usd`` the parents' own usage and their descendants'; ``wall_s``
    the parents' wall seconds (their waits for children included)."""

    cell: str
    parents: Counter[str] = field(default_factory=Counter)
    children: Counter[str] = field(default_factory=Counter)
    spawned: int = 0
    descendants: int = 0
    parent_tokens: int = 0
    children_tokens: int = 0
    parent_cost_usd: float = 0.0
    children_cost_usd: float = 0.0
    wall_s: list[float] = field(default_factory=list)

    @property
    def session_cost_usd(self) -> float:
        """Parents' and descendants' cost together (USD)."""
        return self.parent_cost_usd + self.children_cost_usd

    def lines(self) -> list[str]:
        """The table as text: parents' outcomes, children's outcomes, totals."""
        out = [f"== {self.cell}: {sum(self.parents.values())} parents, "
               f"{self.spawned} children"]
        for title, counts in (("parents", self.parents), ("children", self.children)):
            total = sum(counts.values()) or 1
            out.append(f"  {title}")
            out.extend(f"    {label:<32} {n:>6} {100 * n / total:6.1f}%"
                       for label, n in counts.most_common())
        out.append(f"  tokens  parents {self.parent_tokens:,}  children "
                   f"{self.children_tokens:,}")
        out.append(f"  cost    parents ${self.parent_cost_usd:,.2f}  children "
                   f"${self.children_cost_usd:,.2f}  session ${self.session_cost_usd:,.2f}")
        return out


def tally(table: FanoutTable, outcome: str, state: HarnessState) -> None:
    """Add one parent (its outcome label and final state) to ``table``."""
    table.parents[outcome] += 1
    table.children.update(state.children_outcomes)
    table.spawned += state.children
    table.descendants += state.descendants
    table.parent_tokens += state.total_tokens
    table.children_tokens += state.children_tokens
    table.parent_cost_usd += state.money_usd
    table.children_cost_usd += state.children_cost_usd
    table.wall_s.append(state.wall_s)


def rows_summary(outcomes: Sequence[str], columns: Mapping[str, Sequence[Any]]
                 ) -> dict[str, Any]:
    """summary.json's ``children`` section of one cell, from its rows: the
    parents' ``outcomes`` and the subagent columns (``columns``: name ->
    values, one per parent; ``children_outcomes`` as JSON text).

    Keys: ``parents`` and ``children`` ({ending: count}, largest first, ties
    by name; a child's ending is ``status:reason``); ``spawned``,
    ``children_failed`` and ``descendants`` (totals over the parents);
    ``children_tokens`` and ``children_cost_usd`` (descendants' totals:
    tokens, USD); ``session_tokens`` (:func:`sim.analysis.stats.describe` of
    each parent's own plus its descendants' tokens) and ``session_cost``
    (:func:`sim.analysis.stats.cost_summary` of the same in USD)."""
    children: Counter[str] = Counter()
    for text in columns["children_outcomes"]:
        if text:
            children.update({str(k): int(v) for k, v in json.loads(text).items()})
    return {
        "parents": _ordered(Counter(str(o) for o in outcomes)),
        "children": _ordered(children),
        "spawned": int(sum(columns["children"])),
        "children_failed": int(sum(columns["children_failed"])),
        "descendants": int(sum(columns["descendants"])),
        "children_tokens": int(sum(columns["children_tokens"])),
        "children_cost_usd": float(stats.cost_summary(columns["children_cost_usd"])["total"]),
        "session_tokens": stats.describe(columns["session_tokens"]),
        "session_cost": stats.cost_summary(columns["session_cost_usd"]),
    }


def _ordered(counts: Counter[str]) -> dict[str, int]:
    """``counts`` largest first, ties by label."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

