"""The command line's entry point (sim.cli): help with no command, --version,
the program's name as invoked, exit statuses documented in --help and the
README, report.html mentioned where results are described."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import sim.cli
from sim.output.provenance import sim_version

ROOT = Path(__file__).resolve().parents[1]


def test_no_command_prints_help_and_exits_2_without_a_traceback(capsys):
    """``sim`` alone prints the usage and the commands on stderr, status 2."""
    assert sim.cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and "compare" in err and "Traceback" not in err


def test_version_prints_the_installed_version(capsys):
    """``--version`` prints the program and sim's version, status 0."""
    assert sim.cli.main(["--version"], prog="sim") == 0
    assert capsys.readouterr().out.strip() == f"sim {sim_version()}"


@pytest.mark.parametrize("argv0,prog", [("/usr/local/bin/sim", "sim"),
                                         ("/x/sim/__main__.py", "python -m sim"),
                                         ("", "python -m sim")])
def test_help_names_the_program_as_it_was_invoked(argv0, prog):
    """The installed script is ``sim``; ``python -m sim`` otherwise."""
    assert sim.cli.program_name(argv0) == prog
    assert sim.cli.build_parser(prog).format_usage().startswith(f"usage: {prog} ")


def test_python_dash_m_sim_without_arguments_is_help_not_a_traceback():
    """A real ``python -m sim`` with no arguments: usage on stderr, exit 2."""
    done = subprocess.run([sys.executable, "-m", "sim"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("usage: python -m sim")
    assert "Traceback" not in done.stderr


def test_exit_statuses_and_report_html_are_documented_in_help_and_readme():
    """Every command's --help and the README state the exit statuses 0, 1, 2
    and 3 and name report.html."""
    parser = sim.cli.build_parser("sim")
    texts = [parser.format_help()] + [
        sub.format_help() for sub in parser._subparsers._group_actions[0].choices.values()]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in [*texts, readme]:
        flat = " ".join(text.split())
        for status in ("0", "1", "2", "3"):
            assert re.search(rf"\b{status}[ |]+(done|no regression|a regression|bad input|"
                             rf"inconclusive)", flat), (status, flat[:200])
        assert "report.html" in flat


def test_cost_refuses_a_run_of_no_steps(capsys):
    """``cost --steps 0``: exit 2 with the option named."""
    status = sim.cli.main(["cost", "--steps", "0", "--prefix", "1", "--per-step", "1",
                           "--output", "1", "--price-in", "3", "--price-out", "15"])
    assert status == 2 and "--steps must be" in capsys.readouterr().err
