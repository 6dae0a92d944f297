"""Fitting fan-out (sim/calibration/fanout.py): trace folders written with the
trace writer from a small numpy generator of KNOWN fan-out (spawn probability
per productive parent call, children per spawn, child steps) are fitted back
within sampling error (3 binomial standard errors from the fixture's own
counts); a folder without agents has no fan-out; hand-made cases give exact
counts (spawn grouping, the PMF's tail bucket, the predicted children)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sim.calibration.data import load
from sim.calibration.fanout import (
    CHILD_CLASS,
    TOOL,
    StepBin,
    children_pmf,
    fit_fanout,
    predicted_children,
    simulated_rows,
    spawns,
    validate,
)
from sim.calibration.folds import assign
from sim.harness.messages import Usage
from sim.traces.model import CallRecord, RunRecord, ToolCallRecord
from sim.traces.writer import write_runs

PMF = (0.0, 0.5, 0.3, 0.2)
CHILD_MU, CHILD_SIGMA = math.log(3.0), 0.5
"""A child's calls: a lognormal need rounded (at least 1), as the world runs a child."""


def child_log_mean() -> float:
    """E[log max(1, round(X))] for X lognormal(CHILD_MU, CHILD_SIGMA), summed exactly over k."""
    from scipy.stats import lognorm

    x = lognorm(CHILD_SIGMA, scale=math.exp(CHILD_MU))
    return sum(math.log(k) * (x.cdf(k + 0.5) - x.cdf(k - 0.5)) for k in range(2, 200))


def _call(i: int, prompt: int, *, tool: str | None, agent: str | None, t: float) -> CallRecord:
    tools = [] if tool is None else [ToolCallRecord(tool, id=f"t{i}",
                                                    arguments=json.dumps({"i": i}),
                                                    result_tokens=50, error=False)]
    return CallRecord(usage=Usage(input_tokens=prompt, output_tokens=40), model="m",
                      started_s=t, latency_s=0.5, tool_calls=tools, agent=agent)


def generate(folder, n_runs: int, spawn_at, seed: int, agents: bool = True) -> dict:
    """Write ``n_runs`` runs: each parent makes 5-15 productive tool calls then a
    final answer; after a productive call at 1-based step ``s`` it spawns with
    probability ``spawn_at(s)`` (never without ``agents``) k children (PMF),
    each of round(lognormal) calls (CHILD_MU, CHILD_SIGMA; tool calls, the
    last an answer), their calls interleaved round-robin before the parent's next
    call. Returns the generated counts."""
    rng = np.random.default_rng(seed)
    runs, counts = [], {"productive": 0, "spawns": 0, "kids": 0, "by_k": {}, "child_calls": [],
                        "by_step": {}}
    for r in range(n_runs):
        calls: list[CallRecord] = []
        t, prompt, i = 0.0, 1000, 0
        steps = int(rng.integers(5, 16))
        for s in range(1, steps + 2):
            final = s == steps + 1
            calls.append(_call(i, prompt, tool=None if final else "bash", agent=None, t=t))
            i, t, prompt = i + 1, t + 1.0, prompt + 100
            if final:
                break
            counts["productive"] += 1
            spawned = agents and rng.random() < spawn_at(s)
            hits = counts["by_step"].setdefault(s, [0, 0])
            hits[0] += 1
            if not spawned:
                continue
            hits[1] += 1
            k = int(rng.choice(len(PMF), p=PMF))
            counts["spawns"] += 1
            counts["kids"] += k
            counts["by_k"][k] = counts["by_k"].get(k, 0) + 1
            lengths = [max(1, round(v)) for v in np.exp(rng.normal(CHILD_MU, CHILD_SIGMA, k))]
            counts["child_calls"] += lengths
            for j in range(max(lengths)):
                for c, n in enumerate(lengths):
                    if j < n:
                        calls.append(_call(i, 500 + 80 * j, tool=None if j == n - 1 else "read",
                                           agent=f"a{s}-{c}", t=t))
                        i, t = i + 1, t + 0.5
        runs.append(RunRecord(run_id=f"r{r:04d}", source="sim", file="gen", calls=calls,
                              model="m", exit="succeeded", resolved=True))
    folder.mkdir(parents=True, exist_ok=True)
    write_runs(folder, runs)
    return counts


def se(p: float, n: int) -> float:
    """The binomial standard error of a share ``p`` of ``n``."""
    return math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """600 runs with spawn probability 0.1 at every step."""
    folder = tmp_path_factory.mktemp("flat")
    counts = generate(folder, 600, lambda s: 0.1, seed=1)
    return load(folder), counts


def test_the_spawn_probability_is_recovered_within_three_standard_errors(flat):
    """spawn = spawns / productive parent calls, the counts exactly the
    generated ones, within 3 binomial SEs of the known 0.1; one rate (no
    step bins: the rate does not change with the step)."""
    traces, counts = flat
    fit = fit_fanout(traces, seed=3)
    assert fit is not None
    assert (fit.productive, fit.spawns, fit.kids, fit.runs) == (
        counts["productive"], counts["spawns"], counts["kids"], 600)
    assert abs(fit.spawn - 0.1) <= 3 * se(0.1, fit.productive)
    assert fit.edges is None and fit.spawn_by_step is None
    lo, hi = fit.spawn_ci
    assert lo < fit.spawn < hi
    assert hi - lo < 2 * 3 * se(0.1, fit.productive)  # a 95% interval is ~ 2 x 1.96 SE wide


def test_the_children_pmf_is_recovered_within_three_standard_errors(flat):
    """Each entry of the PMF within 3 binomial SEs (over the spawns) of the
    known one; index 0 is 0 and the entries sum to 1."""
    traces, counts = flat
    fit = fit_fanout(traces, with_child=False)
    assert fit is not None
    assert fit.children[0] == 0.0 and abs(sum(fit.children) - 1.0) < 1e-9
    assert len(fit.children) == len(PMF)
    for k in range(1, len(PMF)):
        assert fit.children[k] == pytest.approx(counts["by_k"][k] / counts["spawns"], abs=2e-6)
        assert abs(fit.children[k] - PMF[k]) <= 3 * se(PMF[k], fit.spawns)
    assert fit.per_run == pytest.approx(counts["kids"] / 600)


def test_the_children_are_a_task_class_of_their_own_steps(flat):
    """The child class is fitted from the children's calls as runs: as many
    runs as children, their steps the generated ones, the need's log-mean
    within 3 SEs of the known E[log steps] (a rounded lognormal)."""
    traces, counts = flat
    fit = fit_fanout(traces)
    assert fit is not None and fit.child is not None
    assert fit.child.runs == counts["kids"]
    assert sorted(fit.child_steps.tolist()) == sorted(counts["child_calls"])
    logs = np.log(fit.child_steps.astype(float))
    assert abs(fit.child.need_mu - child_log_mean()) <= 3 * logs.std() / math.sqrt(counts["kids"])
    block = fit.as_world()
    assert block["tool"] == TOOL and block["child_class"] == CHILD_CLASS
    assert block["children"] == fit.children and block["spawn"] == round(fit.spawn, 6)
    assert "edges" not in block


def test_spawns_that_depend_on_the_step_get_step_bins(tmp_path):
    """Spawn 0.3 at steps 1-2 and 0.02 later: the fit keeps step bins, and its
    rate at step 1 and at step 10 are each within 3 SEs (of their bin's
    calls) of the known ones."""
    counts = generate(tmp_path, 500, lambda s: 0.3 if s <= 2 else 0.02, seed=2)
    fit = fit_fanout(load(tmp_path), with_child=False)
    assert fit is not None and fit.edges is not None and fit.spawn_by_step is not None
    assert fit.edges[0] == 1 and len(fit.spawn_by_step) == len(fit.edges)
    assert fit.bin_calls is not None and sum(fit.bin_calls) == counts["productive"]
    first = fit.bin_calls[0]
    assert abs(fit.spawn_at(1) - 0.3) <= 3 * se(0.3, first) + 1e-9 or fit.edges[1] > 3
    late = fit.bin_calls[-1]
    assert abs(fit.spawn_at(12) - 0.02) <= 3 * se(0.02, late)
    block = fit.as_world()
    assert block["edges"] == fit.edges and len(block["spawn_by_step"]) == len(fit.edges)


def test_the_step_table_counts_each_bin_and_brackets_its_recorded_rate(tmp_path, flat):
    """Spawn 0.3 at steps 1-2 and 0.02 later: per step bin, the productive
    calls and spawns are the generated ones summed over its steps, the
    recorded rate is within 3 binomial SEs of the known mean rate of its
    calls and inside its bootstrap interval, and the fitted rate (bins kept)
    is the recorded one. On the flat world (one fitted rate) every bin's
    fitted rate is that one rate."""
    counts = generate(tmp_path, 500, lambda s: 0.3 if s <= 2 else 0.02, seed=2)
    fit = fit_fanout(load(tmp_path), with_child=False, seed=7)
    assert fit is not None and fit.edges is not None
    assert [b.first for b in fit.by_step] == fit.edges
    by_step = counts["by_step"]
    for b in fit.by_step:
        inside = [s for s in by_step if s >= b.first and (b.last is None or s <= b.last)]
        calls = sum(by_step[s][0] for s in inside)
        assert (b.calls, b.spawns) == (calls, sum(by_step[s][1] for s in inside))
        known = sum(by_step[s][0] * (0.3 if s <= 2 else 0.02) for s in inside) / calls
        assert abs(b.rate - known) <= 3 * se(known, calls)
        assert b.interval[0] <= b.rate <= b.interval[1]
        assert b.fitted == pytest.approx(b.rate)
    assert sum(b.calls for b in fit.by_step) == counts["productive"]
    flat_fit = fit_fanout(flat[0], with_child=False)
    assert flat_fit is not None and flat_fit.edges is None and len(flat_fit.by_step) > 1
    assert {b.fitted for b in flat_fit.by_step} == {flat_fit.spawn}


def test_a_folder_without_agents_has_no_fanout(tmp_path):
    """No call with an agent: no fit, no validation rows."""
    generate(tmp_path, 20, lambda s: 0.5, seed=4, agents=False)
    traces = load(tmp_path)
    assert fit_fanout(traces) is None
    assert validate(traces, assign(traces, 2, 0), 0) == []


def test_children_that_start_before_the_parents_next_call_share_a_spawn(tmp_path):
    """A run by hand: parent calls P1 (tool), child a, child b, P2 (tool),
    child c, P3 (answer). Two spawn calls (steps 1 and 2) of 2 and 1
    children; productive calls 2; children of 1 and 2 calls."""
    calls = [_call(0, 100, tool="bash", agent=None, t=0),
             _call(1, 50, tool="read", agent="a", t=1),
             _call(2, 50, tool="read", agent="b", t=1.1),
             _call(3, 60, tool=None, agent="b", t=2),
             _call(4, 200, tool="bash", agent=None, t=3),
             _call(5, 50, tool=None, agent="c", t=4),
             _call(6, 300, tool=None, agent=None, t=5)]
    runs = [RunRecord(run_id=f"r{j}", source="sim", file="x", calls=list(calls), model="m",
                      exit="succeeded", resolved=True) for j in range(10)]
    write_runs(tmp_path, runs)
    traces = load(tmp_path)
    found = spawns(traces)
    first = found.steps[found.steps["run"] == 0]
    assert first["step"].tolist() == [1, 2]
    assert first["spawn"].tolist() == [True, True]
    assert first["children"].tolist() == [2, 1]
    kids = found.kids[found.kids["run"] == 0].sort_values("agent")
    assert kids["calls"].tolist() == [1, 2, 1] and kids["step"].tolist() == [1, 1, 2]
    fit = fit_fanout(traces)
    assert fit is not None
    assert (fit.productive, fit.spawns, fit.kids) == (20, 20, 30)
    assert fit.children == [0.0, 0.5, 0.5]
    assert fit.spawn == 1.0
    # a runs 1.0-1.5 s and b 1.1-2.5 s (its calls at 1.1 and 2, 0.5 s each): 2 at once
    assert fit.concurrent == 2 and fit.harness() == {"tool": TOOL, "max_concurrent": 2}
    # 20 productive calls: one step bin (fewer than 30 calls merge), every call a spawn
    assert fit.by_step == [StepBin(1, None, 20, 20, 1.0, (1.0, 1.0), 1.0)]


def test_rare_large_counts_form_a_tail_bucket_at_their_mean():
    """Counts 1 x10, 2 x6, 7 and 9: 1 and 2 are seen 5 times or more, the
    two larger ones are one bucket at their mean 8."""
    pmf = children_pmf(np.array([1] * 10 + [2] * 6 + [7, 9]))
    assert len(pmf) == 9
    assert pmf[1] == pytest.approx(10 / 18, abs=1e-6)
    assert pmf[2] == pytest.approx(6 / 18, abs=1e-6)
    assert pmf[8] == pytest.approx(2 / 18, abs=1e-6)
    assert sum(pmf) == pytest.approx(1.0) and pmf[0] == 0.0


def test_predicted_children_of_a_certain_spawn_are_exact(flat):
    """Spawn 1 and one child per spawn: a run of 3 productive calls has 3
    children in every draw, one of none 0."""
    traces, _ = flat
    fit = fit_fanout(traces, with_child=False)
    assert fit is not None
    fit.spawn, fit.children, fit.edges, fit.spawn_by_step = 1.0, [0.0, 1.0], None, None
    out = predicted_children(fit, [np.array([1, 2, 3]), np.array([], np.int64)], 7, 0)
    assert out.tolist() == [3] * 7 + [0] * 7


def test_held_out_folds_agree_with_the_fit_of_the_other_folds(flat):
    """Validation out of sample on the known world: children per run, spawn
    rate and child steps each within their sampling limit, and the children
    per run no further than twice the train-as-forecast floor."""
    traces, _ = flat
    rows = {r.key: r for r in validate(traces, assign(traces, 3, 0), 0)}
    assert set(rows) == {"children", "spawn_rate", "child_steps"}
    for row in rows.values():
        assert row.passed, row.summary()
    assert rows["children"].cells == 3
    assert rows["children"].error <= 2 * rows["children"].floor


def test_calibrate_writes_a_fanout_block_and_a_worker_class(tmp_path):
    """sim calibrate on a folder whose runs have subagents: the scenario's
    world has the fan-out fitted on every run (``world.fanout`` as
    ``FanoutFit.as_world``) and a ``worker`` class of weight 0 with as many
    fitted runs as children, a comment saying what it was fitted from, and
    calibration.json's ``fanout`` with held-out rows for each question, also
    the last rows of its accuracy table."""
    import yaml

    from sim.calibration.pipeline import calibrate

    generate(tmp_path, 60, lambda s: 0.2, seed=5)
    traces = load(tmp_path)
    result = calibrate(tmp_path, folds=2, classes=1, evaluations=0, with_ladder=False,
                       progress=False, final_runs=200, search_runs=200)
    fit = fit_fanout(traces, with_child=False)
    assert fit is not None
    world = result.doc["world"]
    assert world["fanout"]["spawn"] == round(fit.spawn, 6)
    assert world["fanout"]["children"] == fit.children
    assert world["fanout"]["child_class"] == CHILD_CLASS
    # the harness runs the spawns, as many children at once as the traces show
    assert result.doc["harness"]["subagents"] == {"tool": TOOL,
                                                  "max_concurrent": fit.concurrent}
    names = [c["name"] for c in world["classes"]]
    assert names == ["c1", CHILD_CLASS]
    worker = world["classes"][1]
    assert worker["weight"] == 0.0 and world["classes"][0]["weight"] == 1.0
    assert result.fanout is not None and result.fanout.child is not None
    assert result.fanout.child.runs == fit.kids
    text = result.yaml_text()
    assert yaml.safe_load(text) == result.doc
    assert f"# fitted from calls.agent: {fit.kids} children of 60 runs" in text
    summary = result.summary()["fanout"]
    assert summary["children"] == fit.kids and summary["spawns"] == fit.spawns
    assert {r["key"] for r in summary["held_out"]} == {"children", "spawn_rate", "child_steps"}
    c1 = summary["by_class"]["c1"]
    assert list(summary["by_class"]) == ["c1"]
    assert (c1["runs"], c1["productive"], c1["spawns"], c1["children"]) == (
        60, fit.productive, fit.spawns, fit.kids)
    assert c1["spawn"] == pytest.approx(fit.spawn, rel=1e-5)
    keys = [r["key"] for r in result.summary()["accuracy"]]
    assert keys[-3:] == ["children", "spawn_rate", "child_steps"]
    # the recorded against the fitted spawn rate per step bin: calibration.json and the report
    assert sum(b["calls"] for b in summary["by_step"]) == fit.productive
    assert sum(b["spawns"] for b in summary["by_step"]) == fit.spawns
    from sim.api.calibration_report import report_markdown

    report = report_markdown(result)
    section = report[report.index("## Spawn rate by step bin"):].split("\n## ")[0]
    assert len([line for line in section.splitlines() if line.startswith("| ")
                and not line.startswith("| steps")]) == len(summary["by_step"])


def test_calibrate_without_agents_writes_no_fanout(tmp_path):
    """The same runs without subagents: no ``world.fanout``, no class list
    (one class inline, as before), no ``fanout`` in calibration.json."""
    from sim.calibration.pipeline import calibrate

    generate(tmp_path, 40, lambda s: 0.2, seed=5, agents=False)
    result = calibrate(tmp_path, folds=2, classes=1, evaluations=0, with_ladder=False,
                       progress=False, final_runs=200, search_runs=200)
    assert "fanout" not in result.doc["world"] and "classes" not in result.doc["world"]
    assert "subagents" not in result.doc["harness"]
    assert result.fanout is None and result.fanout_rows == []
    assert "fanout" not in result.summary()
    assert "children" not in [r["key"] for r in result.summary()["accuracy"]]
    assert "fanout" not in result.yaml_text()


def _cc_session(project, session: str) -> None:
    """One Claude Code session (tests/cc_lines.py: lines as Claude Code 2.1.90
    writes them) with its subagents' files: the main agent runs Bash (M1),
    starts two subagents in one message (M2: two Agent calls; ``x`` makes a
    Bash call and answers, ``y`` answers), then one more (M3: ``z`` answers),
    then answers (M4)."""
    from cc_lines import assistant, result, text, tool_use, usage, user, write

    def agent_id(name: str) -> str:
        return f"a{name}{session[:6]}"

    main = [user("u0", None, 0.0, "Do it.", session=session),
            assistant("m1", "u0", 1.0, f"msg_{session}_1", tool_use("b1", "Bash", {"c": 1}),
                      usage(100, 10), stop="tool_use", session=session),
            user("r1", "m1", 1.5, result("b1", "ok"), session=session),
            assistant("m2a", "r1", 2.0, f"msg_{session}_2",
                      tool_use("t1", "Agent", {"prompt": "x"}), usage(150, 20), session=session),
            assistant("m2b", "m2a", 2.0, f"msg_{session}_2",
                      tool_use("t2", "Agent", {"prompt": "y"}), usage(150, 20), stop="tool_use",
                      session=session),
            user("r2", "m2b", 8.0, result("t1", "x done") + result("t2", "y done"),
                 session=session),
            assistant("m3", "r2", 10.0, f"msg_{session}_3", tool_use("t3", "Agent",
                                                                     {"prompt": "z"}),
                      usage(200, 20), stop="tool_use", session=session),
            user("r3", "m3", 13.0, result("t3", "z done"), session=session),
            assistant("m4", "r3", 15.0, f"msg_{session}_4", text("All done."), usage(250, 5),
                      stop="end_turn", session=session)]
    write(project / f"{session}.jsonl", main)
    children = {"x": [(3.0, tool_use("s1", "Bash", {"c": 2}), "tool_use"), (5.0, text("x"),
                                                                               "end_turn")],
                "y": [(3.5, text("y"), "end_turn")],
                "z": [(11.0, text("z"), "end_turn")]}
    for name, calls in children.items():
        ident = agent_id(name)
        lines = [user(f"{name}0", None, calls[0][0] - 0.2, name, agent=ident, session=session)]
        parent = f"{name}0"
        for j, (at, block, stop) in enumerate(calls):
            lines.append(assistant(f"{name}{j + 1}", parent, at, f"msg_{session}_{name}{j}",
                                   block, usage(60 + 10 * j, 7), stop=stop, agent=ident,
                                   session=session))
            parent = f"{name}{j + 1}"
            if block["type"] == "tool_use":
                lines.append(user(f"{name}r{j}", parent, at + 0.5, result(block["id"], "ok"),
                                  agent=ident, session=session))
                parent = f"{name}r{j}"
        write(project / session / "subagents" / f"agent-{ident}.jsonl", lines)


def test_a_claude_code_folder_with_subagents_gets_the_fanout_counted_by_hand(tmp_path):
    """Ten Claude Code sessions shaped as :func:`_cc_session` writes them,
    imported: per session 3 productive parent calls (M1, M2, M3), 2 spawn
    calls (M2 of 2 children, M3 of 1), 3 children of 2, 1 and 1 calls. So
    spawn 20/30, children [0, 0.5, 0.5], 30 children, the child class of 30
    runs."""
    from roundtrip import imported

    project = tmp_path / "projects" / "-work"
    sessions = [f"{i:08d}-6641-431c-a6ab-81619fc5df8e" for i in range(10)]
    for session in sessions:
        _cc_session(project, session)
    imported([tmp_path / "projects"], tmp_path / "traces", source="claude-code", runs=10)
    traces = load(tmp_path / "traces")
    fit = fit_fanout(traces)
    assert fit is not None and fit.child is not None
    assert (fit.runs, fit.productive, fit.spawns, fit.kids, fit.early) == (10, 30, 20, 30, 0)
    assert fit.spawn == pytest.approx(2 / 3)
    assert fit.children == [0.0, 0.5, 0.5]
    assert sorted(fit.child_steps.tolist()) == [1] * 20 + [2] * 10
    assert fit.child.runs == 30
    assert fit.as_world() == {"tool": TOOL, "spawn": round(2 / 3, 6),
                              "children": [0.0, 0.5, 0.5], "child_class": CHILD_CLASS}


def test_the_simulated_comparison_reads_zero_for_a_world_equal_to_its_runs():
    """simulated_rows (what the comparison with a spawning world calls): each
    fold's simulation equal to its held-out runs has KS 0; the floor is the
    KS of a fold against the other folds pooled, by hand: fold 0 [0, 0, 1]
    against [2, 2, 2] is 1, fold 1 against [0, 0, 1] is 1."""
    real = [np.array([0, 0, 1]), np.array([2, 2, 2])]
    rows = {r.key: r for r in simulated_rows(real, real, real, real)}
    assert set(rows) == {"children", "child_steps"}
    assert rows["children"].error == 0.0 and rows["children"].floor == 1.0
    assert rows["children"].cells == 2 and rows["children"].passed


def test_sims_own_fanout_traces_calibrate_to_a_scenario_that_loads(tmp_path):
    """sim's own traces of a run with subagents (``sim run fanout --traces``:
    each spawn a call of the subagent tool ``agent``, the children's calls
    under their spawn keys) calibrate to a scenario that loads: the spawn
    tool is the fan-out's, not a tool of the world's own (it was both, and
    the scenario was refused: "'agent' is also the name of a tool"), and the
    world's tool weights are shares of the other tools' calls."""
    import yaml

    import sim
    from sim.calibration.pipeline import calibrate
    from sim.scenario.model import load_scenario

    folder = tmp_path / "fan"
    sim.simulate("fanout", tasks=60, out=folder, traces=True)
    import pyarrow.parquet as pq

    agents = pq.read_table(folder / "calls.parquet", columns=["agent"]).column("agent")
    assert agents.null_count < len(agents)  # the children's calls are recorded
    result = calibrate(folder, folds=2, classes=1, evaluations=0, with_ladder=False,
                       progress=False, final_runs=200, search_runs=200)
    tool = result.doc["harness"]["subagents"]["tool"]
    names = [t["name"] for t in result.doc["world"]["tools"]]
    assert tool == TOOL and tool not in names and names
    assert sum(t["weight"] for t in result.doc["world"]["tools"]) == pytest.approx(1.0, abs=1e-5)
    path = tmp_path / "fit.yaml"
    path.write_text(result.yaml_text())
    scenario = load_scenario(path)
    assert scenario.harness.subagents is not None
    assert yaml.safe_load(path.read_text()) == result.doc


def test_the_folds_table_shows_a_measure_a_fold_could_not_take_as_a_dash(tmp_path):
    """A fold that could not take a measure (held-out runs without costs: its
    verdict has no ``cost`` distance; here ``output`` is removed from a
    fold) shows "-" in the report's folds table, and the count within
    the 95th percentile is out of the folds that took the measure (the
    report raised KeyError: 'cost' when the first fold had it and another
    did not; found by the campaign's calibrate door)."""
    from sim.api.calibration_report import report_markdown
    from sim.calibration.pipeline import calibrate

    generate(tmp_path, 40, lambda s: 0.2, seed=3)
    result = calibrate(tmp_path, folds=2, classes=1, evaluations=0, with_ladder=False,
                       progress=False, final_runs=100, search_runs=100)
    folds = result.judgement.folds
    assert all("output" in f.ks for f in folds) and not any("cost" in f.ks for f in folds)
    folds[1].ks.pop("output")
    report = report_markdown(result)
    table = report[report.index("## Folds"):].split("\n## ")[0]
    row = next(line for line in table.splitlines() if line.startswith("| 2 |"))
    assert row.split(" | ")[5] == "-"  # fold, held out, simulated, steps, prompt, output
    assert f"output {int(folds[0].within('output'))} of 1 folds" in table
