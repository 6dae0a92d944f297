"""Recorded runs as the replay driver reads them: plain, immutable records.

Built from the two tables of a trace folder (``runs.parquet`` and
``calls.parquet``, the trace model of :mod:`sim.traces`) by the one reader of
recorded runs, :mod:`sim.drivers.replay.reading`, which checks them with the
trace model's reader first. Units: tokens are counts, money is USD, times are
seconds.

Two nullable columns of ``calls.parquet`` are used where a source records the
text: ``text_sha256`` (a hash of the response's text) and
``observation_sha256`` (a hash of the non-tool messages that entered after the
call, such as a simulated user's reply). They let the replay tell identical
text turns from different ones (:mod:`sim.drivers.replay`); where they are null
each text turn counts as distinct.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from sim.harness.messages import Usage


@dataclass(frozen=True, slots=True)
class RecordedTool:
    """One tool call a recorded response made and what came back: ``arguments``
    as canonical JSON (None when unrecorded), ``result_tokens`` (None: no result
    recorded), ``result_sha256`` of the result text, ``error`` flag, ``duration_s``."""

    name: str
    arguments: str | None = None
    result_tokens: int | None = None
    result_sha256: str | None = None
    error: bool = False
    duration_s: float | None = None

    def input(self) -> dict[str, Any] | None:
        """The arguments as the JSON object a tool_use block carries: the parsed
        object, ``{"arguments": value}`` for JSON that is not an object or for a
        raw string that is not JSON, None when unrecorded."""
        if self.arguments is None:
            return None
        parsed = _PARSED.get(self.arguments)
        if parsed is None:
            try:
                value = json.loads(self.arguments)
            except ValueError:
                value = {"arguments": self.arguments}
            parsed = value if isinstance(value, dict) else {"arguments": value}
            if len(_PARSED) >= _PARSED_KEPT:
                _PARSED.clear()
            _PARSED[self.arguments] = parsed
        return parsed


_PARSED: dict[str, dict[str, Any]] = {}
"""The objects of the last few thousand argument texts parsed: tool calls
repeat their arguments, and a block's arguments are never altered (blocks
are values), so equal texts share one object."""
_PARSED_KEPT = 4096


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One recorded model call: its ``usage`` (the harness's own per-call
    :class:`~sim.harness.messages.Usage`: the trace model's five counts, its
    ``reasoning_tokens`` as ``thinking_tokens``; ``usage.prompt_tokens`` is the
    whole prompt), ``cost_usd`` (None: unrecorded), ``finish_reason``
    verbatim, ``latency_s``, the size of its text (``text_tokens``), its tool
    calls, the tokens of non-tool messages that entered after it
    (``observation_tokens``), and its ``purpose``: ``step`` (a loop step; what
    imported runs' calls are), ``compaction``, ``verifier`` or ``finalize``
    (the tool-free call of ``harness.visibility.on_limit: finalize``) (sim's
    own recorded runs). The replay answers a request with this very ``usage``."""

    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    finish_reason: str | None = None
    latency_s: float | None = None
    text_tokens: int = 0
    observation_tokens: int = 0
    tools: tuple[RecordedTool, ...] = ()
    model: str | None = None
    text_sha256: str | None = None
    observation_sha256: str | None = None
    purpose: str = "step"
    agent: str | None = None
    """The subagent that made the call (None: the run's own agent)."""


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """One recorded run: identity, the source's ``exit`` label verbatim,
    ``resolved`` (None: the source does not say), the run's recorded
    ``cost_usd`` (None: unrecorded) and its calls in order."""

    run_id: str
    calls: tuple[RecordedCall, ...]
    source: str = ""
    task_id: str | None = None
    model: str | None = None
    exit: str | None = None
    resolved: bool | None = None
    cost_usd: float | None = None

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return sum(len(c.tools) for c in self.calls)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens summed over the recorded calls."""
        return sum(c.usage.prompt_tokens for c in self.calls)

    @property
    def recorded_cost_usd(self) -> float | None:
        """The run's recorded cost, else the sum of its calls' recorded costs
        when every call has one, else None."""
        if self.cost_usd is not None:
            return self.cost_usd
        costs = [c.cost_usd for c in self.calls if c.cost_usd is not None]
        return math.fsum(costs) if costs and len(costs) == len(self.calls) else None


PURPOSES: tuple[str, ...] = ("step", "compaction", "verifier", "finalize")
"""What a recorded call was for (``calls.purpose``; null: a step)."""
