"""Parameters of the stochastic world: tasks, the simulated model and tools.

Pydantic models, validated when a scenario is loaded; every field has a
default and a unit. The defaults reproduce seed 001's random process: a
lognormal number of productive steps per task (median about 10, at least 3),
and per model call a 1.5% chance of entering a doom loop, 8% transient tool
error, 4% bad arguments, 3% premature "done" once half the work is done.

The building blocks (probabilities, sizes, durations) are in
:mod:`sim.world.param_types`, the tasks' difficulty and endings in
:mod:`sim.world.task_params`, the lognormals' ranges in
:mod:`sim.world.ranges`; every name is importable from here.
"""

from __future__ import annotations

from functools import cached_property
from itertools import pairwise
from typing import Annotated

from pydantic import Field, model_validator

from sim.world.distributions import Distribution
from sim.world.param_types import (
    MAX_NEED,
    MIN_RATE,
    DurationParams,
    Effect,
    Prob,
    Size,
)
from sim.world.param_types import Strict as _Strict
from sim.world.task_params import (
    ChoiceDifficulty,
    Difficulty,
    EndingsParams,
    FixedDifficulty,
    LognormalDifficulty,
    UnsolvableParams,
)

__all__ = ["MAX_NEED", "MIN_RATE", "ApprovalParams", "CacheHits", "CacheParams",
           "ChoiceDifficulty", "Difficulty", "DurationParams", "Effect", "EndingsParams",
           "FanoutParams", "FaultParams", "FixedDifficulty", "GraderParams", "LatencyParams",
           "LognormalDifficulty",
           "PolicyParams", "Prob", "Size", "StepSizes", "TaskClass", "TokenParams", "ToolParams",
           "UnsolvableParams", "UserParams", "VisibleBudgetParams", "WorldParams"]


class PolicyParams(_Strict):
    """What the simulated model does on each call that is not stuck in a loop.

    One uniform draw per call picks, in this order: enter a doom loop
    (``loop``), a call that meets a transient tool error (``transient``), a
    call with bad arguments (``validation``), a premature claim of success
    (``premature``, only once ``premature_after`` of the work is done), a
    message to the task-giver (``talk``, in a conversation: a question that
    does not advance the work), else a productive call, or the final answer
    when it completes the work. The probabilities must sum to at most 1.

    A model in a loop repeats its call until a nudge gets it out
    (``escape_after_nudge``) or, on each repeat, it moves on by itself
    (``self_escape``); with ``ends_in_loop`` false a fitted ending waits until
    it is out (the ending drawn for a call it spends in the loop is void). In
    a conversation (the harness's ``end_marker`` set) the model reports a
    finished task to the task-giver, or ends the run itself with the marker
    with probability ``self_end``.
    """

    loop: Prob = Field(0.015, description="probability a call enters a doom loop")
    transient: Prob = Field(0.08, description="probability a call meets a transient tool error")
    validation: Prob = Field(0.04, description="probability a call has bad arguments")
    premature: Prob = Field(0.03, description="probability of a premature 'done' claim")
    premature_after: Prob = Field(
        0.5, description="share of the required progress done before premature claims occur")
    escape_after_nudge: Prob = Field(
        0.5, description="probability a nudge gets the model out of a loop")
    self_escape: Prob = Field(
        0.0, description="probability, on each repeat of a loop, that the model moves on by "
                         "itself")
    ends_in_loop: bool = Field(True, description=(
        "whether a fitted ending (world.endings) may end a run while its model is in a loop "
        "(false: only once it is out)"))
    talk: Prob = Field(0.0, description="probability a call is a message to the task-giver "
                                        "(conversations only)")
    self_end: Prob = Field(0.0, description="probability the model ends a finished "
                                            "conversation itself (its end marker) rather "
                                            "than report to the task-giver")

    @model_validator(mode="after")
    def _sums_to_at_most_one(self) -> PolicyParams:
        total = self.loop + self.transient + self.validation + self.premature + self.talk
        if total > 1.0 + 1e-12:
            raise ValueError(f"loop + transient + validation + premature + talk = {total:g} "
                             f"exceeds 1")
        return self


class ToolParams(_Strict):
    """One simulated tool: its effect class, timeout, share of calls and duration."""

    name: str = Field(description="tool name the model calls")
    effect: Effect = Field("read", description="effect class")
    timeout_s: float = Field(30.0, gt=0, description="per-call timeout (seconds)")
    weight: float = Field(1.0, ge=0, description="relative share of the model's calls")
    polling: bool = Field(False, description="expected to repeat (detector keys on results)")
    definition_tokens: int = Field(200, ge=0, description="schema size in the prefix (tokens)")
    duration: DurationParams = Field(default_factory=DurationParams)
    result_tokens: Size | None = Field(None, description="size of one result or error of "
                                                         "this tool (tokens; null: "
                                                         "tokens.tool_result)")


def _default_tools() -> tuple[ToolParams, ...]:
    return (
        ToolParams(name="read_file", effect="read", timeout_s=5.0, weight=4.0,
                   duration=DurationParams(median_s=0.2, sigma=0.5)),
        ToolParams(name="edit_file", effect="reversible_write", timeout_s=5.0, weight=2.0,
                   duration=DurationParams(median_s=0.3, sigma=0.5)),
        ToolParams(name="run_shell", effect="reversible_write", timeout_s=30.0, weight=2.0,
                   duration=DurationParams(median_s=3.0, sigma=0.6)),
        ToolParams(name="fetch_url", effect="external", timeout_s=15.0, weight=1.0,
                   duration=DurationParams(median_s=1.5, sigma=0.6)),
        ToolParams(name="run_code", effect="reversible_write", timeout_s=60.0, weight=1.0,
                   duration=DurationParams(median_s=8.0, sigma=0.6)),
    )


class StepSizes(_Strict):
    """Sizes that differ by step (``tokens.by_step``): the tool results and the
    task-giver's replies that answer a run's ``n``-th model call (1-based) are
    drawn as usual and multiplied by ``observation[b]``, ``b`` the call's step
    bin (the last ``edges[b] <= n``). A run's first observation (a repository
    listing, a greeting's reply) can so be larger or smaller than later ones."""

    edges: tuple[int, ...] = Field((1,), min_length=1, description=(
        "first model call of each step bin (1-based, increasing, starting at 1)"))
    observation: tuple[Annotated[float, Field(ge=0.0, le=1e3)], ...] = Field(
        (1.0,), min_length=1, description=(
            "multiplier of the tool results and replies answering a call in each step bin"))

    @model_validator(mode="after")
    def _bins(self) -> StepSizes:
        if self.edges[0] != 1:
            raise ValueError(f"edges must start at 1, got {self.edges[0]}")
        if any(b <= a for a, b in pairwise(self.edges)):
            raise ValueError(f"edges must increase, got {list(self.edges)}")
        if len(self.observation) != len(self.edges):
            raise ValueError(f"observation has {len(self.observation)} values for "
                             f"{len(self.edges)} step bins (edges)")
        return self


class FanoutParams(_Strict):
    """When the simulated model starts subagents (``world.fanout``; the
    harness side: ``harness.subagents``). A root run's productive model call
    is a call of the subagent tool ``tool`` instead with probability
    ``spawn`` (or, with ``edges``, ``spawn_by_step[b]`` for a call in step
    bin ``b``: the last ``edges[b] <= n`` for the run's ``n``-th model call,
    1-based). Such a call asks for ``k`` children with probability
    ``children[k]`` (``children[0]`` must be 0) and counts as one productive
    step of the parent (the delegated work). Each child is a task of class
    ``child_class`` of ``world.classes`` (null: a task of the parent's
    class), with its own random streams; children never spawn. The draws
    (two uniforms of the model stream) are made only when ``fanout`` is set,
    so a world without it draws exactly what it drew before."""

    tool: str = Field("agent", min_length=1, description="the subagent tool's name (as "
                                                          "harness.subagents.tool)")
    spawn: Prob = Field(0.0, description="probability a productive call is a spawn call")
    edges: tuple[int, ...] | None = Field(None, min_length=1, description=(
        "first model call of each step bin (1-based, increasing, starting at 1; null: one "
        "bin)"))
    spawn_by_step: tuple[Prob, ...] | None = Field(None, min_length=1, description=(
        "spawn probability per step bin (with edges; replaces spawn)"))
    children: tuple[Prob, ...] = Field((0.0, 1.0), min_length=2, description=(
        "probability of k children per spawn call, k = 0, 1, ... (index 0 must be 0)"))
    child_class: str | None = Field(None, description=(
        "the world.classes class children draw from (null: the parent's class)"))

    @model_validator(mode="after")
    def _bins(self) -> FanoutParams:
        if self.children[0] != 0.0:
            raise ValueError(f"children[0] must be 0 (a spawn starts at least one child), "
                             f"got {self.children[0]}")
        if abs(sum(self.children) - 1.0) > 1e-9:
            raise ValueError(f"children must sum to 1, got {sum(self.children)}")
        if (self.edges is None) != (self.spawn_by_step is None):
            raise ValueError("set edges and spawn_by_step together")
        if self.edges is not None and self.spawn_by_step is not None:
            if self.edges[0] != 1:
                raise ValueError(f"edges must start at 1, got {self.edges[0]}")
            if any(b <= a for a, b in pairwise(self.edges)):
                raise ValueError(f"edges must increase, got {list(self.edges)}")
            if len(self.spawn_by_step) != len(self.edges):
                raise ValueError(f"spawn_by_step has {len(self.spawn_by_step)} values for "
                                 f"{len(self.edges)} step bins (edges)")
        return self


class TokenParams(_Strict):
    """Token sizes. The prompt of step n (0-based) is ``prefix + n * (output +
    tool_result)`` when nothing else enters the history (seed 001: 12,000 +
    1,500 n).

    Each size is a number or a distribution drawn per call (rounded to whole
    tokens; outputs at least 1). ``first_prompt``, when set, draws each run's
    first prompt (the stable prefix plus that run's task statement);
    ``run_scale``, when set, draws once per run a multiplier of every output,
    thinking, tool-result and task-giver reply size of the run, so runs of one
    kind of task differ in how fast their history grows."""

    prefix: int = Field(12_000, ge=1, description=(
        "stable prefix: system prompt + tool definitions + task statement (tokens)"))
    task: int = Field(300, ge=1, description="task statement, part of the prefix (tokens)")
    output: Size = Field(600, description="output of one model call (tokens)")
    answer_output: Size | None = Field(None, description=(
        "output of a reply without tool calls: a final answer or a message to the task-giver "
        "(tokens; null: output)"))
    final_output: Size | None = Field(None, exclude_if=lambda value: value is None, description=(
        "output of a claim that the task is done, a run's final answer, apart from messages "
        "to the task-giver (tokens; null: answer_output)"))
    tool_result: Size = Field(900, description="one tool result or error (tokens)")
    verifier_feedback: int = Field(900, ge=0, description="a verifier's rejection (tokens)")
    summary_ratio: Prob = Field(0.1, description="compaction summary size / compacted size")
    thinking: Size = Field(0, description="thinking tokens per call when enabled (tokens)")
    first_prompt: Distribution | None = Field(None, description=(
        "each run's first prompt: stable prefix + its task statement (tokens; null: prefix)"))
    run_scale: Distribution | None = Field(None, description=(
        "per-run multiplier of output, thinking, tool-result and reply sizes (null: 1)"))
    by_step: StepSizes | None = Field(None, description=(
        "multipliers of the tool results and replies by step bin (null: the same at every "
        "step)"))


class GraderParams(_Strict):
    """The call a model grader (verifier ``model_grader``) makes per claimed
    success: its prompt is ``prompt`` tokens plus the final answer, its output
    ``output`` tokens; both are uncached and priced at the run model's prices."""

    prompt: int = Field(2_000, ge=0, description=(
        "grader prompt besides the answer: rubric, task statement, evidence (tokens)"))
    output: int = Field(150, ge=1, description="the grader's verdict and reasons (tokens)")


class FaultParams(_Strict):
    """Model-API faults per call; all default to zero. A ``persistent`` fault
    is a 5xx server error that every retry of the call meets again, so the run
    ends (``failed:model_error``) at whatever step it strikes (mini-swe-agent's
    ``InternalServerError``)."""

    max_tokens: Prob = Field(0.0, description="probability a response is cut at max tokens")
    rate_limit: Prob = Field(0.0, description="probability of a 429 with Retry-After")
    server_error: Prob = Field(0.0, description="probability of a 5xx server error")
    persistent: Prob = Field(0.0, description="probability a call meets a server error that "
                                              "persists through every retry")
    retry_after_s: float = Field(2.0, ge=0, description="Retry-After sent with a 429 (seconds)")


class CacheHits(_Strict):
    """Cache hits as a provider makes them (``cache.hits``): a call that hits
    reads the cached prefix, the previous call's prompt, and writes (or, with
    automatic caching, sends as plain input) only the new suffix; misses and
    partial reads are events with fitted probabilities, not per-call shares.

    A share ``run_share`` of runs is cached at all (one uniform of the sizes
    stream at a run's first call when it is below 1: hits cluster by run, as
    when some runs reach a provider or a deployment that does not cache, and
    such runs' cost makes the tail); the others read nothing at any call. In
    a cached run, the first call hits with probability ``first_hit`` (an
    entry earlier runs left) and then reads ``round(first_share * prompt)`` tokens. A later
    call, the ``n``-th of its run (1-based model calls, compactions and grader
    calls not counted), whose cache entry is alive (within the TTL of the
    previous call) hits with probability ``hit[b][g]``: ``b`` its call bin (the
    last ``edges[b] <= n``), ``g`` its gap bin (the last ``gap_edges_s[g] <=``
    the seconds from the end of the previous call to this one). A hit reads
    ``min(prompt, round(read_ratio * previous prompt))`` tokens when the
    history is the one the previous call sent, only the stable prefix (system
    prompt and tools) when a compaction rewrote it; with probability
    ``partial`` the hit is partial and reads ``round(share * that)``, the share
    drawn from ``partial_share`` and cut to [0, 1]. A miss reads nothing; hit
    or miss, the prompt becomes the cached entry. Draws: one uniform of the
    sizes stream per call that may hit, and for a hit one more when
    ``partial`` > 0 (plus the share's draw for a partial one).

    ``ttl_s`` is the entry's lifetime fitted from the traces (seconds from
    the start of the previous call of the run; a calibration picks it among
    the lifetimes providers document): a call after it finds no live entry and
    reads nothing. None (the default): the lifetime the harness asks for
    (``harness.prompt_cache``), or ``cache.ttl_s`` with automatic caching."""

    run_share: Prob = Field(1.0, description=(
        "share of runs whose calls the provider caches at all (drawn once per run); the "
        "others read nothing at any call"))
    first_hit: Prob = Field(0.0, description=(
        "probability a run's first call reads an entry earlier runs left"))
    first_share: Prob = Field(1.0, description=(
        "share of the first prompt such a hit reads"))
    edges: tuple[int, ...] = Field((2,), min_length=1, description=(
        "first call of each call bin (1-based model calls of the run, increasing, starting at "
        "2: the first call that can read its own run's previous prompt)"))
    gap_edges_s: tuple[float, ...] = Field((0.0,), min_length=1, description=(
        "start of each gap bin: seconds from the end of the previous call to this one "
        "(increasing, starting at 0)"))
    hit: tuple[tuple[Prob, ...], ...] = Field(((1.0,),), min_length=1, description=(
        "probability a call with a live entry hits, one row per call bin, one value per gap "
        "bin"))
    read_ratio: float = Field(1.0, ge=0.0, le=2.0, description=(
        "tokens a hit reads per token of the previous prompt (cut to the prompt)"))
    partial: Prob = Field(0.0, description="probability a hit reads only part of the prefix")
    ttl_s: float | None = Field(None, gt=0, description=(
        "lifetime of a cache entry fitted from the traces (seconds; null: the harness's "
        "prompt_cache TTL, or cache.ttl_s with automatic caching)"))
    partial_share: Distribution | None = Field(None, description=(
        "share of the prefix a partial hit reads, drawn per partial hit and cut to [0, 1] "
        "(null: none: a partial hit reads nothing)"))

    @model_validator(mode="after")
    def _bins(self) -> CacheHits:
        if self.edges[0] != 2:
            raise ValueError(f"edges must start at 2, got {self.edges[0]}")
        if any(b <= a for a, b in pairwise(self.edges)):
            raise ValueError(f"edges must increase, got {list(self.edges)}")
        if self.gap_edges_s[0] != 0.0:
            raise ValueError(f"gap_edges_s must start at 0, got {self.gap_edges_s[0]}")
        gaps = self.gap_edges_s
        if any(b <= a for a, b in pairwise(gaps)):
            raise ValueError(f"gap_edges_s must increase, got {list(gaps)}")
        if len(self.hit) != len(self.edges):
            raise ValueError(f"hit has {len(self.hit)} rows for {len(self.edges)} call bins "
                             f"(edges)")
        for row in self.hit:
            if len(row) != len(gaps):
                raise ValueError(f"each row of hit needs {len(gaps)} values (one per gap bin, "
                                 f"gap_edges_s), got {len(row)}")
        return self


class CacheParams(_Strict):
    """The provider's prompt cache. A harness that sets cache breakpoints
    (``harness.prompt_cache``) reads from it what the previous prompt of the
    run cached and writes the rest. With ``automatic`` the provider caches
    every prompt unasked (OpenAI's and DeepSeek's automatic prefix caching):
    the part of a prompt the previous prompt of the run had is read from the
    cache while it lives (``ttl_s``), the rest is plain input, nothing is
    written. ``first_prompt_cached`` is the share of a run's first prompt
    already cached by earlier runs (the shared system prompt). A provider may
    read only part of what is cached: with ``read_share`` set, a later call
    that hits reads ``round(share * prompt)`` tokens (the share drawn per call
    from the sizes stream), and with probability ``miss`` it reads nothing
    (one uniform of the sizes stream per later call when ``miss`` > 0). With
    ``hits`` set the provider's own behaviour replaces these three
    (:class:`CacheHits`)."""

    automatic: bool = Field(False, description="the provider caches without breakpoints")
    ttl_s: float = Field(300.0, gt=0, description="lifetime of an automatic cache entry "
                                                  "(seconds)")
    first_prompt_cached: Prob = Field(0.0, description=(
        "share of a run's first prompt read from the cache (written by earlier runs)"))
    miss: Prob = Field(0.0, description=(
        "probability a later call of a run reads nothing from a live cache entry"))
    read_share: Distribution | None = Field(None, description=(
        "share of a later call's prompt read from a live cache entry when it hits, drawn per "
        "call and cut to [0, 1] (null: all the previous prompt cached)"))
    hits: CacheHits | None = Field(None, description=(
        "cache hits as a provider makes them: fitted hit probabilities by call and gap bin, "
        "a hit reading the previous prompt (null: the model above; miss, read_share and "
        "first_prompt_cached then do not apply)"))


class UserParams(_Strict):
    """The task-giver in a conversation (the harness's ``end_marker`` set): it
    answers each message of the model, or ends the run. A report of finished
    work ends it with ``stop_when_done``, a claim of success that is wrong
    (premature, or on a task that cannot be solved) with ``accept_claim``, any
    other message (a question) with ``give_up``."""

    reply: Size = Field(100, description="one reply of the task-giver (tokens)")
    stop_when_done: Prob = Field(1.0, description="probability a report of finished work "
                                                  "ends the run")
    accept_claim: Prob = Field(1.0, description="probability a wrong claim of success ends "
                                                "the run")
    give_up: Prob = Field(0.0, description="probability any other message ends the run")
    latency: DurationParams | None = Field(None, description="time to reply (null: none)")


class LatencyParams(_Strict):
    """Model-call time: ``ttft_s + output / decode_tps + prompt / prefill_tps``."""

    ttft_s: float = Field(0.5, ge=0, description="time to first token (seconds)")
    decode_tps: float = Field(75.0, ge=MIN_RATE, description="decode speed (output "
                                                             "tokens/second)")
    prefill_tps: float | None = Field(None, ge=MIN_RATE, description=(
        "prefill speed (prompt tokens/second); None: prefill time is in ttft"))


class ApprovalParams(_Strict):
    """Human approvals: delay until a decision and the chance of approval."""

    delay: DurationParams = Field(default_factory=lambda: DurationParams(median_s=120.0,
                                                                         sigma=1.0))
    approve: Prob = Field(0.95, description="probability a human approves a call")


class VisibleBudgetParams(_Strict):
    """How the simulated model answers a budget it is shown
    (``harness.visibility``). ASSUMED, NOT FITTED: no trace records a model's
    response to a visible budget yet, so these are explicit assumptions, to
    be swept (a report says so when this block is set).

    When the last message holds the harness's budget note and the smallest
    share any budget leaves (``r = left / total``) is below ``wrap_up_at``,
    each step's call wraps up with probability ``wrap_up`` (one uniform of
    the model stream); with ``wrap_up_slope`` set the probability is instead
    the logistic ``wrap_up / (1 + exp(wrap_up_slope * (r - wrap_up_at)))``
    at every r (half of ``wrap_up`` at ``wrap_up_at``). A call that wraps up
    gives its final answer, right with probability ``wrap_up_success``. The
    one tool-free call the harness makes when a limit is reached
    (``on_limit: finalize``) is answered right with
    probability ``finalize_success`` (without this block: never, since the
    work was not done)."""

    wrap_up_at: Prob = Field(0.2, description=(
        "share of a budget left below which the model may wrap up"))
    wrap_up: Prob = Field(0.0, description=(
        "probability per call that the model wraps up (gives its final answer) once the "
        "share left is below wrap_up_at"))
    wrap_up_slope: float | None = Field(None, gt=0, le=1_000, description=(
        "null: wrap_up is a step at wrap_up_at; else the probability per call is the "
        "logistic wrap_up / (1 + exp(wrap_up_slope * (share left - wrap_up_at)))"))
    wrap_up_success: Prob = Field(0.5, description="probability a wrapped-up answer is right")
    finalize_success: Prob = Field(0.5, description=(
        "probability the answer of the finalize call (on_limit: finalize) is right"))


_CLASS_SECTIONS = ("policy", "tokens", "user", "faults", "unsolvable", "latency", "cache")
_CHANGES = "the fields of the world's {} that the class changes (null: none)"


class TaskClass(_Strict):
    """One kind of task in a mixture (``world.classes``): a run is of class
    ``k`` with probability ``weight_k / sum(weights)``, drawn once per task.

    A class is the world with some sections changed: ``difficulty`` and ``endings`` replace
    the world's; each of ``policy``, ``tokens``, ``user``, ``faults``,
    ``unsolvable``, ``latency`` and ``cache`` changes only the fields it gives (the others
    keep the world's values); ``tool_weights`` gives the class its own shares of
    the world's tools; ``model`` is the model that answers the class's runs
    (priced at ``harness.model_prices`` or the catalogue), null for the
    harness's model. A class's ``tokens.prefix`` is its first prompt: the
    world's stable prefix (system prompt and tool definitions) plus the class's
    task statement.
    """

    name: str = Field(min_length=1, description="the class's name")
    weight: float = Field(1.0, ge=0, description="relative share of tasks")
    model: str | None = Field(None, description="model id of the class's runs (null: the "
                                                "harness's model)")
    difficulty: Difficulty | None = Field(None, description="the class's difficulty (null: "
                                                            "the world's)")
    policy: PolicyParams | None = Field(None, description=_CHANGES.format("policy"),
                                        json_schema_extra={"see": "world.policy"})
    tokens: TokenParams | None = Field(None, description=_CHANGES.format("token sizes"),
                                       json_schema_extra={"see": "world.tokens"})
    user: UserParams | None = Field(None, description=_CHANGES.format("task-giver"),
                                    json_schema_extra={"see": "world.user"})
    faults: FaultParams | None = Field(None, description=_CHANGES.format("faults"),
                                       json_schema_extra={"see": "world.faults"})
    unsolvable: UnsolvableParams | None = Field(
        None, description=_CHANGES.format("unsolvable tasks"),
        json_schema_extra={"see": "world.unsolvable"})
    latency: LatencyParams | None = Field(None, description=_CHANGES.format("model latency"),
                                          json_schema_extra={"see": "world.latency"})
    cache: CacheParams | None = Field(None, description=_CHANGES.format("prompt cache"),
                                      json_schema_extra={"see": "world.cache"})
    endings: EndingsParams | None = Field(None, description=(
        "how the class's runs end (null: the world's endings)"),
        json_schema_extra={"see": "world.endings"})
    tool_weights: dict[str, float] | None = Field(None, description=(
        "tool name -> relative share of the class's calls (null: the world's weights)"))


class WorldParams(_Strict):
    """The stochastic world one scenario cell runs against."""

    difficulty: Difficulty = Field(default_factory=LognormalDifficulty)
    policy: PolicyParams = Field(default_factory=PolicyParams)
    tools: tuple[ToolParams, ...] = Field(default_factory=_default_tools, min_length=1)
    retry_success: Prob = Field(0.9, description="probability a harness retry of a transient "
                                                 "tool error succeeds")
    tokens: TokenParams = Field(default_factory=TokenParams)
    grader: GraderParams = Field(default_factory=GraderParams)
    faults: FaultParams = Field(default_factory=FaultParams)
    latency: LatencyParams = Field(default_factory=LatencyParams)
    approval: ApprovalParams = Field(default_factory=ApprovalParams)
    user: UserParams = Field(default_factory=UserParams)
    unsolvable: UnsolvableParams = Field(default_factory=UnsolvableParams)
    cache: CacheParams = Field(default_factory=CacheParams)
    endings: EndingsParams | None = Field(None, description=(
        "how runs end: competing per-step hazards with a per-run frailty (null: when the "
        "drawn need is done)"))
    classes: tuple[TaskClass, ...] = Field((), description=(
        "task classes: a weighted mixture of kinds of task (empty: one kind, the world)"))
    visible_budget: VisibleBudgetParams | None = Field(
        None, exclude_if=lambda value: value is None, description=(
            "how the model answers a budget it is shown (assumed, not fitted; null: it "
            "ignores it, and a forced final answer is wrong; left out when writing)"))
    fanout: FanoutParams | None = Field(None, exclude_if=lambda value: value is None,
                                        description=("when the model starts subagents (null: "
                                                     "never; left out when writing)"))

    @cached_property
    def class_worlds(self) -> tuple[WorldParams, ...]:
        """The world of each class (the class's changes applied, no classes of
        its own); ValueError naming the class when a combination is invalid."""
        return tuple(self._class_world(c) for c in self.classes)

    def _class_world(self, c: TaskClass) -> WorldParams:
        raw = self.model_dump(exclude={"classes", "fanout"})
        for section in _CLASS_SECTIONS:
            given = getattr(c, section)
            if given is not None:
                raw[section] = {**raw[section], **given.model_dump(include=given.model_fields_set)}
        if c.difficulty is not None:
            raw["difficulty"] = c.difficulty.model_dump()
        if c.endings is not None:
            raw["endings"] = c.endings.model_dump()
        if c.tool_weights is not None:
            unknown = sorted(set(c.tool_weights) - {t["name"] for t in raw["tools"]})
            if unknown:
                raise ValueError(f"class {c.name!r}: tool_weights names unknown tools {unknown}")
            for tool in raw["tools"]:
                tool["weight"] = c.tool_weights.get(tool["name"], 0.0)
        stable = self.tokens.prefix - self.tokens.task
        if raw["tokens"]["prefix"] <= stable:
            raise ValueError(f"class {c.name!r}: tokens.prefix ({raw['tokens']['prefix']}) must "
                             f"exceed the world's stable prefix ({stable}: prefix less task)")
        raw["tokens"]["task"] = raw["tokens"]["prefix"] - stable
        try:
            return WorldParams.model_validate(raw)
        except ValueError as error:
            raise ValueError(f"class {c.name!r}: {error}") from None

    @model_validator(mode="after")
    def _prefix_holds_its_parts(self) -> WorldParams:
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        if sum(t.weight for t in self.tools) <= 0:
            raise ValueError("at least one tool needs a positive weight")
        fixed = self.tokens.task + sum(t.definition_tokens for t in self.tools)
        if fixed > self.tokens.prefix:
            raise ValueError(f"tokens.prefix ({self.tokens.prefix}) is smaller than the task "
                             f"statement plus tool definitions ({fixed})")
        if self.classes:
            names = [c.name for c in self.classes]
            if len(set(names)) != len(names):
                raise ValueError(f"class names must be unique, got {names}")
            if sum(c.weight for c in self.classes) <= 0:
                raise ValueError("at least one class needs a positive weight")
            self.class_worlds  # noqa: B018 - validates every class's world
        fanout = self.fanout
        if fanout is not None and fanout.child_class is not None and fanout.child_class not in [
                c.name for c in self.classes]:
            raise ValueError(f"fanout.child_class {fanout.child_class!r} is not a class of "
                             f"world.classes")
        return self
