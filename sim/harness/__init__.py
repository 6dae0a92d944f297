"""The real harness: sans-IO, standard library only (DESIGN.md, Rule 1).

Start with :mod:`sim.harness.loop`, which shows one run from top to bottom.
A driver performs the effects of :mod:`sim.harness.effects` and answers them
as :mod:`sim.harness.protocol` says; it touches a run's state only through
:func:`request_abort`, :func:`park`, :func:`resume` and :func:`cancel`. Every
budget is checked by the harness itself (:class:`Limits`, which raises
:class:`LimitExceeded`), never by a driver.
"""

from sim.harness.budgets import LimitExceeded, Limits
from sim.harness.checkpoint import CheckpointStore, MemoryStore, SQLiteStore
from sim.harness.context import normalize
from sim.harness.detector import NoProgressDetector, canonical_call
from sim.harness.effects import (
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolError,
    ToolRequest,
    ToolResult,
    UserReply,
    UserTurn,
    Verdict,
    VerifyRequest,
    Wait,
)
from sim.harness.events import Event
from sim.harness.loop import CONTINUATION, NUDGE_PREFIX, agent_loop, cancel
from sim.harness.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from sim.harness.params import (
    Budgets,
    ContextParams,
    DetectorParams,
    HarnessParams,
    ParameterError,
    Prices,
    RetryPolicy,
    RetryQuota,
    ThinkingConfig,
    ToolDefinition,
    ToolSpec,
    VerifierParams,
)
from sim.harness.protocol import ANSWERS, ProtocolError
from sim.harness.retry_budget import RetryBudget
from sim.harness.state import (
    OUTCOMES,
    RESUMABLE,
    TERMINAL_STATES,
    HarnessState,
    new_state,
    park,
    request_abort,
    resume,
)

__all__ = [
    "ANSWERS", "CONTINUATION", "NUDGE_PREFIX", "OUTCOMES", "RESUMABLE", "TERMINAL_STATES",
    "ApprovalDecision", "ApprovalRequest", "Budgets", "Checkpoint", "CheckpointStore",
    "ContextParams", "DetectorParams", "Event", "HarnessParams", "HarnessState", "LimitExceeded",
    "Limits", "MemoryStore",
    "Message", "ModelError", "ModelRequest", "ModelResponse", "NoProgressDetector",
    "ParameterError", "Prices", "ProtocolError", "RetryBudget", "RetryPolicy", "RetryQuota",
    "SQLiteStore", "TextBlock",
    "ThinkingBlock", "ThinkingConfig", "ToolDefinition", "ToolError", "ToolRequest",
    "ToolResult", "ToolResultBlock", "ToolSpec", "ToolUseBlock", "Usage", "UserReply",
    "UserTurn", "Verdict",
    "VerifierParams", "VerifyRequest", "Wait", "agent_loop", "cancel", "canonical_call",
    "new_state", "normalize", "park", "request_abort", "resume",
]
