"""The test suite as a newcomer runs it (tests/conftest.py): ``python -m
pytest`` leaves out the tests marked slow and says how to run them; ``-m``
(as .ci/run passes) or a named test file runs them; npm installs the Claude
Code CLI only under ``$SIM_NODE_PREFIX`` or a temporary folder of the run,
never into the home folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import conftest

ROOT = Path(__file__).resolve().parents[1]


def fake_config(markexpr: str = "", args: tuple[str, ...] = ("tests",)):
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr), args=list(args))


def test_a_plain_run_leaves_the_slow_tests_out():
    """``python -m pytest`` (no -m; the default folder, or a folder named)."""
    assert conftest.leaves_slow_out(fake_config())
    assert conftest.leaves_slow_out(fake_config(args=()))


def test_a_marker_expression_or_a_named_file_keeps_the_slow_tests():
    """``-m slow``, ``-m "not slow and not untraced"`` (the marker decides)
    and ``tests/test_x.py`` or one of its tests (the user asked for it)."""
    for config in (fake_config("slow"), fake_config("not slow and not untraced"),
                   fake_config(args=("tests/test_x.py",)),
                   fake_config(args=("tests/test_x.py::test_y",))):
        assert not conftest.leaves_slow_out(config)


def test_the_npm_prefix_is_set_and_is_not_in_the_home_folder():
    """This run has a prefix: $SIM_NODE_PREFIX as given, or a temporary
    folder (under the system's temporary folder), never ``~/.cache``."""
    prefix, temporary = conftest.node_prefix()
    assert os.environ["SIM_NODE_PREFIX"] == str(prefix)
    if temporary:
        assert prefix.parent == Path(tempfile.gettempdir())
        assert prefix.name.startswith("sim-tests-node-")


def test_a_real_collection_says_what_it_left_out_and_where_npm_installs(tmp_path):
    """``python -m pytest`` on a folder holding one quick and one slow test
    (this conftest copied beside them): one passes, one is deselected, and
    the output says how to run slow tests and where npm would install."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text()
                                          .replace("from scripted import make_params, "
                                                   "make_state\n", "")
                                          .replace("from sim.harness import HarnessParams, "
                                                   "HarnessState\n", ""))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\ndef test_quick():\n    pass\n\n"
        "@pytest.mark.slow\ndef test_long():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SIM_NODE_PREFIX",
                                                            "SIM_NODE_PREFIX_IS_TEMPORARY")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "no:xdist", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 deselected" in done.stdout
    assert "the tests marked slow (long statistical checks, notebooks) were not run: " \
           "python -m pytest -m slow runs them" in done.stdout
    assert "npm installs @anthropic-ai/claude-code (if absent) into a temporary folder" \
        in done.stdout
    assert str(Path.home() / ".cache") not in done.stdout
