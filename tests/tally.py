"""One statistic whose trials are split across pytest-xdist workers.

A test whose trials take minutes pins one worker (``--dist loadscope`` sends a
module, or a class, to one worker). Split into parts (one test class each, so
the parts can run on different workers), each part records its count here;
the part that finishes last sees every part's count and checks the whole
statistic, with the size and power of the unsplit test. The record lives in
a folder shared by the workers of one run and by no other run (the parent of
a worker's base temporary folder under xdist, the base folder itself
without), written under a file lock.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest


def run_folder(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """A folder every xdist worker of this run shares, and no other run."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


def tally(folder: Path, name: str, part: str, value: int, parts: set[str]) -> dict[str, int] | None:
    """Record ``value`` as ``part`` of the statistic ``name``; return every
    part's value once all of ``parts`` are recorded (to exactly one caller,
    the last), else None."""
    path = folder / f"tally-{name}.json"
    with open(folder / f"tally-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        seen = json.loads(path.read_text()) if path.exists() else {}
        complete_before = set(seen) >= parts
        seen[part] = value
        path.write_text(json.dumps(seen))
    return seen if set(seen) >= parts and not complete_before else None
