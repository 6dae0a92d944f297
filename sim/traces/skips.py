"""What an import could not use, and why: skips counted by reason.

An importer that meets a run (or a whole file) it cannot use raises
:class:`Unusable` with a short ``reason`` (one of :data:`REASONS`, the key
skips are counted by) and a ``detail`` naming the record and the values; the
import turns it into a :class:`Skip` naming the file and the run. Skips never
stop an import unless it is strict (``--strict``), where the first one is an
:class:`~sim.bad_input.InputError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

UNKNOWN_FORMAT = "unknown format"
INVALID_JSON = "invalid or truncated JSON"
NO_USAGE = "no token usage"
NO_CALLS = "no model calls"
NO_RUNS = "no runs"
NO_TRAJECTORY = "no per-call trajectory"
CACHE_EXCEEDS = "cache fields exceed prompt tokens"
CACHE_MISMATCH = "cache fields do not add up"
REASONING_EXCEEDS = "reasoning tokens exceed output tokens"
BAD_COUNT = "invalid token count"
DUPLICATE = "duplicate run_id"
MISSING_EXTRA = "optional dependency missing"
UNREADABLE = "unreadable file"
TOO_LARGE = "file too large"
TOO_DEEP = "nested too deep"
NO_TOOL_NAME = "tool call without a name"

REASONS: tuple[str, ...] = (UNKNOWN_FORMAT, INVALID_JSON, NO_USAGE, NO_CALLS, NO_RUNS,
                            NO_TRAJECTORY,
                            CACHE_EXCEEDS, CACHE_MISMATCH, REASONING_EXCEEDS, BAD_COUNT, DUPLICATE,
                            MISSING_EXTRA, UNREADABLE,
                            TOO_LARGE, TOO_DEEP, NO_TOOL_NAME)


class Unusable(Exception):
    """A run or file an importer cannot use: ``reason`` (counted) and ``detail``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True, slots=True)
class Skip:
    """One skipped run (``run`` set) or file (``run`` None), with its reason."""

    file: str
    reason: str
    detail: str = ""
    run: str | None = None

    def message(self) -> str:
        """``FILE: run RUN: reason (detail)``."""
        where = self.file + (f": run {self.run}" if self.run else "")
        return f"{where}: {self.reason}" + (f" ({self.detail})" if self.detail else "")

    def to_dict(self) -> dict[str, str | None]:
        return {"file": self.file, "run": self.run, "reason": self.reason,
                "detail": self.detail}


T = TypeVar("T")

NESTED_DETAIL = "values nested deeper than the importer reads"
"""The detail of a :data:`TOO_DEEP` skip of a run or file Python cannot walk."""


def or_skip(read: Callable[[], T], file: str, run: str | None = None, *,
            deep: bool = True) -> T | Skip:
    """``read()``, or the :class:`Skip` of ``file`` (and ``run``) it gives by
    raising :class:`Unusable`, or (with ``deep``) ``RecursionError``
    (:data:`TOO_DEEP`: a structure nested deeper than Python walks; without
    ``deep`` it propagates to the file's reading)."""
    try:
        return read()
    except Unusable as problem:
        return Skip(file, problem.reason, problem.detail, run)
    except RecursionError:
        if not deep:
            raise
        return Skip(file, TOO_DEEP, NESTED_DETAIL, run)


def counts(reasons: Iterable[str]) -> dict[str, int]:
    """``{reason: count}``, most frequent first, then by name."""
    counted = Counter(reasons)
    return dict(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))


def phrase(n: int, noun: str, by_reason: dict[str, int]) -> str:
    """``"skipped 11 files: 7 no token usage, 4 cache fields exceed prompt tokens"``."""
    parts = ", ".join(f"{count} {reason}" for reason, count in by_reason.items())
    return f"skipped {n} {noun}{'' if n == 1 else 's'}" + (f": {parts}" if parts else "")
