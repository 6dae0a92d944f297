"""The scenario schema: the pydantic models a scenario file is validated into.

A scenario has a ``harness`` section (the real harness's settings), a
``world`` section (the stochastic model, tools and tasks, see
:mod:`sim.world.params`), run settings (``tasks``, ``seed``), the DES settings
and an optional ``sweep`` of axes over dotted paths, expanded as a grid. Every
field has a unit and a default; ``scenarios/README.md`` documents them all
(:mod:`sim.scenario.docs`).

The harness's sections are the harness's own parameter dataclasses
(:mod:`sim.harness.params`), validated directly; its top-level settings take
their default, bounds and description from the same dataclasses
(:mod:`sim.scenario.shared`). What is the scenario's own: which detector and
verifier to build, the price spec, the conversation mode.

:func:`strict` validates a raw mapping in pydantic's strict mode on its JSON
form: a boolean is not an integer, a string is not a number, a number is not a
string, while lists stand for tuples and ISO strings for dates.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sim.engines.des_params import DesParams
from sim.harness import params as hp
from sim.harness.fields import spec
from sim.scenario import limits
from sim.scenario.shared import from_harness
from sim.world.params import WorldParams
from sim.world.world import END_MARKER

_harness = partial(from_harness, hp.HarnessParams)
_price = partial(from_harness, hp.Prices, default=None)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class DetectorConfig(hp.DetectorParams):
    """No-progress detector: ``name`` is ``default`` or ``package.module:Class``
    (built with the detector parameters)."""

    name: str = field(default="default", metadata=spec("registered name or import path"))

    @property
    def params(self) -> hp.DetectorParams:
        """The harness's detector parameters (without the name)."""
        return hp.DetectorParams(**{f.name: getattr(self, f.name)
                                    for f in fields(hp.DetectorParams)})


class VerifierConfig(_Strict):
    """Verifier of claimed successes: ``none`` (accept every claim), ``oracle``,
    ``noisy`` or ``package.module:Class``; ``options`` are passed to it."""

    name: str = Field("none", description="none, oracle, noisy, model_grader or an import "
                                          "path")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")


class PricesConfig(_Strict):
    """Price overrides in USD per million tokens (null: keep the catalogue's)."""

    input: float | None = _price("input")
    output: float | None = _price("output")
    cache_read: float | None = _price("cache_read")
    cache_write: float | None = _price("cache_write")
    thinking: float | None = _price("thinking")


class ConversationConfig(_Strict):
    """A task-giver (a user) in the loop: a reply without tool calls and
    without ``end_marker`` goes to the task-giver (the world's ``user``), who
    answers or ends the run (``succeeded:user_stop``); a reply with the marker
    is the model's own final answer."""

    enabled: bool = Field(False, description="run as a conversation with a task-giver")
    end_marker: str = Field(END_MARKER, min_length=1,
                            description="text by which the model ends the run itself")


class HarnessConfig(_Strict):
    """The harness under test (see :class:`sim.harness.params.HarnessParams`)."""

    model: str = _harness("model")
    prices: str | PricesConfig | None = Field(
        None, description="named price set (e.g. seed001), overrides, or null for the "
                          "model's catalogue prices")
    max_output_tokens: int = _harness("max_output_tokens")
    context_window: int = _harness("context_window")
    temperature: float = _harness("temperature")
    tool_choice: str = _harness("tool_choice")
    thinking: hp.ThinkingConfig = Field(default_factory=hp.ThinkingConfig)
    budgets: hp.Budgets = Field(default_factory=hp.Budgets)
    retry: hp.RetryPolicy = Field(default_factory=hp.RetryPolicy)
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    context: hp.ContextParams = Field(default_factory=hp.ContextParams)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    approval_required: tuple[str, ...] = _harness("approval_required", default=())
    approval_timeout_s: float = _harness("approval_timeout_s")
    model_timeout_s: float = _harness("model_timeout_s")
    tool_failure_limit: int = _harness("tool_failure_limit")
    prompt_cache: Literal["5m", "1h"] | None = _harness("prompt_cache")
    prices_date: datetime.date | None = Field(
        None, description="catalogue prices as of this date (null: today, UTC); a "
                          "time-of-day price counts by the hours of the day it holds")
    conversation: ConversationConfig = Field(default_factory=ConversationConfig)
    model_prices: dict[str, PricesConfig] = Field(
        default_factory=dict, description="model id -> price overrides, for the models of "
                                          "world.classes (a model not listed: its catalogue "
                                          "prices)")
    subagents: hp.SubagentParams | None = Field(
        None, exclude_if=lambda value: value is None,
        description="child runs the model may start with the subagent tool (null: none; "
                    "world.fanout says when the simulated model does)")
    visibility: hp.Visibility = Field(
        default_factory=hp.Visibility, exclude_if=lambda value: value == hp.Visibility(),
        description="the budgets the model is shown (show_budget) and what a reached step, "
                    "token or money limit does (on_limit: stop, finalize or ask)")
    shared_budgets: tuple[hp.ScopedBudget, ...] = Field(
        (), exclude_if=lambda value: value == (),
        description="budgets shared by a session (a parent and its descendants) or a "
                    "tenant over a window, each hard or soft, checked before_call or "
                    "between_turns")


class Scenario(_Strict):
    """A scenario file. ``sweep`` maps dotted paths (e.g.
    ``harness.budgets.tokens``) to lists of values, expanded as a grid."""

    name: str = Field("", pattern=r"^[^/\\]*$", max_length=200,
                      description="scenario name (default: the file name); no path "
                                  "separators")
    description: str = Field("", description="what the scenario models")
    tasks: int = Field(1000, ge=1, le=limits.MAX_TASKS, description="tasks per cell")
    seed: int = Field(0, ge=0, description="root seed of the random streams")
    engine: Literal["direct", "des"] = Field(
        "direct", description="direct (tasks alone, fast) or des (arrivals, shared capacity)")
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    world: WorldParams = Field(default_factory=WorldParams)
    des: DesParams = Field(default_factory=DesParams,
                           description="arrivals, tenants, capacity, operator controls "
                                       "(engine des)")
    sweep: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(
        default_factory=dict, description="dotted path -> values (a grid)")


def json_value(value: Any) -> Any:
    """A scenario value that JSON has no type for, in its JSON form (a date as ISO text)."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"not a scenario value: {type(value).__name__}")  # pragma: no cover


def strict(raw: dict[str, Any]) -> Scenario:
    """``raw`` (held to the limits already) validated in strict mode. Its JSON
    form is validated, so lists stand for tuples and ISO strings for dates
    while a boolean is never an integer and a string never a number."""
    text = json.dumps(default_shapes((), raw), default=json_value, allow_nan=False)
    return Scenario.model_validate_json(text, strict=True)


def default_shapes(loc: tuple[str, ...], value: Any) -> Any:
    """``value``, the raw value of the field at ``loc`` (``()``: the whole
    document), with the documented default shape filled in where a mapping
    omits its selector: ``world.difficulty`` without ``distribution`` is
    lognormal."""
    if loc == ("world", "difficulty"):
        if isinstance(value, dict) and "distribution" not in value:
            return {"distribution": "lognormal", **value}
        return value
    if loc in ((), ("world",)) and isinstance(value, dict):
        inner = "world" if not loc else "difficulty"
        if inner in value:
            shaped = default_shapes((*loc, inner), value[inner])
            if shaped is not value[inner]:
                return {**value, inner: shaped}
    return value
