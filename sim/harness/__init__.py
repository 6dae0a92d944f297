"""The real harness: sans-IO, standard library only (DESIGN.md, Rule 1).

Start with :mod:`sim.harness.loop`, which shows one run from top to bottom.
"""

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
    Verdict,
    VerifyRequest,
    Wait,
)
from sim.harness.events import Event
from sim.harness.loop import CONTINUATION, NUDGE_PREFIX, agent_loop
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
    ThinkingConfig,
    ToolSpec,
    VerifierParams,
)
from sim.harness.state import TERMINAL_STATES, HarnessState, new_state, resume

__all__ = [
    "CONTINUATION", "NUDGE_PREFIX", "TERMINAL_STATES", "ApprovalDecision", "ApprovalRequest",
    "Budgets", "Checkpoint", "CheckpointStore", "ContextParams", "DetectorParams", "Event",
    "HarnessParams", "HarnessState", "MemoryStore", "Message", "ModelError", "ModelRequest",
    "ModelResponse", "NoProgressDetector", "ParameterError", "Prices", "RetryPolicy",
    "SQLiteStore", "TextBlock", "ThinkingBlock", "ThinkingConfig", "ToolError", "ToolRequest",
    "ToolResult", "ToolResultBlock", "ToolSpec", "ToolUseBlock", "Usage", "Verdict",
    "VerifierParams", "VerifyRequest", "Wait", "agent_loop", "canonical_call", "new_state",
    "normalize", "resume",
]
