"""Shared fixtures for the test suite.

The harness tests drive the loop with the scripted driver in ``tests/scripted.py``
(importable as ``scripted`` because pytest puts this folder on ``sys.path``).
"""

from __future__ import annotations

import pytest
from scripted import make_params, make_state

from sim.harness import HarnessParams, HarnessState


@pytest.fixture
def params() -> HarnessParams:
    """Small valid harness parameters with five tools and no budgets."""
    return make_params()


@pytest.fixture
def state(params: HarnessParams) -> HarnessState:
    """A fresh state for ``params`` holding the task statement."""
    return make_state(params)
