"""Exploring harness settings interactively: :class:`Explorer` (a setting in,
a cached small-sample simulation and its figures out) and, with ipywidgets
installed (the ``notebooks`` extra), :func:`panel` (the explorer's dials as
widgets). See ``notebooks/explore_budgets.ipynb``."""

from __future__ import annotations

from typing import Any

from sim.explore.explorer import Explorer, Setting, View, readable, side_by_side

__all__ = ["Explorer", "Setting", "View", "panel", "readable", "side_by_side"]


def panel(explorer: Explorer, **dials: Any):
    """The widget panel of ``explorer`` (see :func:`sim.explore.dials.panel`);
    ipywidgets is imported here, on first use."""
    from sim.explore.dials import panel as build

    return build(explorer, **dials)
