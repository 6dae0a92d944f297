"""The Inspect AI importer (sim/traces/inspect_log.py) on logs that inspect_ai
itself writes in the test, with its ``mockllm`` model answering from a script
(usage given, so nothing is counted with a tokenizer download)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("inspect_ai", reason="needs the 'inspect' extra (pip install 'sim[inspect]')")
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate, use_tools, user_message
from inspect_ai.tool import tool

from sim.traces import import_traces, read_traces
from sim.traces.model import approx_tokens, sha256_text

MODEL = "mockllm/model"


@tool
def add():
    async def execute(x: int, y: int):
        """Add two numbers.

        Args:
            x: First number.
            y: Second number.
        """
        return x + y

    return execute


def with_usage(output: ModelOutput, inp: int, read: int, write: int, out: int,
               reasoning: int | None = None, cost: float | None = None) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=inp, output_tokens=out,
                              total_tokens=inp + read + write + out,
                              input_tokens_cache_read=read, input_tokens_cache_write=write,
                              reasoning_tokens=reasoning, total_cost=cost)
    return output


def tool_call(x: int) -> ModelOutput:
    return ModelOutput.for_tool_call(model=MODEL, tool_name="add",
                                     tool_arguments={"x": x, "y": 2})


# sample -> the script of its calls: (output, input, cache read, cache write, output, reasoning)
SCRIPT = {
    "right": [(tool_call(1), 100, 0, 50, 20, None, 0.002),
              (ModelOutput.from_content(model=MODEL, content="3"), 10, 150, 5, 7, 3, 0.001)],
    "wrong": [(ModelOutput.from_content(model=MODEL, content="no idea"), 120, 0, 0, 9, None,
               None)],
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    """An .eval log written by inspect_ai's eval(), and the same log as JSON."""
    folder = tmp_path_factory.mktemp("inspect")
    outputs = [with_usage(o, *usage) for name in ("right", "wrong")
               for o, *usage in SCRIPT[name]]
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="right"),
                         Sample(input="What is 1+2, again?", target="3", id="wrong")],
                solver=[use_tools(add()), generate()], scorer=match(), message_limit=20)
    [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=outputs),
                         log_dir=str(folder / "eval"), display="none", max_samples=1)
    assert log.status == "success", log.error
    eval_path = Path(log.location)
    json_path = folder / "json" / "log.json"
    json_path.parent.mkdir()
    write_eval_log(read_eval_log(eval_path), str(json_path), format="json")
    return {"eval": eval_path, "json": json_path}


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_an_inspect_log_imports_one_run_per_sample_with_its_usage(tmp_path, logs, fmt):
    """input excludes the cache counts in Inspect (kept as they are); output
    includes reasoning (taken out); scores give resolved; limits carried."""
    report = import_traces([logs[fmt]], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert report.runs == 2 and report.skips == []
    by_task = runs.set_index("task_id")
    for name, script in SCRIPT.items():
        row = by_task.loc[name]
        assert row["source"] == "inspect" and row["model"] == MODEL
        assert row["steps"] == len(script)
        mine = calls[calls["run_id"] == row["run_id"]].sort_values("call")
        got = list(zip(mine["input_tokens"], mine["cache_read_tokens"],
                       mine["cache_write_tokens"], mine["output_tokens"],
                       mine["reasoning_tokens"], strict=True))
        assert got == [(i, r, w, o - (t or 0), t or 0) for _, i, r, w, o, t, _ in script]
        assert row["message_limit"] == 20
        assert row["duration_s"] > 0
    assert by_task.loc["right", "resolved"] == True  # noqa: E712  (pandas boolean)
    assert by_task.loc["wrong", "resolved"] == False  # noqa: E712
    assert by_task.loc["right", "cost_usd"] == pytest.approx(0.003)
    assert runs["exit"].isna().all()  # both ran to their end


def test_tool_calls_carry_the_tool_events_results(tmp_path, logs):
    import_traces([logs["eval"]], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    right = runs.set_index("task_id").loc["right", "run_id"]
    first = calls[(calls["run_id"] == right) & (calls["call"] == 0)].iloc[0]
    [made] = first["tool_calls"]
    assert (made["name"], made["arguments"], made["error"]) == ("add", '{"x":1,"y":2}', False)
    assert made["result_tokens"] == approx_tokens("3")
    assert made["result_sha256"] == sha256_text("3")
    assert made["duration_s"] >= 0
    assert first["finish_reason"] == "tool_calls"
    assert first["started_s"] >= 0 and first["latency_s"] >= 0
    last = calls[(calls["run_id"] == right) & (calls["call"] == 1)].iloc[0]
    assert last["tool_calls"] == [] and last["text_tokens"] == approx_tokens("3")


def test_the_eval_and_json_forms_of_one_log_give_the_same_tables(tmp_path, logs):
    tables = {}
    for fmt in ("eval", "json"):
        import_traces([logs[fmt]], tmp_path / fmt)
        tables[fmt] = read_traces(tmp_path / fmt)
    (runs_e, calls_e), (runs_j, calls_j) = tables["eval"], tables["json"]
    assert runs_e.drop(columns="file").equals(runs_j.drop(columns="file"))
    assert calls_e.drop(columns="tool_calls").equals(calls_j.drop(columns="tool_calls"))


def test_a_hit_limit_is_the_exit_label(tmp_path):
    """A sample stopped by its message limit exits with Inspect's own label."""
    outputs = [with_usage(tool_call(i), 50 + i, 0, 0, 5) for i in range(10)]
    task = Task(dataset=[Sample(input="loop", target="3", id="loop")],
                solver=[use_tools(add()), generate()], scorer=match(), message_limit=4)
    inspect_eval(task, model=get_model(MODEL, custom_outputs=outputs),
                 log_dir=str(tmp_path / "logs"), display="none")
    import_traces([tmp_path / "logs"], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert runs["exit"].tolist() == ["message"]
    assert runs["steps"].iloc[0] >= 1


def test_a_damaged_inspect_archive_is_skipped_as_unreadable(tmp_path, logs):
    broken = tmp_path / "broken.eval"
    data = logs["eval"].read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    good = tmp_path / "good.eval"
    good.write_bytes(data)
    report = import_traces([broken, good], tmp_path / "out")
    assert report.runs == 2
    reasons = report.skipped_files()
    assert list(reasons) == [str(broken)]


def test_text_and_observation_hashes_come_from_the_messages(tmp_path):
    """Two answers with the same text share a text hash; a user message the
    solver adds between two calls is the first call's observation hash (with
    its tokens); the last call, and a call answered by tool results only, have
    none; a tool call's text is the log's own text of that message."""
    outputs = [with_usage(tool_call(1), 50, 0, 0, 5),
               with_usage(ModelOutput.from_content(model=MODEL, content="3"), 60, 0, 0, 1),
               with_usage(ModelOutput.from_content(model=MODEL, content="3"), 70, 0, 0, 1)]
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="twice")],
                solver=[use_tools(add()), generate(), user_message("Are you sure?"),
                        generate()], scorer=match())
    inspect_eval(task, model=get_model(MODEL, custom_outputs=outputs),
                 log_dir=str(tmp_path / "logs"), display="none")
    import_traces([tmp_path / "logs"], tmp_path / "out")
    _, calls = read_traces(tmp_path / "out")
    calls = calls.sort_values("call")
    assert len(calls) == 3
    first, answer, again = (calls.iloc[i] for i in range(3))
    assert answer["text_sha256"] == again["text_sha256"] == sha256_text("3")
    [log] = list((tmp_path / "logs").iterdir())
    [sample] = read_eval_log(str(log)).samples
    tool_turn = next(m for m in sample.messages if m.role == "assistant")
    assert first["text_sha256"] == sha256_text(tool_turn.text)
    assert pd.isna(first["observation_sha256"]) and first["observation_tokens"] == 0
    assert answer["observation_sha256"] == sha256_text("Are you sure?")
    assert answer["observation_tokens"] == approx_tokens("Are you sure?")
    assert pd.isna(again["observation_sha256"])


def test_a_model_output_without_choices_is_a_call_without_text_or_tools(tmp_path, logs):
    """Inspect ``choices: []`` (issue 25: an IndexError): the call is kept
    with its usage, no finish reason, no text, no tool calls."""
    import json

    doc = json.loads(Path(logs["json"]).read_text())
    sample = doc["samples"][0]
    event = next(e for e in sample["events"] if e.get("event") == "model")
    event["output"]["choices"] = []
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    report = import_traces([path], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert report.runs == 2 and report.skips == []
    first = calls[calls["run_id"] == runs.iloc[0]["run_id"]].sort_values("call").iloc[0]
    assert pd.isna(first["finish_reason"]) and first["tool_calls"] == []
    assert first["text_tokens"] == 0


def test_reasoning_above_the_output_is_counted_apart(tmp_path, logs):
    """Inspect's output_tokens include reasoning; a call with more reasoning
    than output (Gemini's thoughts counted apart) keeps both, counted."""
    import json

    doc = json.loads(Path(logs["json"]).read_text())
    for sample in doc["samples"]:
        for event in sample["events"]:
            if event.get("event") == "model":
                event["output"]["usage"]["reasoning_tokens"] = 500
                break
    path = tmp_path / "apart.json"
    path.write_text(json.dumps(doc))
    report = import_traces([path], tmp_path / "out")
    _, calls = read_traces(tmp_path / "out")
    assert report.skips == [] and (calls["reasoning_tokens"] == 500).sum() == 2
    assert "calls.reasoning_tokens" in report.repairs_by_field()


def test_a_sample_without_any_model_call_is_a_run_of_zero_calls(tmp_path, logs):
    """A sample whose model events are gone (it failed before its first
    reply): a run with zero calls, its exit and its score."""
    import json

    doc = json.loads(Path(logs["json"]).read_text())
    sample = doc["samples"][0]
    sample["events"] = [e for e in sample["events"] if e.get("event") != "model"]
    path = tmp_path / "none.json"
    path.write_text(json.dumps(doc))
    report = import_traces([path], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert report.runs == 2 and report.skips == []
    assert sorted(runs["steps"].tolist())[0] == 0
