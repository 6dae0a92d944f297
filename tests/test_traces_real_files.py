"""The trace importers on real files that the formats' own tools wrote (taken
from those tools' repositories: ``tests/fixtures/real/README.md`` names each
file's source and licence). Each expectation is counted by hand from the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sim.calibration.exits import category
from sim.traces import read_traces
from sim.traces.assemble import EXIT_CHARS, exit_label
from sim.traces.importer import import_traces

REAL = Path(__file__).parent / "fixtures" / "real"


def test_inspect_json_log_without_sample_ids_is_imported(tmp_path: Path) -> None:
    """An Inspect JSON log written by inspect_ai 0.3.41, whose header has no
    ``eval.dataset.sample_ids`` (inspect_ai's streaming sample reader refuses
    such a log), is read whole: its one sample is one run of one call with the
    usage the file records (66 input, 2 output tokens, no cache), the eval's
    model, and the ``match`` scorer's ``I`` as not resolved."""
    pytest.importorskip("inspect_ai")
    import_traces([REAL / "inspect" / "log_formats.json"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == ["FDENXLYYaukMN6EbfnNHvk/1/1"]
    run = runs.iloc[0]
    assert (run["task_id"], run["model"], run["steps"]) == ("1", "ollama/llama3.1", 1)
    assert not run["resolved"]
    assert calls[["input_tokens", "cache_read_tokens", "cache_write_tokens",
                  "output_tokens", "reasoning_tokens"]].values.tolist() == [[66, 0, 0, 2, 0]]


def test_openhands_trajectory_that_finished_has_exit_finished(tmp_path: Path) -> None:
    """OpenHands' saved trajectory (the agent's history, from which OpenHands
    leaves out its agent_state_changed events) whose agent ended with a
    ``finish`` action has the exit ``finished``, the state OpenHands sets on
    it, which calibration counts as the agent's own ending; its two model
    calls' usage is LiteLLM's Anthropic usage (prompt 3486 = 4 + 3482 written;
    prompt 4646 = 6 + 3482 read + 1158 written; output 1135 and 177)."""
    import_traces([REAL / "openhands" / "basic.json"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (len(runs), run["exit"], run["model"]) == (1, "finished", "claude-3-5-sonnet-20241022")
    assert category(run["exit"]) == "agent"
    assert calls[["input_tokens", "cache_read_tokens", "cache_write_tokens",
                  "output_tokens"]].values.tolist() == [[4, 0, 3482, 1135], [6, 3482, 1158, 177]]


def test_openhands_run_stopped_at_max_iterations_is_a_step_limit(tmp_path: Path) -> None:
    """An OpenHands evaluation output line whose run hit ``max_iterations``
    (50) keeps OpenHands' error as its exit, and calibration counts it as a
    stop by the step limit, not as a model fault; its 49 model responses are
    49 calls whose usage sums to the line's accumulated_token_usage (938,015
    prompt, 5,627 completion, no cache)."""
    import_traces([REAL / "openhands" / "max_iterations_output.jsonl"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert run["exit"].startswith("RuntimeError: Agent reached maximum iteration")
    assert category(run["exit"]) == "steps"
    assert (run["run_id"], run["steps"], run["step_limit"]) == ("ponylang__ponyc-4588", 49, 50)
    assert (int(calls["input_tokens"].sum()), int(calls["output_tokens"].sum()),
            int(calls["cache_read_tokens"].sum())) == (938_015, 5_627, 0)


def test_sweagent_0x_trajectory_takes_model_and_cost_limit_from_args_yaml(tmp_path: Path) -> None:
    """A SWE-agent 0.x trajectory has no ``replay_config``: its model
    (``gpt4``) and cost limit (3.0 USD) are read from the ``args.yaml`` that
    SWE-agent 0.x writes in the run folder beside it; the run is 5 calls
    (``api_calls`` 5, 5 steps) with the run totals of ``model_stats``
    (52,861 tokens sent, 326 received, 0.53839 USD), each call's usage
    unknown."""
    folder = REAL / "sweagent" / "0.x_run"
    import_traces([folder / "swe-agent__test-repo-i1.traj"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (run["model"], run["cost_limit_usd"], run["exit"]) == ("gpt4", 3.0, "submitted")
    assert (run["steps"], run["input_tokens"], run["output_tokens"]) == (5, 52_861, 326)
    assert run["cost_usd"] == pytest.approx(0.53839)
    assert calls["input_tokens"].isna().all()


def test_sweagent_0x_args_yaml_is_parsed_once_per_folder_and_again_when_rewritten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three 0.x trajectories beside one ``args.yaml`` parse it once (a
    SWE-bench run folder holds thousands); the file rewritten with another
    model is read again on the next import."""
    from sim.traces import sweagent

    run = tmp_path / "run"
    run.mkdir()
    source = REAL / "sweagent" / "0.x_run"
    args = (source / "args.yaml").read_text(encoding="utf-8")
    (run / "args.yaml").write_text(args, encoding="utf-8")
    for name in ("a", "b", "c"):
        (run / f"{name}.traj").write_bytes((source / "swe-agent__test-repo-i1.traj").read_bytes())
    parsed = []
    load = sweagent.yaml.load
    monkeypatch.setattr(sweagent.yaml, "load", lambda *a, **k: parsed.append(1) or load(*a, **k))
    import_traces(sorted(run.glob("*.traj")), tmp_path / "first")
    runs, _ = read_traces(tmp_path / "first")
    assert list(runs["model"]) == ["gpt4"] * 3 and len(parsed) == 1
    (run / "args.yaml").write_text(args.replace("gpt4", "gpt-4o-2024-08-06"), encoding="utf-8")
    import_traces(sorted(run.glob("*.traj")), tmp_path / "second")
    runs, _ = read_traces(tmp_path / "second")
    assert list(runs["model"]) == ["gpt-4o-2024-08-06"] * 3 and len(parsed) == 2


@pytest.mark.parametrize("args", [None, "agent: [model: {", "agent:\n  model: [1, 2]\n",
                                  "\udcff"])
def test_sweagent_0x_trajectory_without_usable_args_yaml_has_no_model(
        tmp_path: Path, args: str | None) -> None:
    """Without the run folder's ``args.yaml`` (the trajectory copied alone),
    or with one that is not YAML, not UTF-8 or of another shape, the 0.x run
    is still imported, its model and cost limit null."""
    alone = tmp_path / "alone"
    alone.mkdir()
    source = REAL / "sweagent" / "0.x_run" / "swe-agent__test-repo-i1.traj"
    (alone / source.name).write_bytes(source.read_bytes())
    if args is not None:
        (alone / "args.yaml").write_bytes(args.encode("utf-8", "surrogateescape"))
    import_traces([alone / source.name], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert runs["model"].isna().all() and runs["cost_limit_usd"].isna().all()


def test_inspect_sample_stopped_by_its_message_limit_is_a_step_limit(tmp_path: Path) -> None:
    """An .eval log that inspect_ai writes (mockllm answering with a tool call
    every time, message_limit 6) stops its sample after 3 calls (user, then 3
    assistant turns each with its tool result, the 7th message refused): the
    run has exit ``message`` (Inspect's limit type), 3 calls of input
    100 + 101 + 102 and output 3 x 10, and calibration counts it as a stop by
    the step limit (what it calibrates a message limit as), not ``other``."""
    pytest.importorskip("inspect_ai")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def add():  # type: ignore[no-untyped-def]
        async def execute(x: int, y: int) -> int:
            """Add two numbers.

            Args:
                x: First number.
                y: Second number.
            """
            return x + y

        return execute

    outputs = []
    for i in range(10):
        output = ModelOutput.for_tool_call(model="mockllm/model", tool_name="add",
                                           tool_arguments={"x": i, "y": 2})
        output.usage = ModelUsage(input_tokens=100 + i, output_tokens=10, total_tokens=110 + i)
        outputs.append(output)
    task = Task(dataset=[Sample(input="Add forever", target="3", id="loop")],
                solver=[use_tools(add()), generate()], scorer=match(), message_limit=6)
    [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=outputs),
                         log_dir=str(tmp_path / "logs"), display="none")
    import_traces([Path(log.location)], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (run["exit"], run["steps"], run["message_limit"]) == ("message", 3, 6)
    assert calls["input_tokens"].tolist() == [100, 101, 102]
    assert calls["output_tokens"].tolist() == [10, 10, 10]
    assert category(run["exit"]) == "steps"


def test_langfuse_vertex_gemini_thoughts_left_in_total_are_reasoning(tmp_path: Path) -> None:
    """Langfuse's trace of a Vertex AI call to gemini-2.5-flash (OpenInference's
    vertexai instrumentation 0.1.11, which records Gemini's prompt, candidates
    and total counts but not ``thoughts_token_count``) has usageDetails input
    5, output 845 and total 2,023. Gemini's total is prompt (cached content
    inside it) + candidates + thoughts, so the 2,023 - 5 - 845 = 1,173 tokens
    the keys leave out are the model's thoughts: read as reasoning (derived),
    not dropped; the cost stays the file's 0.00085."""
    import_traces([REAL / "langfuse" / "vertex-ai-2025-08-01.trace.json"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert calls[["input_tokens", "cache_read_tokens", "cache_write_tokens",
                  "output_tokens", "reasoning_tokens"]].values.tolist() == [[5, 0, 0, 845, 1173]]
    assert calls["provenance"].iloc[0]["reasoning_tokens"] == "derived"
    assert calls["provenance"].iloc[0]["output_tokens"] == "exact"
    assert runs.iloc[0]["cost_usd"] == pytest.approx(0.00085)


def test_langfuse_beeai_event_spans_typed_as_generations_are_not_calls(tmp_path: Path) -> None:
    """Langfuse's trace of a BeeAI ReAct agent (OpenInference's beeai
    instrumentation, gpt-4o-mini, three iterations) lists five GENERATIONs:
    three ``backend.openai.chat.start-N`` events holding the request, its
    usage (input 1,195, 1,988, 2,359; no output recorded) and cost, and the
    last call's ``success-16`` and ``finish-16`` events, which record no
    usage, no cost, and input and output ``None``. The run is the three calls
    BeeAI made, so its cost is known: 0.00017925 + 0.0002982 + 0.00035385 =
    0.0008313 USD."""
    import_traces([REAL / "langfuse" / "beeai-2025-08-01.trace.json"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (len(runs), run["steps"], run["model"]) == (1, 3, "gpt-4o-mini")
    assert calls["input_tokens"].tolist() == [1195, 1988, 2359]
    assert calls["output_tokens"].isna().all()
    assert run["cost_usd"] == pytest.approx(0.0008313)


def test_openhands_event_store_stopped_at_max_iterations_is_a_step_limit(tmp_path: Path) -> None:
    """A session's event store (``sessions/SID/events/N.json``, one event per
    file as OpenHands' EventStream writes them: the events of OpenHands' own
    GUI-mode trajectory, its last state change the one the controller writes
    when the iteration flag stops the agent: ``agent_state`` ``error`` with
    the RuntimeError in ``extras.reason``) has that reason as its exit, which
    calibration counts as a stop by the step limit, not a model fault (the
    bare state ``error`` was one). Its 4 calls are the file's 4 responses:
    prompt 3439 = 4 + 3435 written; 3601 = 6 + 3435 read + 160 written;
    4769 = 6 + 3595 + 1168; 5488 = 6 + 4763 + 719; output 104, 1142, 693, 85."""
    store = REAL / "openhands" / "max_iterations_store" / "sessions"
    import_traces([store], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    run = runs.iloc[0]
    assert (len(runs), run["run_id"], run["steps"]) == (1, "basic_gui_mode", 4)
    assert run["exit"] == ("RuntimeError: Agent reached maximum iteration. "
                           "Current iteration: 4, max iteration: 4")
    assert category(run["exit"]) == "steps"
    assert calls[["input_tokens", "cache_read_tokens", "cache_write_tokens",
                  "output_tokens"]].values.tolist() == [
        [4, 0, 3435, 104], [6, 3435, 160, 1142], [6, 3595, 1168, 693], [6, 4763, 719, 85]]


@pytest.mark.parametrize(("text", "label"), [
    (None, None), ("", None), ("  \n \n", None),
    ("RuntimeError: Agent reached maximum iteration. Current iteration: 4, max iteration: 4",
     "RuntimeError: Agent reached maximum iteration. Current iteration: 4, max iteration: 4"),
    ("\n  litellm.BadRequestError: context window exceeded  \nTraceback (most recent call last):\n"
     "  File ...", "litellm.BadRequestError: context window exceeded"),
    ("x" * 500, "x" * EXIT_CHARS),
])
def test_an_error_becomes_an_exit_label_by_its_first_line(text: str | None,
                                                          label: str | None) -> None:
    """An importer keeps a recorded error's first non-blank line, stripped and
    cut to EXIT_CHARS, as the run's exit: a traceback or a long provider
    message would otherwise make a label of its own in every summary."""
    assert exit_label(text) == label


def test_openhands_controller_reason_kept_by_its_first_line(tmp_path: Path) -> None:
    """The controller's ``extras.reason`` with a traceback under it (as
    ``last_error`` holds for an LLM fault) gives the run its first line."""
    events = REAL / "openhands" / "max_iterations_store" / "sessions" / "basic_gui_mode"
    store = tmp_path / "sessions" / "multi_line"
    shutil.copytree(events, store)
    last = store / "events" / "15.json"
    event = json.loads(last.read_text())
    event["extras"]["reason"] = ("litellm.APIConnectionError: connection reset\n"
                                 "Traceback (most recent call last):\n  File \"x.py\", line 1")
    last.write_text(json.dumps(event))
    import_traces([tmp_path / "sessions"], tmp_path / "out")
    runs, _ = read_traces(tmp_path / "out")
    assert runs["exit"].tolist() == ["litellm.APIConnectionError: connection reset"]
