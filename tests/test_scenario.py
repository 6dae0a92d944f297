"""Scenario files: every kind of bad input gets one clear message naming the
file and the dotted field path, exit status 2 and no traceback; overrides and
components given by import path really take effect.

Each bad input is checked three ways: :func:`sim.scenario.load_scenario`
raises :class:`~sim.errors.InputError` (fast, in-process); the CLI's entry
point ``sim.cli.main`` returns 2 with the message on stderr (in-process); and
``python -m sim run ...`` in a real interpreter exits with status 2, prints
``error: ...`` and no traceback. The interpreter runs cost about two CPU
seconds each (imports), so they cover one case per error path (file reading,
YAML, validation, harness compatibility, imports, sweep cells, --set, --tasks)
and run concurrently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import sim.cli
from sim.errors import InputError
from sim.scenario import (
    DetectorConfig,
    build_verifier,
    cells_of_names,
    load_scenario,
    resolve_detector,
)

REPO = Path(__file__).resolve().parents[1]
BOUNDED = REPO / "scenarios" / "bounded.yaml"
VALID = "tasks: 5\nseed: 1\n"
