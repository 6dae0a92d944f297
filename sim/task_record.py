"""One flat record per simulated task (DESIGN.md "Results").

Engines build a :class:`TaskRecord` with :func:`make_record` from the
harness's final state and the world's hidden ground truth; sweeps turn lists
of them into DataFrames and Parquet files. Units: tokens are counts, cost is
USD, times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from sim.harness.messages import prompt_tokens_of
from sim.harness.state import SUCCEEDED, HarnessState

FALSE_SUCCESS = "false_success"


def outcome_label(status: str, reason: str, truly_done: bool) -> str:
    """``state:reason``, except ``succeeded`` (verified, or claimed and truly
    done) and ``false_success`` (claimed, accepted and not truly done)."""
    if status == SUCCEEDED:
        return SUCCEEDED if truly_done else FALSE_SUCCESS
    return f"{status}:{reason}"


@dataclass(slots=True)
class TaskRecord:
    """What one task did. ``ground_truth`` is the progress the task needed
    (hidden from the harness); ``truly_done`` whether it was reached.
    Times are seconds on the engine's clock: ``arrival_s``, ``start_s`` (a
    sandbox was free), ``end_s``; ``queue_s`` is the wait before the start,
    ``model_wait_s`` the total wait for model slots; ``resumptions`` counts
    restarts from a checkpoint by a human with extended budgets."""

    cell: str
    task: int
    state: str
    reason: str
    outcome: str
    steps: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    thinking_tokens: int
    cost_usd: float
    active_s: float
    wall_s: float
    retries: int
    nudges: int
    verifier_rejections: int
    compactions: int
    ground_truth: int
    truly_done: bool
    tenant: str = ""
    agent_type: str = ""
    arrival_s: float = 0.0
    start_s: float = 0.0
    end_s: float = 0.0
    queue_s: float = 0.0
    model_wait_s: float = 0.0
    resumptions: int = 0

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens, cached or not."""
        return prompt_tokens_of(self)


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskRecord))


def make_record(cell: str, index: int, s: HarnessState, *, ground_truth: int, truly_done: bool,
                tenant: str = "", agent_type: str = "", arrival_s: float = 0.0,
                start_s: float = 0.0, end_s: float | None = None, queue_s: float = 0.0,
                model_wait_s: float = 0.0, resumptions: int = 0) -> TaskRecord:
    """The flat record of task ``index`` of ``cell`` that ended in state ``s``.
    ``ground_truth`` (productive steps the task needed) and ``truly_done``
    (whether the work was really done) are the world's hidden truth, read
    here for the report only. Without engine times, the task starts at 0 and
    ends after its wall time."""
    status, reason = s.status, s.reason
    return TaskRecord(  # positional, in field order (a keyword call costs more per task)
        cell, index, status, reason, outcome_label(status, reason, truly_done),
        s.turns, s.tool_calls, s.input_tokens, s.output_tokens, s.cache_read_tokens,
        s.cache_write_tokens, s.thinking_tokens, s.money_usd, s.active_s, s.wall_s, s.retries,
        s.nudges, s.verifier_rejections, s.compactions, ground_truth, truly_done, tenant,
        agent_type, arrival_s, start_s, start_s + s.wall_s if end_s is None else end_s,
        queue_s, model_wait_s, resumptions)
