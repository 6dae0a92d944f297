"""Helpers for the trace tests: the shared data folder and small record builders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.traces.model import CallRecord, RunRecord, ToolCallRecord

ROOT = Path(__file__).resolve().parents[1]


def data_folder(*parts: str) -> Path:
    """``shared/data/traces/<parts>`` beside the repository (or two levels up,
    for a worktree), or ``$SIM_TRACES_DATA/<parts>``; skips the test when absent."""
    candidates = [Path(os.environ["SIM_TRACES_DATA"])] if os.environ.get("SIM_TRACES_DATA") \
        else [ROOT.parent / "shared" / "data" / "traces",
              ROOT.parent.parent / "shared" / "data" / "traces"]
    for base in candidates:
        if base.is_dir():
            return base.joinpath(*parts)
    pytest.skip("the shared trace data (shared/data/traces) is not beside the repository")


def call(prompt: int = 100, *, read: int = 0, write: int = 0, output: int = 10,
         tools: int = 0, **fields) -> CallRecord:
    """A call with ``prompt`` tokens in all, ``read``/``write`` of them cached."""
    return CallRecord(prompt - read - write, read, write, output, 0,
                      tool_calls=[ToolCallRecord(name=f"t{i}", id=f"id{i}", arguments="{}")
                                  for i in range(tools)], **fields)


def run(run_id: str, prompts: list[int], **fields) -> RunRecord:
    """A run of calls with the given prompt sizes."""
    fields.setdefault("source", "sim")
    fields.setdefault("file", "test")
    return RunRecord(run_id=run_id, calls=[call(p) for p in prompts], **fields)
