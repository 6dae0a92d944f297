"""Scenario files: YAML in, a validated :class:`Scenario` out, or one clear error.

The names the rest of sim imports, gathered from the modules that hold them,
one concept each:

- :mod:`sim.scenario.schema`: the pydantic models (the harness's sections are
  the harness's own parameter dataclasses) and strict validation;
- :mod:`sim.scenario.loading`: reading a file or a scenario name, ``--set``;
- :mod:`sim.scenario.validation`: the whole document, its sweep and the checks
  that span fields, as errors naming the file, field and YAML line;
- :mod:`sim.scenario.messages`: pydantic's errors in a scenario author's words;
- :mod:`sim.scenario.grid`: the sweep's cells and their names;
- :mod:`sim.scenario.compilation`: a cell's world and harness parameters, and
  its detector and verifier by name or import path.
"""

from __future__ import annotations

from sim.scenario.compilation import (
    build_verifier,
    build_world,
    check_plugins,
    harness_params,
    resolve_detector,
    resolve_import,
)
from sim.scenario.dotted import parse_override, set_dotted
from sim.scenario.grid import cell_names, expand
from sim.scenario.loading import MAX_FILE_BYTES, load_scenario, read_text, read_yaml
from sim.scenario.messages import did_you_mean
from sim.scenario.schema import (
    ConversationConfig,
    DetectorConfig,
    HarnessConfig,
    PricesConfig,
    Scenario,
    VerifierConfig,
)
from sim.scenario.validation import MAX_ARRIVALS_BYTES, validate

__all__ = ["MAX_ARRIVALS_BYTES", "MAX_FILE_BYTES", "ConversationConfig", "DetectorConfig",
           "HarnessConfig", "PricesConfig", "Scenario", "VerifierConfig", "build_verifier",
           "build_world", "cell_names", "check_plugins", "did_you_mean", "expand",
           "harness_params", "load_scenario", "parse_override", "read_text", "read_yaml",
           "resolve_detector", "resolve_import", "set_dotted", "validate"]
