"""A tool call without a usable name (issue 41): JSON null, "", whitespace
only, a number or an object where a format records the tool's name. Every
importer hands the recorded value on as it is and the writer's one check
(:func:`sim.traces.repairs.repair_run`) refuses the run holding it: skipped and
counted as ``tool call without a name``, the detail naming the call and the
field ``calls.tool_calls.name``. No tool row named ``"None"``, ``""`` or a
stringified object is ever written (a trace folder's reader refuses a null
name, so the run cannot be kept with its name null).

The documents are the small files of each format the other importer tests
use, with the tool's name replaced."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fuzz_traces import _miniswe_tools, _otel, json_samples
from sim.bad_input import InputError
from sim.cli import main
from sim.traces import import_traces, read_traces
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord, Usage
from sim.traces.skips import NO_TOOL_NAME, Unusable
from sim.traces.writer import write_runs
from tests.test_traces_harbor import claude_trajectory
from tests.test_traces_openhands import history
from tests.test_traces_otel_console import printed
from tests.test_traces_phoenix import dataframe
from tests.test_traces_sources_fuzz import SEEDS

NAME = "tool_x"
"""The name each document gives its tool call; the cases replace it."""

BAD = {"null": None, "empty": "", "whitespace": " \t ", "number": 5,
       "object": {"name": "x"}}


def _otlp_value(value: Any) -> dict:
    """``value`` as an OTLP JSON ``AnyValue`` (null: an empty one)."""
    if value is None:
        return {}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _otlp_value(v)}
                                           for k, v in value.items()]}}
    return {"stringValue": value}


def renamed(doc: Any, value: Any) -> Any:
    """``doc`` with every :data:`NAME` replaced by ``value`` (in an OTLP
    attribute, encoded as OTLP encodes it)."""
    if doc == {"stringValue": NAME}:
        return _otlp_value(value)
    if isinstance(doc, dict):
        return {k: renamed(v, value) for k, v in doc.items()}
    if isinstance(doc, list):
        return [renamed(v, value) for v in doc]
    return value if doc == NAME else doc


def _tau2() -> dict:
    doc = json_samples()["tau2"]
    doc["simulations"][0]["messages"][2]["tool_calls"][0]["name"] = NAME  # s2 keeps "find"
    return doc


def _miniswe() -> dict:
    doc = _miniswe_tools()
    for message in doc["messages"]:
        for call in message.get("tool_calls", []):
            call["function"]["name"] = NAME
    return doc


def _otel_genai() -> dict:
    return json.loads(json.dumps(_otel()).replace('"search"', json.dumps(NAME)))


def _seed(fmt: str, old: str) -> list:
    values = copy.deepcopy(SEEDS[fmt])
    return json.loads(json.dumps(values).replace(json.dumps(old), json.dumps(NAME)))


def _langfuse() -> list:
    values = copy.deepcopy(SEEDS["langfuse"])
    values[0]["data"][2]["name"] = NAME  # the TOOL observation
    return values


def _otel_legacy() -> list:
    values = copy.deepcopy(SEEDS["otel-legacy"])
    spans = values[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["attributes"] += [
        {"key": "gen_ai.completion.0.tool_calls.0.name", "value": {"stringValue": NAME}},
        {"key": "gen_ai.completion.0.tool_calls.0.id", "value": {"stringValue": "c1"}}]
    return values


def _harbor() -> dict:
    return json.loads(json.dumps(claude_trajectory()).replace('"Write"', json.dumps(NAME)))


def _phoenix() -> list:
    """Phoenix's spans dataframe as JSON lines (pandas' to_json, ISO times)."""
    text = dataframe().to_json(orient="records", lines=True, date_format="iso", date_unit="us")
    return [json.loads(line.replace('"search"', json.dumps(NAME)))
            for line in text.splitlines() if line.strip()]


def _openhands() -> list:
    return json.loads(json.dumps(history()).replace('"execute_bash"', json.dumps(NAME)))


# format: (file name, document (a list is written as JSON Lines), source, runs, runs named)
FORMATS: dict[str, tuple[str, Any, str, int, int]] = {
    "tau2": ("results.json", _tau2(), "tau2", 2, 1),
    "mini-swe-agent": ("x.traj.json", _miniswe(), "mini-swe-agent", 1, 1),
    "otel-genai": ("spans.json", _otel_genai(), "otel-genai", 1, 1),
    "claude-code": ("session.jsonl", _seed("claude-code", "Bash"), "claude-code", 1, 1),
    "langfuse": ("observations.jsonl", _langfuse(), "langfuse", 1, 1),
    "langsmith": ("runs.jsonl", _seed("langsmith", "t"), "langsmith", 1, 1),
    "openinference": ("spans.jsonl", _seed("openinference", "f"), "openinference", 1, 1),
    "otel-legacy (OpenLLMetry)": ("spans.jsonl", _otel_legacy(), "otel-genai", 1, 1),
    "harbor": ("trajectory.json", _harbor(), "harbor", 1, 1),
    "openhands": ("events.json", _openhands(), "openhands", 1, 1),
    "phoenix": ("spans.jsonl", _phoenix(), "openinference", 2, 1),
}


def write(folder: Path, fmt: str, value: Any) -> Path:
    """The document of ``fmt`` with its tool's name ``value``, written in ``folder``."""
    name, doc, *_ = FORMATS[fmt]
    doc = renamed(doc, value)
    path = folder / name
    if isinstance(doc, list) and name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(v) + "\n" for v in doc))
    else:
        path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_documents_tool_call_imports_under_its_name(fmt, tmp_path):
    """The documents as written (the tool named :data:`NAME`) import every run,
    the named tool among the tool calls: the cases below change only the name."""
    _, _, source, runs, _ = FORMATS[fmt]
    report = import_traces([write(tmp_path, fmt, NAME)], tmp_path / "out")
    assert report.runs_by_source == {source: runs} and not report.skips, report.lines()
    _, calls = read_traces(tmp_path / "out")
    names = {t["name"] for tools in calls["tool_calls"] for t in tools}
    assert NAME in names


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_run_with_a_nameless_tool_call_is_skipped_with_the_reason(fmt, bad, tmp_path):
    """A tool name that is null, "", whitespace, a number or an object skips
    the run holding it (``tool call without a name``, the detail naming
    ``calls.tool_calls.name``); the other runs are kept, none with a tool row
    named "None", "", "5" or a stringified object. When no run is left the
    import is refused (nothing written) with that reason."""
    _, _, source, runs, named = FORMATS[fmt]
    path = write(tmp_path, fmt, BAD[bad])
    if runs == named:
        with pytest.raises(InputError) as refused:
            import_traces([path], tmp_path / "out")
        assert f"{named} {NO_TOOL_NAME}" in str(refused.value)
        assert not (tmp_path / "out").exists()
        return
    report = import_traces([path], tmp_path / "out")
    assert report.runs_by_source == {source: runs - named}
    assert [s.reason for s in report.skips] == [NO_TOOL_NAME] * named
    assert all("calls.tool_calls.name" in s.detail for s in report.skips)
    _, calls = read_traces(tmp_path / "out")
    names = {t["name"] for tools in calls["tool_calls"] for t in tools}
    assert not names & {"None", "", " \t ", "5", "{'name': 'x'}"}
    assert names == ({"find"} if fmt == "tau2" else set())  # the other run's tools


def test_the_import_report_and_the_summary_line_count_the_skip(tmp_path, capsys):
    """``traces import`` says how many runs it skipped for a nameless tool
    call, and import.json lists the skip with its file, run and detail."""
    path = write(tmp_path, "tau2", None)
    assert main(["traces", "import", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert f"1 {NO_TOOL_NAME}" in out.out + out.err
    report = json.loads((tmp_path / "out" / "import.json").read_text())
    assert json.dumps(report).count(NO_TOOL_NAME) >= 1
    skips = [s for s in report["skips"] if s["reason"] == NO_TOOL_NAME]
    assert len(skips) == 1 and skips[0]["run"] is not None
    assert "call 0: tool call 0: calls.tool_calls.name is None" in skips[0]["detail"]


@pytest.mark.parametrize("bad", sorted(BAD))
def test_the_writer_refuses_a_run_whose_tool_call_has_no_name(bad, tmp_path):
    """The one check every importer's runs pass (SWE-agent's too, whose
    tool is the first word of a non-blank action, so never nameless): a run
    with a nameless tool call is Unusable, naming the call and the field; a
    good name is written."""
    def run(name: Any) -> RunRecord:
        return RunRecord(run_id="r", source="sim", file="f", calls=[
            CallRecord(Usage(input_tokens=1, output_tokens=1)),
            CallRecord(Usage(input_tokens=1, output_tokens=1),
                       tool_calls=[ToolCallRecord("ok"), ToolCallRecord(name)])])

    with pytest.raises(Unusable) as refused:
        write_runs(tmp_path, [run(BAD[bad])])
    assert refused.value.reason == NO_TOOL_NAME
    assert "call 1: tool call 1: calls.tool_calls.name" in refused.value.detail
    write_runs(tmp_path, [run("bash")])
    _, calls = read_traces(tmp_path)
    assert [t["name"] for t in calls["tool_calls"][1]] == ["ok", "bash"]


@pytest.mark.parametrize("bad", sorted(BAD))
def test_console_exporter_spans_with_a_nameless_tool_are_refused(bad, tmp_path):
    """OpenTelemetry's console exporter (the real one) prints a GenAI run
    whose execute_tool span's ``gen_ai.tool.name`` is then replaced: the one
    run is skipped for it and the import refused, nothing written."""
    path = printed(tmp_path / "console.txt")
    text = path.read_text()
    named = '"gen_ai.tool.name": "search"'
    assert text.count(named) == 1
    path.write_text(text.replace(named, f'"gen_ai.tool.name": {json.dumps(BAD[bad])}'))
    with pytest.raises(InputError) as refused:
        import_traces([path], tmp_path / "out")
    assert f"1 {NO_TOOL_NAME}" in str(refused.value)


@pytest.fixture(scope="module")
def inspect_json(tmp_path_factory) -> Path:
    """An Inspect JSON log written by inspect_ai's eval() and write_eval_log:
    two samples, the first calling the tool ``add`` (the scripted outputs
    of tests/test_traces_inspect.py)."""
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, use_tools

    from tests.test_traces_inspect import MODEL, SCRIPT, add, with_usage

    folder = tmp_path_factory.mktemp("inspect")
    outputs = [with_usage(o, *usage) for name in ("right", "wrong")
               for o, *usage in SCRIPT[name]]
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="right"),
                         Sample(input="What is 1+2, again?", target="3", id="wrong")],
                solver=[use_tools(add()), generate()], scorer=match(), message_limit=20)
    [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=outputs),
                         log_dir=str(folder / "eval"), display="none", max_samples=1)
    path = folder / "log.json"
    write_eval_log(read_eval_log(log.location), str(path), format="json")
    return path


@pytest.mark.parametrize("bad", sorted(BAD))
def test_an_inspect_log_with_a_nameless_tool_call_skips_that_sample(bad, inspect_json,
                                                                    tmp_path):
    """An Inspect JSON log written by inspect_ai (tests/test_traces_inspect.py)
    whose tool call's ``function`` is replaced: a string without a name ("",
    whitespace) skips that sample's run with the reason, the other run kept;
    a value Inspect's own reader refuses (null, a number, an object) refuses
    the file or skips it. Never a tool row with such a name."""
    doc = json.loads(inspect_json.read_text())
    text = json.dumps(doc).replace('"function": "add"', f'"function": {json.dumps(BAD[bad])}')
    assert text != json.dumps(doc)
    path = tmp_path / "log.json"
    path.write_text(text)
    try:
        report = import_traces([path], tmp_path / "out")
    except InputError:
        assert not isinstance(BAD[bad], str)  # a name Inspect's reader refuses
        return
    if isinstance(BAD[bad], str):
        assert report.runs_by_source == {"inspect": 1}
        assert [s.reason for s in report.skips] == [NO_TOOL_NAME]
    _, calls = read_traces(tmp_path / "out")
    names = {t["name"] for tools in calls["tool_calls"] for t in tools}
    assert not names & {"None", "", " \t ", "5", "{'name': 'x'}"}
