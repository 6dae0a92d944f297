"""Terminal and CI habits of the command line: progress drawn only on a
terminal (one line per tenth otherwise), ``sim view`` opening a report or
printing its path, and ``-v``."""

from __future__ import annotations

import io
import webbrowser

import pytest

import sim.cli
from sim.progress import LineProgress, progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("total", [1, 7, 10, 95, 1000])
def test_progress_off_a_terminal_is_one_line_per_tenth(total):
    """Off a terminal: no carriage returns, one line each time another tenth
    is done, the last at 100%: exactly min(total, 10) lines."""
    stream = io.StringIO()
    bar = progress_bar(total=total, file=stream, desc="simulating")
    assert isinstance(bar, LineProgress)
    for _ in range(total):
        bar.update(1)
    bar.close()
    text = stream.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == min(total, 10) and "100%" in lines[-1]


def test_progress_stopped_early_writes_where_it_stopped():
    """A bar closed at 55% writes its 10% .. 50% lines and one closing line."""
    stream = io.StringIO()
    bar = progress_bar(total=20, file=stream)
    for _ in range(11):
        bar.update(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 6 and "55%" in lines[-1]


def test_progress_on_a_terminal_is_a_tqdm_bar_and_quiet_writes_nothing():
    """A terminal gets tqdm's redrawn bar; ``disable`` writes nothing anywhere."""
    terminal = _Terminal()
    bar = progress_bar(total=5, file=terminal)
    assert not isinstance(bar, LineProgress)
    bar.update(5)
    bar.close()
    assert "\r" in terminal.getvalue()
    quiet = io.StringIO()
    bar = progress_bar(total=5, file=quiet, disable=True)
    bar.update(5)
    bar.close()
    assert quiet.getvalue() == ""


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / "report.md").write_text("# r\n", encoding="utf-8")
    (folder / "report.html").write_text("<html></html>", encoding="utf-8")
    return folder


def test_view_prints_the_path_where_no_browser_is_available(results, monkeypatch, capsys):
    """No browser known to :mod:`webbrowser`: the report's path on stdout, exit 0."""
    def no_browser(*args, **kwargs):
        raise webbrowser.Error("no browser")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert sim.cli.main(["view", str(results)]) == 0
    assert capsys.readouterr().out.strip() == str((results / "report.html").resolve())


def test_view_opens_the_report_in_the_browser(results, monkeypatch, capsys):
    """With a browser, the report's file URL is opened (html before md)."""
    monkeypatch.delenv("CI", raising=False)
    opened = []

    class Browser(webbrowser.BaseBrowser):
        def open(self, url, new=0, autoraise=True):
            opened.append(url)
            return True

    monkeypatch.setattr(webbrowser, "get", lambda *a, **k: Browser())
    monkeypatch.setattr(webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    assert sim.cli.main(["view", str(results)]) == 0
    assert opened == [(results / "report.html").resolve().as_uri()]
    assert capsys.readouterr().out == ""


def test_view_finds_a_calibration_report(tmp_path, capsys):
    """A calibration folder's report is calibration.html."""
    (tmp_path / "calibration.html").write_text("<html></html>", encoding="utf-8")
    assert sim.cli.main(["view", str(tmp_path), "--print"]) == 0
    assert capsys.readouterr().out.strip().endswith("calibration.html")


def test_verbose_is_accepted_before_and_after_the_command(results, capsys):
    """``sim -v view DIR`` and ``sim view DIR -v`` both run."""
    assert sim.cli.main(["-v", "view", str(results), "--print"]) == 0
    assert sim.cli.main(["view", str(results), "--print", "-vv"]) == 0


def test_verbose_logs_the_scenario_found_by_name_and_quiet_without(tmp_path, capsys):
    """``-v`` says which file a scenario name resolved to; without it, no log."""
    argv = ["run", "bounded", "--tasks", "3", "--quiet", "--workers", "1"]
    assert sim.cli.main(["-v", *argv, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "sim: scenario bounded: " in err and "bounded.yaml" in err
    assert sim.cli.main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert "sim:" not in capsys.readouterr().err


def test_summary_md_appends_as_ci_step_summaries_are_written(tmp_path, capsys):
    """``compare --summary-md FILE`` appends its summary (verdict first) after
    what earlier steps wrote, separated by a blank line; two runs keep both."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    argv = ["compare", "bounded", "bounded_stop_first", "--tasks", "20", "--quiet",
            "--resamples", "200", "--workers", "1", "--summary-md", str(summary)]
    for n in (1, 2):
        status = sim.cli.main([*argv, "--out", str(tmp_path / f"out{n}")])
        assert status in (0, 1, 3)
    capsys.readouterr()
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n\n")
    parts = text.split("\n\n", 1)[1]
    first_line = parts.splitlines()[0]
    assert text.count(first_line) == 2  # the same verdict line, once per run
