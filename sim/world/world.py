"""The compiled world of one scenario cell: constants the per-step code reads.

:class:`World` is built once per cell from :class:`WorldParams`; it turns
probabilities into cumulative thresholds and tool lists into lookup tables so
that :class:`~sim.world.task.SimulatedTask` does no work twice per step. It
also builds the harness's tool specifications, so the harness and the world
agree on names, effect classes and timeouts.
"""

from __future__ import annotations

from bisect import bisect_right

from sim.harness.params import ToolSpec
from sim.world.params import WorldParams
from sim.world.verifiers import OracleVerifier, Verifier


class World:
    """Per-cell constants of the stochastic world (see :class:`WorldParams`)."""

    def __init__(self, params: WorldParams, verifier: Verifier | None = None) -> None:
        self.params = params
        policy = params.policy
        self.c_loop = policy.loop
        self.c_transient = self.c_loop + policy.transient
        self.c_validation = self.c_transient + policy.validation
        self.c_premature = self.c_validation + policy.premature
        self.premature_after = policy.premature_after
        self.escape = policy.escape_after_nudge
        self.retry_success = params.retry_success

        tools = params.tools
        self.tool_names = tuple(t.name for t in tools)
        total = sum(t.weight for t in tools)
        acc = 0.0
        cumulative = []
        for t in tools:
            acc += t.weight / total
            cumulative.append(acc)
        cumulative[-1] = 1.0
        self.tool_cumulative = tuple(cumulative)
        self._last_tool = len(tools) - 1
        self.tool_duration = {t.name: t.duration.dist for t in tools}  # seconds

        tokens = params.tokens
        self.output_tokens = tokens.output
        self.thinking_tokens = tokens.thinking
        self.result_tokens = tokens.tool_result
        self.feedback_tokens = tokens.verifier_feedback
        self.summary_ratio = tokens.summary_ratio
        self.task_tokens = tokens.task
        self.stable_prefix_tokens = tokens.prefix - tokens.task

        faults = params.faults
        self.f_rate_limit = faults.rate_limit
        self.f_server = faults.rate_limit + faults.server_error
        self.f_max_tokens = self.f_server + faults.max_tokens
        self.any_faults = self.f_max_tokens > 0
        self.retry_after_s = faults.retry_after_s

        latency = params.latency
        self.ttft_s = latency.ttft_s
        self.decode_s_per_token = 1.0 / latency.decode_tps
        self.prefill_s_per_token = 0.0 if latency.prefill_tps is None else 1.0 / latency.prefill_tps

        approval = params.approval
        self.approval_delay = approval.delay
        self.approve = approval.approve

        self.verifier: Verifier = verifier if verifier is not None else OracleVerifier()

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The harness's view of the tools: names, effects, timeouts, schema sizes."""
        return tuple(ToolSpec(name=t.name, effect=t.effect, timeout_s=t.timeout_s,
                              polling=t.polling, definition_tokens=t.definition_tokens)
                     for t in self.params.tools)

    def system_prompt_tokens(self) -> int:
        """Tokens of the system prompt: the prefix less the task statement and
        tool definitions, so that the first prompt is ``tokens.prefix``."""
        p = self.params
        return p.tokens.prefix - p.tokens.task - sum(t.definition_tokens for t in p.tools)

    def pick_tool(self, u: float) -> str:
        """The tool a uniform draw ``u`` in [0, 1) selects, by weight."""
        return self.tool_names[min(bisect_right(self.tool_cumulative, u), self._last_tool)]
