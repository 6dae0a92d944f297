"""Subagents in Inspect AI logs (sim/traces/inspect_log.py): a call made in an
``agent`` span other than the sample's own agent carries that span's id in
``calls.agent``. The logs are written by inspect_ai itself (its ``mockllm``
model answering from a script): a ``react`` agent that runs a second
``react`` agent as a tool (``inspect_ai.agent.as_tool``)."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("inspect_ai", reason="needs the 'inspect' extra (pip install 'sim[inspect]')")
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.agent import as_tool, react
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from roundtrip import imported

from sim.traces import read_traces

MODEL = "mockllm/model"


def _used(output: ModelOutput, tokens: int) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=tokens, output_tokens=5, total_tokens=tokens + 5)
    return output


def _submit(answer: str, tokens: int) -> ModelOutput:
    return _used(ModelOutput.for_tool_call(model=MODEL, tool_name="submit",
                                           tool_arguments={"answer": answer}), tokens)


def _log(tmp_path, outputs: list[ModelOutput], tools: list) -> list[str]:
    """Run the task into ``tmp_path/logs``; the ids of the researcher's agent spans."""
    task = Task(dataset=[Sample(input="What is 1+2?", target="3", id="s")],
                solver=react(name="main", prompt="P.", tools=tools), scorer=match())
    [log] = inspect_eval(task, model=get_model(MODEL, custom_outputs=outputs),
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    assert log.samples is not None
    return [e.id for e in log.samples[0].events
            if e.event == "span_begin" and e.type == "agent" and e.name == "researcher"]


def test_an_agent_run_as_a_tool_is_a_subagent(tmp_path):
    """main calls the researcher tool (30 tokens), the researcher answers in
    its own agent span (70), main submits (40): the researcher's call alone
    carries the researcher's span id."""
    researcher = react(name="researcher", description="Researches.", prompt="R.")
    outputs = [_used(ModelOutput.for_tool_call(model=MODEL, tool_name="researcher",
                                               tool_arguments={"input": "y"}), 30),
               _submit("sub", 70), _submit("3", 40)]
    spans = _log(tmp_path, outputs, [as_tool(researcher)])
    assert len(spans) == 1
    imported([tmp_path / "logs"], tmp_path / "traces", source="inspect", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert calls["input_tokens"].tolist() == [30, 70, 40]
    assert [None if pd.isna(a) else a for a in calls["agent"]] == [None, spans[0], None]


def test_one_agent_alone_has_no_subagents(tmp_path):
    """main alone submits at once: its call is the run's own."""
    _log(tmp_path, [_submit("3", 40)], [])
    imported([tmp_path / "logs"], tmp_path / "traces", source="inspect", runs=1)
    _, calls = read_traces(tmp_path / "traces")
    assert calls["agent"].isna().tolist() == [True]
