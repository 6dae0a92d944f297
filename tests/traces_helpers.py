"""Helpers for the trace tests: the shared data folder and small record builders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage

ROOT = Path(__file__).resolve().parents[1]


SKIP_REASON = ("no shared trace data: set SIM_TRACES_DATA to the traces folder (the one "
               "holding tau2/ and mini-swe-agent/) or SIM_SHARED to the project's shared "
               "folder (holding data/traces); looked in {looked}")


def trace_data_candidates() -> list[Path]:
    """Where the shared trace data is looked for, in order: ``$SIM_TRACES_DATA``;
    else ``$SIM_SHARED/data/traces``; else ``shared/data/traces`` beside the
    repository (or two levels up, for a worktree)."""
    if os.environ.get("SIM_TRACES_DATA"):
        return [Path(os.environ["SIM_TRACES_DATA"])]
    if os.environ.get("SIM_SHARED"):
        return [Path(os.environ["SIM_SHARED"]) / "data" / "traces"]
    return [ROOT.parent / "shared" / "data" / "traces",
            ROOT.parent.parent / "shared" / "data" / "traces"]


def data_folder(*parts: str) -> Path:
    """``<trace data>/<parts>`` (see :func:`trace_data_candidates`); skips the
    test, naming SIM_TRACES_DATA and SIM_SHARED, when absent."""
    candidates = trace_data_candidates()
    for base in candidates:
        if base.is_dir():
            return base.joinpath(*parts)
    pytest.skip(SKIP_REASON.format(looked=", ".join(str(c) for c in candidates)))


def call(prompt: int = 100, *, read: int = 0, write: int = 0, output: int = 10,
         tools: int = 0, **fields) -> CallRecord:
    """A call with ``prompt`` tokens in all, ``read``/``write`` of them cached."""
    return CallRecord(Usage(input_tokens=prompt - read - write, cache_read_tokens=read,
                            cache_write_tokens=write, output_tokens=output),
                      tool_calls=[ToolCallRecord(name=f"t{i}", id=f"id{i}", arguments="{}")
                                  for i in range(tools)], **fields)


def run(run_id: str, prompts: list[int], **fields) -> RunRecord:
    """A run of calls with the given prompt sizes."""
    fields.setdefault("source", "sim")
    fields.setdefault("file", "test")
    return RunRecord(run_id=run_id, calls=[call(p) for p in prompts], **fields)
