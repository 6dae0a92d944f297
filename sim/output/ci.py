"""A comparison's verdict for CI systems: JUnit XML and a Markdown summary.

``compare --junit FILE`` writes one JUnit test case per check of the
comparison (:mod:`sim.analysis.compare`), named ``<cell>: <check>``:

* a regression is a ``<failure>`` (type ``regression``) whose message is the
  check in words;
* an inconclusive check is ``<skipped>``, its message saying how many tasks
  would decide it;
* a check within its limit passes.

The suite's properties carry the verdict, the exit status and the tasks
that would decide an inconclusive comparison. ``compare --summary-md FILE``
writes Markdown for a CI step summary (GitHub's ``$GITHUB_STEP_SUMMARY``):
the verdict first, then the checks that failed or are undecided, then every
check in a table. Both are deterministic for a given comparison. Names from
the scenarios (title, cells, changed values, sources) are escaped: for XML
their control characters shown as escapes (:func:`~sim.output.safe_text.printable`:
XML 1.0 cannot hold them), for Markdown as :func:`~sim.output.safe_text.md_text`.
"""

from __future__ import annotations

import contextlib
import os
import xml.etree.ElementTree as ET

import pandas as pd

from sim.analysis import frames
from sim.analysis.compare import INCONCLUSIVE, REGRESSION, Comparison, check_sentence, format_p
from sim.output.safe_text import md_code, md_text, printable

_HEADLINE = {"no regression": "✅ no regression", "regression": "❌ REGRESSION",
             "inconclusive": "⚠️ inconclusive"}


def _need(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def junit_xml(result: Comparison) -> bytes:
    """The JUnit XML document of ``result`` (UTF-8, with a declaration)."""
    checks = frames.records(result.checks)
    failures = sum(c["status"] == REGRESSION for c in checks)
    skipped = sum(c["status"] == INCONCLUSIVE for c in checks)
    counts = {"tests": str(len(checks)), "failures": str(failures), "errors": "0",
              "skipped": str(skipped)}
    name = printable(f"sim compare: {result.title}")
    root = ET.Element("testsuites", {"name": name, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": name, **counts, "time": "0"})
    properties = ET.SubElement(suite, "properties")
    need = result.tasks_to_decide
    for key, value in (("verdict", result.outcome), ("exit_status", str(result.exit_status)),
                       ("paired", str(result.paired).lower()),
                       ("tasks_to_decide", "" if need is None else str(need)),
                       ("base", result.base.source), ("candidate", result.candidate.source),
                       *((f"changed {path}", f"{old} -> {new}")
                         for path, old, new in result.changes)):
        ET.SubElement(properties, "property", {"name": printable(key),
                                               "value": printable(value)})
    for check in checks:
        case = ET.SubElement(suite, "testcase", {
            "classname": printable(f"sim.compare.{check['cell']}"),
            "name": printable(f"{check['cell']}: {check['check']}"), "time": "0"})
        sentence = printable(check_sentence(check))
        if check["status"] == REGRESSION:
            failure = ET.SubElement(case, "failure", {"type": "regression", "message": sentence})
            failure.text = sentence
        elif check["status"] == INCONCLUSIVE:
            ET.SubElement(case, "skipped", {"message": f"inconclusive: {sentence}"})
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def summary_markdown(result: Comparison) -> str:
    """Markdown for a CI step summary: the verdict first (see the module docstring)."""
    checks = frames.records(result.checks)
    level = round(100 * (1 - result.thresholds.alpha))
    lines = [f"## {_HEADLINE[result.outcome]}: {md_text(result.title)}", ""]
    if result.changes:
        lines += ["Changed: " + ", ".join(f"{md_code(path)} {md_text(old)} -> {md_text(new)}"
                                          for path, old, new in result.changes) + ".", ""]
    lines += [f"{md_text(result.verdict[0].upper() + result.verdict[1:])}. Exit status "
              f"{result.exit_status}.", ""]
    flagged = [c for c in checks if c["status"] != "within"]
    lines += [f"- {'**regression**' if c['status'] == REGRESSION else 'undecided'}: "
              f"{md_text(check_sentence(c))}" for c in flagged]
    if flagged:
        lines.append("")
    lines += [f"| check | change | {level}% interval | limit | adjusted p | result | tasks to "
              "decide |", "|---|---:|---:|---:|---:|---|---:|"]
    for c in checks:
        unit = " pp" if c["unit"] == "pp" else "%"
        need = _need(c["tasks_to_decide"])
        lines.append(f"| {md_text(c['cell'])}: {md_text(c['check'])} | {c['change']:+.2f}{unit} "
                     f"| {c['ci_low']:+.2f} to {c['ci_high']:+.2f}{unit} "
                     f"| {c['threshold']:g}{unit} | {format_p(c['p_adjusted'])} "
                     f"| {c['status']} | {'' if need is None else f'{need:,}'} |")
    lines += ["", f"- Base: {md_text(result.base.source)}",
              f"- Candidate: {md_text(result.candidate.source)}",
              f"- Pairing: {md_text(result.pairing_note)}"]
    return "\n".join(lines) + "\n"


def append_summary(path: str | os.PathLike[str], markdown: str) -> None:
    """Append ``markdown`` to the file at ``path`` (created if missing), as
    CI step summaries are written (GitHub's ``$GITHUB_STEP_SUMMARY`` collects
    every step's appends): one write, separated from earlier text by a blank
    line, so a step that runs several comparisons keeps them all. A write
    that fails (a full disk) is cut off again: the file keeps its earlier
    text, never half of this summary."""
    existing = os.path.getsize(path) if os.path.exists(path) else 0
    text = ("\n" if existing else "") + markdown.rstrip("\n") + "\n"
    with open(path, "a", encoding="utf-8") as summary:
        try:
            summary.write(text)
            summary.flush()
        except OSError:  # a full disk: the earlier summaries as they were, no half of this one
            with contextlib.suppress(OSError):
                summary.truncate(existing)
            raise
