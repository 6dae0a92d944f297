"""Immutable parameters of one agent run, fixed before the loop starts.

Everything here is a frozen dataclass: a mutation raises
``dataclasses.FrozenInstanceError`` (seed 000: immutability is enforced in
code, not by convention). A :class:`HarnessParams` is validated once, when it
is built: incompatible or out-of-range settings raise :class:`ParameterError`
then, so every parameter object that exists is valid and the loop never
checks them again.

Units: tokens are counts, money is USD, time is seconds, prices are USD per
million tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

EffectClass = Literal["read", "reversible_write", "external", "irreversible"]
EFFECT_CLASSES: tuple[str, ...] = ("read", "reversible_write", "external", "irreversible")
CACHE_TTLS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


class ParameterError(ValueError):
    """Incompatible or out-of-range harness parameters (raised before the loop).
    ``problems`` lists ``(dotted field path, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call.

    ``effect``: what running it does to the world (read, reversible write,
    external side effect, irreversible); ``timeout_s``: per-call timeout in
    seconds (seed 000: file 5, shell 30, network 15, code 60);
    ``polling``: the tool is expected to repeat (build status, job poll), so the
    no-progress detector keys it on unchanged *results*, not on repeated calls;
    ``definition_tokens``: size of its definition (name, description, schema)
    in the prompt prefix; ``required_args``: argument names the policy layer
    checks before running it; ``description``: what the tool does, as the
    model reads it; ``input_schema``: the JSON Schema of its arguments object as
    JSON text (kept as text so the parameters stay hashable), or empty for the
    schema implied by ``required_args``.
    """

    name: str
    effect: EffectClass = "read"
    timeout_s: float = 30.0
    polling: bool = False
    definition_tokens: int = 200
    required_args: tuple[str, ...] = ()
    description: str = ""
    input_schema: str = ""

    def definition(self) -> ToolDefinition:
        """The tool as a provider call declares it (see :class:`ToolDefinition`)."""
        if self.input_schema:
            schema: dict[str, Any] = json.loads(self.input_schema)
        else:
            schema = {"type": "object",
                      "properties": {name: {} for name in self.required_args},
                      "required": list(self.required_args)}
        return ToolDefinition(self.name, self.description, schema)


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the model is told about it in a provider call: ``name``,
    ``description`` and ``input_schema`` (a JSON Schema object describing the
    arguments). Anthropic takes these as ``tools=[{"name", "description",
    "input_schema"}]``; OpenAI as ``tools=[{"type": "function", "function":
    {"name", "description", "parameters": input_schema}}]``."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Prices:
    """Prices of one model in USD per million tokens, with optional cliff tiers.

    ``thinking`` defaults to the output price when None (most providers bill
    thinking as output). ``tiers`` holds cliff tiers ``((start_tokens,
    Prices), ...)`` in ascending ``start_tokens`` (genai-prices' semantics): a
    call whose prompt (uncached + cache-read + cache-write tokens) has *more
    than* ``start_tokens`` tokens pays that tier's prices on all its tokens;
    otherwise this object's own prices apply. Tier prices are flat (no tiers
    of their own). This is the one tiered-price type: the harness prices calls
    with it and :mod:`sim.cost` reads the catalogue into it."""

    input: float = 3.0
    output: float = 15.0
    cache_read: float = 0.3
    cache_write: float = 3.75
    thinking: float | None = None
    tiers: tuple[tuple[int, Prices], ...] = ()

    def at(self, prompt_tokens: int) -> Prices:
        """The prices of one call whose prompt has ``prompt_tokens`` tokens: the
        highest tier it exceeds, else this object itself (whose own fields
        apply; :meth:`cost` never reads ``tiers``)."""
        prices = self
        for start, tier in self.tiers:
            if prompt_tokens <= start:
                break
            prices = tier
        return prices

    @property
    def base(self) -> Prices:
        """The prices below the first tier, without tiers (self when untiered)."""
        return replace(self, tiers=()) if self.tiers else self

    def with_overrides(self, **overrides: float | None) -> Prices:
        """A copy with the given fields (USD per million tokens) replaced, in
        the base prices and in every tier."""
        changes: dict[str, Any] = dict(overrides)
        return replace(self, **changes, tiers=tuple(
            (start, replace(tier, **changes)) for start, tier in self.tiers))

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_write: int = 0, thinking: int = 0) -> float:
        """Cost in USD of the given token counts at this object's own prices."""
        think_price = self.output if self.thinking is None else self.thinking
        return (input_tokens * self.input + output_tokens * self.output
                + cache_read * self.cache_read + cache_write * self.cache_write
                + thinking * think_price) / 1e6


@dataclass(frozen=True, slots=True)
class Budgets:
    """Run budgets; None means unlimited. Each is checked before every model
    call (and the time budgets before every tool call) against the worst case
    of the next call, so none is ever overshot.

    ``steps``: model calls (seed 000's max turns); ``tokens``: total prompt
    tokens over all calls (seed 001's input-token budget); ``output_tokens``:
    total output plus thinking tokens; ``money_usd``: spend in USD;
    ``wall_s``: active plus parked seconds; ``active_s``: seconds not parked
    waiting for a human approval; ``retries``: harness retries of transient
    errors over the whole run; ``tool_errors``: tool errors the model has been
    shown (tau2-bench's ``max_errors``): once that many, the next model call is
    refused (``budget_exhausted:errors``).
    """

    steps: int | None = None
    tokens: int | None = None
    output_tokens: int | None = None
    money_usd: float | None = None
    wall_s: float | None = None
    active_s: float | None = None
    retries: int | None = None
    tool_errors: int | None = None


MAX_ATTEMPTS = 1_000
"""The most retries of one call a retry policy may allow (each is a request,
and its error is kept for the diagnostic)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the harness retries transient errors itself, without a model step.

    Backoff before retry k (k = 1, 2, ...) is ``min(base_s * 2**(k-1), cap_s)``
    seconds, times a jitter factor drawn in [1 - jitter, 1] when ``jitter`` > 0;
    a Retry-After from the server overrides it. ``max_attempts`` bounds the
    retries of one call (``tool_max_attempts``, when set, those of a tool
    call); after ``fallback_after`` rate-limit retries of one model call the
    harness switches to ``fallback_model`` if one is set.
    ``model_error_retries``: immediate retries of a server error (5xx,
    malformed or empty response) before the run fails (seed 000: one).
    """

    base_s: float = 1.0
    cap_s: float = 64.0
    jitter: float = 0.0
    max_attempts: int = 5
    tool_max_attempts: int | None = None
    fallback_after: int = 5
    fallback_model: str | None = None
    fallback_prices: Prices | None = None
    model_error_retries: int = 1
    retry_tool_errors: bool = True


@dataclass(frozen=True, slots=True)
class DetectorParams:
    """No-progress detector settings (seed 001).

    ``repeat_threshold``: identical canonical calls in a row that count as a
    loop; ``cycle_max_period`` / ``cycle_repeats``: a sequence of calls with
    period 2..max repeated this many times (A-B-A-B) counts as a cycle;
    ``stale_window``: this many consecutive observations whose hashes are
    all already seen counts as no new information (0 disables);
    ``objective_window``: steps without improvement of a reported objective
    metric (lower is better) that count as no movement (0 disables);
    ``max_nudges``: detections answered with an injected observation before
    the next detection stops the run as needs_human (0 stops on the first);
    counted since the detector's memory was last cleared (a person resumed
    the run). The scenario key is ``harness.detector.nudges``.
    """

    enabled: bool = True
    repeat_threshold: int = 3
    cycle_max_period: int = 4
    cycle_repeats: int = 2
    stale_window: int = 0
    objective_window: int = 0
    max_nudges: int = 1


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

    compact_at_tokens: int | None = None
    compact_fraction: float = 0.6
    emergency_compaction: bool = True
    emergency_target: float = 0.5
    summary_max_tokens: int = 2_000


@dataclass(frozen=True, slots=True)
class ThinkingConfig:
    """Extended thinking: ``budget_tokens`` of thinking per call when enabled."""

    enabled: bool = False
    budget_tokens: int = 0


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
    max_prompt_tokens: int = 0
    max_output_tokens: int = 0
    max_duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class HarnessParams:
    """All immutable parameters of one run (seed 000's parameter list).

    ``max_output_tokens``: cap on one call's output; ``context_window``: the
    model's maximum prompt size; ``system_prompt``: the instructions sent with
    every call (``system_prompt_tokens`` long); ``temperature`` and ``top_p``:
    sampling parameters (``top_p`` None: the provider's default);
    ``tool_choice``: ``"auto"``, ``"any"``, ``"none"`` or ``"tool:<name>"``
    (forced use of one tool); ``provider``: the wire format the history is
    normalised to, ``"anthropic"`` or ``"openai"``;
    ``approval_required``: effect classes whose calls need a human decision;
    ``approval_timeout_s``: how long a decision may take before the run is
    cancelled; ``model_timeout_s``: worst-case duration of one model call,
    used only by the time budgets; ``tool_failure_limit``: consecutive
    failures of one tool after which the model is told to do without it.

    ``end_marker``: when set, the run is a conversation with a task-giver (a
    user): a reply without tool calls whose text does not contain the marker is
    a message to the task-giver, who answers it or ends the run
    (``succeeded:user_stop``); a reply containing it is the model's own final
    answer (tau2-bench's ``###STOP###``). None: every reply without tool calls
    is the final answer.
    ``model_prices``: prices of models other than ``model`` that runs may use
    (``((model id, Prices), ...)``, e.g. the models of a pooled population); a
    model without an entry is priced at ``prices``.
    """

    model: str = "claude-sonnet-4-20250514"
    system_prompt: str = ""
    system_prompt_tokens: int = 2_000
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int = 16_384
    context_window: int = 200_000
    temperature: float = 0.0
    top_p: float | None = None
    tool_choice: str = "auto"
    thinking: ThinkingConfig = field(default_factory=ThinkingConfig)
    budgets: Budgets = field(default_factory=Budgets)
    prices: Prices = field(default_factory=Prices)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    detector: DetectorParams = field(default_factory=DetectorParams)
    context: ContextParams = field(default_factory=ContextParams)
    verifier: VerifierParams = field(default_factory=VerifierParams)
    approval_required: frozenset[str] = frozenset()
    approval_timeout_s: float = 3_600.0
    model_timeout_s: float = 120.0
    tool_failure_limit: int = 3
    provider: str = "anthropic"
    prompt_cache: str | None = None
    end_marker: str | None = None
    model_prices: tuple[tuple[str, Prices], ...] = ()
    tool_definitions: tuple[ToolDefinition, ...] = field(
        init=False, repr=False, compare=False, hash=False)
    """The tools as every model call declares them, derived from ``tools`` at
    construction (not a parameter of its own)."""

    def __post_init__(self) -> None:
        self.validate()
        object.__setattr__(self, "tool_definitions",
                           tuple(spec.definition() for spec in self.tools))

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
        for spec in self.tools:
            if spec.name == name:
                return spec
        return None

    def with_budgets(self, **changes: float | int | None) -> HarnessParams:
        """A copy with some budgets changed (for resuming with extended budgets)."""
        budgets: dict[str, Any] = dict(changes)
        return replace(self, budgets=replace(self.budgets, **budgets))

    def validate(self) -> HarnessParams:
        """Check that the settings are compatible; raise ParameterError naming
        every problem (the first one first). Called once, at construction, so
        a built object is always valid; returns self so it can be chained."""
        problems = list(_problems(self))
        if problems:
            raise ParameterError(problems)
        return self


def _positive(value: float) -> bool:
    """True for a finite number above zero (False for NaN and infinities)."""
    return value > 0 and math.isfinite(value)


def _non_negative(value: float) -> bool:
    """True for a finite number at or above zero (False for NaN and infinities)."""
    return value >= 0 and math.isfinite(value)


def _problems(p: HarnessParams) -> Iterator[tuple[str, str]]:
    """Every problem of ``p`` as ``(dotted field path, message)``. Every number
    must be finite (NaN or an infinity would disable the check that reads it)."""
    if p.max_output_tokens <= 0:
        yield "max_output_tokens", f"must be positive, got {p.max_output_tokens}"
    if p.context_window <= 0:
        yield "context_window", f"must be positive, got {p.context_window}"
    if p.max_output_tokens > p.context_window:
        yield "max_output_tokens", (f"{p.max_output_tokens} exceeds the context window "
                                    f"({p.context_window})")
    if p.thinking.enabled:
        if p.temperature > 0:
            yield "thinking.enabled", "extended thinking cannot be combined with temperature > 0"
        if p.tool_choice.startswith("tool:") or p.tool_choice == "any":
            yield "thinking.enabled", (f"extended thinking cannot be combined with forced tool "
                                       f"use (tool_choice {p.tool_choice!r})")
        if p.thinking.budget_tokens <= 0:
            yield "thinking.budget_tokens", "must be positive when thinking is enabled"
        if p.thinking.budget_tokens > p.max_output_tokens:
            yield "thinking.budget_tokens", (f"{p.thinking.budget_tokens} exceeds "
                                             f"max_output_tokens ({p.max_output_tokens})")
    if not 0.0 <= p.temperature <= 2.0:
        yield "temperature", f"must be in [0, 2], got {p.temperature}"
    if p.tool_choice not in ("auto", "any", "none") and not p.tool_choice.startswith("tool:"):
        yield "tool_choice", f"must be auto, any, none or tool:<name>, got {p.tool_choice!r}"
    if p.tool_choice.startswith("tool:") and p.tool(p.tool_choice[5:]) is None:
        yield "tool_choice", f"names an unknown tool {p.tool_choice[5:]!r}"
    for name in ("steps", "tokens", "output_tokens", "money_usd", "wall_s", "active_s"):
        value = getattr(p.budgets, name)
        if value is not None and not _positive(value):
            yield f"budgets.{name}", f"must be positive and finite, got {value}"
    if p.budgets.retries is not None and p.budgets.retries < 0:
        yield "budgets.retries", f"must be >= 0, got {p.budgets.retries}"
    if p.budgets.tool_errors is not None and p.budgets.tool_errors < 1:
        yield "budgets.tool_errors", f"must be >= 1, got {p.budgets.tool_errors}"
    if p.end_marker is not None and not p.end_marker.strip():
        yield "end_marker", "must be a non-empty string or null"
    names = [t.name for t in p.tools]
    if len(set(names)) != len(names):
        yield "tools", f"tool names must be unique, got {names}"
    for i, t in enumerate(p.tools):
        if t.effect not in EFFECT_CLASSES:
            yield f"tools[{i}].effect", f"must be one of {EFFECT_CLASSES}, got {t.effect!r}"
        if not _positive(t.timeout_s):
            yield f"tools[{i}].timeout_s", f"must be positive and finite, got {t.timeout_s}"
        yield from _schema_problems(f"tools[{i}].input_schema", t.input_schema)
    for effect in sorted(p.approval_required):
        if effect not in EFFECT_CLASSES:
            yield "approval_required", f"unknown effect class {effect!r}"
    r = p.retry
    if not (_positive(r.base_s) and math.isfinite(r.cap_s) and r.cap_s >= r.base_s):
        yield "retry.base_s", f"need 0 < base_s <= cap_s, got base_s={r.base_s}, cap_s={r.cap_s}"
    if not 0.0 <= r.jitter <= 1.0:
        yield "retry.jitter", f"must be in [0, 1], got {r.jitter}"
    for name in ("max_attempts", "model_error_retries", "tool_max_attempts"):
        if not 0 <= (getattr(r, name) or 0) <= MAX_ATTEMPTS:
            yield f"retry.{name}", f"must be in [0, {MAX_ATTEMPTS}], got {getattr(r, name)}"
    if r.fallback_after < 1:
        yield "retry.fallback_after", f"must be >= 1, got {r.fallback_after}"
    d = p.detector
    for name in ("repeat_threshold", "cycle_repeats", "cycle_max_period"):
        if getattr(d, name) < 2:
            yield f"detector.{name}", f"must be >= 2, got {getattr(d, name)}"
    for name in ("stale_window", "objective_window", "max_nudges"):
        if getattr(d, name) < 0:
            yield f"detector.{name}", f"must be >= 0, got {getattr(d, name)}"
    c = p.context
    for name in ("compact_fraction", "emergency_target"):
        if not 0.0 < getattr(c, name) < 1.0:
            yield f"context.{name}", f"must be in (0, 1), got {getattr(c, name)}"
    if c.compact_at_tokens is not None and not 0 < c.compact_at_tokens <= p.context_window:
        yield "context.compact_at_tokens", (f"must be in (0, context_window], "
                                            f"got {c.compact_at_tokens}")
    if c.summary_max_tokens <= 0:
        yield "context.summary_max_tokens", f"must be positive, got {c.summary_max_tokens}"
    if p.prefix_tokens >= p.context_window:
        yield "system_prompt_tokens", (f"the prompt prefix ({p.prefix_tokens} tokens) does not "
                                       f"fit the context window ({p.context_window})")
    if p.tool_failure_limit < 1:
        yield "tool_failure_limit", f"must be >= 1, got {p.tool_failure_limit}"
    for name in ("approval_timeout_s", "model_timeout_s"):
        if not _positive(getattr(p, name)):
            yield name, f"must be positive and finite, got {getattr(p, name)}"
    for name in ("max_prompt_tokens", "max_output_tokens", "max_duration_s"):
        if not _non_negative(getattr(p.verifier, name)):
            yield f"verifier.{name}", f"must be >= 0 and finite, got {getattr(p.verifier, name)}"
    if p.prompt_cache is not None and p.prompt_cache not in CACHE_TTLS:
        yield "prompt_cache", f"must be null, 5m or 1h, got {p.prompt_cache!r}"
    if p.provider not in ("anthropic", "openai"):
        yield "provider", f"must be anthropic or openai, got {p.provider!r}"
    if p.top_p is not None and not 0.0 < p.top_p <= 1.0:
        yield "top_p", f"must be in (0, 1] or null, got {p.top_p}"
    yield from _price_problems("prices", p.prices)
    if r.fallback_prices is not None:
        yield from _price_problems("retry.fallback_prices", r.fallback_prices)


_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write", "thinking")


def _price_problems(path: str, prices: Prices, tier: bool = False) -> Iterator[tuple[str, str]]:
    """Prices must be finite and non-negative (so money never decreases); tiers
    ascend by their start and hold flat prices."""
    for name in _PRICE_FIELDS:
        value = getattr(prices, name)
        if value is None and name == "thinking":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not _non_negative(
                value):
            yield f"{path}.{name}", f"must be a finite number >= 0 (USD per million tokens), " \
                                    f"got {value!r}"
    if tier and prices.tiers:
        yield f"{path}.tiers", "a tier's prices cannot have tiers of their own"
    last = -1
    for k, (start, tier_prices) in enumerate(prices.tiers):
        if isinstance(start, bool) or not isinstance(start, int) or start <= last:
            yield f"{path}.tiers[{k}]", (f"tier starts must be integers >= 0 in ascending "
                                         f"order, got {start!r}")
        else:
            last = start
        yield from _price_problems(f"{path}.tiers[{k}]", tier_prices, tier=True)


def _schema_problems(path: str, schema: str) -> Iterator[tuple[str, str]]:
    """A tool's input schema, when given, must be JSON text of an object."""
    if not schema:
        return
    try:
        value = json.loads(schema)
    except ValueError as error:
        yield path, f"must be JSON text of a JSON Schema object: {error}"
        return
    if not isinstance(value, dict):
        yield path, f"must be a JSON object, got {type(value).__name__}"
