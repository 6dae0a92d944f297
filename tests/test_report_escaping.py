"""Reports are safe to render (issue 41): a scenario name, a description, a
sweep value, a trace's model name, exit label and task id holding HTML, a
Markdown link, a pipe, a backtick, a newline or terminal escape bytes land in
``report.md``, ``compare --summary-md``, the JUnit XML and ``report.html`` as
text: no tag, no link, no extra table cell, no broken XML. One escaper does it
(:mod:`sim.output.safe_text`), and the HTML converter reads what it writes
back to the value as it was."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.output.markdown_html import markdown_to_html
from sim.output.safe_text import md_code, md_text, printable
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
from sim.traces.writer import write_runs

NAME = "<script>alert(1) | [x](javascript:alert(1)) `tick` \x1b]0;pwned\x07"
"""A scenario name: HTML, a link, a pipe, a backtick, a terminal title escape
(no slash: a scenario's name names its folder)."""
VALUE = "<img src=x onerror=alert(1)>|x"
"""A sweep value (a model name: cells are named by it)."""
ESCAPE = "esc\x1b[2Jmodel"
"""Another: a terminal's clear-screen sequence (XML 1.0 cannot hold ESC)."""
TRACE = "<img src=x onerror=alert(1)>|[y](javascript:alert(2))\n| `z`"
"""A trace's model, exit label, task id and tool name."""

SCENARIO = f"""\
name: "{NAME.replace(chr(27), chr(92) + 'e').replace(chr(7), chr(92) + 'a')}"
description: "about <img src=x onerror=alert(1)> | end"
tasks: 12
harness:
  prices: seed001
sweep:
  harness.model: ["claude-sonnet-4-20250514", "{VALUE}", "esc\\e[2Jmodel"]
"""


def _injections(text: str) -> list[str]:
    """What would become markup: a raw ``<script``/``<img`` tag, a link to
    ``javascript:`` not escaped, a control byte."""
    found = re.findall(r"<script|<img|(?<!\\)\]\(javascript:|[\x00-\x08\x0b-\x1f\x7f]",
                       text, flags=re.IGNORECASE)
    return found


def _tables(markdown: str) -> list[list[int]]:
    """Each pipe table's cells per row (escaped characters do not count)."""
    tables: list[list[int]] = []
    previous = False
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = re.sub(r"\\.", "", line).strip().strip("|").count("|") + 1
            if not previous:
                tables.append([])
            tables[-1].append(cells)
        previous = line.startswith("|")
    return tables


def _check_markdown(markdown: str) -> None:
    assert _injections(markdown) == []
    for table in _tables(markdown):
        assert len(set(table)) == 1, table  # every row as wide as the header


def _check_html(page: str) -> None:
    assert "<script" not in page.lower()
    assert "<img src=x" not in page.lower() and "href=" not in page.lower()


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep of a hostile scenario (three cells, two named by hostile
    model names) and its comparison with itself under a tighter step budget,
    with ``--junit`` and ``--summary-md``."""
    root = tmp_path_factory.mktemp("escaping")
    scenario = root / "hostile.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    assert main(["sweep", str(scenario), "--quiet", "--workers", "1",
                 "--out", str(root / "sweep")]) == 0
    status = main(["compare", str(scenario), str(scenario), "--candidate-set",
                   "harness.budgets.steps=8", "--quiet", "--workers", "1",
                   "--out", str(root / "compare"), "--junit", str(root / "junit.xml"),
                   "--summary-md", str(root / "summary.md")])
    assert status in (0, 1, 3)
    return root


def test_a_sweep_report_shows_hostile_names_as_text(swept):
    """report.md: the scenario's name, description and a cell named by a
    hostile sweep value carry no tag, no link, no control byte; every table
    keeps its column count; report.html shows them escaped."""
    report = (swept / "sweep" / "report.md").read_text(encoding="utf-8")
    _check_markdown(report)
    assert "# Results: &lt;script>alert(1) \\| \\[x\\](javascript:alert(1)) \\`tick\\` " \
           "\\\\x1b\\]0;pwned\\\\x07" in report
    assert "| model=&lt;img src=x onerror=alert(1)>\\|x |" in report
    assert len(_tables(report)[0]) == 5  # header, rule, three cells
    assert f"## {md_text('model=' + ESCAPE)}" == "## model=esc\\\\x1b\\[2Jmodel"
    assert f"## {md_text('model=' + ESCAPE)}\n" in report
    page = (swept / "sweep" / "report.html").read_text(encoding="utf-8")
    _check_html(page)
    assert "<h2>model=&lt;img src=x onerror=alert(1)&gt;|x</h2>" in page


def test_a_comparison_report_summary_and_junit_are_safe(swept):
    """compare's report.md and report.html, ``--summary-md`` and ``--junit``:
    the hostile names as text; the JUnit XML parses (its control bytes shown
    as escapes) and names the cell as it is."""
    for name in ("compare/report.md", "summary.md"):
        _check_markdown((swept / name).read_text(encoding="utf-8"))
    _check_html((swept / "compare" / "report.html").read_text(encoding="utf-8"))
    root = ET.fromstring((swept / "junit.xml").read_bytes())
    names = {case.get("name").split(": ")[0] for case in root.iter("testcase")}
    assert names == {"model=claude-sonnet-4-20250514", f"model={VALUE}",
                     f"model={printable(ESCAPE)}"}


def test_a_replay_report_shows_trace_names_as_text(tmp_path):
    """A trace folder whose model, exit label, task id and tool name are
    hostile: the replay's report.md and report.html carry them as text."""
    traces = tmp_path / "traces"
    traces.mkdir()
    calls = [CallRecord(Usage(input_tokens=100, output_tokens=10), model=TRACE, cost_usd=0.01,
                        tool_calls=[ToolCallRecord(TRACE, "c1", "{}", 3, None, False, 0.1)]),
             CallRecord(Usage(input_tokens=150, output_tokens=5), model=TRACE, cost_usd=0.01)]
    write_runs(traces, [RunRecord(run_id=f"r{i}", source="tau2", file="x", task_id=TRACE,
                                  model=TRACE, exit=TRACE, resolved=True, calls=list(calls))
                        for i in range(3)])
    out = tmp_path / "replayed"
    assert main(["replay", str(traces), "replay", "--quiet", "--out", str(out)]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    _check_markdown(report)
    assert md_code(TRACE) in report  # the unpriced model and the recorded models, escaped
    _check_html((out / "report.html").read_text(encoding="utf-8"))


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8") | st.sampled_from("<>&|[]()`\\*_!#\n\r\t\x1b")))
def test_a_value_escaped_for_a_table_cell_reads_back_as_itself(value):
    """Any text through :func:`md_text` is one table cell, one heading and
    one paragraph that the HTML converter shows as the text itself (its
    control characters as visible escapes): no tag, no extra cell."""
    shown = printable(value, newlines=False).strip()
    page = markdown_to_html(f"| a | b |\n|---|---|\n| {md_text(value)} | 2 |\n\n"
                            f"## x {md_text(value)}\n", {}, title="t")
    cells = re.findall(r"<td>(.*?)</td>", page, flags=re.DOTALL)
    assert len(cells) == 2 and cells[1] == "2"
    assert html.unescape(cells[0]) == shown
    heading = re.search(r"<h2>x(.*?)</h2>", page, flags=re.DOTALL)
    assert heading is not None and html.unescape(heading.group(1)).strip() == shown
    assert "<script" not in cells[0] and "<img" not in cells[0]


def test_md_code_keeps_plain_values_as_code_and_escapes_the_rest():
    """A plain label stays inline code; one with markup becomes escaped text."""
    assert md_code("needs_human:no_progress") == "`needs_human:no_progress`"
    assert md_code("a`b") == "a\\`b" and md_code("x|y") == "x\\|y"
    assert md_code("<b>") == "&lt;b>" and md_code("a -> b") == "`a -> b`"


def test_printable_shows_terminal_escapes_and_keeps_lines():
    """ESC, BEL, CSI (C1), DEL, a bidi override and a lone surrogate become
    visible escapes; newline and tab stay unless a name must be one line."""
    assert printable("\x1b]0;pwned\x07\x1b[2J\x9b\x7f\u202e\ud800") == \
        "\\x1b]0;pwned\\x07\\x1b[2J\\x9b\\x7f\\u202e\\ud800"
    assert printable("a\nb\tc") == "a\nb\tc"
    assert printable("a\nb\tc\r", newlines=False) == "a\\nb\\tc\\r"


def test_a_calibration_report_shows_trace_names_as_text(tmp_path):
    """A calibration of runs whose model and exit label are hostile:
    calibration.md and calibration.html carry them as text (the classes and
    prices table, the exit labels, the accuracy table's folder)."""
    from dataclasses import replace

    from tests.test_calibrate_cli import a_run, write_folder

    model = "<img src=x onerror=alert(1)>|m"
    runs = []
    for i in range(80):
        run = a_run(i, 4 + (i * 7) % 6)
        run = replace(run, model=model, exit=TRACE,
                      calls=[replace(c, model=model) for c in run.calls])
        runs.append(run)
    folder = write_folder(tmp_path / "t<script>", runs)
    status = main(["calibrate", folder, "--out", str(tmp_path / "fit.yaml"), "--classes", "1",
                   "--quiet", "--evaluations", "8", "--search-runs", "300",
                   "--report", str(tmp_path / "rep")])
    assert status in (0, 1)
    report = (tmp_path / "rep" / "calibration.md").read_text(encoding="utf-8")
    _check_markdown(report)
    assert md_code(TRACE) in report and md_text(model) in report
    _check_html((tmp_path / "rep" / "calibration.html").read_text(encoding="utf-8"))


def test_the_html_converter_renders_a_ragged_table_as_wide_as_its_header():
    """A row with more cells than the header (a pipe some writer did not
    escape) or fewer renders as GitHub does: excess cells dropped, missing
    ones empty; it no longer raises IndexError."""
    page = markdown_to_html("| a | b |\n|---|---:|\n| 1 | 2 | 3 |\n| x |\n", {}, title="t")
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert [len(re.findall(r"<t[hd]", r)) for r in rows] == [2, 2, 2]
    assert "<td>1</td><td class=\"r\">2</td>" in rows[1] and "3" not in rows[1]
