"""``--where`` slices of a trace folder, for tune: :mod:`sim.traces.where`.

The conditions serve every command that reads a trace folder (import,
summary, calibrate, replay, tune), so they live with the trace model; the
names are re-exported here for code that imported them from tune.
"""

from __future__ import annotations

from sim.traces.where import Condition, parse_where, run_mask, slice_folder

__all__ = ["Condition", "parse_where", "run_mask", "slice_folder"]
