"""The compiled world of one scenario cell: constants the per-step code reads.

:class:`World` is built once per cell from :class:`WorldParams`; it turns
probabilities into cumulative thresholds and tool lists into lookup tables so
that :class:`~sim.world.task.SimulatedTask` does no work twice per step. It
also builds the harness's tool specifications, so the harness and the world
agree on names, effect classes and timeouts. A world with task classes holds
one compiled world per class (``classes``); a task picks one when it starts.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from sim.harness.messages import ToolUseBlock
from sim.harness.params import ToolSpec
from sim.world.distributions import BaseDistribution, Fixed, Gamma, Lognormal
from sim.world.params import FanoutParams, Size, WorldParams
from sim.world.verifiers import OracleVerifier, Verifier

MADE_CALLS = 2048
"""Calls per run whose ids and targets (and, with fixed sizes, blocks) are made once."""

END_MARKER = "###STOP###"
"""The end marker the harness's conversation mode looks for by default (tau2-bench's)."""


def size_parts(size: Size) -> tuple[int | None, BaseDistribution | None]:
    """``(tokens, None)`` for a fixed size, ``(None, distribution)`` otherwise."""
    if isinstance(size, int):
        return size, None
    if isinstance(size, Fixed):
        return round(size.value), None
    return None, size


@dataclass(frozen=True, slots=True)
class FixedSizes:
    """The sizes (tokens) of a world whose every size is fixed, with no per-run
    scale: the per-step code reads these constants and draws nothing."""

    output: int
    answer: int
    thinking: int
    results: dict[str, int]


def _cumulative(weights: list[float]) -> tuple[float, ...]:
    """Cumulative shares of ``weights`` (the last exactly 1.0), for picking by
    one uniform draw with ``bisect_right``."""
    total = sum(weights)
    acc = 0.0
    cumulative = []
    for w in weights:
        acc += w / total
        cumulative.append(acc)
    cumulative[-1] = 1.0
    return tuple(cumulative)


class Fanout:
    """The compiled ``world.fanout``: the subagent tool's name, the spawn
    probability of a productive call by step, and the number of children a
    uniform draw gives (see :class:`~sim.world.params.FanoutParams`)."""

    __slots__ = ("tool", "edges", "spawn", "cumulative", "child_class")

    def __init__(self, params: FanoutParams) -> None:
        self.tool = params.tool
        self.edges: tuple[int, ...] = params.edges or (1,)
        self.spawn: tuple[float, ...] = params.spawn_by_step or (params.spawn,)
        self.cumulative = _cumulative(list(params.children))
        self.child_class = params.child_class

    def spawn_at(self, step: int) -> float:
        """The chance that a productive ``step``-th model call (1-based) spawns."""
        return self.spawn[max(0, bisect_right(self.edges, step) - 1)]

    def children(self, u: float) -> int:
        """The number of children a uniform draw ``u`` in [0, 1) gives (>= 1)."""
        return max(1, min(bisect_right(self.cumulative, u), len(self.cumulative) - 1))


class World:
    """Per-cell constants of the stochastic world (see :class:`WorldParams`).

    ``end_marker`` is the harness's conversation marker (None: no
    conversation), which the simulated model writes when it ends a
    conversation itself; ``max_output_tokens`` the harness's output cap, the
    bound on an answer's size when outputs are drawn from a distribution.
    """

    def __init__(self, params: WorldParams, verifier: Verifier | None = None, *,
                 end_marker: str | None = None, max_output_tokens: int | None = None,
                 model: str | None = None) -> None:
        self.params = params
        self.model = model
        self.end_marker = end_marker
        self._compile_policy(params, end_marker)
        self._compile_tools(params)
        self._compile_sizes(params, max_output_tokens)
        self._compile_endings(params)
        self._compile_conditions(params)
        self.visible = params.visible_budget  # the answer to a budget note (None: none)
        self.plain = (not self.any_faults and not self.endings  # no draw before the decision
                      and self.visible is None)
        self.verifier: Verifier = verifier if verifier is not None else OracleVerifier()
        self.classes = tuple(
            World(world, self.verifier, end_marker=end_marker,
                  max_output_tokens=max_output_tokens, model=c.model)
            for c, world in zip(params.classes, params.class_worlds, strict=True))
        if self.classes:
            self.class_cumulative = _cumulative([c.weight for c in params.classes])
        self.fanout = None if params.fanout is None else Fanout(params.fanout)

    def class_named(self, name: str) -> World:
        """The compiled world of the class called ``name`` (KeyError if none)."""
        for c, world in zip(self.params.classes, self.classes, strict=True):
            if c.name == name:
                return world
        raise KeyError(name)

    def child_world(self, parent: World) -> World:
        """The world a child of a task of class world ``parent`` draws from:
        ``fanout.child_class``'s, or the parent's own."""
        name = None if self.fanout is None else self.fanout.child_class
        return parent if name is None else self.class_named(name)

    def _compile_policy(self, params: WorldParams, end_marker: str | None) -> None:
        """The model's decision bands as cumulative thresholds of one uniform."""
        policy = params.policy
        self.c_loop = policy.loop
        self.c_transient = self.c_loop + policy.transient
        self.c_validation = self.c_transient + policy.validation
        self.c_premature = self.c_validation + policy.premature
        self.c_talk = self.c_premature + (policy.talk if end_marker is not None else 0.0)
        self.talk = self.c_talk > self.c_premature
        self.premature_after = policy.premature_after
        self.escape = policy.escape_after_nudge
        self.self_escape = policy.self_escape
        self.ends_in_loop = policy.ends_in_loop
        self.self_end = policy.self_end
        self.retry_success = params.retry_success

    def _compile_tools(self, params: WorldParams) -> None:
        """The tools: names, the cumulative weights a uniform picks one by, and
        their duration distributions (seconds)."""
        tools = params.tools
        self.tool_names = tuple(t.name for t in tools)
        self.tool_cumulative = _cumulative([t.weight for t in tools])
        self.last_tool = len(tools) - 1
        self.tool_duration = {t.name: t.duration.dist for t in tools}  # seconds
        self.tool_draw = {name: d.sample for name, d in self.tool_duration.items()}
        # lognormal durations drawn inline by the task: exp(log median + sigma * Z)
        self.tool_lognormal = {name: (d.log_median, d.sigma) if isinstance(d, Lognormal)
                               else None for name, d in self.tool_duration.items()}

    def _compile_sizes(self, params: WorldParams, max_output_tokens: int | None) -> None:
        """Token sizes (fixed or drawn), the prompt cache, and ``fixed``: the
        sizes of a world whose every size is fixed."""
        tokens = params.tokens
        self.output_tokens, self.output_dist = size_parts(tokens.output)
        answer = tokens.output if tokens.answer_output is None else tokens.answer_output
        self.answer_tokens, self.answer_dist = size_parts(answer)
        self.final_split = tokens.final_output is not None  # final answers sized apart
        self.final_tokens, self.final_dist = size_parts(
            answer if tokens.final_output is None else tokens.final_output)
        self.thinking_tokens, self.thinking_dist = size_parts(tokens.thinking)
        self.result_tokens, self.result_dist = size_parts(tokens.tool_result)
        self.tool_result = {t.name: size_parts(tokens.tool_result if t.result_tokens is None
                                               else t.result_tokens) for t in params.tools}
        self.feedback_tokens = tokens.verifier_feedback
        self.summary_ratio = tokens.summary_ratio
        self.task_tokens = tokens.task
        self.stable_prefix_tokens = tokens.prefix - tokens.task
        self.first_prompt = tokens.first_prompt
        self.run_scale = tokens.run_scale
        by_step = tokens.by_step  # multipliers of observations by step bin (None: none)
        self.obs_edges: tuple[int, ...] = (1,) if by_step is None else by_step.edges
        self.obs_scale = None if by_step is None else by_step.observation
        cache = params.cache
        self.cache_automatic = cache.automatic
        self.cache_ttl_s = cache.ttl_s
        self.first_prompt_cached = cache.first_prompt_cached
        self.cache_miss = cache.miss
        self.cache_share = cache.read_share
        self.partial_cache = self.cache_miss > 0 or self.cache_share is not None
        hits = cache.hits  # the provider's own hits (None: the shares above)
        self.cache_hits = hits is not None
        if hits is not None:
            self.hit_runs = hits.run_share
            self.hit_first, self.hit_first_share = hits.first_hit, hits.first_share
            self.hit_edges, self.hit_gap_edges, self.hit_table = (
                hits.edges, hits.gap_edges_s, hits.hit)
            self.hit_ratio, self.hit_partial = hits.read_ratio, hits.partial
            self.hit_partial_share = hits.partial_share
            self.hit_ttl_s = hits.ttl_s
        # every size fixed and no per-run scale: the per-step code reads constants
        self.fixed: FixedSizes | None = None
        results = {name: fixed for name, (fixed, _) in self.tool_result.items()
                   if fixed is not None}
        if (self.output_tokens is not None and self.answer_tokens is not None
                and self.thinking_tokens is not None and self.run_scale is None
                and self.obs_scale is None and not self.final_split
                and len(results) == len(self.tool_result)):
            self.fixed = FixedSizes(self.output_tokens, self.answer_tokens,
                                    self.thinking_tokens, results)
        self.fixed_output = 0 if self.fixed is None else self.fixed.output
        # the first calls' blocks of a world of fixed sizes, made once and shared by its
        # runs (SimulatedTask._new_call): slot (2 * call number + loop) * tools + tool
        self.n_tools = len(params.tools)
        self.made_calls: list[ToolUseBlock | None] | None = (
            None if self.fixed is None else [None] * (2 * MADE_CALLS * self.n_tools))
        cap = max_output_tokens
        self.answer_bound = (cap if self.final_tokens is None
                             else self.final_tokens if cap is None
                             else min(cap, self.final_tokens))

    def _compile_conditions(self, params: WorldParams) -> None:
        """Unsolvable tasks, the task-giver, provider faults (cumulative
        thresholds of one uniform), latency and approvals."""
        unsolvable = params.unsolvable
        self.unsolvable_share = unsolvable.share
        self.unsolvable_scale = unsolvable.need_scale
        user = params.user
        self.reply_tokens, self.reply_dist = size_parts(user.reply)
        self.stop_when_done = user.stop_when_done
        self.accept_claim = user.accept_claim
        self.give_up = user.give_up
        self.reply_latency = user.latency
        faults = params.faults
        self.f_rate_limit = faults.rate_limit
        self.f_server = faults.rate_limit + faults.server_error
        self.f_max_tokens = self.f_server + faults.max_tokens
        self.f_persistent = self.f_max_tokens + faults.persistent
        self.any_faults = self.f_persistent > 0
        self.retry_after_s = faults.retry_after_s
        latency = params.latency
        self.ttft_s = latency.ttft_s
        self.decode_s_per_token = 1.0 / latency.decode_tps
        self.prefill_s_per_token = 0.0 if latency.prefill_tps is None else 1.0 / latency.prefill_tps
        approval = params.approval
        self.approval_delay = approval.delay
        self.approve = approval.approve

    def _compile_endings(self, params: WorldParams) -> None:
        """Per-bin thresholds of the competing-risks endings (``endings``
        False when the world has none): the total hazard per step of each
        bin and the cumulative shares of resolve and give-up in it, and the
        exponent of the run's size multiplier in its hazards (``size_link``)."""
        endings = params.endings
        self.endings = endings is not None
        self.frailty: BaseDistribution | None = None
        self.size_link = 0.0 if endings is None else endings.size_link
        if endings is None:
            return
        self.end_edges = endings.edges
        totals, resolve, give_up = [], [], []
        for r, g, e in zip(endings.resolve, endings.give_up, endings.error, strict=True):
            total = r + g + e
            totals.append(total)
            resolve.append(r / total if total > 0 else 1.0)
            give_up.append((r + g) / total if total > 0 else 1.0)
        self.end_total = tuple(totals)
        self.end_resolve = tuple(resolve)
        self.end_give_up = tuple(give_up)
        if endings.frailty > 0:
            self.frailty = Gamma(shape=1.0 / endings.frailty, scale=endings.frailty)

    def end_bin(self, step: int) -> int:
        """The step bin of the ``step``-th model call (1-based)."""
        return max(0, bisect_right(self.end_edges, step) - 1)

    def pick_class(self, u: float) -> World:
        """The class world a uniform draw ``u`` in [0, 1) selects, by weight."""
        k = min(bisect_right(self.class_cumulative, u), len(self.classes) - 1)
        return self.classes[k]

    def class_models(self) -> tuple[str, ...]:
        """The models the classes name (each once, in class order)."""
        return tuple(dict.fromkeys(c.model for c in self.classes if c.model))

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
        return self.tool_names[min(bisect_right(self.tool_cumulative, u), self.last_tool)]
