"""Exit categories: the sources' own termination labels and sim's
``state:reason`` put on one scale, so that exit mixes can be compared.

A trace's ``exit`` is the source's label, verbatim (tau2-bench's
``user_stop``, mini-swe-agent's ``Submitted``, sim's
``succeeded:model_complete``). Each maps to one category of :data:`CATEGORIES`:

- ``agent``: the agent ended the run itself (a final answer, tau2's
  ``agent_stop``, mini-swe-agent's ``Submitted``, OpenHands' ``finished``
  and ``rejected``, sim's ``succeeded`` other
  than by the task-giver);
- ``task_giver``: the task-giver ended it (tau2's ``user_stop``, sim's
  ``succeeded:user_stop``);
- ``steps``, ``errors``, ``money``, ``tokens``, ``time``: a harness limit
  (tau2's ``max_steps`` and ``too_many_errors``, mini-swe-agent's
  ``LimitsExceeded``, OpenHands' ``RuntimeError: Agent reached maximum
  iteration...`` and ``...maximum budget...``, the OpenHands SDK's
  ``MaxIterationsReached`` and ``MaxBudgetReached``, Inspect's ``message``,
  ``turn``, ``token``, ``cost``, ``time`` and ``working`` limits, sim's
  ``budget_exhausted:<budget>``);
- ``model_error``: a model-API fault the run did not survive (sim's
  ``failed:model_error`` and ``failed:retries_exhausted``, an exception name
  such as ``InternalServerError`` or ``Timeout``);
- ``no_progress``, ``context``, ``cancelled``: sim's detector stop (and the
  OpenHands SDK's ``stuck``), context overflow (and Inspect's ``context``
  limit, the SDK's ``LLMContextWindowExceedError``) and cancellations (and
  Inspect's ``operator`` limit, the SDK's ``paused``);
- ``other``: anything else (kept, and listed by label in the report).
"""

from __future__ import annotations

import re

CATEGORIES: tuple[str, ...] = ("agent", "task_giver", "steps", "errors", "money", "tokens",
                               "time", "model_error", "no_progress", "context", "cancelled",
                               "other")

_EXACT: dict[str, str] = {
    # tau2-bench
    "user_stop": "task_giver", "agent_stop": "agent", "max_steps": "steps",
    "too_many_errors": "errors", "agent_error": "model_error", "user_error": "other",
    # mini-swe-agent
    "submitted": "agent", "limitsexceeded": "steps", "formaterror": "other",
    # OpenHands (its AgentState on a finish or reject action)
    "finished": "agent", "rejected": "agent",
    # OpenHands V1 (the software-agent-sdk: its execution_status, and the code of
    # the ConversationErrorEvent it stops on)
    "maxiterationsreached": "steps", "maxbudgetreached": "money", "stuck": "no_progress",
    "paused": "cancelled", "llmcontextwindowexceederror": "context",
    # Inspect AI (the type of the limit that stopped a sample; a message limit is
    # calibrated as a step budget, sim.calibration.limits)
    "message": "steps", "turn": "steps", "token": "tokens", "cost": "money", "time": "time",
    "working": "time", "context": "context", "operator": "cancelled",
    # sim
    "succeeded": "agent", "false_success": "agent", "succeeded:user_stop": "task_giver",
    "budget_exhausted:steps": "steps", "budget_exhausted:errors": "errors",
    "budget_exhausted:money": "money", "budget_exhausted:tokens": "tokens",
    "budget_exhausted:output_tokens": "tokens", "budget_exhausted:active_time": "time",
    "budget_exhausted:wall_time": "time", "budget_exhausted:retries": "model_error",
    "failed:model_error": "model_error", "failed:retries_exhausted": "model_error",
    "needs_human:no_progress": "no_progress", "failed:context_overflow": "context",
}
_LIMITS: tuple[tuple[re.Pattern[str], str], ...] = (
    # OpenHands' control flags stop a run with a RuntimeError that names the limit
    (re.compile(r"reached maximum iteration", re.IGNORECASE), "steps"),
    (re.compile(r"reached maximum budget", re.IGNORECASE), "money"),
)
_FAULT = re.compile(r"(error|exception|timeout|timedout|unavailable|overloaded|ratelimit)",
                    re.IGNORECASE)


def category(label: str | None) -> str:
    """The category of one exit label (None or empty: ``other``)."""
    if not label:
        return "other"
    key = label.strip()
    low = key.lower()
    if low in _EXACT:
        return _EXACT[low]
    if low.startswith("succeeded"):
        return "agent"
    if low.startswith("cancelled"):
        return "cancelled"
    if low.startswith("budget_exhausted:"):
        return "other"
    for pattern, limit in _LIMITS:
        if pattern.search(key):
            return limit
    if _FAULT.search(key):
        return "model_error"
    return "other"


def mix(labels: list[str]) -> dict[str, float]:
    """Share of each category among ``labels`` (exit labels or categories),
    over every category, in :data:`CATEGORIES` order."""
    cats = [c if c in CATEGORIES else category(c) for c in labels]
    n = len(cats)
    return {c: (cats.count(c) / n if n else 0.0) for c in CATEGORIES}


def total_variation(p: dict[str, float], q: dict[str, float]) -> float:
    """Total-variation distance ``(1/2) sum |p - q|`` of two mixes."""
    return 0.5 * sum(abs(p.get(c, 0.0) - q.get(c, 0.0)) for c in set(p) | set(q))
