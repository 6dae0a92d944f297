"""Capacity measurements against theory (sim/capacity.py, sim/sizing.py,
``python -m sim capacity``).

Every DES run here goes through :func:`simulate`, which asserts the
drained-run invariants (:func:`sim.analysis.capacity.check_drained`: among
them that the area under each series equals the per-task times, for the
system, the sandbox pool, the sandbox queue and the model-slot queue) and
Little's law over a steady-state window, L against the scenario's arrival
rate times W, within its stated tolerance (a check that can fail: see
``test_littles_law_fails_when_the_arrival_rate_is_not_the_scenarios``).
Queueing is checked on an M/M/c queue built from the agent simulator
(scenarios/mmc.yaml): every wait of 20,000 tasks against the first-come-
first-served recursion on the same inputs (exact), that recursion against
Erlang C, and the queue's inputs at full size (the full 1,000,000-task run
against Erlang C is benchmarks/mmc_full.py); utilisation against offered load,
and seed 001's tail-share example (scenarios/tail.yaml). Tolerances come from
the sample sizes (stated in each docstring), not from golden numbers of one
seed.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats

from sim.analysis.capacity import (
    check_drained,
    littles_law,
    measurements,
    resampled,
    tail_share,
    value_at,
    window_average,
    window_averages,
)
from sim.cli import main
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.monitor import Series
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of
from sim.sweeps.sizing import probe_of, size_capacity, with_capacity

BOUNDED = "scenarios/bounded.yaml"


def simulate(path: str, overrides: list[str] = (), tasks: int | None = None):
    """Run the scenario at ``path`` (engine des) and assert the drained-run
    invariants; return (scenario, result, arrivals, capacity measurements)."""
    extra = [f"tasks={tasks}"] if tasks else []
    scenario = load_scenario(path, ["engine=des", *overrides, *extra])
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, scenario.tasks, cell.seed)
    result = DesEngine(cell, scenario.des, arrivals).run()
    problems = check_drained(result, scenario.des, arrivals)
    assert not problems, problems
    capacity = measurements(result, scenario.des.capacity.model_dump())
    law = capacity["littles_law"]  # checked where there is a steady state, never failing
    assert law is None or (law["holds"] is not False and law["queue_holds"] is not False), law
    return scenario, result, arrivals, capacity


# ---------------------------------------------------------------- Erlang C
def erlang_c(c: int, a: float) -> float:
    """P(an arrival waits) in M/M/c with offered load ``a = lambda / mu`` < c."""
    term, total = 1.0, 1.0  # a^k / k! for k = 0, summed over k < c
    for k in range(1, c):
        term *= a / k
        total += term
    top = term * a / c * c / (c - a)  # a^c / c! * c / (c - a)
    return top / (total + top)


def erlang_c_wait(c: int, lam: float, mu: float) -> float:
    """Mean wait in queue of M/M/c: C(c, a) / (c mu - lambda)."""
    return erlang_c(c, lam / mu) / (c * mu - lam)


def test_erlang_c_matches_known_values():
    """M/M/1: P(wait) = rho, Wq = rho / (mu - lambda); C(2, 1) = 1/3;
    M/M/4 at rho 0.8: P(wait) = 0.5964 (tables)."""
    assert erlang_c(1, 0.7) == pytest.approx(0.7)
    assert erlang_c_wait(1, 0.7, 1.0) == pytest.approx(0.7 / 0.3)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(4, 3.2) == pytest.approx(0.5964, abs=1e-4)


MMC = "scenarios/mmc.yaml"
MMC_LAMBDA, MMC_MU, MMC_C = 192 / 3600, 1 / 60, 4
MMC_TASKS = 20_000          # DES customers at utilisation 0.8 (the exact check needs no more)
MMC_ARRIVALS = 1_000_000    # gaps of the arrival schedule (cheap: no simulation)
MMC_SERVICES = 1_000_000    # service times drawn from the tasks' own streams (cheap)
MMC_WARMUP = 2_000          # customers dropped for the batch means (the run starts empty)
MMC_BATCHES = 40            # batch means


def fcfs_waits(arrivals: np.ndarray, services: np.ndarray, servers: int) -> np.ndarray:
    """Each customer's wait in a first-come-first-served queue with
    ``servers`` servers, from arrival times and service times (the
    Kiefer-Wolfowitz recursion on the servers' remaining work, kept sorted):
    the queueing model M/M/c is this recursion fed exponential inputs."""
    work = np.zeros(servers)
    waits = np.empty(len(arrivals))
    previous = 0.0
    for i, (time_s, service) in enumerate(zip(arrivals.tolist(), services.tolist(),
                                              strict=True)):
        work = np.maximum(work - (time_s - previous), 0.0)
        work.sort()
        waits[i] = work[0]
        work[0] += service
        previous = time_s
    return waits


def batch_means(values: np.ndarray, batches: int = MMC_BATCHES) -> np.ndarray:
    """Means of ``batches`` consecutive equal batches of ``values``."""
    size = len(values) // batches
    return values[:size * batches].reshape(batches, size).mean(axis=1)


def mean_and_se(means: np.ndarray) -> tuple[float, float]:
    """The grand mean of batch means and its standard error."""
    return float(means.mean()), float(means.std(ddof=1) / math.sqrt(len(means)))


@pytest.fixture(scope="module")
def mmc_run():
    """scenarios/mmc.yaml (utilisation 0.8) on MMC_TASKS tasks through the
    DES engine, and the same tasks (common random numbers: task i is the same
    task in every engine) through the direct engine, which has no queue."""
    from sim.engines.direct import run_tasks

    scenario, result, _, capacity = simulate(MMC, tasks=MMC_TASKS)
    cell = build_cell(cells_of(scenario)[0])
    records = sorted(result.records, key=lambda r: r.task)
    direct = run_tasks(cell, range(MMC_TASKS))
    return {"scenario": scenario, "result": result, "capacity": capacity,
            "arrival_s": np.array([r.arrival_s for r in records]),
            "start_s": np.array([r.start_s for r in records]),
            "end_s": np.array([r.end_s for r in records]),
            "waits": np.array([r.queue_s for r in records]),
            "service": np.array([r.active_s for r in direct]),
            "outcomes": {r.outcome for r in records} | {r.outcome for r in direct}}


def test_mmc_waits_are_exactly_the_fcfs_queue_at_utilisation_0_8(mmc_run):
    """The analytic check at high utilisation (replacing a 1,000,000-task
    statistical one). On mmc.yaml's 20,000 tasks (M/M/4 at utilisation 0.8)
    the DES engine's wait for a sandbox of every task equals, to 1e-6 s, the
    first-come-first-served recursion fed the same arrival times and the
    service times the direct engine gives the same tasks (no queue there:
    common random numbers), and each task holds its sandbox exactly its
    service time. The M/M/c queue is that recursion fed exponential inputs,
    so with the inputs checked below, the engine's waits have Erlang C's law.

    Detectable effect: before, a bias of the mean wait of about 6% (the 5%
    tolerance plus 0.84 of its 1% standard error; any cause). Now any error
    of queue discipline, capacity or bookkeeping that moves one wait of the
    20,000 by more than 1e-6 s fails, with no sampling error at all."""
    run = mmc_run
    assert run["outcomes"] == {"succeeded"}
    expected = fcfs_waits(run["arrival_s"], run["service"], MMC_C)
    assert np.max(np.abs(run["waits"] - expected)) < 1e-6
    assert np.max(np.abs(run["start_s"] - run["arrival_s"] - run["waits"])) < 1e-6
    assert np.max(np.abs(run["end_s"] - run["start_s"] - run["service"])) < 1e-6
    assert np.max(np.abs(np.sort(run["result"].sandbox_hold_s) - np.sort(run["service"]))) \
        < 1e-6
    assert (run["waits"] > 0).mean() > 0.4  # the check ran where the queue binds


def test_the_fcfs_recursion_is_erlang_c():
    """The oracle of the exact check, against theory: the recursion fed
    exponential inputs (300 independent M/M/4 queues at utilisation 0.8,
    20,000 customers each after 2,000 of warm-up, vectorised) has a mean
    wait within four standard errors (about 0.8% each: relative variance
    about 240 / n per queue) of Erlang C's Wq = 44.73 s, and the probability
    of waiting within four of Erlang C's 0.596."""
    rng = np.random.default_rng(20240611)
    queues, n = 300, 20_000
    work = np.zeros((queues, MMC_C))
    total = np.zeros(queues)
    waited = np.zeros(queues)
    for i in range(n + MMC_WARMUP):
        work = np.maximum(work - rng.exponential(1 / MMC_LAMBDA, queues)[:, None], 0.0)
        work.sort(axis=1)
        if i >= MMC_WARMUP:
            total += work[:, 0]
            waited += work[:, 0] > 0
        work[:, 0] += rng.exponential(1 / MMC_MU, queues)
    means, shares = total / n, waited / n
    wq = erlang_c_wait(MMC_C, MMC_LAMBDA, MMC_MU)
    assert abs(means.mean() - wq) <= 4 * means.std(ddof=1) / math.sqrt(queues)
    p_wait = erlang_c(MMC_C, MMC_LAMBDA / MMC_MU)
    assert abs(shares.mean() - p_wait) <= 4 * shares.std(ddof=1) / math.sqrt(queues)


def test_the_recursion_matches_erlang_c_on_small_known_cases():
    """M/D/1 by hand: arrivals at 0, 1, 2 with services 2, 2, 2 on one
    server wait 0, 1, 2; on two servers 0, 0, 0."""
    arrivals, services = np.array([0.0, 1.0, 2.0]), np.array([2.0, 2.0, 2.0])
    assert fcfs_waits(arrivals, services, 1).tolist() == [0.0, 1.0, 2.0]
    assert fcfs_waits(arrivals, services, 2).tolist() == [0.0, 0.0, 0.0]


def service_times(cell, tasks: int) -> np.ndarray:
    """The tool-call duration of each of the first ``tasks`` tasks of an
    mmc.yaml cell, drawn as the world draws it (the task's first draw from its
    latency stream), without running the harness: the service times the
    engines give these tasks (checked against the direct engine below)."""
    from sim.world.streams import CONCERNS, StreamPool

    latency, pool, draw = CONCERNS.index("latency"), StreamPool(), cell.world.tool_draw["work"]
    out = np.empty(tasks)
    for task in range(tasks):
        streams = pool.acquire(cell.seed, task)
        out[task] = draw(streams[latency])
        pool.release(streams)
    return out


def test_mmc_inputs_are_the_scenarios_exponentials(mmc_run):
    """The inputs of the queue at full size, where they are cheap: the arrival
    schedule's 1,000,000 gaps (no simulation needed) and the service times of
    1,000,000 tasks (drawn from each task's own stream as the world draws
    them; for the 20,000 tasks simulated, equal to the direct engine's to
    1e-6 s, so these are the engine's service times) have means 1/lambda =
    18.75 s and 1/mu = 60 s within four standard errors (0.4% each), an
    exponential shape (KS) and no lag-1 correlation (|r| < 4/sqrt(n)).

    Detectable effect on the mean wait (its elasticity at utilisation 0.8 is
    6.4 to the arrival rate and 7.4 to the mean service time): before, the
    1,000,000-task mean wait caught a rate or service-mean error of about
    0.8% (a 6% bias of the mean wait). Now, with 80% power, a rate error of
    0.48% (3.1% of the mean wait) and a service-mean error of 0.48% (3.6%);
    shape errors far smaller than before (KS on 1,000,000 values: CDF gaps
    of 0.2%, where the mean wait moved 5% only for a 10% change of the
    service time's squared coefficient of variation)."""
    scenario = load_scenario(MMC, ["tasks=1000"])
    cell = build_cell(cells_of(scenario)[0])
    times = np.array([a.time_s for a in arrival_schedule(scenario.des, MMC_ARRIVALS, cell.seed)])
    gaps = np.diff(times)
    service = service_times(cell, MMC_SERVICES)
    assert np.max(np.abs(service[:MMC_TASKS] - mmc_run["service"])) < 1e-6
    for values, mean in ((gaps, 1 / MMC_LAMBDA), (service, 1 / MMC_MU)):
        assert abs(values.mean() - mean) <= 4 * mean / math.sqrt(len(values))
        assert stats.kstest(values, "expon", args=(0, mean)).pvalue > 0.001
        assert abs(np.corrcoef(values[:-1], values[1:])[0, 1]) < 4 / math.sqrt(len(values))


def test_mmc_capacity_table_reports_the_waits_and_utilisation(mmc_run):
    """The capacity table of the 20,000-task run: its mean sandbox wait is
    the mean of the tasks' waits; Little's law holds over the steady window
    (tolerance under 10%); busy sandboxes / c, time-averaged while tasks
    arrive (40 windows), equals the offered load 0.8 within four batch-means
    standard errors (about 0.01 each), and its mean wait is within four
    batch-means standard errors of Erlang C (a loose end-to-end check: the
    exact one is above; the full-size 5% check is benchmarks/mmc_full.py).

    Detectable effect: utilisation, before 4 x 0.002 (1,000,000 tasks), now
    4 x about 0.01; the exact check above leaves only the inputs to move it,
    and they are checked at full size."""
    run = mmc_run
    capacity = run["capacity"]
    assert capacity["sandbox_wait_s"]["mean"] == pytest.approx(run["waits"].mean(), rel=1e-9)
    law = capacity["littles_law"]
    assert law["holds"] and law["queue_holds"] and law["tolerance"] < 0.1
    edges = np.linspace(run["arrival_s"][MMC_WARMUP], run["arrival_s"][-1], MMC_BATCHES + 1)
    busy = window_averages(run["result"].series["busy_sandboxes"], edges) / MMC_C
    utilisation, se = mean_and_se(busy)
    assert abs(utilisation - MMC_LAMBDA / (MMC_C * MMC_MU)) <= 4 * se
    waits, wait_se = mean_and_se(batch_means(run["waits"][MMC_WARMUP:]))
    assert abs(waits - erlang_c_wait(MMC_C, MMC_LAMBDA, MMC_MU)) <= 4 * wait_se


# --------------------------------------------------------------- tail share
TAIL = "scenarios/tail.yaml"
TAIL_TASKS = 2_000       # DES tasks: each one's holding time checked exactly
TAIL_DRAWS = 200_000     # tasks' needs drawn from their own streams (no simulation)


def task_needs(cell, tasks: int) -> np.ndarray:
    """The productive steps each of the first ``tasks`` tasks needs, drawn
    as the world draws it (from the task's own difficulty stream), without
    running the harness."""
    from sim.world.difficulty import sample_need
    from sim.world.streams import CONCERNS, StreamPool

    difficulty, pool = CONCERNS.index("difficulty"), StreamPool()
    spec = cell.world.params.difficulty
    out = np.empty(tasks, dtype=np.int64)
    for task in range(tasks):
        streams = pool.acquire(cell.seed, task)
        out[task] = sample_need(spec, streams[difficulty])
        pool.release(streams)
    return out


@pytest.mark.slow
def test_tail_share_reproduces_seed_001():
    """scenarios/tail.yaml: 95% of tasks take 2 minutes and 5% take 25
    (exactly, by construction). Seed 001: the long 5% hold 1.25 / 3.15 =
    39.7% of the sandbox-minutes.

    Design (common random numbers, then full size where it is cheap): through
    the DES engine, each of 2,000 tasks holds its sandbox exactly 120 s or
    1,500 s as its need, drawn from its own stream, is 6 or 66 steps, and the
    capacity table's tail share is the top 5% share of those holdings. The
    needs of 200,000 tasks, drawn the same way without simulating, then give:
    the share of the longest 5% within 3 standard errors (0.65 points) of
    39.7%, and the long fraction within four of 5% (binomial). The share
    moves with the realised fraction p of long tasks (binomial: standard
    error sqrt(0.05 x 0.95 / n)), with a sensitivity of at most 4.4 per unit,
    so its standard error is at most 0.22 points at n = 200,000.

    Detectable effect (80% power): before (20,000 simulated tasks, 2-point
    tolerance, 0.68-point standard error), a tail-share error of about 2.6
    points; now 0.83 points, and any task whose holding time differs from
    its need's by more than 1e-6 s. The mean number of busy sandboxes:
    before, within 4 x 1.33% of the offered load lambda E[S] = 31.5 on
    20,000 tasks; now its two factors at full size, the mean holding time
    within 4 x 0.36% (CV(S) = 1.59 over 200,000 tasks) and the arrival rate
    within 4 x 0.22% (200,000 gaps), the area under busy sandboxes equal to
    the holdings (exact), and the 2,000-task run's mean busy within four of
    its standard errors (4 x 4.2%) of the offered load.
    """
    expected = 0.05 * 25 / (0.95 * 2 + 0.05 * 25)
    assert expected == pytest.approx(1.25 / 3.15)
    scenario, result, _, capacity = simulate(TAIL, tasks=TAIL_TASKS)
    cell = build_cell(cells_of(scenario)[0])
    records = sorted(result.records, key=lambda r: r.task)
    holds = np.array([r.end_s - r.start_s for r in records])
    needs = task_needs(cell, TAIL_DRAWS)
    assert set(needs.tolist()) == {6, 66}
    by_need = np.where(needs == 6, 120.0, 1500.0)
    assert np.max(np.abs(holds - by_need[:TAIL_TASKS])) < 1e-6  # durations exact, per task
    assert np.allclose(np.sort(result.sandbox_hold_s), np.sort(holds), atol=1e-6)
    assert capacity["tail_share_5pct"] == pytest.approx(tail_share(list(result.sandbox_hold_s)))
    busy = result.series["busy_sandboxes"].integral(result.horizon_s)
    assert busy == pytest.approx(float(holds.sum()), rel=1e-9)
    n = TAIL_DRAWS
    se_p = math.sqrt(0.05 * 0.95 / n)
    assert abs(tail_share(by_need.tolist()) - expected) <= 3 * 4.4 * se_p
    long = needs == 66
    assert abs(long.mean() - 0.05) <= 4 * se_p
    mean_s = 0.95 * 120 + 0.05 * 1500  # 189 s
    cv = math.sqrt(0.95 * 120 ** 2 + 0.05 * 1500 ** 2 - mean_s ** 2) / mean_s
    assert abs(by_need.mean() - mean_s) / mean_s <= 4 * cv / math.sqrt(n)
    gaps = np.diff([a.time_s for a in arrival_schedule(scenario.des, n, cell.seed)])
    assert abs(gaps.mean() - 6.0) / 6.0 <= 4 / math.sqrt(len(gaps))  # 600 tasks/h
    offered = 600 / 3600 * mean_s
    load = capacity["while_arriving"]["mean_busy"]["sandboxes"]
    assert abs(load - offered) / offered <= 4 * math.sqrt(1 + cv ** 2) / math.sqrt(TAIL_TASKS)


def test_tail_share_is_the_top_share():
    """The longest ceil(5% n) holdings over the total; 0 when nothing is held."""
    assert tail_share([1.0] * 19 + [81.0]) == pytest.approx(81 / 100)
    assert tail_share([2.0] * 95 + [25.0] * 5) == pytest.approx(1.25 / 3.15)
    assert tail_share([1.0] * 21, tail=0.05) == pytest.approx(2 / 21)  # ceil(1.05) = 2
    assert tail_share([0.0, 0.0]) == 0.0


# ----------------------------------------------------------- Little's law
@pytest.mark.parametrize("overrides,tasks", [
    (["des.arrivals.kind=batch"], 400),
    (["des.tenants=[{name: a, rate_per_hour: 900, max_concurrency: 40}, "
      "{name: b, rate_per_hour: 300}]", "des.capacity={sandboxes: 55, model_slots: 40}"], 600),
    (["des.tenants=[{name: a, rate_per_hour: 600}]", "harness.budgets.steps=12",
      "des.resume={share: 0.5, delay: {median_s: 300, sigma: 0.5}}",
      "harness.approval_required=[external]"], 1000),
], ids=["batch", "caps and queues", "resumption and approvals"])
def test_littles_law_holds_on_drained_runs(overrides, tasks):
    """Over the steady window (arrivals from the 10th to the 90th
    percentile), L from the time series is within its tolerance (four
    Poisson standard errors of the arrival count plus the window's edge
    effect) of the scenario's rate times the measured W, and L_q of
    lambda W_q; a batch has no such window. Over the whole drained run the
    area under busy sandboxes equals the sandbox-seconds the tasks held."""
    scenario, result, _, capacity = simulate(BOUNDED, overrides, tasks=tasks)
    law = capacity["littles_law"]
    if scenario.des.arrivals.kind == "batch":
        assert law is None and capacity["littles_law_error"] is None
        return
    rate = sum(t.rate_per_hour for t in scenario.des.tenants) / 3600
    assert law["rate_source"] == "scenario" and law["arrival_rate_per_s"] == rate
    assert law["steady"] and law["holds"] and law["queue_holds"]
    assert abs(law["L"] - rate * law["W_s"]) <= law["tolerance"] * rate * law["W_s"]
    assert capacity["littles_law_error"] == abs(law["error"])
    busy = result.series["busy_sandboxes"].integral(result.horizon_s)
    assert busy == pytest.approx(sum(result.sandbox_hold_s), rel=1e-9)


def test_a_queue_without_bound_has_no_steady_state_to_check():
    """A tenant arriving faster than its cap of 6 can serve queues without
    bound: the times in system are long against the window, so Little's law
    is reported but not checked (``steady`` False, ``holds`` None), rather
    than passed with a tolerance that could not fail."""
    _, _, _, capacity = simulate(BOUNDED, [
        "des.tenants=[{name: a, rate_per_hour: 900, max_concurrency: 6}]"], tasks=300)
    law = capacity["littles_law"]
    assert not law["steady"] and law["holds"] is None and law["queue_holds"] is None


def test_littles_law_fails_when_the_arrival_rate_is_not_the_scenarios():
    """The check is not an identity: the same run measured against an arrival
    rate 20% off the one that produced it fails, well beyond its tolerance
    (mmc.yaml on 4,000 tasks: tolerance about 10%)."""
    _, result, _, capacity = simulate(MMC, tasks=4_000)
    assert capacity["littles_law"]["holds"]
    for factor in (0.8, 1.2):
        wrong = dataclasses.replace(result, offered_rate_per_s=result.offered_rate_per_s * factor)
        law = littles_law(wrong)
        assert not law["holds"] and not law["queue_holds"]
        assert abs(law["error"]) > 1.5 * law["tolerance"]


def test_series_helpers_integrate_exactly():
    """Window averages, values at a time and resampled bins agree with the
    step function's exact integral."""
    s = Series("x")
    s.add(0.0, 2)
    s.add(10.0, -1)   # 2 on [0, 10), 1 on [10, 30), 4 on [30, 40)
    s.add(30.0, 3)
    s.add(40.0, -4)
    assert window_average(s, 40.0) == pytest.approx((20 + 20 + 40) / 40)
    assert window_average(s, 35.0, 5.0) == pytest.approx((10 + 20 + 20) / 30)
    assert list(window_averages(s, [0, 10, 30, 40, 50])) == [2, 1, 4, 0]
    assert (value_at(s, 9.99), value_at(s, 10.0), value_at(s, 50.0)) == (2, 1, 0)
    times, values = resampled(s, 40.0, points=4)
    assert list(times) == [0, 10, 20, 30] and list(values) == [2, 1, 1, 4]
    assert s.integral(40.0) == pytest.approx(80.0)


def test_the_multi_tenant_scenario_runs_with_every_mechanism_at_work():
    """scenarios/capacity.yaml (cut to 400 tasks) drains with the invariants
    holding, all three tenants served, prompt caching reading the cache,
    some approvals parked and per-tenant caps never exceeded."""
    _, result, _, capacity = simulate("scenarios/capacity.yaml", tasks=400)
    assert set(capacity["tenants"]) == {"acme", "globex", "initech"}
    assert sum(r.cache_read_tokens for r in result.records) > 0
    assert any(r.wall_s > r.active_s for r in result.records)
    assert result.series["running:initech"].peak <= 10
    assert capacity["peak"]["sandboxes"] <= 96 and capacity["peak"]["model_slots"] <= 64


# ------------------------------------------------------------------ sizing
SIZED = ["des.tenants=[{name: a, rate_per_hour: 900}]", "des.capacity={}"]


def test_sizing_finds_the_fewest_units_meeting_the_target():
    """The sized capacity meets the p95 target for both waits; one sandbox
    fewer (with unlimited model slots) and one model slot fewer (with the
    sized sandboxes) were probed and miss it; the answer does not depend
    on the number of worker processes."""
    target = 20.0
    scenario = load_scenario(BOUNDED, ["engine=des", "tasks=300", *SIZED])
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, 300, cell.seed)
    sizing = size_capacity(cell, scenario.des, arrivals, target, workers=1)
    s, m = sizing.sandboxes, sizing.model_slots
    probes = {(p.sandboxes, p.model_slots): p for p in sizing.probes}
    assert probes[(s, m)].meets(target)
    if s > 1:
        assert not probes[(s - 1, None)].meets(target, model=False)
    if m > 1:
        assert not probes[(s, m - 1)].meets(target)
    unlimited = probes[(None, None)]
    assert s <= unlimited.peak_sandboxes and s >= unlimited.load_sandboxes  # Little's law
    des = with_capacity(scenario.des, s, m)
    result = DesEngine(cell, des, arrivals).run()
    assert not check_drained(result, des, arrivals)
    again = size_capacity(cell, scenario.des, arrivals, target, workers=2)
    assert (again.sandboxes, again.model_slots) == (s, m)


def test_sizing_meets_the_target_for_every_tenant_not_only_in_aggregate(tmp_path):
    """A smooth tenant (380 tasks, one every 30 s) and a burst (20 tasks at
    once), each task one 60 s tool call: the aggregate p95 wait for a
    sandbox meets 30 s with a few sandboxes while the burst's p95 wait is
    minutes. Sizing finds the fewest sandboxes that meet 30 s for each
    tenant: one fewer misses it for the burst; the aggregate alone would
    have stopped earlier, where the burst still waits beyond the target."""
    rows = ["arrival_s,tenant", *(f"{30 * i},smooth" for i in range(380)),
            *("5000,burst" for _ in range(20))]
    (tmp_path / "arrivals.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    scenario = load_scenario(MMC, [
        "tasks=400", f"des.arrivals={{kind: csv, path: {tmp_path / 'arrivals.csv'}}}",
        "des.tenants=[{name: smooth}, {name: burst}]", "des.capacity={}",
        "world.tools=[{name: work, timeout_s: 1.0e9, duration: {distribution: fixed, "
        "median_s: 60}}]"])
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, 400, cell.seed)
    target = 30.0
    sizing = size_capacity(cell, scenario.des, arrivals, target, workers=1)
    probes = {(p.sandboxes, p.model_slots): p for p in sizing.probes}
    sized = probes[(sizing.sandboxes, sizing.model_slots)]
    assert set(sized.tenants) == {"smooth", "burst"}
    assert all(t["sandbox_wait_p95_s"] <= target for t in sized.tenants.values())
    assert not probes[(sizing.sandboxes - 1, None)].meets(target, model=False)

    def probe(k: int):
        return probe_of(DesEngine(cell, with_capacity(scenario.des, k, None), arrivals).run(),
                        k, None)

    aggregate_only = next(k for k in range(1, sizing.sandboxes + 1)
                          if probe(k).sandbox_wait_p95_s <= target)
    assert aggregate_only < sizing.sandboxes
    assert probe(aggregate_only).tenants["burst"]["sandbox_wait_p95_s"] > target


# --------------------------------------------------------------------- CLI
def test_capacity_command_prints_the_table_and_writes_results(tmp_path, capsys):
    """``python -m sim capacity`` runs the DES cell (whatever the scenario's
    engine), prints L, rate, W, Little's-law error, utilisation, waits and
    tail share, and writes the results folder with a capacity section."""
    code = main(["capacity", BOUNDED, "--tasks", "200", "--quiet", "--out", str(tmp_path),
                 "--set", "des.capacity={sandboxes: 10, model_slots: 6}"])
    out = capsys.readouterr().out
    assert code == 0
    for text in ("L (mean tasks in system)", "arrival rate", "W (mean time in system)",
                 "Little's law", "sandboxes", "model slots", "tail share", "p95"):
        assert text in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    capacity = summary["cells"][0]["capacity"]
    assert capacity["littles_law"]["holds"] and capacity["littles_law"]["queue_holds"]
    assert capacity["peak"]["sandboxes"] <= 10
    assert {"results.parquet", "report.md", "report.html", "timeseries.parquet"} <= {
        p.name for p in tmp_path.iterdir()}


def test_capacity_command_shows_progress_on_stderr(tmp_path, capsys):
    """Without --quiet the DES run reports tasks ended on stderr (stdout
    keeps the tables)."""
    assert main(["capacity", BOUNDED, "--tasks", "60", "--out", str(tmp_path / "o")]) == 0
    captured = capsys.readouterr()
    assert "simulating (des)" in captured.err and "60/60" in captured.err
    assert "simulating" not in captured.out


def test_capacity_command_sizes_and_reports_json(tmp_path, capsys):
    """With --target-p95-wait and --format json the summary carries the
    sizing answer, and the reported run uses the sized capacity."""
    code = main(["capacity", BOUNDED, "--tasks", "200", "--quiet", "--out", str(tmp_path),
                 "--format", "json", "--workers", "1", "--target-p95-wait", "30",
                 *(x for o in SIZED for x in ("--set", o))])
    assert code == 0
    cell = json.loads(capsys.readouterr().out)["cells"][0]
    sizing = cell["sizing"]
    assert sizing["target_p95_wait_s"] == 30
    assert cell["params"] == {"des.capacity.sandboxes": sizing["sandboxes"],
                              "des.capacity.model_slots": sizing["model_slots"]}
    assert cell["capacity"]["sandbox_wait_s"]["p95"] <= 30
    assert cell["capacity"]["model_wait_s"]["p95"] <= 30


@pytest.mark.parametrize("argv", [
    ["--target-p95-wait", "-1"],
    ["--target-p95-wait", "nan"],
    ["--tasks", "0"],
    ["--set", "des.capacity.sandboxes=0"],
])
def test_capacity_command_rejects_bad_input_with_status_2(argv, tmp_path, capsys):
    """Bad options or values exit with status 2 and one message."""
    assert main(["capacity", BOUNDED, "--quiet", "--out", str(tmp_path), *argv]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_the_peak_rate_counts_the_busiest_bin_whatever_the_horizon() -> None:
    """:func:`peak_rate` is the largest count of a histogram over every bin of
    the horizon (per second), for random times; over a horizon of 10^12 s
    (a tenant arriving once in centuries: the dense histogram did not fit in
    memory) it counts only the bins that hold an event."""
    import numpy as np

    from sim.analysis.capacity import peak_rate

    rng = np.random.default_rng(7)
    for bin_s in (1.0, 5.0, 0.25):
        times = rng.uniform(0, 300, 500)
        edges = np.arange(int(300 / bin_s) + 2) * bin_s
        assert peak_rate(list(times), bin_s) == np.histogram(times, edges)[0].max() / bin_s
    assert peak_rate([], 1.0) == 0.0
    assert peak_rate([0.5, 1e12, 1e12 + 0.2, 3e12], 1.0) == 2.0
