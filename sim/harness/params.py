"""Immutable parameters of one agent run, fixed before the loop starts.

Everything here is a frozen dataclass: a mutation raises
``dataclasses.FrozenInstanceError`` (seed 000: immutability is enforced in
code, not by convention). Each checks itself when it is built
(``__post_init__``): its bounds, stated once in its fields' metadata
(:mod:`sim.harness.fields`), and its own invariants; a
:class:`HarnessParams` adds the checks that span sections. Bad settings raise
:class:`ParameterError` naming the field, so every parameter object that exists
is valid and the loop never checks them again. These dataclasses are the only
definition of the harness's settings: the scenario schema validates them
directly (their ``__pydantic_config__`` is a plain dict).

Units: tokens are counts, money is USD, time is seconds, prices are USD per
million tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from sim.harness.fields import PYDANTIC_CONFIG, ParameterError, param, spec, validated
from sim.harness.prices import Prices
from sim.harness.scopes import ScopedBudget
from sim.harness.tool_spec import EFFECT_CLASSES, EffectClass, ToolDefinition, ToolSpec

__all__ = ["CACHE_TTLS", "EFFECT_CLASSES", "MAX_ATTEMPTS", "Budgets", "ContextParams",
           "DetectorParams", "EffectClass", "HarnessParams", "ParameterError", "Prices",
           "ON_LIMIT", "RetryPolicy", "RetryQuota", "ScopedBudget", "SubagentParams",
           "ThinkingConfig", "ToolDefinition", "ToolSpec", "VerifierParams", "Visibility"]

CACHE_TTLS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
MAX_ATTEMPTS = 1_000
"""The most retries of one call a retry policy may allow (each is a request,
and its error is kept for the diagnostic)."""


def _is_none(value: object) -> bool:
    """True for None (a schema leaves such an optional section out when writing)."""
    return value is None


def _is_empty(value: object) -> bool:
    """True for an empty tuple (left out when writing, like a None section)."""
    return value == ()


@dataclass(frozen=True, slots=True)
class Budgets:
    """Run budgets; null means unlimited. Each is checked before every model
    call (and the time budgets before every tool call) against the worst case
    of the next call, so none is ever overshot.

    ``tool_errors``: tool errors the model has been shown (tau2-bench's
    ``max_errors``): once that many, the next model call is refused
    (``budget_exhausted:errors``).
    """

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    steps: int | None = param(None, "model calls per run (max turns)", gt=0,
                              report="{}-step budget")
    tokens: int | None = param(None, "prompt tokens over all calls (tokens)", gt=0,
                               report="{} prompt-token budget")
    output_tokens: int | None = param(None, "output + thinking tokens (tokens)", gt=0,
                                      report="{} output-token budget")
    money_usd: float | None = param(None, "spend per run (USD)", gt=0,
                                    report="${} money budget")
    wall_s: float | None = param(None, "active + parked time (seconds)", gt=0,
                                 report="{} s wall-time budget")
    active_s: float | None = param(None, "time not parked (seconds)", gt=0,
                                   report="{} s active-time budget")
    retries: int | None = param(None, "harness retries per run", ge=0,
                                report="{} harness retries per run")
    tool_errors: int | None = param(None, "tool errors shown to the model before the run "
                                    "stops (budget_exhausted:errors)", ge=1,
                                    report="{} tool-error budget")

    def __post_init__(self) -> None:
        validated(self)

    def scaled(self, factor: float) -> Budgets:
        """Every set budget times ``factor`` (an integer budget rounded down),
        for resuming a run with extended budgets; unset ones stay unlimited."""
        changes: dict[str, Any] = {
            f.name: type(value)(value * factor)
            for f in fields(self) if (value := getattr(self, f.name)) is not None}
        return replace(self, **changes)


def _unwritten(default: Any, description: str, **bounds: Any) -> Any:
    """A parameter field (:func:`~sim.harness.fields.param`) that a schema
    leaves out when writing a value equal to its ``default``."""
    return field(default=default, metadata={**spec(description, **bounds),
                                            "exclude_if": lambda v: v == default})


@dataclass(frozen=True, slots=True)
class RetryQuota:
    """A retry token bucket shared by every run of one client (the AWS SDKs'
    "retry quota", gRPC's retry throttling), held by a
    :class:`~sim.harness.retry_budget.RetryBudget` that the engine shares.

    The bucket starts full at ``capacity`` tokens. Each retry of a transient
    model error takes ``retry_cost`` tokens (``timeout_cost`` for a timeout);
    when the bucket holds less, the retry is not made and the run fails as
    ``failed:retries_exhausted`` (exhausted: ``retry_quota``). A call that
    succeeds at its first try puts ``success_refund`` tokens back; one that
    succeeds after retries puts back what its retries took. With
    ``refill_per_s`` > 0 the bucket also refills by that many tokens per second
    of the clock the engine passes in. Nothing exceeds ``capacity``.
    AWS standard mode: 500, 5, 10, 1, 0.
    """

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    capacity: float = param(500.0, "tokens in the full bucket", gt=0)
    retry_cost: float = param(5.0, "tokens a retry takes", gt=0)
    timeout_cost: float = param(10.0, "tokens a retry after a timeout takes", gt=0)
    success_refund: float = param(1.0, "tokens a first-try success puts back", ge=0)
    refill_per_s: float = param(0.0, "tokens added per second of engine time", ge=0)

    def __post_init__(self) -> None:
        validated(self)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Harness retries of transient errors, without a model step.

    Delay before retry k (k = 1, 2, ...; seconds), never above
    :data:`~sim.harness.classifier.MAX_WAIT_S`:

    * a server's Retry-After (seconds) when ``honor_retry_after`` (the
      default) and the error carries one;
    * else 0 (retry at once) when ``backoff`` is false;
    * else, with ``decorrelated`` false, exponential backoff:
      ``t_k = min(base_s * 2**(k-1), cap_s)`` times ``1 - jitter * (1 - u)``
      for a draw u uniform on [0, 1), i.e. uniform on
      ``[(1 - jitter) t_k, t_k]``. ``jitter: 0`` is no jitter, ``jitter: 1``
      AWS's *full jitter* (uniform(0, t_k)), ``jitter: 0.5`` its *equal
      jitter* (t_k/2 + uniform(0, t_k/2));
    * else AWS's *decorrelated jitter*: ``d_k = min(cap_s, base_s + u *
      (3 d_(k-1) - base_s))`` (uniform(base_s, 3 d_(k-1)) capped), with
      ``d_0 = base_s``; it needs ``jitter: 1`` (every delay drawn).

    The draws come from :func:`~sim.harness.classifier.jitter_draw`
    (deterministic: the harness owns no random source), keyed by the call's
    turn and retry number; with ``jitter_scope: run`` also by the run's key
    (given by the engine), so runs rejected together spread out; with
    ``call`` (the default) every run draws alike.

    The retries of one model call stop (``failed:retries_exhausted``) after
    ``max_attempts`` of them (the OpenAI and Anthropic SDKs' ``max_retries``,
    2 by default there), or, with ``max_retry_s`` set, when the next retry
    would start more than ``max_retry_s`` seconds after the call's first try
    began (its tries' latencies plus the delays), or when the shared
    ``quota`` (:class:`RetryQuota`) is empty. ``tool_max_attempts``, when
    set, bounds the retries of a tool call instead; after ``fallback_after``
    rate-limit retries of one model call the harness switches to
    ``fallback_model`` if one is set (priced at ``fallback_prices`` when
    given). ``model_error_retries``: immediate retries of a server error (5xx,
    malformed or empty response) before the run fails (seed 000: one).
    """

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    base_s: float = param(1.0, "first backoff (seconds)", gt=0)
    cap_s: float = param(64.0, "longest backoff (seconds)", gt=0)
    jitter: float = param(0.0, "share of a backoff that jitter may remove (1: full jitter, "
                               "0.5: equal jitter)", ge=0, le=1)
    max_attempts: int = param(5, "retries of one model call (and of a tool call unless "
                                 "tool_max_attempts is set)", ge=0, le=MAX_ATTEMPTS)
    tool_max_attempts: int | None = param(None, "retries of one tool call (null: max_attempts)",
                                          ge=0, le=MAX_ATTEMPTS)
    fallback_after: int = param(5, "rate-limit retries before the fallback model", ge=1)
    fallback_model: str | None = param(None, "model id to switch to, or null")
    fallback_prices: Prices | None = field(default=None, metadata={
        **spec("prices of the fallback model (null: priced as any other model)"),
        "exclude_if": _is_none})
    model_error_retries: int = param(1, "immediate retries of a model server error", ge=0,
                                     le=MAX_ATTEMPTS)
    retry_tool_errors: bool = param(True, "retry transient tool errors in the harness (false: "
                                          "the model sees them)")
    # the fields below are left out of a written scenario at their defaults, so
    # settings written before they existed are written the same
    backoff: bool = _unwritten(True, "back off before a retry (false: retry at once, or after "
                                     "the Retry-After when honoured)")
    honor_retry_after: bool = _unwritten(True, "wait the server's Retry-After when it gives one")
    decorrelated: bool = _unwritten(False, "AWS decorrelated jitter (needs jitter: 1)")
    jitter_scope: str = _unwritten("call", "what a jitter draw is keyed by: call (turn and "
                                           "retry) or run (also the run)")
    max_retry_s: float | None = _unwritten(None, "time budget of one model call's tries "
                                                 "(seconds; null: none)", gt=0)
    quota: RetryQuota | None = field(default=None, metadata={
        **spec("retry token bucket shared by a client's runs (null: none)"),
        "exclude_if": _is_none})

    def __post_init__(self) -> None:
        validated(self, self._problems())

    def _problems(self) -> Iterator[tuple[str, str]]:
        if not self.cap_s >= self.base_s:
            yield "base_s", (f"need 0 < base_s <= cap_s, got base_s={self.base_s}, "
                             f"cap_s={self.cap_s}")
        if self.decorrelated and self.jitter != 1:
            yield "decorrelated", f"decorrelated jitter draws every delay: needs jitter 1, " \
                                  f"got {self.jitter}"
        if self.jitter_scope not in JITTER_SCOPES:
            yield "jitter_scope", f"must be one of {', '.join(JITTER_SCOPES)}, got " \
                                  f"{self.jitter_scope!r}"


JITTER_SCOPES = ("call", "run")
"""What a retry's jitter draw is keyed by (:attr:`RetryPolicy.jitter_scope`)."""


@dataclass(frozen=True, slots=True)
class DetectorParams:
    """No-progress detector settings (seed 001).

    A sequence of calls with period 2..``cycle_max_period`` repeated
    ``cycle_repeats`` times (A-B-A-B) counts as a cycle; ``stale_window``
    observations in a row whose hashes were all seen count as no new
    information; ``objective_window`` steps without improvement of a reported
    objective metric (lower is better) count as no movement. ``max_nudges``
    (the scenario's ``nudges``): detections answered with an injected
    observation before the next detection stops the run as needs_human (0
    stops on the first), counted since the detector's memory was last cleared
    (a person resumed the run).
    """

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    enabled: bool = param(True, "run the detector")
    repeat_threshold: int = param(3, "identical calls in a row that count as a loop", ge=2)
    cycle_max_period: int = param(4, "longest cycle period looked for (calls)", ge=2,
                                  le=MAX_ATTEMPTS)
    cycle_repeats: int = param(2, "repeats of a cycle that count", ge=2)
    stale_window: int = param(0, "observations in a row already seen (0: off)", ge=0)
    objective_window: int = param(0, "steps without objective improvement (0: off)", ge=0)
    max_nudges: int = param(1, "nudges before the run stops as needs_human", ge=0, alias="nudges")

    def __post_init__(self) -> None:
        validated(self)

    @property
    def nudges(self) -> int:
        """``max_nudges`` by its scenario name (``harness.detector.nudges``)."""
        return self.max_nudges


@dataclass(frozen=True, slots=True)
class ContextParams:
    """Context builder settings.

    ``compact_at_tokens``: when the assembled context exceeds this many tokens
    the oldest history is compacted before the call (None: never);
    ``compact_fraction``: share of the history (oldest first) replaced by a
    summary on compaction (seed 000: 0.6 after a max_tokens truncation);
    ``emergency_compaction``: on context overflow, compact to
    ``emergency_target`` of the window, raise an alert and continue; when
    False the run fails as ``failed:context_overflow``.
    """

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    compact_at_tokens: int | None = param(None, "compact the oldest history above this prompt "
                                                "size (tokens; null: never)", gt=0)
    compact_fraction: float = param(0.6, "share of history compacted", gt=0, lt=1)
    emergency_compaction: bool = param(True, "on overflow compact and continue (false: fail)")
    emergency_target: float = param(0.5, "share of the window to compact down to", gt=0, lt=1)
    summary_max_tokens: int = param(2_000, "longest compaction summary (tokens)", gt=0)

    def __post_init__(self) -> None:
        validated(self)


@dataclass(frozen=True, slots=True)
class ThinkingConfig:
    """Extended thinking: ``budget_tokens`` of thinking per call when enabled
    (then more than zero)."""

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    enabled: bool = param(False, "request extended thinking")
    budget_tokens: int = param(0, "thinking budget per call (tokens)", ge=0)

    def __post_init__(self) -> None:
        validated(self, [("budget_tokens", "must be positive when thinking is enabled")]
                  if self.enabled and self.budget_tokens <= 0 else [])


@dataclass(frozen=True, slots=True)
class VerifierParams:
    """When and how a claimed success is checked by something the model cannot
    write. ``enabled`` False accepts every claim (unverified success).

    A check that costs something (a model grader) states its worst case so the
    budgets can refuse it before it runs: ``max_prompt_tokens`` and
    ``max_output_tokens`` of its model call (priced at the run's prices) and
    ``max_duration_s`` seconds. Zero means the check is free."""

    enabled: bool = False
    name: str = "oracle"
    max_prompt_tokens: int = param(0, "grader prompt (tokens)", ge=0)
    max_output_tokens: int = param(0, "grader output (tokens)", ge=0)
    max_duration_s: float = param(0.0, "check duration (seconds)", ge=0)

    def __post_init__(self) -> None:
        validated(self)


@dataclass(frozen=True, slots=True)
class SubagentParams:
    """Child runs the model may start by calling the subagent tool ``tool``
    (rules: :mod:`sim.harness.subagents`).

    ``max_concurrent``: children of one spawn call run at once (Claude Code's
    default: 20); more are queued by the driver and run as earlier ones end.
    ``max_total``: children one run may start in all, counting its own
    children only (a child's children count against the child's own
    ``max_total``, so a tree holds at most ``m + m**2 + ... + m**max_depth``
    runs below its root, ``m`` = ``max_total``). ``max_depth``: how deep
    children may go (1: children cannot spawn). A spawn past ``max_total``
    or ``max_depth`` is refused to the model as a tool error it sees.
    ``wait``: the parent waits for its children's results (one tool result
    per spawn call); false: the spawn returns at once and the children's
    results come back as a later message (collected before each model call,
    and waited for before a final answer is taken)."""

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    tool: str = param("agent", "name of the subagent tool the model calls")
    max_concurrent: int = param(20, "children of one spawn call running at once", ge=1)
    max_total: int | None = param(None, "children one run may start (its own, not its "
                                        "descendants; null: unlimited)", ge=0)
    max_depth: int = param(1, "levels of children below a root run (1: children cannot "
                              "spawn)", ge=0)
    wait: bool = param(True, "the parent waits for its children (false: their results come "
                             "back later, as a message)")

    def __post_init__(self) -> None:
        validated(self, [("tool", "must be a non-empty string")]
                  if not self.tool.strip() else [])

    def definition(self) -> ToolDefinition:
        """The subagent tool as a provider call declares it: one required
        argument, ``tasks``, a list of task statements (one child each)."""
        schema = {"type": "object", "required": ["tasks"], "properties": {"tasks": {
            "type": "array", "items": {"type": "string"}, "minItems": 1}}}
        return ToolDefinition(self.tool, "Start subagents, one per task, and wait for "
                              "their answers.", schema)


ON_LIMIT = ("stop", "finalize", "ask")
"""What the harness does when a step, token, output-token or money budget
refuses the next call (:attr:`Visibility.on_limit`)."""


@dataclass(frozen=True, slots=True)
class Visibility:
    """The limits the model sees, and what happens when one is reached
    (rules: :mod:`sim.harness.budgets` and :mod:`sim.harness.on_limit`).

    ``show_budget``: before every step's call the harness appends a short
    note of what the set budgets leave (``"Budget: 12,000 of 50,000 prompt
    tokens left; 3 of 30 steps left"``) to the history; its tokens count
    like any other message's.
    ``on_limit``: ``stop`` ends the run as ``budget_exhausted:<limit>``
    (the default); ``finalize`` makes ONE more model call, tool-free
    (``tool_choice`` none), asking for the final answer (``finalize_output_tokens`` of output at
    most), whose worst case every earlier call leaves room for, and ends as
    ``succeeded:finalized`` when the answer is accepted, else as the limit
    would have ended it; ``ask`` parks the run for a human (an approval
    request of effect class ``limit``): yes extends every set budget by
    ``extend_by`` of itself, once per run; no ends it as
    ``needs_human:limit``. Time, retry, error and shared budgets always
    stop."""

    __pydantic_config__: ClassVar[Any] = PYDANTIC_CONFIG

    show_budget: bool = param(False, "tell the model each turn what its budgets leave")
    on_limit: str = param("stop", "when a step, token or money budget refuses the next call: "
                                  "stop, finalize (one tool-free call for the final answer) or "
                                  "ask (park for a human, who may extend the budgets once)")
    finalize_output_tokens: int = param(2_000, "output cap of the finalize call (tokens)", gt=0)
    extend_by: float = param(0.5, "ask: share of each set budget a human's yes adds, once",
                             gt=0, le=10)

    def __post_init__(self) -> None:
        validated(self, [("on_limit", f"must be one of {', '.join(ON_LIMIT)}, got "
                                      f"{self.on_limit!r}")]
                  if self.on_limit not in ON_LIMIT else [])


def _is_default_visibility(value: object) -> bool:
    """True for the default :class:`Visibility` (left out when writing)."""
    return value == Visibility()


@dataclass(frozen=True, slots=True)
class HarnessParams:
    """All immutable parameters of one run (seed 000's parameter list).

    ``system_prompt``: the instructions sent with every call
    (``system_prompt_tokens`` long); ``top_p``: nucleus sampling (None: the
    provider's default); ``provider``: the wire format the history is
    normalised to, ``"anthropic"`` or ``"openai"``.

    ``end_marker``: when set, the run is a conversation with a task-giver (a
    user): a reply without tool calls whose text does not contain the marker is
    a message to the task-giver, who answers it or ends the run
    (``succeeded:user_stop``); a reply containing it is the model's own final
    answer (tau2-bench's ``###STOP###``). None: every reply without tool calls
    is the final answer.
    ``model_prices``: prices of models other than ``model`` that runs may use
    (``((model id, Prices), ...)``, e.g. the models of a pooled population); a
    model without an entry is priced at ``prices``.
    ``subagents``: the subagent tool and its caps (None: the model cannot
    start child runs; a call of a tool named ``agent`` is then an unknown tool).
    ``shared_budgets``: budgets shared with the other runs of a session (a
    parent and its descendants) or a tenant (:mod:`sim.harness.scopes`); the
    driver gives each run the ledgers it shares, a run given none keeps its
    own.
    ``visibility``: whether the model is told its remaining budget and what
    a reached limit does (:class:`Visibility`).
    """

    model: str = param("claude-sonnet-4-20250514", "model id")
    system_prompt: str = ""
    system_prompt_tokens: int = 2_000
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int = param(16_384, "output cap per call (tokens)", gt=0)
    context_window: int = param(200_000, "largest prompt (tokens)", gt=0)
    temperature: float = param(0.0, "sampling temperature", ge=0, le=2)
    top_p: float | None = param(None, "nucleus sampling (null: the provider's default)", gt=0,
                                le=1)
    tool_choice: str = param("auto", "auto, any, none or tool:<name>")
    thinking: ThinkingConfig = field(default_factory=ThinkingConfig)
    budgets: Budgets = field(default_factory=Budgets)
    prices: Prices = field(default_factory=Prices)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    detector: DetectorParams = field(default_factory=DetectorParams)
    context: ContextParams = field(default_factory=ContextParams)
    verifier: VerifierParams = field(default_factory=VerifierParams)
    approval_required: frozenset[str] = param(frozenset(), "effect classes needing approval")
    approval_timeout_s: float = param(3_600.0, "wait for a decision (seconds)", gt=0)
    model_timeout_s: float = param(120.0, "worst-case model call (seconds)", gt=0)
    tool_failure_limit: int = param(3, "consecutive failures before 'do without it'", ge=1)
    provider: str = "anthropic"
    prompt_cache: str | None = param(None, "prompt caching with a 5-minute or 1-hour lifetime "
                                           "(null: off)")
    end_marker: str | None = None
    model_prices: tuple[tuple[str, Prices], ...] = ()
    subagents: SubagentParams | None = field(default=None, metadata={
        **spec("child runs the model may start with the subagent tool (null: none; "
               "world.fanout says when the simulated model does)"), "exclude_if": _is_none})
    visibility: Visibility = field(default_factory=Visibility, metadata={
        **spec("the budgets the model is shown and what a reached limit does"),
        "exclude_if": _is_default_visibility})
    shared_budgets: tuple[ScopedBudget, ...] = field(default=(), metadata={
        **spec("budgets shared by a session (a parent and its descendants) or a "
               "tenant over a window, each hard or soft, checked before_call or "
               "between_turns"),
        "exclude_if": _is_empty})
    tool_definitions: tuple[ToolDefinition, ...] = field(
        init=False, repr=False, compare=False, hash=False)
    """The tools as every model call declares them, derived from ``tools`` at
    construction (not a parameter of its own)."""

    def __post_init__(self) -> None:
        self.validate()
        definitions = tuple(t.definition() for t in self.tools)
        if self.subagents is not None:
            definitions += (self.subagents.definition(),)
        object.__setattr__(self, "tool_definitions", definitions)

    @property
    def tool_retries(self) -> int:
        """Harness retries allowed for one tool call."""
        r = self.retry
        return r.max_attempts if r.tool_max_attempts is None else r.tool_max_attempts

    @property
    def cache_ttl_s(self) -> float | None:
        """The prompt-cache lifetime in seconds, or None without caching."""
        return CACHE_TTLS.get(self.prompt_cache) if self.prompt_cache else None

    @property
    def prefix_tokens(self) -> int:
        """Tokens of the stable prefix: system prompt plus tool definitions."""
        return self.system_prompt_tokens + sum(t.definition_tokens for t in self.tools)

    def tool(self, name: str) -> ToolSpec | None:
        """The tool named ``name``, or None if there is none."""
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def prices_for(self, model: str) -> Prices:
        """The prices a call to ``model`` is charged at: the fallback's after a
        switch to ``retry.fallback_model`` (when ``retry.fallback_prices`` is
        set), those listed in ``model_prices``, else ``prices``."""
        retry = self.retry
        if retry.fallback_prices is None and not self.model_prices:
            return self.prices  # one price list for every model
        if retry.fallback_prices is not None and model == retry.fallback_model:
            return retry.fallback_prices
        if model != self.model:
            for name, prices in self.model_prices:
                if name == model:
                    return prices
        return self.prices

    def with_budgets(self, **changes: float | int | None) -> HarnessParams:
        """A copy with some budgets changed (for resuming with extended budgets)."""
        budgets: dict[str, Any] = dict(changes)
        return replace(self, budgets=replace(self.budgets, **budgets))

    def validate(self) -> HarnessParams:
        """Check the settings that span sections (each section checked itself
        when built) and this object's own bounds; raise ParameterError naming
        every problem (the first one first). Called once, at construction, so
        a built object is always valid; returns self so it can be chained."""
        validated(self, _window_problems(self), _thinking_problems(self),
                  _choice_problems(self), _tool_problems(self))
        return self


def _window_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    """What must fit the context window: one call's output, the compaction
    threshold and the stable prefix."""
    if p.max_output_tokens > p.context_window:
        yield "max_output_tokens", (f"{p.max_output_tokens} exceeds the context window "
                                    f"({p.context_window})")
    if p.visibility.finalize_output_tokens > p.context_window:
        yield "visibility.finalize_output_tokens", (
            f"{p.visibility.finalize_output_tokens} exceeds the context window "
            f"({p.context_window})")
    c = p.context.compact_at_tokens
    if c is not None and c > p.context_window:
        yield "context.compact_at_tokens", f"must be in (0, context_window], got {c}"
    if p.prefix_tokens >= p.context_window:
        yield "system_prompt_tokens", (f"the prompt prefix ({p.prefix_tokens} tokens) does not "
                                       f"fit the context window ({p.context_window})")


def _thinking_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    """Extended thinking excludes sampling and forced tool use, and its
    budget fits one call's output."""
    if not p.thinking.enabled:
        return
    if p.temperature > 0:
        yield "thinking.enabled", "extended thinking cannot be combined with temperature > 0"
    if p.tool_choice.startswith("tool:") or p.tool_choice == "any":
        yield "thinking.enabled", (f"extended thinking cannot be combined with forced tool "
                                   f"use (tool_choice {p.tool_choice!r})")
    if p.thinking.budget_tokens > p.max_output_tokens:
        yield "thinking.budget_tokens", (f"{p.thinking.budget_tokens} exceeds "
                                         f"max_output_tokens ({p.max_output_tokens})")


_CHOICES: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    ("prompt_cache", (None, *CACHE_TTLS)), ("provider", ("anthropic", "openai")))


def _choice_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    """Settings that take one of a few values."""
    for name, allowed in _CHOICES:
        if getattr(p, name) not in allowed:
            shown = ", ".join("null" if a is None else a for a in allowed)
            yield name, f"must be one of {shown}, got {getattr(p, name)!r}"
    if p.end_marker is not None and not p.end_marker.strip():
        yield "end_marker", "must be a non-empty string or null"
    for effect in sorted(p.approval_required):
        if effect not in EFFECT_CLASSES:
            yield "approval_required", f"unknown effect class {effect!r}"


def _tool_problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    """Tool names are unique and tool choice names a known tool."""
    names = [t.name for t in p.tools]
    if len(set(names)) != len(names):
        yield "tools", f"tool names must be unique, got {names}"
    if p.subagents is not None and p.subagents.tool in names:
        yield "subagents.tool", f"{p.subagents.tool!r} is also the name of a tool"
    if p.tool_choice in ("auto", "any", "none"):
        return
    if not p.tool_choice.startswith("tool:"):
        yield "tool_choice", f"must be auto, any, none or tool:<name>, got {p.tool_choice!r}"
    elif p.tool(p.tool_choice[5:]) is None:
        yield "tool_choice", f"names an unknown tool {p.tool_choice[5:]!r}"
