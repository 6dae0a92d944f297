"""Start-up (issue 14): a command imports scipy, matplotlib and genai_prices
only when it uses them (measured against a baseline in
benchmarks/bench_startup.py; here, which modules load)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _imported(*argv: str) -> set[str]:
    """Modules a fresh ``python -m sim ARGV`` imported (from ``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "sim", *argv],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:")}


def test_help_imports_no_heavy_library() -> None:
    """``sim --help`` loads neither scipy, matplotlib nor the price catalogue."""
    assert not {"scipy", "matplotlib", "genai_prices"} & _imported("--help")


def test_a_run_with_named_prices_needs_neither_the_catalogue_nor_scipy(
        tmp_path: Path) -> None:
    """Simulating a scenario whose prices are a named set (bounded.yaml) and
    writing its results (report.html included) loads neither genai_prices nor
    scipy."""
    modules = _imported("run", "scenarios/bounded.yaml", "--tasks", "2", "--quiet", "--out",
                        str(tmp_path / "out"))
    assert "sim.sweeps.cells" in modules
    assert not {"genai_prices", "scipy"} & modules
