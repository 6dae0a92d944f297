"""Progress off a terminal: ``traces import``, ``replay`` and ``calibrate``
(whose folds run in parallel worker processes) write whole lines to a
stderr that is not a terminal (a CI log, a file): no carriage-return frames,
at most one line per tenth of each bar's total (sim.progress), and
nothing printed from inside the workers (which would interleave)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from test_calibrate_cli import a_run, write_folder

from sim.cli import main


def stderr_of(*argv: str) -> tuple[int, str]:
    """Exit status and stderr of ``python -m sim ARGV`` in process, stderr a
    StringIO (not a terminal)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, err.getvalue()


def bar_lines(text: str, desc: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{desc}:")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A trace folder of 60 runs of 3 to 9 calls."""
    return write_folder(tmp_path_factory.mktemp("progress") / "t",
                        [a_run(i, 3 + i % 7) for i in range(60)])


def test_import_of_30_inputs_writes_exactly_ten_lines(tmp_path):
    """30 trace folders: a line at every third file (10%, 20%, ... 100%),
    ten in all, each ending in a newline, no ``\\r``."""
    sources = [write_folder(tmp_path / f"f{i:02d}", [a_run(i, 3)]) for i in range(30)]
    status, err = stderr_of("traces", "import", *sources, "--out", str(tmp_path / "all"))
    assert status == 0
    assert "\r" not in err
    lines = bar_lines(err, "importing")
    assert len(lines) == 10
    assert [re.search(r"(\d+)/30", line).group(1) for line in lines] == [
        str(3 * k) for k in range(1, 11)]


def test_replay_writes_at_most_eleven_whole_lines(tmp_path, folder):
    """60 runs replayed in chunks on two workers: no ``\\r``, between 1 and
    11 lines of the bar, the last at 60/60."""
    path = tmp_path / "tight.yaml"
    path.write_text("name: tight\nharness:\n  budgets: {tokens: 5000}\n")
    status, err = stderr_of("replay", folder, str(path), "--out", str(tmp_path / "r"),
                            "--workers", "2")
    assert status == 0
    assert "\r" not in err
    lines = bar_lines(err, "replay tight")
    assert 1 <= len(lines) <= 11
    assert "60/60" in lines[-1]


def test_calibrate_folds_in_parallel_write_one_bar_per_phase(tmp_path, folder):
    """Two folds on two workers: no ``\\r``; the folds' bar writes a line per
    fold (2 jobs: 50%, 100%) and the final fit's bar (the final fit and the
    two folds' ladder replays: 3 jobs) a line per job; no line comes from a
    worker (no ``fold 1 of 2``, no ``searching``)."""
    status, err = stderr_of("calibrate", folder, "--out", str(tmp_path / "fit.yaml"),
                            "--classes", "1", "--workers", "2", "--folds", "2",
                            "--evaluations", "5")
    assert status in (0, 1)
    assert "\r" not in err
    assert len(bar_lines(err, "fitting folds")) == 2
    assert len(bar_lines(err, "final fit and ladder")) == 3
    assert "searching" not in err and "fold 1 of" not in err
