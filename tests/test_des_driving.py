"""The DES's tasks are SimPy processes, each one flat generator
(sim/engines/des.py); tests/des_oracle.py writes the same process per
task independently, with a generator per layer (``yield from``) and a
``try``/``finally`` per wait. Both must give exactly the same results:
every record, every time series (times, values, peak, integral), the
limiter's and ledgers' counts, for operator pauses and cancels that catch
tasks in every kind of wait (queued for a tenant's cap, for a sandbox, for
a model slot; holding a slot; on a tool; parked for an approval or by a
pause; in a backoff; waiting for a human), and for ties at equal times (a
batch arriving at once, operators acting at the same instant), across
seeds."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sim.engines import des as des_task  # the task process lives in des.py
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.perform import EFFECTS
from sim.harness.effects import ToolRequest, ToolResult
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from tests.des_oracle import ProcessEngine

CAPACITY = "scenarios/capacity.yaml"
# tight pools, rate limits that bind, approvals and resumptions that are common
TIGHT = ["des.capacity.model_slots=6", "des.capacity.sandboxes=20", "harness.budgets.steps=12",
         "des.capacity.requests_per_minute=40",
         "des.tenants=[{name: acme, rate_per_hour: 900, agent_type: coder, max_concurrency: 40},"
         " {name: globex, rate_per_hour: 400, agent_type: coder},"
         " {name: initech, rate_per_hour: 200, agent_type: support, max_concurrency: 3}]",
         "des.resume.share=1.0", "des.resume.delay={median_s: 600, sigma: 0.5}",
         "harness.approval_required=[irreversible, external]"]
OPERATIONS = ("des.operations=[{at_s: 200, action: pause, scope: 'tenant:initech'},"
              " {at_s: 300, action: cancel, scope: 'tenant:initech'},"
              " {at_s: 420, action: pause}, {at_s: 480, action: cancel, scope: 'tenant:globex'},"
              " {at_s: 480, action: resume}, {at_s: 700, action: resume, scope: 'tenant:initech'},"
              + ", ".join(f"{{at_s: {t}, action: cancel, scope: 'tenant:globex'}}"
                          for t in range(250, 1000, 50) if t != 480)
              + ", {at_s: 1300, action: cancel, scope: 'tenant:initech'},"
              " {at_s: 1500, action: cancel}]")
BATCH = ["des.arrivals.kind=batch",
         "des.operations=[{at_s: 0, action: pause, scope: 'tenant:globex'},"
         " {at_s: 0, action: cancel, scope: 'tenant:initech'},"
         " {at_s: 30, action: resume, scope: 'tenant:globex'},"
         " {at_s: 30, action: cancel, scope: 'tenant:acme'}]"]


def outputs(engine_class, overrides: list[str], tasks: int, seed: int) -> tuple:
    """Everything a run produced, as comparable values."""
    scenario = load_scenario(CAPACITY, [*overrides, f"seed={seed}", f"tasks={tasks}"])
    cell = build_cell(cells_of(scenario)[0])
    result = engine_class(cell, scenario.des, arrival_schedule(scenario.des, tasks,
                                                               cell.seed)).run()
    limiter = result.limiter
    return ([tuple(getattr(r, f) for f in r.__slots__) for r in result.records],
            {name: (s.times, s.values, s.peak, s.integral(result.horizon_s))
             for name, s in result.series.items()},
            result.horizon_s, result.rate_limited, result.sandbox_hold_s, result.sandbox_wait_s,
            None if limiter is None else (limiter.admitted, limiter.rejected),
            result.tenant_budgets)


@pytest.fixture()
def cancelled_in(monkeypatch) -> Counter:
    """Counts the kind of wait (des_task's CAP, SANDBOX, ...) of each task an
    operator cancels, and the effect's type for a timed one (a tool call, a
    backoff ``Wait``, ...)."""
    seen: Counter = Counter()
    cancel = des_task.TaskRun.cancel

    def counting(run: des_task.TaskRun) -> None:
        if run.process.is_alive:
            seen[run.mode] += 1
            if run.mode == des_task.TIMER:
                seen[run.kind.__name__] += 1
        cancel(run)
    monkeypatch.setattr(des_task.TaskRun, "cancel", counting)
    return seen


def test_operators_give_the_process_engines_results(cancelled_in):
    """Pauses and cancels at every kind of wait: identical to the process
    per task at each of three seeds, and between them every kind of wait is
    cancelled at least once."""
    overrides = [*TIGHT, OPERATIONS]
    for seed in (1, 2, 3):
        assert outputs(DesEngine, overrides, 160, seed) == outputs(ProcessEngine, overrides,
                                                                   160, seed), seed
    kinds = {des_task.CAP, des_task.SANDBOX, des_task.PARK, des_task.QUEUED, des_task.MODEL,
             des_task.TIMER, des_task.HELD, des_task.HUMAN, "Wait", "ToolRequest"}
    assert kinds <= set(cancelled_in), cancelled_in


@pytest.mark.parametrize("seed", [4, 5])
def test_ties_at_equal_times_give_the_process_engines_results(seed):
    """A batch arriving at time 0 (every start, request and grant tied),
    operators pausing and cancelling at the same instants."""
    overrides = [*TIGHT, *BATCH]
    assert outputs(DesEngine, overrides, 120, seed) == outputs(ProcessEngine, overrides, 120,
                                                               seed)


@pytest.mark.parametrize("seed", [6, 7])
def test_without_operators_the_results_are_the_process_engines(seed):
    """capacity.yaml as shipped (the pools elide the events that change
    nothing), and with tenants' money budgets."""
    assert outputs(DesEngine, [], 200, seed) == outputs(ProcessEngine, [], 200, seed)
    money = ["des.tenants=[{name: a, rate_per_hour: 900, money_usd: 10, max_concurrency: 20},"
             " {name: b, rate_per_hour: 500, money_usd: 5}]"]
    assert outputs(DesEngine, money, 150, seed) == outputs(ProcessEngine, money, 150, seed)


@pytest.mark.parametrize("seed", [8, 9])
def test_csv_arrivals_on_whole_seconds_give_the_process_engines_results(seed, tmp_path):
    """Arrivals on whole seconds, often several at once, with a rate limit
    whose Retry-After is whole seconds too (so a retry can fall due exactly
    when tasks arrive), with and without operators."""
    rng = random.Random(seed)
    times = sorted(rng.choice((0, 0, 1, 2, 5)) + 3 * k for k in range(60) for _ in range(2))
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_s,tenant\n" + "".join(
        f"{t},{rng.choice(('acme', 'globex', 'initech'))}\n" for t in times), encoding="utf-8")
    csv = [*TIGHT, f"des.arrivals={{kind: csv, path: {path}}}"]
    for overrides in (csv, [*csv, "des.operations=[{at_s: 60, action: pause, scope: "
                                  "'tenant:acme'}, {at_s: 90, action: cancel, scope: "
                                  "'tenant:globex'}, {at_s: 120, action: resume, scope: "
                                  "'tenant:acme'}]"]):
        assert outputs(DesEngine, overrides, 120, seed) == outputs(ProcessEngine, overrides,
                                                                   120, seed)


def test_the_des_tool_seconds_are_the_effect_tables() -> None:
    """The DES reads a tool call's seconds as ``result.duration_s`` without
    the table's call (des_task.TaskRun.drive): the table must say the same."""
    result = ToolResult("ok", 3, 2.5)
    assert EFFECTS[ToolRequest].seconds(None, result) == result.duration_s
