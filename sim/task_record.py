"""One flat record per simulated task (DESIGN.md "Results").

Engines build a :class:`TaskRecord` with :func:`make_record` from the
harness's final state and the world's hidden ground truth; sweeps turn lists
of them into DataFrames and Parquet files. Units: tokens are counts, cost is
USD, times are seconds.
"""

from __future__ import annotations

import json
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
    restarts from a checkpoint by a human with extended budgets.

    The children fields (:data:`CHILDREN_FIELDS`, written only for a harness
    with subagents) describe the run's subagents: ``children`` the child runs
    it started, ``children_failed`` those that ended in any state but
    succeeded, ``descendants`` every run below it; ``children_tokens`` and
    ``children_cost_usd`` what its descendants used (tokens: prompt, cached or
    not, plus output and thinking; USD); ``session_tokens`` and
    ``session_cost_usd`` the run's own plus its descendants'; and
    ``children_outcomes`` its children's endings as JSON
    (``{"status:reason": count}``, sorted keys; ``""`` with no children)."""

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
    children: int = 0
    children_failed: int = 0
    descendants: int = 0
    children_tokens: int = 0
    children_cost_usd: float = 0.0
    session_tokens: int = 0
    session_cost_usd: float = 0.0
    children_outcomes: str = ""

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens, cached or not."""
        return prompt_tokens_of(self)


CHILDREN_FIELDS: tuple[str, ...] = (
    "children", "children_failed", "descendants", "children_tokens", "children_cost_usd",
    "session_tokens", "session_cost_usd", "children_outcomes")
"""The fields about a run's subagents: columns of results.parquet only when a
cell's harness has subagents (a sweep without them writes the same bytes as before)."""

ALL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskRecord))
"""Every field of :class:`TaskRecord`, in order: :data:`RECORD_FIELDS` then
:data:`CHILDREN_FIELDS`."""

RECORD_FIELDS: tuple[str, ...] = tuple(f for f in ALL_FIELDS if f not in CHILDREN_FIELDS)
"""The fields every results.parquet has as columns, in order."""


def record_fields(children: bool) -> tuple[str, ...]:
    """The columns of a results table: :data:`RECORD_FIELDS`, then with
    ``children`` (a harness with subagents) :data:`CHILDREN_FIELDS`."""
    return ALL_FIELDS if children else RECORD_FIELDS


def outcomes_json(outcomes: dict[str, int]) -> str:
    """Children's endings ``{label: count}`` as the ``children_outcomes``
    column holds them: JSON with sorted keys, ``""`` when empty."""
    return json.dumps(outcomes, sort_keys=True, separators=(",", ":")) if outcomes else ""


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
        queue_s, model_wait_s, resumptions, s.children, s.children_failed, s.descendants,
        s.children_tokens, s.children_cost_usd, s.total_tokens + s.children_tokens,
        s.money_usd + s.children_cost_usd, outcomes_json(s.children_outcomes))
