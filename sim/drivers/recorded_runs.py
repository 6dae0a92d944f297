"""Recorded runs as the replay driver reads them: one frozen record per run,
its calls the trace model's own :class:`~sim.traces.model.CallRecord` (what
every importer writes), in order.

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

import math
from dataclasses import dataclass

from sim.traces.model import CallRecord


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """One recorded run: identity, the source's ``exit`` label verbatim,
    ``resolved`` (None: the source does not say), the run's recorded
    ``cost_usd`` (None: unrecorded) and its calls in order."""

    run_id: str
    calls: tuple[CallRecord, ...]
    source: str = ""
    task_id: str | None = None
    model: str | None = None
    exit: str | None = None
    resolved: bool | None = None
    cost_usd: float | None = None

    @property
    def tool_calls(self) -> int:
        """Tool calls over all recorded calls."""
        return sum(len(c.tool_calls) for c in self.calls)

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

