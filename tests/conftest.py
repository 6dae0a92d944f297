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

Tests marked ``slow`` (long statistical checks, notebook kernels: most of the
suite's time) run only when asked: ``python -m pytest`` runs as if given
``-m "not slow"`` and says so at the end; any ``-m`` (``-m slow``, or the two
parts ``.ci/run`` passes) or naming a test file runs them
(:func:`leaves_slow_out`).

The Claude Code transcript tests run the real ``@anthropic-ai/claude-code``
CLI, which npm installs when it is absent: into ``$SIM_NODE_PREFIX`` when it
is set (``.ci/run`` sets it; set it to keep the install between runs), else
into a temporary folder removed when the run ends, never into your home
folder. The header and the end of the run say which (:func:`node_prefix`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

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


NODE_PREFIX = "SIM_NODE_PREFIX"
"""Where npm installs (or finds) the Claude Code CLI the transcript tests run."""
_TEMPORARY_NODE = "SIM_NODE_PREFIX_IS_TEMPORARY"
"""Set (to the folder) when this run chose a temporary :data:`NODE_PREFIX`."""


def node_prefix() -> tuple[Path, bool]:
    """The npm prefix of the Claude Code CLI and whether it is a temporary
    folder of this run (``$SIM_NODE_PREFIX`` unset)."""
    prefix = os.environ[NODE_PREFIX]
    return Path(prefix), os.environ.get(_TEMPORARY_NODE) == prefix


def pytest_configure(config: pytest.Config) -> None:
    """Scopes in the order collected (xdist's own order, by test count, would
    start a long module of few tests last). Without ``$SIM_NODE_PREFIX``, a
    temporary one for this run (chosen before the xdist workers start: they
    inherit it)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    config.addinivalue_line(
        "markers", "untraced: times a child process's response to a signal, so CI runs it "
        "outside the coverage tracer (.ci/run), whose subprocess hooks slow the stop")
    if not os.environ.get(NODE_PREFIX):
        folder = str(Path(tempfile.gettempdir()) / f"sim-tests-node-{os.getpid()}")
        os.environ[NODE_PREFIX] = os.environ[_TEMPORARY_NODE] = folder
    left_out = leaves_slow_out(config)
    config.stash[_SLOW_LEFT_OUT] = left_out
    if left_out:  # pytest's own -m: reported as deselected, in xdist's workers too
        config.option.markexpr = "not slow"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the temporary npm prefix this run made (in the process that chose it)."""
    prefix, temporary = node_prefix()
    if temporary and not hasattr(config, "workerinput") and prefix.name.endswith(
            f"-{os.getpid()}"):
        shutil.rmtree(prefix, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Where npm installs the Claude Code CLI, and whether slow tests run."""
    prefix, temporary = node_prefix()
    where = (f"a temporary folder, {prefix}, removed at the end (set {NODE_PREFIX} to keep it)"
             if temporary else f"{NODE_PREFIX}={prefix}")
    return [f"Claude Code transcript tests: npm installs @anthropic-ai/claude-code (if "
            f"absent) into {where}"]


def leaves_slow_out(config: pytest.Config) -> bool:
    """Whether this run leaves the tests marked slow out: it selects by no
    marker (``-m``) and names no test file or test (``tests/test_x.py``)."""
    named = any(str(arg).split("::")[0].endswith(".py") for arg in config.args)
    return not config.option.markexpr and not named


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest scopes first (a stable sort: the rest keep their order)."""
    items.sort(key=lambda item: _cost_rank(item.nodeid))


_SLOW_LEFT_OUT = pytest.StashKey[bool]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """Say how many slow tests were not run and how to run them, and where
    npm put the Claude Code CLI if it did."""
    if config.stash.get(_SLOW_LEFT_OUT, False):
        terminalreporter.write_line(
            "the tests marked slow (long statistical checks, notebooks) were not run: "
            "python -m pytest -m slow runs them (CI runs both parts: .ci/run)")
    prefix, temporary = node_prefix()
    if (prefix / "node_modules").is_dir():
        terminalreporter.write_line(
            f"the Claude Code CLI is installed under {prefix}"
            + (" (a temporary folder, removed now)" if temporary else ""))


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
