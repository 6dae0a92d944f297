"""Scenario files: YAML in, a validated :class:`Scenario` out, or one clear error.

A scenario has a ``harness`` section (the real harness's settings), a
``world`` section (the stochastic model, tools and tasks, see
:mod:`sim.world.params`), run settings (``tasks``, ``seed``) and an optional
``sweep`` of axes over dotted paths, expanded as a grid. Every field has a unit
and a default; ``scenarios/README.md`` documents them all.

Every kind of bad input (missing file, malformed YAML, a duplicate key, unknown
key, wrong type, out-of-range value, incompatible harness settings, an unknown
component name or import path) raises :class:`~sim.bad_input.InputError` naming
the file and the dotted field path; the CLI prints it and exits with status 2.

Validation is strict: YAML is read by :mod:`sim.scenario.safeyaml` (duplicate
keys, alias bombs and deep nesting refused), the document is held to the
bounds of :mod:`sim.scenario.limits` (finite numbers of bounded magnitude,
bounded strings and sizes), and the fields are validated in pydantic's strict
mode: a boolean is not an integer, a string is not a number, a number is not
a string. A scenario names code to import (a detector or verifier given as
``package.module:Class``) only with ``allow_plugins``; otherwise that field is
an error and nothing is imported.
"""

from __future__ import annotations

import copy
import datetime
import importlib
import itertools
import json
import math
import os
import stat
from collections.abc import Callable
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sim.bad_input import InputError
from sim.engines.des_params import DesParams
from sim.harness import params as hp
from sim.harness.detector import Detector, NoProgressDetector
from sim.scenario import limits
from sim.scenario.catalog import resolve
from sim.scenario.ranges import check_world
from sim.scenario.safeyaml import key_lines, line_of, parse
from sim.world.params import Prob, WorldParams
from sim.world.verifiers import VERIFIERS, Verifier
from sim.world.world import END_MARKER, World

Positive = Annotated[float, Field(gt=0)]


def _default(cls: type, name: str) -> Any:
    """The default of dataclass field ``name`` of ``cls`` (defaults are defined once)."""
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(name)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetsConfig(_Strict):
    """Run budgets; null means unlimited (see :class:`sim.harness.params.Budgets`)."""

    steps: int | None = Field(None, gt=0, description="model calls per run (max turns)")
    tokens: int | None = Field(None, gt=0, description="prompt tokens over all calls (tokens)")
    output_tokens: int | None = Field(None, gt=0, description="output + thinking tokens (tokens)")
    money_usd: float | None = Field(None, gt=0, description="spend per run (USD)")
    wall_s: float | None = Field(None, gt=0, description="active + parked time (seconds)")
    active_s: float | None = Field(None, gt=0, description="time not parked (seconds)")
    retries: int | None = Field(None, ge=0, description="harness retries per run")
    tool_errors: int | None = Field(None, ge=1, description="tool errors shown to the model "
                                                            "before the run stops "
                                                            "(budget_exhausted:errors)")


class RetryConfig(_Strict):
    """Harness retries of transient errors (see :class:`sim.harness.params.RetryPolicy`)."""

    base_s: float = Field(_default(hp.RetryPolicy, "base_s"), gt=0,
                          description="first backoff (seconds)")
    cap_s: float = Field(_default(hp.RetryPolicy, "cap_s"), gt=0,
                         description="longest backoff (seconds)")
    jitter: Prob = Field(_default(hp.RetryPolicy, "jitter"),
                         description="share of a backoff that jitter may remove")
    max_attempts: int = Field(_default(hp.RetryPolicy, "max_attempts"), ge=0,
                              le=limits.MAX_ATTEMPTS,
                              description="retries of one model call (and of a tool call "
                                          "unless tool_max_attempts is set)")
    tool_max_attempts: int | None = Field(None, ge=0, le=limits.MAX_ATTEMPTS,
                                          description="retries of one tool call "
                                                      "(null: max_attempts)")
    fallback_after: int = Field(_default(hp.RetryPolicy, "fallback_after"), ge=1,
                                description="rate-limit retries before the fallback model")
    fallback_model: str | None = Field(None, description="model id to switch to, or null")
    model_error_retries: int = Field(_default(hp.RetryPolicy, "model_error_retries"), ge=0,
                                     le=limits.MAX_ATTEMPTS,
                                     description="immediate retries of a model server error")
    retry_tool_errors: bool = Field(True, description="retry transient tool errors in the "
                                                      "harness (false: the model sees them)")


class DetectorConfig(_Strict):
    """No-progress detector: ``name`` is ``default`` or ``package.module:Class``
    (built with the detector parameters)."""

    name: str = Field("default", description="registered name or import path")
    enabled: bool = Field(True, description="run the detector")
    repeat_threshold: int = Field(_default(hp.DetectorParams, "repeat_threshold"), ge=2,
                                  description="identical calls in a row that count as a loop")
    cycle_max_period: int = Field(_default(hp.DetectorParams, "cycle_max_period"), ge=2,
                                  le=limits.MAX_ATTEMPTS,
                                  description="longest cycle period looked for (calls)")
    cycle_repeats: int = Field(_default(hp.DetectorParams, "cycle_repeats"), ge=2,
                               description="repeats of a cycle that count")
    stale_window: int = Field(0, ge=0, description="observations in a row already seen "
                                                   "(0: off)")
    objective_window: int = Field(0, ge=0, description="steps without objective improvement "
                                                       "(0: off)")
    nudges: int = Field(_default(hp.DetectorParams, "max_nudges"), ge=0,
                        description="nudges before the run stops as needs_human")


class ContextConfig(_Strict):
    """Context builder (see :class:`sim.harness.params.ContextParams`)."""

    compact_at_tokens: int | None = Field(None, gt=0, description="compact the oldest history "
                                                                  "above this prompt size "
                                                                  "(tokens; null: never)")
    compact_fraction: float = Field(_default(hp.ContextParams, "compact_fraction"), gt=0, lt=1,
                                    description="share of history compacted")
    emergency_compaction: bool = Field(True, description="on overflow compact and continue "
                                                         "(false: fail)")
    emergency_target: float = Field(_default(hp.ContextParams, "emergency_target"), gt=0, lt=1,
                                    description="share of the window to compact down to")
    summary_max_tokens: int = Field(_default(hp.ContextParams, "summary_max_tokens"), gt=0,
                                    description="longest compaction summary (tokens)")


class VerifierConfig(_Strict):
    """Verifier of claimed successes: ``none`` (accept every claim), ``oracle``,
    ``noisy`` or ``package.module:Class``; ``options`` are passed to it."""

    name: str = Field("none", description="none, oracle, noisy, model_grader or an import "
                                          "path")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments")


class ThinkingConfig(_Strict):
    """Extended thinking."""

    enabled: bool = Field(False, description="request extended thinking")
    budget_tokens: int = Field(0, ge=0, description="thinking budget per call (tokens)")


class PricesConfig(_Strict):
    """Price overrides in USD per million tokens (null: keep the catalogue's)."""

    input: float | None = Field(None, ge=0, description="uncached input (USD/Mtok)")
    output: float | None = Field(None, ge=0, description="output (USD/Mtok)")
    cache_read: float | None = Field(None, ge=0, description="cache reads (USD/Mtok)")
    cache_write: float | None = Field(None, ge=0, description="cache writes (USD/Mtok)")
    thinking: float | None = Field(None, ge=0, description="thinking (USD/Mtok; null: output)")


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

    model: str = Field(_default(hp.HarnessParams, "model"), description="model id")
    prices: str | PricesConfig | None = Field(
        None, description="named price set (e.g. seed001), overrides, or null for the "
                          "model's catalogue prices")
    max_output_tokens: int = Field(_default(hp.HarnessParams, "max_output_tokens"), gt=0,
                                   description="output cap per call (tokens)")
    context_window: int = Field(_default(hp.HarnessParams, "context_window"), gt=0,
                                description="largest prompt (tokens)")
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature")
    tool_choice: str = Field("auto", description="auto, any, none or tool:<name>")
    thinking: ThinkingConfig = Field(default_factory=ThinkingConfig)
    budgets: BudgetsConfig = Field(default_factory=BudgetsConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    approval_required: tuple[str, ...] = Field((), description="effect classes needing approval")
    approval_timeout_s: Positive = Field(_default(hp.HarnessParams, "approval_timeout_s"),
                                         description="wait for a decision (seconds)")
    model_timeout_s: Positive = Field(_default(hp.HarnessParams, "model_timeout_s"),
                                      description="worst-case model call (seconds)")
    tool_failure_limit: int = Field(_default(hp.HarnessParams, "tool_failure_limit"), ge=1,
                                    description="consecutive failures before 'do without it'")
    prompt_cache: Literal["5m", "1h"] | None = Field(
        None, description="prompt caching with a 5-minute or 1-hour lifetime (null: off)")
    prices_date: datetime.date | None = Field(
        None, description="catalogue prices as of this date (null: today, UTC)")
    conversation: ConversationConfig = Field(default_factory=ConversationConfig)
    model_prices: dict[str, PricesConfig] = Field(
        default_factory=dict, description="model id -> price overrides, for the models of "
                                          "world.classes (a model not listed: its catalogue "
                                          "prices)")


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


# ------------------------------------------------------------------ loading
MAX_FILE_BYTES = 5_000_000
"""The largest scenario file read (bytes)."""


def load_scenario(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = (), *,
                  allow_plugins: bool = False) -> Scenario:
    """Read, override (``dotted.path=value``, value parsed as YAML) and validate
    a scenario: a file, or a scenario name (see :mod:`sim.scenario.catalog`;
    a path that exists wins). Errors name the YAML line of the field where
    the file has it. ``allow_plugins`` lets it name a detector or verifier by import
    path (code that is imported and run); without it such a name is an error."""
    source = resolve(path)
    text = read_text(source)
    raw = _top_mapping(parse(text, source), source)
    for item in overrides:
        key, value = parse_override(item, source)
        set_dotted(raw, key, value, source)
    if raw.get("name", "") == "":  # absent or empty: the file's name (null, 0, [] are errors)
        raw["name"] = Path(source).stem
    _anchor_paths(raw, Path(source).parent)
    return validate(raw, source, allow_plugins=allow_plugins, lines=key_lines(text))


def _anchor_paths(raw: dict[str, Any], base: Path) -> None:
    """Make a relative arrivals CSV path relative to the scenario's folder."""
    arrivals = (raw.get("des") or {}).get("arrivals") if isinstance(raw.get("des"), dict) else None
    if isinstance(arrivals, dict) and isinstance(arrivals.get("path"), str):
        path = Path(arrivals["path"])
        if not path.is_absolute():
            arrivals["path"] = str(base / path)


def read_yaml(source: str) -> dict[str, Any]:
    """The top-level mapping of a YAML file (read strictly, see
    :mod:`sim.scenario.safeyaml`), or an InputError."""
    source = resolve(source)
    return _top_mapping(parse(read_text(source), source), source)


def read_text(source: str) -> str:
    """The text of the scenario file ``source``; an InputError saying what the
    path is instead (a folder, a Parquet or other binary file, too large)."""
    path = Path(source)
    try:
        info = path.stat()  # never blocks, unlike opening a FIFO
        if stat.S_ISDIR(info.st_mode):
            raise InputError(_folder_kind(path), source=source)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file ({_file_kind(info.st_mode)}): give a "
                             f"scenario file", source=source)
        if info.st_size > MAX_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_FILE_BYTES:,} bytes", source=source)
        with path.open("rb") as handle:  # bounded: the file may grow after the stat
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"the file is larger than {MAX_FILE_BYTES:,} bytes", source=source)
    except FileNotFoundError:
        raise InputError("file not found", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read the file ({error.strerror or error})",
                         source=source) from None
    if data[:4] == b"PAR1":
        raise InputError("is a Parquet file, not a scenario: give a scenario YAML file or "
                         "name ('sim scenarios' lists them)", source=source)
    try:
        if b"\0" in data[:8192]:
            raise UnicodeDecodeError("utf-8", data[:1], 0, 1, "NUL byte")
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("is a binary file, not YAML text: give a scenario YAML file or "
                         "name ('sim scenarios' lists them)", source=source) from None


def _folder_kind(path: Path) -> str:
    """What a folder given as a scenario is, and what to give instead."""
    if (path / "runs.parquet").is_file() or (path / "calls.parquet").is_file():
        kind = "a trace folder (runs.parquet), not a scenario file (were two arguments swapped?)"
    elif (path / "summary.json").is_file() or (path / "results.parquet").is_file():
        kind = "a results folder, not a scenario file"
    else:
        inside = sorted(p.name for p in path.glob("*.y*ml"))[:3]
        kind = "a folder, not a scenario file" + (
            f" (it holds {', '.join(inside)})" if inside else "")
    return f"is {kind}: give a scenario YAML file or name ('sim scenarios' lists them)"


def _top_mapping(data: Any, source: str) -> dict[str, Any]:
    """A parsed document as the scenario's top-level mapping ({} when empty)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"the top level must be a mapping, got {type(data).__name__}",
                         source=source)
    return data


def _file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words."""
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a file"


def parse_override(item: str, source: str) -> tuple[str, Any]:
    """``dotted.path=value`` as (path, YAML-parsed value); text that is not
    YAML is the string it is."""
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise InputError(f"--set expects dotted.path=value, got {item!r}", source=source)
    return key.strip(), parse(text, source, malformed_as_text=True)


def set_dotted(raw: dict[str, Any], path: str, value: Any, source: str) -> None:
    """Set ``raw[a][b]... = value`` for ``path`` ``a.b...``, creating mappings."""
    parts = path.split(".")
    if len(parts) > limits.MAX_DEPTH:
        raise InputError(f"nests deeper than {limits.MAX_DEPTH} levels", source=source,
                         path=path[:200])
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise InputError(f"is not a mapping, cannot set {path!r}", source=source,
                             path=".".join(parts[:i + 1]))
        node = child
    node[parts[-1]] = value


def validate(raw: dict[str, Any], source: str, *, allow_plugins: bool = False,
             lines: dict[str, int] | None = None) -> Scenario:
    """Validate a raw mapping as a scenario, including every sweep cell (at
    most :data:`~sim.scenario.limits.MAX_CELLS`, uniquely named). ``lines``
    (dotted path -> line, :func:`~sim.scenario.safeyaml.key_lines`) puts the
    YAML line of the field in the error."""
    try:
        return _validate(raw, source, allow_plugins=allow_plugins)
    except InputError as error:
        if error.line is None and error.path and lines:
            line = line_of(lines, error.path)
            if line is not None:
                raise InputError(error.message, source=error.source, path=error.path,
                                 line=line) from None
        raise


def _validate(raw: dict[str, Any], source: str, *, allow_plugins: bool = False) -> Scenario:
    scenario = _validate_one(raw, source, prefix="", allow_plugins=allow_plugins)
    for key, values in scenario.sweep.items():
        if key.split(".")[0] in _NOT_SWEEPABLE:
            raise InputError(f"{key.split('.')[0]!r} cannot be swept (it is one setting of the "
                             f"whole run; use --{key} or separate runs)", source=source,
                             path=f"sweep.{key}")
        labels = [_label(v) for v in values]
        repeated = sorted({v for v in labels if labels.count(v) > 1})
        if repeated:
            raise InputError(f"repeated value(s) {', '.join(repeated)}: each cell must be "
                             f"distinct", source=source, path=f"sweep.{key}")
    cells = math.prod(len(v) for v in scenario.sweep.values()) if scenario.sweep else 1
    if cells > limits.MAX_CELLS:
        raise InputError(f"the grid has {cells:,} cells; at most {limits.MAX_CELLS:,} are "
                         f"allowed", source=source, path="sweep")
    if cells * scenario.tasks > limits.MAX_TOTAL_TASKS:
        raise InputError(f"{cells:,} cells of {scenario.tasks:,} tasks is "
                         f"{cells * scenario.tasks:,} tasks; a run holds at most "
                         f"{limits.MAX_TOTAL_TASKS:,}", source=source, path="tasks")
    grid = _grid(scenario.sweep)
    cell_names(scenario.sweep, grid, source)
    try:
        _check_arrival_count(scenario)
    except InputError as error:
        raise InputError(error.message, source=source, path=error.path) from None
    for cell_values in grid:
        cell_raw = copy.deepcopy(raw)
        cell_raw.pop("sweep", None)
        for key, value in cell_values:
            set_dotted(cell_raw, key, value, source)
        label = ", ".join(f"{k}={v!r}" for k, v in cell_values)
        _validate_one(cell_raw, source, prefix=f"in the sweep cell {label}: ",
                      allow_plugins=allow_plugins)
    return scenario


_NOT_SWEEPABLE = frozenset({"tasks", "name", "description", "sweep"})


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"not a scenario value: {type(value).__name__}")  # pragma: no cover


def _strict(raw: dict[str, Any]) -> Scenario:
    """``raw`` (held to the limits already) validated in strict mode. Its JSON
    form is validated, so lists stand for tuples and ISO strings for dates
    while a boolean is never an integer and a string never a number."""
    text = json.dumps(_default_shapes(raw), default=_json_value, allow_nan=False)
    return Scenario.model_validate_json(text, strict=True)


def _default_shapes(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with the documented default shape filled in where a mapping
    omits its selector: ``world.difficulty`` without ``distribution`` is
    lognormal."""
    world = raw.get("world")
    if not isinstance(world, dict):
        return raw
    difficulty = world.get("difficulty")
    if isinstance(difficulty, dict) and "distribution" not in difficulty:
        world = {**world, "difficulty": {"distribution": "lognormal", **difficulty}}
        return {**raw, "world": world}
    return raw


def _validate_one(raw: dict[str, Any], source: str, prefix: str, *,
                  allow_plugins: bool = False) -> Scenario:
    try:
        limits.check_document(raw, source)
        scenario = _strict(raw)
    except InputError as error:
        raise InputError(f"{prefix}{error.message}", source=source, path=error.path) from None
    except ValidationError as error:
        errors = error.errors()
        first = _dotted(errors[0]["loc"])
        more = "".join(f"; also {_dotted(e['loc'])}: {_problem(e)}" for e in errors[1:])
        raise InputError(f"{prefix}{_problem(errors[0])}{more}", source=source,
                         path=first if first != "(top level)" else "") from None
    try:
        check_plugins(scenario.harness, allow_plugins)
        check_world(scenario.world)
        _check_conversation(scenario)
        harness_params(scenario.harness, scenario.world)
        resolve_detector(scenario.harness.detector.name)
        build_verifier(scenario.harness.verifier)
        _check_arrivals(scenario.des)
    except InputError as error:
        raise InputError(f"{prefix}{error.message}", source=source, path=error.path) from None
    return scenario


def _problem(error: Any) -> str:
    """One pydantic error in words, with "did you mean" for an unknown field."""
    if error.get("type") == "extra_forbidden":
        return f"unknown field{did_you_mean(_dotted(error['loc']))}"
    return f"{_yaml_words(error['msg'])} (got {_show(error.get('input'))})"


def did_you_mean(path: str) -> str:
    """``; did you mean 'x'?`` naming the documented field closest to the
    unknown field ``path`` (a sibling first, else the same name elsewhere), and
    the fields allowed there otherwise."""
    import difflib
    import re

    from sim.scenario.docs import field_docs  # it imports this module

    known = sorted({f.path for f in field_docs()})
    generic = re.sub(r"\[\d+\]", "[]", path)
    parent, _, leaf = generic.rpartition(".")
    siblings = sorted({k.rpartition(".")[2] for k in known
                       if k.rpartition(".")[0] == parent})
    elsewhere = [k for k in known if k.rpartition(".")[2] == leaf and k != generic]
    if elsewhere:
        return f"; did you mean {elsewhere[0]!r}?"
    close = difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    if siblings:
        return f"; the fields here are {', '.join(siblings)}"
    return ""


_JSON_WORDS = (("Input should be an object", "Input should be a mapping"),
               ("Input should be a valid array", "Input should be a list"),
               ("JSON input", "input"))


def _yaml_words(message: str) -> str:
    """A pydantic message in YAML's words (validation runs on the JSON form)."""
    for json_word, yaml_word in _JSON_WORDS:
        message = message.replace(json_word, yaml_word)
    return message


def check_plugins(h: HarnessConfig, allow_plugins: bool) -> None:
    """An InputError naming the field when the harness names a component by
    import path (code to import and run) and plugins are not allowed."""
    if allow_plugins:
        return
    for path, name in (("harness.detector.name", h.detector.name),
                       ("harness.verifier.name", h.verifier.name)):
        if ":" in name:
            raise InputError(f"{name!r} is an import path: a scenario runs code it names "
                             f"only when you allow it (--allow-plugins on the command line, "
                             f"allow_plugins=True in Python)", path=path)


def _check_arrivals(des: DesParams) -> None:
    """An arrivals CSV must be a readable regular file (checked before anything runs)."""
    if des.arrivals.kind != "csv":
        return
    assert des.arrivals.path is not None  # ArrivalParams: kind csv needs a path
    path = Path(des.arrivals.path)
    where = "des.arrivals.path"
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"arrivals file {str(path)!r} not found", path=where) from None
    except OSError as error:
        raise InputError(f"cannot read {str(path)!r} ("
                         f"{error.strerror or error})", path=where) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{str(path)!r} is not a file", path=where)
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise InputError(f"cannot read {str(path)!r} ("
                         f"{error.strerror or error})", path=where) from None


MAX_ARRIVALS_BYTES = 100_000_000
"""The largest arrivals CSV read (bytes)."""


def _check_arrival_count(scenario: Scenario) -> None:
    """An arrivals CSV (engine des) must hold at least ``tasks`` valid rows:
    read, bounded, before anything runs (not found short after simulating)."""
    des = scenario.des
    if des.arrivals.kind != "csv" or (scenario.engine != "des" and "engine" not in scenario.sweep):
        return
    assert des.arrivals.path is not None
    where = "des.arrivals.path"
    path = Path(des.arrivals.path)
    size = path.stat().st_size  # a regular file: _check_arrivals ran
    if size > MAX_ARRIVALS_BYTES:
        raise InputError(f"{str(path)!r} is larger than {MAX_ARRIVALS_BYTES:,} bytes",
                         path=where)
    from sim.engines.des import arrival_schedule

    try:
        arrivals = arrival_schedule(des, scenario.tasks, scenario.seed)
    except InputError as error:  # a bad row: the CSV's name and line, at this field
        raise InputError(f"{error.source}: {error.message}" if error.source else error.message,
                         path=where) from None
    if len(arrivals) < scenario.tasks:
        raise InputError(f"{str(path)!r} holds {len(arrivals):,} arrivals, fewer than the "
                         f"{scenario.tasks:,} tasks per cell: give more rows or fewer tasks",
                         path=where)


def _check_conversation(scenario: Scenario) -> None:
    """Messages to a task-giver need the harness's conversation mode."""
    if scenario.harness.conversation.enabled:
        return
    world = scenario.world
    for path, policy in [("world.policy", world.policy)] + [
            (f"world.classes[{i}].policy", c.policy) for i, c in enumerate(world.classes)]:
        if policy is not None and policy.talk > 0:
            raise InputError("messages to the task-giver (talk > 0) need "
                             "harness.conversation.enabled", path=f"{path}.talk")


def _discriminator_tags() -> frozenset[str]:
    """The tags pydantic puts in error paths of tagged unions (not fields)."""
    from typing import get_args

    from sim.world import distributions as wd
    from sim.world import params as wp

    tags = set()
    for union in (wp.Difficulty, wd.Distribution, wd.Component):
        for member in get_args(get_args(union)[0]):
            tags.add(member.model_fields["distribution"].default)
    return frozenset(tags)


def _union_members() -> frozenset[str]:
    """Names pydantic puts in error paths for the members of a union (a
    model's class name, ``str``, ``int``, ...): not fields."""
    from typing import get_args

    names = {"str", "int", "float", "bool", "none", "date", "list", "dict", "tuple"}
    stack: list[Any] = [Scenario]  # annotations: classes, unions, aliases
    seen: set[type] = set()
    while stack:
        annotation = stack.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation in seen:
                continue
            seen.add(annotation)
            names.add(annotation.__name__)
            stack.extend(f.annotation for f in annotation.model_fields.values())
        else:
            stack.extend(get_args(annotation))
    return frozenset(names)


_DISCRIMINATOR_TAGS = _discriminator_tags()
_UNION_MEMBERS = _union_members()
_SCHEMA_TAG_PREFIXES = ("constrained-", "function-", "lax-or-strict", "json-or-python")
"""pydantic-core schema names that tag a union member in error paths
(``constrained-int`` for an ``int`` with bounds in ``int | Distribution``)."""


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif (part in _DISCRIMINATOR_TAGS or part in _UNION_MEMBERS or "[" in str(part)
              or str(part).startswith(_SCHEMA_TAG_PREFIXES)):
            continue  # pydantic's tag of a union member, not a field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------ the grid
def _grid(sweep: dict[str, list[Any]]) -> list[tuple[tuple[str, Any], ...]]:
    if not sweep:
        return []
    keys = list(sweep)
    return [tuple(zip(keys, combo, strict=True))
            for combo in itertools.product(*(sweep[k] for k in keys))]


def expand(scenario: Scenario) -> list[tuple[str, Scenario, tuple[tuple[str, Any], ...]]]:
    """The sweep's cells as ``(name, scenario of the cell, axis values)``; a
    scenario without a sweep is one cell named after the scenario."""
    grid = _grid(scenario.sweep)
    if not grid:
        return [(scenario.name, scenario, ())]
    base = scenario.model_dump(mode="json", exclude={"sweep"})
    names = cell_names(scenario.sweep, grid, scenario.name)
    cells = []
    for name, values in zip(names, grid, strict=True):
        raw = copy.deepcopy(base)
        for key, value in values:
            set_dotted(raw, key, value, scenario.name)
        cells.append((name, _strict(raw), values))
    return cells


def cell_names(sweep: dict[str, list[Any]], grid: list[tuple[tuple[str, Any], ...]],
               source: str) -> list[str]:
    """The grid's cell names, ``last_part=value`` joined by commas (with the
    parent for a generic last part: ``detector.enabled=false``; the whole
    dotted path for axes whose shown parts coincide); an InputError at
    ``sweep`` when two cells would still share a name."""
    leaves = [_shown_leaf(key) for key in sweep]
    shown = {key: key if leaves.count(leaf) > 1 else leaf
             for key, leaf in zip(sweep, leaves, strict=True)}
    names = [",".join(f"{shown[key]}={_label(value)}" for key, value in values)
             for values in grid]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InputError(f"two cells would share the name {twice[0]!r}: give the values "
                         f"distinct labels", source=source, path="sweep")
    return names


_GENERIC_LEAVES = frozenset({"enabled", "name", "kind", "distribution", "mode", "value",
                             "values", "weight", "weights", "share", "mean_s", "median_s",
                             "sigma", "mu", "min", "max", "options", "automatic"})
"""Field names that do not say which setting they are alone (``enabled``):
a cell name shows them with their parent (``detector.enabled=false``)."""


def _shown_leaf(key: str) -> str:
    """The part of a sweep axis's dotted path a cell name shows: the last
    part, with its parent when the last part alone is a generic word."""
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in _GENERIC_LEAVES:
        return ".".join(parts[-2:])
    return parts[-1]


def _label(value: Any) -> str:
    """A value as it reads in YAML (``null``, ``true``), for cell names."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).splitlines()[0]
    return str(value)


# ------------------------------------------------------------- components
def resolve_import(name: str, path: str) -> Any:
    """The object at ``package.module:Attribute``, or an InputError naming ``path``."""
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"unknown name {name!r}: use a registered name or "
                         f"package.module:Class", path=path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"cannot import {module_name!r}: {error}", path=path) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise InputError(f"module {module_name!r} has no attribute {attr!r}", path=path) from None


def resolve_detector(name: str) -> Callable[[hp.HarnessParams], Detector]:
    """A factory building the detector ``name`` from the harness parameters."""
    if name == "default":
        return _default_detector
    cls = resolve_import(name, "harness.detector.name")
    if not callable(getattr(cls, "observe", None)):
        raise InputError(f"{name} has no observe() method", path="harness.detector.name")
    return _ImportedDetector(cls)


def _default_detector(params: hp.HarnessParams) -> Detector:
    return NoProgressDetector(params.detector)


class _ImportedDetector:
    """Builds a user's detector class with the detector parameters (picklable)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __call__(self, params: hp.HarnessParams) -> Detector:
        return self.cls(params.detector)


def build_verifier(config: VerifierConfig) -> Verifier | None:
    """The world-side verifier named in ``config``, or None for ``none``."""
    if config.name == "none":
        return None
    cls = VERIFIERS.get(config.name) or resolve_import(config.name, "harness.verifier.name")
    try:
        verifier = cls(**config.options)
    except (TypeError, ValueError) as error:
        raise InputError(f"cannot build {config.name}: {error}",
                         path="harness.verifier.options") from None
    if not callable(getattr(verifier, "check", None)):
        raise InputError(f"{config.name} has no check() method", path="harness.verifier.name")
    return verifier


def build_world(h: HarnessConfig, world: WorldParams, verifier: Verifier | None = None
                ) -> World:
    """The compiled world of a cell, speaking the harness's protocol: its
    conversation marker and its output cap."""
    marker = h.conversation.end_marker if h.conversation.enabled else None
    return World(world, verifier, end_marker=marker, max_output_tokens=h.max_output_tokens)


def harness_params(h: HarnessConfig, world: WorldParams | World,
                   prices: hp.Prices | None = None, verifier: object | None = None
                   ) -> hp.HarnessParams:
    """The real harness's parameters for this configuration and world, validated.
    ``world`` may be the compiled :class:`World` and ``verifier`` the built
    verifier of the cell, so that each is built once per cell."""

    w = world if isinstance(world, World) else build_world(h, world)
    if prices is None:
        prices = _prices(h)
    if verifier is None:
        verifier = build_verifier(h.verifier)
    worst = getattr(verifier, "worst_case", None)
    check_prompt, check_output, check_s = worst(w) if worst is not None else (0, 0, 0.0)
    d = h.detector
    try:
        return hp.HarnessParams(
            model=h.model, system_prompt_tokens=w.system_prompt_tokens(), tools=w.tool_specs(),
            max_output_tokens=h.max_output_tokens, context_window=h.context_window,
            temperature=h.temperature, tool_choice=h.tool_choice,
            thinking=hp.ThinkingConfig(h.thinking.enabled, h.thinking.budget_tokens),
            budgets=hp.Budgets(**h.budgets.model_dump()),
            prices=prices,
            retry=hp.RetryPolicy(**h.retry.model_dump(), fallback_prices=None),
            detector=hp.DetectorParams(
                enabled=d.enabled, repeat_threshold=d.repeat_threshold,
                cycle_max_period=d.cycle_max_period, cycle_repeats=d.cycle_repeats,
                stale_window=d.stale_window, objective_window=d.objective_window,
                max_nudges=d.nudges),
            context=hp.ContextParams(**h.context.model_dump()),
            verifier=hp.VerifierParams(
                enabled=h.verifier.name != "none", name=h.verifier.name,
                max_prompt_tokens=check_prompt, max_output_tokens=check_output,
                max_duration_s=check_s),
            approval_required=frozenset(h.approval_required),
            approval_timeout_s=h.approval_timeout_s, model_timeout_s=h.model_timeout_s,
            tool_failure_limit=h.tool_failure_limit, prompt_cache=h.prompt_cache,
            end_marker=h.conversation.end_marker if h.conversation.enabled else None,
            model_prices=_model_prices(h, w),
        ).validate()
    except hp.ParameterError as error:
        path, message = error.problems[0]
        raise InputError(message, path=_scenario_path(path)) from None


_HARNESS_TO_SCENARIO = {"system_prompt_tokens": "harness.context_window",
                        "verifier": "harness.verifier.name", "provider": "harness.model"}


def _scenario_path(path: str) -> str:
    """The scenario field behind a harness parameter's dotted path (the
    harness's own names where the scenario's differ: the prefix that must
    fit the context window, the world's tools, the verifier's worst case)."""
    head = path.split(".", 1)[0].split("[", 1)[0]
    if head == "tools":  # tools[i].effect: the world's tool i
        return f"world.{path}"
    if head in _HARNESS_TO_SCENARIO:
        return _HARNESS_TO_SCENARIO[head]
    if head not in HarnessConfig.model_fields:
        return "harness"
    return f"harness.{path}"


def _model_prices(h: HarnessConfig, w: World) -> tuple[tuple[str, hp.Prices], ...]:
    """Prices of the other models runs may use: the classes' models and those
    of ``harness.model_prices``, each from its overrides over the catalogue."""
    models = [m for m in dict.fromkeys((*w.class_models(), *h.model_prices)) if m != h.model]
    out = []
    for model in models:
        spec = h.model_prices.get(model)
        overrides = None if spec is None else {k: v for k, v in spec.model_dump().items()
                                               if v is not None}
        try:
            out.append((model, _resolve(h, model, overrides)))
        except InputError as error:
            raise InputError(error.message, path=f"harness.model_prices.{model}") from None
    return tuple(out)


def _resolve(h: HarnessConfig, model: str, spec: str | dict | None) -> hp.Prices:
    from sim.cost import resolve_price_tiers

    day = h.prices_date or datetime.datetime.now(datetime.UTC).date()
    when = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
    tiers = resolve_price_tiers(model, spec, cache_ttl=h.prompt_cache or "5m", when=when)
    return replace(tiers.base, tiers=tiers.tiers)


def _prices(h: HarnessConfig) -> hp.Prices:
    """The run's prices with their tiers, from the catalogue, a named set or overrides."""
    from sim.cost import resolve_price_tiers

    spec: str | dict[str, Any] | None = (
        {k: v for k, v in h.prices.model_dump().items() if v is not None}
        if isinstance(h.prices, PricesConfig) else h.prices)
    day = h.prices_date or datetime.datetime.now(datetime.UTC).date()
    when = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
    try:
        return resolve_price_tiers(h.model, spec, cache_ttl=h.prompt_cache or "5m", when=when)
    except InputError as error:
        path = f"harness.{error.path}" if error.path else "harness.prices"
        raise InputError(error.message, path=path) from None
