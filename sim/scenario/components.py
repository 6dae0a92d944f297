"""The components a scenario names: the no-progress detector and the
verifier, by registered name or, with ``allow_plugins``, by import path."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from sim.bad_input import InputError
from sim.harness import params as hp
from sim.harness.detector import Detector, NoProgressDetector
from sim.scenario.schema import HarnessConfig, VerifierConfig
from sim.world.verifiers import VERIFIERS, Verifier

__all__ = ["build_verifier", "check_plugins", "resolve_detector", "resolve_import"]


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


