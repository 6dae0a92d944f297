"""``python -m sim live``: a tasks file run against a provider over HTTP, the outcomes
table on stdout, traces written; bad input is exit status 2 with a message
naming the file and field, before any model call is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fake_providers import FakeProvider, Reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.bad_input import InputError
from sim.cli import main
from sim.drivers.live.tasks import load_tasks
from sim.traces import read_traces

MODEL = "claude-sonnet-4-20250514"


def write_tasks(folder: Path, doc) -> Path:
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def good_doc() -> dict:
    return {"system_prompt": "Be careful.", "tasks": [
        {"id": "greet", "instruction": "Write 42 to out.txt and say DONE.",
         "tools": ["shell"], "workdir": ".", "check": "grep -q 42 out.txt"}]}


def replies() -> list[Reply]:
    return [Reply([("tool_use", "c1", "shell", {"command": "echo 42 > out.txt"})], "tool_use",
                  input_tokens=200, output_tokens=20),
            Reply([("text", "DONE")], input_tokens=250, output_tokens=5)]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_live_runs_the_tasks_prints_the_outcomes_table_and_writes_traces(provider, tmp_path,
                                                                         monkeypatch, capsys):
    """Exit 0; the same outcomes table as ``run``; a trace folder, OTLP JSON
    spans and an SQLite checkpoint store on disk; the tool really ran."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    path = write_tasks(tmp_path, good_doc())
    out = tmp_path / "traces"
    with FakeProvider(replies()) as server:
        url = server.base_url if provider == "anthropic" else server.openai_url
        status = main(["live", str(path), "--provider", provider, "--model",
                       MODEL if provider == "anthropic" else "gpt-4o", "--base-url", url,
                       "--out", str(out), "--otel", str(tmp_path / "spans.json"), "--quiet"])
    stdout = capsys.readouterr().out
    assert status == 0
    assert "== live, 1 tasks" in stdout and "succeeded" in stdout
    assert "steps          p50    2" in stdout
    assert (tmp_path / "out.txt").read_text() == "42\n"
    runs, calls = read_traces(out)
    assert list(runs["exit"]) == ["succeeded:verified"] and len(calls) == 2
    assert json.loads((tmp_path / "spans.json").read_text())["resourceSpans"]
    assert (tmp_path / "traces.checkpoints.sqlite").is_file()


def test_live_json_output_and_a_scenario_harness(tmp_path, monkeypatch, capsys):
    """--format json gives the summary and the runs; --scenario and --set
    set the harness (a step budget of one ends the run after one call)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    path = write_tasks(tmp_path, good_doc())
    scenario = tmp_path / "harness.yaml"
    scenario.write_text("name: tight\nharness:\n  budgets:\n    steps: 5\n")
    with FakeProvider(replies()) as server:
        status = main(["live", str(path), "--provider", "anthropic", "--model", MODEL,
                       "--base-url", server.base_url, "--out", str(tmp_path / "t"),
                       "--scenario", str(scenario), "--set", "harness.budgets.steps=1",
                       "--format", "json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert status == 0
    assert doc["summary"]["name"] == "live tight"
    assert doc["summary"]["outcomes"] == {"budget_exhausted:steps": 1.0}
    assert doc["runs"][0]["exit"] == "budget_exhausted:steps"
    assert doc["runs"][0]["steps"] == 1


BAD_TASKS = [
    ("tasks: [", "not valid YAML at line 1"),
    ("42", "expected a list of tasks"),
    ({"tasks": []}, "tasks: List should have at least 1 item"),
    ({"tasks": [{"id": "a"}]}, "tasks[0].instruction: required field is missing"),
    ({"tasks": [{"instruction": "x", "tools": ["rm_rf"]}]}, "tasks[0].tools[0].name: "
                                                           "unknown tool 'rm_rf'"),
    ({"tasks": [{"instruction": "x", "tools": [{"name": "shell", "timeout_s": -1}]}]},
     "tasks[0].tools[0].timeout_s"),
    ({"tasks": [{"instruction": "x", "colour": "red"}]}, "tasks[0].colour: unknown field"),
    ({"tasks": [{"id": "a", "instruction": "x"}, {"id": "a", "instruction": "y"}]},
     "tasks[1].id: duplicate task id 'a'"),
    ({"tasks": [{"instruction": "x", "workdir": "nowhere"}]},
     "tasks[0].workdir: working directory 'nowhere' does not exist"),
    ({"tasks": [{"instruction": "x", "tools": ["shell", "shell"]}]},
     "tasks[0].tools: a tool is listed twice"),
    ({"tasks": [{"id": "a b", "instruction": "x"}]}, "tasks[0].id: must be"),
]


@pytest.mark.parametrize(("doc", "message"), BAD_TASKS)
def test_a_bad_tasks_file_is_exit_2_with_the_field_named(doc, message, tmp_path, monkeypatch,
                                                         capsys):
    """Every problem of the tasks file names the file and the dotted field,
    and nothing reaches the provider."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    path = write_tasks(tmp_path, doc)
    with FakeProvider([]) as server:
        status = main(["live", str(path), "--provider", "anthropic", "--model", MODEL,
                       "--base-url", server.base_url, "--out", str(tmp_path / "t"), "--quiet"])
    err = capsys.readouterr().err
    assert status == 2
    assert str(path) in err and message in err
    assert server.requests == []


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "harness.temperature=0.5"], "harness.temperature: the Anthropic Messages API "
                                           "takes no temperature"),
    (["--set", "harness.thinking.enabled=true", "--set", "harness.thinking.budget_tokens=100"],
     "harness.thinking.budget_tokens: Anthropic needs at least 1024"),
    (["--set", "harness.budgets.steps=0"], "harness.budgets.steps"),
    (["--scenario", "missing.yaml"], "missing.yaml"),
])
def test_harness_settings_the_provider_refuses_are_exit_2_before_any_call(args, message,
                                                                          tmp_path, monkeypatch,
                                                                          capsys):
    """Fail fast (seed 000): incompatible settings stop the command before
    the first request."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    path = write_tasks(tmp_path, good_doc())
    with FakeProvider([]) as server:
        status = main(["live", str(path), "--provider", "anthropic", "--model", MODEL,
                       "--base-url", server.base_url, "--out", str(tmp_path / "t"), "--quiet",
                       *args])
    err = capsys.readouterr().err
    assert status == 2 and message in err
    assert server.requests == []


def test_a_non_empty_output_folder_is_refused_before_any_call(tmp_path, monkeypatch, capsys):
    """A results folder is never overwritten silently (and the refusal comes
    before money is spent)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    path = write_tasks(tmp_path, good_doc())
    out = tmp_path / "t"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with FakeProvider([]) as server:
        status = main(["live", str(path), "--provider", "anthropic", "--model", MODEL,
                       "--base-url", server.base_url, "--out", str(out), "--quiet"])
    assert status == 2 and "--force" in capsys.readouterr().err
    assert server.requests == [] and (out / "keep.txt").exists()


def test_openai_without_an_api_key_is_exit_2(tmp_path, monkeypatch, capsys):
    """The SDK refuses to start without a key: a clear message, exit 2."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = write_tasks(tmp_path, good_doc())
    status = main(["live", str(path), "--provider", "openai", "--model", "gpt-4o",
                   "--out", str(tmp_path / "t"), "--quiet"])
    assert status == 2 and "cannot set up the openai client" in capsys.readouterr().err


_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8),
                    st.lists(st.text(max_size=6), max_size=3))
_task = st.dictionaries(
    st.sampled_from(["id", "instruction", "tools", "workdir", "check", "check_timeout_s",
                     "extra"]),
    st.one_of(_values, st.lists(st.one_of(st.sampled_from(["shell", "read_file", "nope"]),
                                          st.fixed_dictionaries({"name": _values})),
                                max_size=3)), max_size=6)
_documents = st.one_of(_values, st.lists(_task, max_size=3),
                       st.fixed_dictionaries({"tasks": st.lists(_task, max_size=3)},
                                             optional={"system_prompt": _values}))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_documents)
def test_any_tasks_document_loads_or_is_an_input_error(tmp_path, doc):
    """Generated documents, good and bad: load_tasks returns validated tasks
    or raises InputError naming the file; never another exception."""
    path = write_tasks(tmp_path, doc)
    try:
        tasks, _ = load_tasks(path)
    except InputError as error:
        assert str(path) in str(error)
        return
    assert tasks.tasks and all(t.instruction and t.id for t in tasks.tasks)
    assert len({t.id for t in tasks.tasks}) == len(tasks.tasks)


PLUGIN = '''
class Impatient:
    """Signals no progress at every call."""

    def __init__(self, params):
        self.params = params

    def observe(self, memory, call_key, observation_key, polling, metric):
        return "impatient"


class Lenient:
    """Passes every claim."""

    def check(self, claim, rng, world):
        return True
'''


def plugin_scenario(tmp_path, monkeypatch, harness: str) -> tuple[Path, Path]:
    """The tasks file and a scenario whose ``harness`` section (YAML text) may
    name the PLUGIN module's classes, importable for the test."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    (tmp_path / "impatient_detector.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    scenario = tmp_path / "harness.yaml"
    scenario.write_text(f"name: plug\nharness:\n{harness}")
    return write_tasks(tmp_path, good_doc()), scenario


def test_a_detector_plugin_runs_live_only_with_allow_plugins(tmp_path, monkeypatch, capsys):
    """A scenario naming a detector by import path is refused (exit 2, the
    field named, no request made); with --allow-plugins that detector judges
    the live run (here: it fires at the first tool call and, with no nudges
    left, the run ends needs_human:no_progress)."""
    path, scenario = plugin_scenario(tmp_path, monkeypatch, "  detector:\n"
                                     "    name: impatient_detector:Impatient\n    nudges: 0\n")
    argv = ["live", str(path), "--provider", "anthropic", "--model", MODEL, "--scenario",
            str(scenario), "--format", "json", "--quiet"]
    with FakeProvider([]) as server:
        status = main([*argv, "--base-url", server.base_url, "--out", str(tmp_path / "no")])
    assert status == 2 and server.requests == []
    assert "harness.detector.name" in capsys.readouterr().err
    with FakeProvider(replies()) as server:
        status = main([*argv, "--base-url", server.base_url, "--out", str(tmp_path / "yes"),
                       "--allow-plugins"])
    doc = json.loads(capsys.readouterr().out)
    assert status == 0
    assert doc["runs"][0]["exit"] == "needs_human:no_progress"
    assert doc["runs"][0]["steps"] == 1


def test_a_verifier_plugin_is_refused_live(tmp_path, monkeypatch, capsys):
    """A live run verifies with its task's check: a verifier named by import
    path is bad input even with --allow-plugins, before any request."""
    path, scenario = plugin_scenario(tmp_path, monkeypatch,
                                     "  verifier:\n    name: impatient_detector:Lenient\n")
    with FakeProvider([]) as server:
        status = main(["live", str(path), "--provider", "anthropic", "--model", MODEL,
                       "--scenario", str(scenario), "--allow-plugins", "--quiet",
                       "--base-url", server.base_url, "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert status == 2 and server.requests == []
    assert "harness.verifier.name" in err and "task's check" in err
