"""Compiling a scenario cell: the world it runs against, the real harness's
parameters, validated (the checks that span sections raise
:class:`~sim.bad_input.InputError` naming the scenario field), and the
components the scenario names: the no-progress detector and the verifier, by
registered name or, with ``allow_plugins``, by import path."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from sim.bad_input import InputError
from sim.harness import params as hp
from sim.harness.detector import Detector, NoProgressDetector
from sim.scenario.schema import HarnessConfig, PricesConfig, VerifierConfig
from sim.world.params import WorldParams
from sim.world.verifiers import VERIFIERS, Verifier
from sim.world.world import World

__all__ = ["build_verifier", "build_world", "check_plugins", "harness_params", "resolve_detector",
           "resolve_import"]


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
    try:
        return hp.HarnessParams(
            **{name: getattr(h, name) for name in _AS_GIVEN},
            system_prompt_tokens=w.system_prompt_tokens(), tools=w.tool_specs(),
            prices=prices, detector=h.detector.params,
            verifier=hp.VerifierParams(
                enabled=h.verifier.name != "none", name=h.verifier.name,
                max_prompt_tokens=check_prompt, max_output_tokens=check_output,
                max_duration_s=check_s),
            approval_required=frozenset(h.approval_required),
            end_marker=h.conversation.end_marker if h.conversation.enabled else None,
            model_prices=_model_prices(h, w),
        )
    except hp.ParameterError as error:
        path, message = error.problems[0]
        raise InputError(message, path=_scenario_path(path)) from None


_BUILT = frozenset({"prices", "model_prices", "verifier", "detector", "approval_required"})
"""Harness parameters the scenario states in another form (a price spec, a
component to build, a name beside the settings, a list for a set)."""
_AS_GIVEN = tuple(name for name in HarnessConfig.model_fields
                  if name in {f.name for f in fields(hp.HarnessParams)} and name not in _BUILT)
"""Harness parameters the scenario holds as the harness takes them: passed on
by name, so a setting added to both needs no edit here."""

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
    return tuple((model, _resolve(h, model, h.model_prices.get(model),
                                  f"harness.model_prices.{model}")) for model in models)


def _prices(h: HarnessConfig) -> hp.Prices:
    """The run's prices with their tiers, from the catalogue, a named set or overrides."""
    return _resolve(h, h.model, h.prices, "harness.prices")


def _resolve(h: HarnessConfig, model: str, spec: str | PricesConfig | None,
             where: str) -> hp.Prices:
    """``model``'s prices (USD per million tokens, with tiers) from the price
    spec (a named set, overrides over the catalogue, or None for the
    catalogue's) as of ``harness.prices_date``; an InputError at ``where``."""
    from sim.cost import resolve_price_tiers
    from sim.cost.prices import prices_day

    given: str | dict[str, Any] | None = (
        {k: v for k, v in spec.model_dump().items() if v is not None}
        if isinstance(spec, PricesConfig) else spec)
    when = prices_day(h.prices_date)
    try:
        return resolve_price_tiers(model, given, cache_ttl=h.prompt_cache or "5m", when=when)
    except hp.ParameterError as error:  # the catalogue's prices out of bounds
        raise InputError(str(error), path=where) from None
    except InputError as error:  # at "prices" or "prices.<field>": below ``where``
        sub = error.path.partition(".")[2] if error.path else ""
        raise InputError(error.message, path=f"{where}.{sub}" if sub else where) from None


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
