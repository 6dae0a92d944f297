"""Shared fixtures for the test suite.

The harness tests drive the loop with the scripted driver in ``tests/scripted.py``
(importable as ``scripted`` because pytest puts this folder on ``sys.path``).
With the environment variable CI set, hypothesis is derandomized.

The suite runs on pytest-xdist with ``--dist loadscope`` (pyproject.toml): a
module, or a class of one, goes whole to one worker. :func:`pytest_configure`
turns off xdist's reordering of those scopes by test count (as
``--no-loadscope-reorder`` would), so they start in the order collected, and
:func:`pytest_collection_modifyitems` puts the costliest scopes
(:data:`COSTLIEST`) first, longest first: the many short ones then fill both
workers at the end instead of one long scope starting last.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from scripted import make_params, make_state

from sim.harness import HarnessParams, HarnessState

# The scopes that take longest (a module or a class, as pytest-xdist's loadscope
# sends them to a worker), longest first: run first, the short ones after. Seconds
# in a full run on main at load ~10 (pytest --durations; worker time, about four
# times that at load ~1-2), before the splits into classes. A name that no longer
# exists only drops out of the ordering (tests/test_suite_order.py checks that each
# names a test file and class).
COSTLIEST = (
    "tests/test_calibrate_verdict.py::TestSizeFirstHalf",  # 770 s both halves
    "tests/test_calibrate_verdict.py::TestSizeSecondHalf",
    "tests/test_notebooks.py::TestYourAgent",  # 350 s
    "tests/test_calibrate_recovery.py",  # 330 s
    "tests/test_sweeps_cli.py",  # 175 s
    "tests/test_calibrate_verdict.py::TestPower",  # 135 s
    "tests/test_calibrate_cli.py",  # 125 s
    "tests/test_tune_tau2.py",  # 115 s
    "tests/test_fuzz_cli.py",  # 115 s
    "tests/test_tune.py::TestOptimumFirstSeeds",  # 195 s both halves
    "tests/test_tune.py::TestOptimumLastSeeds",
    "tests/test_tune.py::TestRecommendation",
    "tests/test_scenario_fuzz.py",  # 65 s
    "tests/test_notebooks.py",  # 60 s
    "tests/test_api_journey.py",  # 60 s
    "tests/test_replay_traces.py",  # 45 s
    "tests/test_engine_equivalence.py::TestFirstSeeds",  # 70 s both halves
    "tests/test_engine_equivalence.py::TestLastSeeds",
    "tests/test_traces_claude_code.py",  # 35 s
    "tests/test_calibrate_ladder.py",  # 30 s
    "tests/test_reproduction.py",  # 30 s
    "tests/test_fuzz_harness.py",  # 25 s
    "tests/test_sweep_cli.py",  # 25 s
    "tests/test_tune.py",
)


def _cost_rank(nodeid: str) -> int:
    """The position of the test's scope in :data:`COSTLIEST` (after them all
    when it is not listed)."""
    scope = nodeid.rsplit("::", 1)[0]
    return COSTLIEST.index(scope) if scope in COSTLIEST else len(COSTLIEST)


def pytest_configure(config: pytest.Config) -> None:
    """Scopes in the order collected (xdist's own order, by test count, would
    start a long module of few tests last)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    config.addinivalue_line(
        "markers", "untraced: times a child process's response to a signal, so CI runs it "
        "outside the coverage tracer (.ci/run), whose subprocess hooks slow the stop")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest scopes first (a stable sort: the rest keep their order)."""
    items.sort(key=lambda item: _cost_rank(item.nodeid))


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
