"""Replaying sim's own traces of runs with subagents (``sim run fanout
--traces`` then ``sim replay``): the recorder writes each child's calls into
its root's run with ``agent`` set (sim/traces/simulated.py), so the replay
splits them by agent and replays the session under the candidate's shared
budgets (sim/drivers/replay/session.py).

- Under the harness that made the traces, the replay stops nothing and gives
  each run the session's cost, steps and children (direct and DES). A child
  whose first call the session budget refused made no call: the trace
  cannot show it, so the test's session budget is one no run reaches.
- Under a tighter session budget, on the direct engine's traces (its calls
  in the order the engine made them, each child to its end in turn: the
  order the session ledger was charged in), the replay stops exactly the
  runs the simulation under that budget stopped, at the very call it
  refused: the first call where the tight simulation's trace leaves the
  loose one's.
- On the DES's traces (calls in the order their answers came back, the
  children side by side) the replay's ledger holds, before each call, at
  least what the simulation's held when it sent that call (every call
  answered before it was sent came back before it), so a tighter budget
  stops at least every run the tight simulation stopped.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pandas as pd
import pytest

import sim.cli
from sim.traces import read_traces

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
TASKS = 60
SESSION = "budget_exhausted:session"


def scenario(tmp: Path, name: str, session_tokens: int, wait: bool = True) -> Path:
    """fanout.yaml without its sweep, with a session budget of
    ``session_tokens``; ``wait`` false: parents do not wait for their children."""
    text = (SCENARIOS / "fanout.yaml").read_text().split("\nsweep:")[0]
    text, made = re.subn(r"(- scope: session.*\n\s+tokens: )\d+", rf"\g<1>{session_tokens}",
                         text)
    assert made == 1
    if not wait:
        text, made = re.subn(r"(\n\s+)(max_depth: 1)", r"\1\2\1wait: false", text)
        assert made == 1
    path = tmp / f"{name}.yaml"
    path.write_text(text.replace("name: fanout", f"name: {name}", 1))
    return path


def cli(*argv: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return sim.cli.main([*argv, "--quiet"])


def simulate(tmp: Path, yaml: Path, engine: str) -> Path:
    out = tmp / f"sim-{yaml.stem}-{engine}"
    assert cli("run", str(yaml), "--out", str(out), "--tasks", str(TASKS), "--workers", "1",
               "--traces", "--set", f"engine={engine}") == 0
    return out


def replay(tmp: Path, traces: Path, yaml: Path) -> pd.DataFrame:
    out = tmp / f"replay-{traces.name}-{yaml.stem}"
    assert cli("replay", str(traces), str(yaml), "--out", str(out)) == 0
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == TASKS
    return rows


def session_stopped(results: pd.DataFrame) -> set[int]:
    """The tasks whose session the session budget stopped (the parent or a child)."""
    hit = (results["outcome"] == SESSION) | results["children_outcomes"].str.contains(SESSION)
    return set(results.loc[hit, "task"])


def replay_stops(rows: pd.DataFrame) -> dict[int, tuple[str, int]]:
    """The tasks whose session the replay's session budget stopped: who
    (``parent`` or the child's id) at which of the run's calls (a run
    without children is replayed alone: its own stop)."""
    out = {}
    for row in rows.itertuples():
        if row.session_stopped_by:
            out[row.task] = (row.session_stopped_by, row.session_stopped_call)
        elif row.outcome == SESSION:
            out[row.task] = ("parent", row.stopped_at)
    return out


def calls_of(traces: Path) -> dict[str, list[tuple]]:
    """Each run's calls in order, as (agent, prompt tokens, output tokens)."""
    _, calls = read_traces(traces)
    out: dict[str, list[tuple]] = {}
    for run_id, agent, prompt, output in zip(calls["run_id"], calls["agent"],
                                             calls["input_tokens"], calls["output_tokens"],
                                             strict=True):
        out.setdefault(run_id, []).append((agent if isinstance(agent, str) else None,
                                           int(prompt), int(output)))
    return out


def common(a: list[tuple], b: list[tuple]) -> int:
    """How many leading calls ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.parametrize("wait", [True, False])
@pytest.mark.parametrize("engine", ["direct", "des"])
def test_replaying_sims_own_fanout_traces_under_their_harness_stops_nothing(tmp_path, engine,
                                                                             wait):
    """Under the session budget the runs were made with (one no session
    reaches), the replay of sim's own fan-out traces stops no run and no
    call, and gives each run its session's cost (parent and children: the
    trace's ``runs.cost_usd``, the sum of its calls' costs), its steps
    (every call of the session is a step) and its children (by their spawn
    keys). With parents that do not wait, a parent that ended before it
    collected its children leaves their cost out of its results row
    (``session_cost_usd``), not out of the trace."""
    yaml = scenario(tmp_path, "loose", 10**9, wait)
    traces = simulate(tmp_path, yaml, engine)
    results = pd.read_parquet(traces / "results.parquet")
    assert results["children"].sum() > 0 and not session_stopped(results)
    rows = replay(tmp_path, traces, yaml)
    assert not rows["stopped"].any()
    assert (rows["session_stopped_by"] == "").all()
    runs, _ = read_traces(traces)
    assert rows["cost_usd"].to_numpy() == pytest.approx(runs["cost_usd"].to_numpy(float),
                                                        rel=1e-12)
    counted = runs["cost_usd"].to_numpy(float) == pytest.approx(
        results["session_cost_usd"].to_numpy(), rel=1e-12)
    assert counted if wait else not counted  # not waited for: some children never collected
    recorded = calls_of(traces)
    steps = [len(recorded[f"loose/{t}"]) for t in results["task"]]
    assert rows["steps"].tolist() == steps == rows["recorded_steps"].tolist()
    own = [sum(1 for c in recorded[f"loose/{t}"] if c[0] is None) for t in results["task"]]
    assert own == results["steps"].tolist()
    assert rows["children"].tolist() == results["children"].tolist()
    for task, states in zip(results["task"], rows["children_states"], strict=True):
        ids = [part.split("=")[0] for part in states.split(";") if part]
        assert sorted(ids) == sorted(f"{task}:{j}" for j in range(len(ids)))


def test_a_tighter_session_budget_stops_the_calls_the_direct_simulation_stopped(tmp_path):
    """Replayed under a tighter session budget, the direct engine's traces
    made under a loose one stop exactly the runs the direct simulation under
    the tight budget stopped, each at the call the simulation refused (the
    first call where its trace leaves the loose one's), by the agent that
    made it."""
    loose, tight = scenario(tmp_path, "loose", 10**9), scenario(tmp_path, "tight", 400_000)
    loose_traces = simulate(tmp_path, loose, "direct")
    tight_traces = simulate(tmp_path, tight, "direct")
    tight_results = pd.read_parquet(tight_traces / "results.parquet")
    stopped = session_stopped(tight_results)
    assert 0 < len(stopped) < TASKS
    rows = replay(tmp_path, loose_traces, tight)
    stops = replay_stops(rows)
    assert set(stops) == stopped
    assert any(by != "parent" for by, _ in stops.values())  # children were stopped too
    before, after = calls_of(loose_traces), calls_of(tight_traces)
    for task, (by, call) in stops.items():
        a, b = before[f"loose/{task}"], after[f"tight/{task}"]
        k = common(a, b)
        assert call == k, task
        assert by == ("parent" if a[k][0] is None else a[k][0])


def test_a_tighter_session_budget_stops_at_least_what_the_des_stopped(tmp_path):
    """Replayed under a tighter session budget, the DES's traces made under
    a loose one stop every run the DES under the tight budget stopped (the
    replay's ledger never holds less than the simulation's did)."""
    loose, tight = scenario(tmp_path, "loose", 10**9), scenario(tmp_path, "tight", 400_000)
    tight_results = pd.read_parquet(simulate(tmp_path, tight, "des") / "results.parquet")
    stopped = session_stopped(tight_results)
    assert 0 < len(stopped) < TASKS
    rows = replay(tmp_path, simulate(tmp_path, loose, "des"), tight)
    assert stopped <= set(replay_stops(rows))
