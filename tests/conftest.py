"""Shared fixtures for the test suite.

The harness tests drive the loop with the scripted driver in ``tests/scripted.py``
(importable as ``scripted`` because pytest puts this folder on ``sys.path``).
With the environment variable CI set, hypothesis is derandomized.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from scripted import make_params, make_state

from sim.harness import HarnessParams, HarnessState

# CI runs the same examples every time (a red build must be reproducible);
# local runs explore new examples on each run.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def params() -> HarnessParams:
    """Small valid harness parameters with five tools and no budgets."""
    return make_params()


@pytest.fixture
def state(params: HarnessParams) -> HarnessState:
    """A fresh state for ``params`` holding the task statement."""
    return make_state(params)
