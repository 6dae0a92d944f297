"""Events the loop emits for observers (metrics, logs, traces).

An observer is any callable taking an :class:`Event`; the loop calls each
observer synchronously and ignores its return value. Kinds: ``model_response``,
``tool_executed``, ``retry``, ``nudge``, ``compaction``, ``alert``, ``approval``,
``verifier`` and ``terminal``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MODEL_RESPONSE = "model_response"
TOOL_EXECUTED = "tool_executed"
RETRY = "retry"
NUDGE = "nudge"
COMPACTION = "compaction"
ALERT = "alert"
APPROVAL = "approval"
VERIFIER = "verifier"
TERMINAL = "terminal"


@dataclass(slots=True)
class Event:
    """Something that happened at step ``turn``, with details in ``data``."""

    kind: str
    turn: int
    data: dict[str, Any] = field(default_factory=dict)


Observer = Callable[[Event], None]
