"""Traces: real and simulated agent runs in one model, and importers for the
formats agents already write (see :mod:`sim.traces.model` for the model and
:mod:`sim.traces.importer` for the formats).

    from sim.traces import import_traces, read_traces
    import_traces(["runs/"], "traces/")           # any mix of formats
    runs, calls = read_traces("traces/")          # pandas DataFrames, checked
"""

from __future__ import annotations

from sim.traces.model import (
    CallRecord,
    RunRecord,
    ToolCallRecord,
    approx_tokens,
    load_tables,
    read_traces,
)

__all__ = ["CallRecord", "RunRecord", "ToolCallRecord", "approx_tokens", "import_traces",
           "load_tables", "read_traces"]


def __getattr__(name: str) -> object:
    if name == "import_traces":  # the importers load only when an import runs
        from sim.traces.importer import import_traces

        return import_traces
    raise AttributeError(f"module 'sim.traces' has no attribute {name!r}")
