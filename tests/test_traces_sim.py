"""sim's own runs in the trace model: ``python -m sim run|sweep ... --traces``
(sim/traces/simulated.py) writes runs.parquet and calls.parquet beside
results.parquet, and that folder imports as itself."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

import sim.cli
from sim.traces import import_traces, read_traces
from sim.traces.model import CALLS_FILE, RUNS_FILE

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def simulate(out: Path, scenario: str = "bounded.yaml", *options: str, command: str = "run"
             ) -> int:
    argv = [command, str(SCENARIOS / scenario), "--out", str(out), "--quiet", "--tasks", "60",
            "--workers", "1", *options]
    with contextlib.redirect_stdout(io.StringIO()):
        return sim.cli.main(argv)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sim") / "bounded"
    assert simulate(out, "bounded.yaml", "--traces") == 0
    return out


def check_against_results(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each run's tokens, cost, resolution and time equal its results row."""
    runs, calls = read_traces(folder)
    results = pd.read_parquet(folder / "results.parquet")
    assert runs["run_id"].tolist() == [f"{c}/{t}" for c, t in zip(results["cell"],
                                                                  results["task"], strict=True)]
    for column in TOKENS:
        assert runs[column].tolist() == results[column].tolist(), column
    assert runs["reasoning_tokens"].tolist() == results["thinking_tokens"].tolist()
    assert runs["cost_usd"].to_numpy(float) == pytest.approx(results["cost_usd"].to_numpy())
    assert runs["exit"].tolist() == [f"{s}:{r}" for s, r in zip(results["state"],
                                                               results["reason"], strict=True)]
    assert runs["resolved"].tolist() == results["truly_done"].tolist()
    assert runs["duration_s"].to_numpy(float) == pytest.approx(results["wall_s"].to_numpy())
    per_run = calls.groupby("run_id", sort=False)["cost_usd"].sum()
    assert per_run.reindex(runs["run_id"]).to_numpy(float) == pytest.approx(
        runs["cost_usd"].to_numpy(float))
    return runs, calls


def test_run_with_traces_records_every_model_call_of_every_task(bounded):
    runs, calls = check_against_results(bounded)
    results = pd.read_parquet(bounded / "results.parquet")
    assert (runs["source"] == "sim").all() and len(runs) == 60
    steps = calls[calls["purpose"] == "step"].groupby("run_id", sort=False).size()
    assert steps.reindex(runs["run_id"], fill_value=0).tolist() == results["steps"].tolist()
    assert (runs["step_limit"] == 50).all()


def test_calls_carry_tool_results_times_and_observations(bounded):
    _, calls = read_traces(bounded)
    tools = [t for ts in calls["tool_calls"] for t in ts]
    assert tools and all(t["result_tokens"] is not None and t["error"] is not None
                         for t in tools)
    assert any(t["error"] for t in tools) and any(not t["error"] for t in tools)
    assert all(len(t["result_sha256"]) == 64 for t in tools)
    starts = calls.groupby("run_id", sort=False)["started_s"]
    assert (starts.first() == 0).all()
    assert (starts.diff().dropna() > 0).all()
    assert (calls["observation_tokens"] > 0).any()  # nudges and verifier feedback


def test_the_results_folder_imports_as_itself(bounded, tmp_path):
    report = import_traces([bounded], tmp_path / "again")
    assert report.runs_by_source == {"sim": 60}
    runs, calls = read_traces(bounded)
    runs2, calls2 = read_traces(tmp_path / "again")
    assert runs.equals(runs2)
    assert calls.drop(columns="tool_calls").equals(calls2.drop(columns="tool_calls"))
    assert calls["tool_calls"].tolist() == calls2["tool_calls"].tolist()


def test_traces_are_identical_bytes_for_any_worker_count(bounded, tmp_path):
    assert simulate(tmp_path / "two", "bounded.yaml", "--traces", "--workers", "2") == 0
    for name in (RUNS_FILE, CALLS_FILE):
        assert (tmp_path / "two" / name).read_bytes() == (bounded / name).read_bytes()


def test_compaction_and_grader_calls_are_calls_too(tmp_path):
    """A summary call (purpose compaction) and a model grader's check (purpose
    verifier) are calls: the run's tokens and cost still equal its results row."""
    out = tmp_path / "compacting"
    assert simulate(out, "bounded.yaml", "--traces", "--set",
                    "harness.context.compact_at_tokens=20000", "--set",
                    "harness.verifier.name=model_grader") == 0
    _, calls = check_against_results(out)
    assert set(calls["purpose"]) == {"step", "compaction", "verifier"}
    graded = calls[calls["purpose"] == "verifier"]
    assert (graded["cost_usd"] > 0).all() and (graded["latency_s"] > 0).all()


def test_a_des_sweep_with_traces_records_its_cells(tmp_path):
    out = tmp_path / "des"
    assert simulate(out, "capacity.yaml", "--traces", command="sweep") == 0
    runs, _ = check_against_results(out)
    assert runs["run_id"].str.contains("/").all()


def test_without_traces_no_trace_files_stay_beside_the_results(bounded, tmp_path):
    out = tmp_path / "plain"
    assert simulate(out, "bounded.yaml", "--traces") == 0
    # another run's results are replaced only with --force (the folder is written whole)
    assert simulate(out, "bounded.yaml", "--seed", "3", "--force") == 0
    assert not (out / RUNS_FILE).exists() and not (out / CALLS_FILE).exists()


def test_the_recorder_hashes_response_texts_and_what_the_harness_put_in_after_them():
    """A scripted run through the recorder: each step call's text_sha256 is the
    hash of its text blocks (empty for a tool-only response); a call's
    observation_sha256 hashes the nudge and verifier feedback the harness put
    in the history after it (null where only tool results came back)."""
    from scripted import ScriptedDriver, final, make_params, make_state, tool_call

    from sim.harness import Verdict, agent_loop
    from sim.harness.params import DetectorParams, VerifierParams
    from sim.harness.pump import drive
    from sim.traces.model import joined_sha256, sha256_text
    from sim.traces.simulated import RunRecorder

    params = make_params(detector=DetectorParams(repeat_threshold=2, max_nudges=5),
                         verifier=VerifierParams(enabled=True))
    state = make_state(params)
    driver = ScriptedDriver(model=[tool_call("search", q="a"), tool_call("search", q="a"),
                                   final("first try"), final("Done: it passes.")],
                            verdicts=[Verdict(False, "tests still fail", 4), Verdict(True)])
    recorder = RunRecorder(state, lambda: 0.0)
    drive(agent_loop(params, state), driver._answer, (recorder,))
    assert state.status == "succeeded"
    injected = {origin: [b.text for m in state.messages for b in m.content
                         if getattr(b, "origin", "") == origin] for origin in ("nudge",
                                                                               "verifier")}
    assert len(injected["nudge"]) == 1 and injected["verifier"] == ["tests still fail"]
    first, second, tried, done = recorder.calls
    assert [c.text_sha256 for c in recorder.calls] == [
        sha256_text(""), sha256_text(""), sha256_text("first try"),
        sha256_text("Done: it passes.")]
    assert first.observation_sha256 is None and first.observation_tokens == 0
    assert second.observation_sha256 == joined_sha256(injected["nudge"])
    assert tried.observation_sha256 == sha256_text("tests still fail")
    assert done.observation_sha256 is None


def test_simulated_traces_carry_text_hashes_on_every_step(bounded):
    """sim run --traces: every step call has a text hash, and a call has an
    observation hash exactly when text (a nudge, feedback) entered after it."""
    _, calls = read_traces(bounded)
    steps = calls[calls["purpose"] == "step"]
    assert steps["text_sha256"].str.len().eq(64).all()
    assert (calls["observation_sha256"].notna() == (calls["observation_tokens"] > 0)).all()
    assert calls["observation_sha256"].notna().any()


@pytest.mark.parametrize("scenario,engine", [("bounded.yaml", None), ("capacity.yaml", None),
                                             ("fanout.yaml", None), ("fanout.yaml", "des")])
def test_the_column_recorder_builds_the_tables_the_objects_would(scenario, engine):
    """The recorder writes columns (no object per call); the tables built from
    them equal those the writer builds from the same runs as objects, on the
    direct engine and on the DES engine, whose runs' calls interleave, and
    with subagents (their calls' ``agent`` column too)."""
    from sim.engines.des import DesEngine, arrival_schedule
    from sim.engines.direct import run_tasks
    from sim.scenario.model import load_scenario
    from sim.sweeps.cells import RunTracer, build_cell, cells_of, traced_runs, traced_tables
    from sim.traces.writer import trace_tables

    loaded = load_scenario(SCENARIOS / scenario)
    if engine is not None:
        loaded = loaded.model_copy(update={"engine": engine})
    run = cells_of(loaded)[0]
    cell = build_cell(run)
    tracer = RunTracer()
    if run.scenario.engine == "des":
        des = run.scenario.des
        records = DesEngine(cell, des, arrival_schedule(des, 40, cell.seed), tracer).run().records
        assert sorted(tracer.columns.run) != tracer.columns.run  # the calls did interleave
    else:
        records = run_tasks(cell, range(40), tracer)
    runs, calls = traced_tables(tracer, cell, records, "results.parquet")
    objects = trace_tables(traced_runs(tracer, cell, records, "results.parquet"))
    assert runs.num_rows == 40 and calls.num_rows == len(tracer.columns) > 40
    assert runs.equals(objects[0]) and calls.equals(objects[1])
    assert (calls.column("agent").null_count < calls.num_rows) == (scenario == "fanout.yaml")


def test_the_recorder_keeps_numbers_and_strings_only():
    """The column buffer holds no object the garbage collector walks (no
    usage, block or history of the harness), so a long chunk costs no extra
    collections."""
    import gc

    from sim.engines.direct import run_tasks
    from sim.scenario.model import load_scenario
    from sim.sweeps.cells import RunTracer, build_cell, cells_of

    cell = build_cell(cells_of(load_scenario(SCENARIOS / "tau2.yaml"))[0])
    tracer = RunTracer()
    run_tasks(cell, range(20), tracer)
    columns = tracer.columns
    assert len(columns) > 20
    values = [v for name in columns.__slots__ for v in getattr(columns, name)]
    assert values and not any(gc.is_tracked(v) for v in values)


def test_a_tool_calls_arguments_are_recorded_whatever_their_values() -> None:
    """The recorder's cache of one-pair arguments never mixes values that are
    equal as keys (1, 1.0, True) and takes values that are not hashable (a
    provider's nested object): each is its own canonical JSON."""
    from sim.harness.messages import ToolUseBlock
    from sim.traces.model import canonical_json
    from sim.traces.simulated import _answer, _arguments

    for arguments in ({"x": 1}, {"x": True}, {"x": 1.0}, {"x": "1"}, {"a": {"a": {}}},
                      {"a": [1, 2]}, {"x": 1}, {"x": True}, {}, {"a": 1, "b": 2},
                      {"x": "1"}, {"y": "1"}):
        assert _arguments(arguments) == canonical_json(arguments)
        tool_rows: list = []  # as a response's tool call records them
        _answer([ToolUseBlock("toolu_1", "t", arguments)], tool_rows)
        assert tool_rows[2] == canonical_json(arguments)


def test_a_traced_run_leaves_no_cycles_for_the_collector():
    """Recording frees what it holds as each run ends: with the collector
    off, no run's harness state outlives its run, traced or not (the loop's
    StopIteration kept in the recorder's own frame ties that frame, the
    run's history and its state into one cycle per run, and a chunk of runs
    then costs hundreds of extra collections). States are counted, not all
    garbage, so what other threads of the test process leave does not count."""
    import gc

    from sim.engines.direct import run_tasks
    from sim.harness.state import HarnessState
    from sim.scenario.model import load_scenario
    from sim.sweeps.cells import RunTracer, build_cell, cells_of

    def states() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is HarnessState)

    cell = build_cell(cells_of(load_scenario(SCENARIOS / "bounded.yaml"))[0])
    left = []
    for tracer in (None, RunTracer()):
        gc.collect()
        before = states()
        gc.disable()
        try:
            run_tasks(cell, range(30), tracer)
            left.append(states() - before)
        finally:
            gc.enable()
    assert left == [0, 0]


@pytest.mark.parametrize("engine", ["direct", "des"])
def test_a_fanout_run_with_traces_records_each_childs_calls_under_its_agent(tmp_path, engine):
    """``sim run fanout --traces`` (subagents) exits 0 in both engines and
    its results equal the untraced run's. Each run's calls are its whole
    session's, as importers write a Claude Code session with subagents: the
    calls with ``agent`` null are the parent's own (as many as its steps,
    its own tokens and cost), each child's carry its spawn key
    (``<task>:<ordinal>``), and all of them add up to the session's tokens
    and cost (``runs.cost_usd``: the sum of the calls' costs, the
    session's). A child appears once it made a call: every child does, but
    one whose first call the session budget refused. The spawn is a call of the ``agent`` tool whose
    ``duration_s`` is the parent's wait."""
    traced, plain = tmp_path / "traced", tmp_path / "plain"
    engines = ("--set", f"engine={engine}")
    assert simulate(traced, "fanout.yaml", "--traces", *engines) == 0
    assert simulate(plain, "fanout.yaml", *engines) == 0
    results = pd.read_parquet(traced / "results.parquet")
    assert results.equals(pd.read_parquet(plain / "results.parquet"))
    assert results["children"].sum() > 0
    runs, calls = read_traces(traced)
    assert runs["run_id"].tolist() == [f"{c}/{t}" for c, t in zip(results["cell"],
                                                                  results["task"], strict=True)]
    assert runs["cost_usd"].to_numpy(float) == pytest.approx(
        results["session_cost_usd"].to_numpy(), rel=1e-12)
    own = calls[calls["agent"].isna()]
    by_run = own.groupby("run_id", sort=False)
    assert by_run.size().reindex(runs["run_id"]).tolist() == results["steps"].tolist()
    for column in TOKENS:
        assert by_run[column].sum().reindex(runs["run_id"]).tolist() == results[column].tolist()
    assert by_run["cost_usd"].sum().reindex(runs["run_id"]).to_numpy(float) == pytest.approx(
        results["cost_usd"].to_numpy())
    whole = calls.groupby("run_id", sort=False)
    tokens = (whole[[*TOKENS, "reasoning_tokens"]].sum().sum(axis=1)
              .reindex(runs["run_id"]).tolist())
    assert tokens == results["session_tokens"].tolist()
    assert whole["cost_usd"].sum().reindex(runs["run_id"]).to_numpy(float) == pytest.approx(
        results["session_cost_usd"].to_numpy())
    assert (calls.groupby("run_id")["call"].apply(lambda c: c.tolist() == list(range(len(c))))
            .all())
    children = calls.dropna(subset=["agent"])
    agents = children.groupby("run_id")["agent"].nunique().reindex(runs["run_id"], fill_value=0)
    refused = results["children_outcomes"].str.contains("budget_exhausted:session")
    assert (agents.to_numpy() <= results["children"].to_numpy()).all()
    assert (agents.to_numpy() == results["children"].to_numpy())[~refused.to_numpy()].all()
    for run_id, agent in children[["run_id", "agent"]].drop_duplicates().itertuples(index=False):
        task, ordinal = agent.split(":")
        assert run_id.endswith(f"/{task}") and 0 <= int(ordinal) < 20
    spawns = [t for made in own["tool_calls"] for t in made if t["name"] == "agent"]
    # a refused spawn waited for nothing; a spawn left unanswered (its run ended) has no result
    waited = [t["duration_s"] for t in spawns if t["error"] is False]
    assert waited and all(d is not None and d > 0 for d in waited)


@pytest.mark.parametrize("engine", ["direct", "des"])
def test_a_childs_calls_come_between_its_spawn_and_the_parents_next_call(tmp_path, engine):
    """In sim's traces of a fan-out, the calls after a parent's spawn call
    up to its next call are its children's (the parent waits for them), and
    each lies on the run's clock within the spawn's wait: it starts after
    the spawn call's answer and ends before the wait (the spawn's
    ``duration_s``) is over."""
    out = tmp_path / "fanout"
    assert simulate(out, "fanout.yaml", "--traces", "--set", f"engine={engine}") == 0
    _, calls = read_traces(out)
    checked = 0
    for _, run in calls.groupby("run_id", sort=False):
        rows = list(run.itertuples(index=False))
        for i, call in enumerate(rows):
            waited = [t for t in call.tool_calls if t["name"] == "agent" and t["error"] is False]
            if not isinstance(call.agent, str) and waited:
                start = call.started_s + call.latency_s
                end = start + waited[0]["duration_s"]
                j = i + 1
                while j < len(rows) and isinstance(rows[j].agent, str):
                    child = rows[j]
                    assert start - 1e-9 <= child.started_s
                    assert child.started_s + child.latency_s <= end + 1e-9
                    checked, j = checked + 1, j + 1
    assert checked > 100


def test_a_childs_recorder_writes_into_its_roots_run_under_its_spawn_key():
    """``RunRecorder.child`` (and a child's ``child``, for a grandchild)
    records into the same columns under the root's run key, from the root's
    start (``t0``), with ``agent`` the spawn key joined by ``:``."""
    from sim.harness.state import new_state
    from sim.traces.columns import CallColumns
    from sim.traces.simulated import RunRecorder

    columns = CallColumns()
    now = [5.0]
    root = RunRecorder(new_state(10, "m", "task", 3), lambda: now[0], columns, key=7)
    now[0] = 9.0
    child = root.child(new_state(10, "m", "sub", 3), lambda: now[0], (7, 2))
    grandchild = child.child(new_state(10, "m", "subsub", 3), lambda: now[0], (7, 2, 0))
    assert (child.key, child.t0, child.agent) == (7, 5.0, "7:2")
    assert (grandchild.key, grandchild.t0, grandchild.agent) == (7, 5.0, "7:2:0")
    assert grandchild.columns is columns and not columns.agents
