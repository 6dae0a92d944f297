"""The discrete-event engine (sim/engines/des.py): shared capacity, rate
limits, tenants, approvals, operator controls, human resumption, arrivals.

Every run goes through :func:`simulate`, which asserts the engine's
invariants on the drained run (:func:`sim.analysis.capacity.check_drained`):
conservation (every arrival ends exactly once), a monotone clock, Little's
law within 2% for the system and each pool and queue, peaks within capacity
and tenant caps, and the harness's clock agreeing with the engine's.

Many checks compare a run with a reference run of the same tasks (common
random numbers): capacity, rate limits and pauses only move tasks in time, so
without time-dependent rules (prompt-cache lifetimes, time budgets) every
task does the same work: same outcome, steps, tokens and cost.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from sim.analysis.capacity import check_drained, value_at
from sim.bad_input import InputError
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.gateway import ModelGateway
from sim.engines.monitor import Series
from sim.engines.ratelimit import RateLimiter, TokenBucket
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

BOUNDED = "scenarios/bounded.yaml"
ALPHA = 0.001  # significance of the statistical tests: a false alarm in 1,000 runs
STOPPED = ("budget_exhausted", "needs_human")


def simulate(overrides: list[str], tasks: int = 300, path: str = BOUNDED, limiter=None):
    """Run ``tasks`` tasks of the scenario at ``path`` with ``overrides`` in the
    DES engine and assert the drained-run invariants; return (scenario,
    result, arrivals). ``limiter``, when given, builds the engine's rate
    limiter from the engine (to observe it)."""
    scenario = load_scenario(path, ["engine=des", f"tasks={tasks}", *overrides])
    cell = build_cell(cells_of(scenario)[0])
    arrivals = arrival_schedule(scenario.des, tasks, cell.seed)
    engine = DesEngine(cell, scenario.des, arrivals)
    if limiter is not None:
        engine.limiter = limiter(engine)
    result = engine.run()
    problems = check_drained(result, scenario.des, arrivals)
    assert not problems, problems
    return scenario, result, arrivals


def work(record) -> tuple:
    """What a task did, apart from when: outcome, steps, calls, tokens, cost."""
    return (record.outcome, record.steps, record.tool_calls, record.input_tokens,
            record.output_tokens, record.cache_read_tokens, record.cache_write_tokens,
            record.thinking_tokens, record.cost_usd, record.nudges, record.verifier_rejections,
            record.compactions, record.ground_truth, record.truly_done)


ONE_TENANT = "des.tenants=[{name: a, rate_per_hour: 600}]"


# ----------------------------------------------------------- rate limits
class RecordingLimiter(RateLimiter):
    """A rate limiter that logs every decision: (the task asking, time, prompt
    tokens, Retry-After or 0 when admitted). The task asking is the
    :class:`~sim.world.task.SimulatedTask` the gateway answers for, set in
    ``caller`` by :func:`recording_callers`."""

    def __init__(self, rpm, tpm) -> None:
        super().__init__(rpm, tpm)
        self.caller: object = None
        self.log: list[tuple[object, float, int, float]] = []

    def admit(self, now: float, prompt_tokens: int) -> float:
        retry_after = super().admit(now, prompt_tokens)
        self.log.append((self.caller, now, prompt_tokens, retry_after))
        return retry_after


def recording_callers(monkeypatch) -> None:
    """Make the model gateway tell a :class:`RecordingLimiter` which task asks."""
    answer = ModelGateway.answer

    def telling(gateway, request, task, *args):
        gateway.limiter.caller = task
        return answer(gateway, request, task, *args)
    monkeypatch.setattr(ModelGateway, "answer", telling)


def conforms(times: np.ndarray, amounts: np.ndarray, per_minute: float) -> bool:
    """True if the admitted ``amounts`` at ``times`` never exceed a token
    bucket of ``per_minute`` capacity refilled at ``per_minute / 60`` per
    second: for every window [t_i, t_j] of admissions, the amount admitted in
    it is at most capacity + rate x (t_j - t_i)."""
    rate = per_minute / 60.0
    cumulative = np.cumsum(amounts)
    g = cumulative - rate * times                   # admitted up to j, less the refill
    h = cumulative - amounts - rate * times         # admitted before i, less the refill
    worst = g - np.minimum.accumulate(h)            # max over i <= j
    return bool(np.all(worst <= per_minute * (1 + 1e-9)))


def test_rate_limits_answer_429_and_the_harness_backs_off(monkeypatch):
    """Above the requests- and tokens-per-minute buckets the provider answers
    429 with a whole-second Retry-After; the harness waits exactly that long
    before trying again; no admitted request ever exceeds either bucket; and
    since 429s consume no model draws, every task does the same work as with
    no limits (only later)."""
    rpm, tpm = 300.0, 6_000_000.0
    overrides = ["des.tenants=[{name: a, rate_per_hour: 1500}]",
                 "harness.retry.max_attempts=1000"]  # never give up: only delays
    _, free, _ = simulate(overrides)
    recording_callers(monkeypatch)
    _, limited, _ = simulate([*overrides, f"des.capacity.requests_per_minute={rpm}",
                              f"des.capacity.tokens_per_minute={tpm}"],
                             limiter=lambda engine: RecordingLimiter(rpm, tpm))
    log = limited.limiter.log
    admitted = [(t, tokens) for _, t, tokens, wait in log if not wait]
    rejected = [(p, t, wait) for p, t, _, wait in log if wait]
    assert limited.rate_limited == len(rejected) > 100  # the limits bind
    assert all(wait >= 1 and wait == math.floor(wait) for _, _, wait in rejected)
    times = np.array([t for t, _ in admitted])
    assert conforms(times, np.ones(len(times)), rpm)
    assert conforms(times, np.minimum(np.array([k for _, k in admitted], float), tpm), tpm)
    # the same task's next request comes Retry-After seconds after a 429
    by_task: dict[object, list[tuple[float, float]]] = {}
    for task, t, _, wait in log:
        by_task.setdefault(task, []).append((t, wait))
    assert len(by_task) > 100
    gaps = [(t2 - t1, wait) for calls in by_task.values()
            for (t1, wait), (t2, _) in itertools.pairwise(calls) if wait]
    assert gaps and all(gap == pytest.approx(wait, abs=1e-6) for gap, wait in gaps)
    assert [work(r) for r in limited.records] == [work(r) for r in free.records]
    assert sum(r.end_s - r.arrival_s for r in limited.records) > sum(
        r.end_s - r.arrival_s for r in free.records)


def test_token_bucket_retry_after_is_the_wait_for_enough_tokens():
    """A drained bucket refills at limit/60 per second; Retry-After is the
    whole seconds until the request fits, and a request larger than the
    bucket waits for a full bucket."""
    limiter = RateLimiter(60.0, None)  # 1 request per second, burst 60
    assert all(limiter.admit(0.0, 10) == 0 for _ in range(60))
    assert limiter.admit(0.0, 10) == 1.0
    assert limiter.admit(0.5, 10) == 1.0  # 0.5 s more needed: rounded up
    assert limiter.admit(1.0, 10) == 0.0
    assert (limiter.admitted, limiter.rejected) == (61, 2)
    bucket = TokenBucket(600.0)
    bucket.level = 0.0
    assert bucket.wait(1_000) == pytest.approx(60.0)  # above capacity: a full bucket


def test_admit_is_the_buckets_refill_and_wait():
    """RateLimiter.admit (its buckets' refill and wait written inline) gives,
    call for call, what the buckets' own refill and wait give: admitted or
    the same Retry-After, and the same levels."""
    rng = random.Random(5)
    for rpm, tpm in [(60.0, None), (None, 50_000.0), (400.0, 7_800_000.0), (5.0, 1_000.0)]:
        limiter = RateLimiter(rpm, tpm)
        buckets = [TokenBucket(x) if x else None for x in (rpm, tpm)]
        now = 0.0
        for _ in range(400):
            now += rng.expovariate(rng.choice([0.2, 2.0, 20.0]))
            tokens = rng.randrange(1, 60_000)
            wait = 0.0
            for bucket, amount in zip(buckets, (1.0, float(tokens)), strict=True):
                if bucket is not None:
                    bucket.refill(now)
                    wait = max(wait, bucket.wait(amount))
            expected = float(max(1, math.ceil(wait))) if wait > 0 else 0.0
            if not wait > 0:
                for bucket, amount in zip(buckets, (1.0, float(tokens)), strict=True):
                    if bucket is not None:
                        bucket.level -= min(amount, bucket.capacity)
            assert limiter.admit(now, tokens) == expected
            assert [b.level for b in (limiter.requests, limiter.tokens) if b is not None] == [
                b.level for b in buckets if b is not None]


# ------------------------------------------------- sandboxes, model slots
def test_capacity_only_delays_tasks_and_is_never_exceeded():
    """With 8 sandboxes and 3 model slots against about 20 tasks' worth of
    load, tasks queue for both (the peaks reach the limits, never pass them)
    and every task does the same work as with unlimited capacity."""
    _, free, _ = simulate([ONE_TENANT])
    _, tight, _ = simulate([ONE_TENANT, "des.capacity={sandboxes: 8, model_slots: 3}"])
    series = tight.series
    assert series["busy_sandboxes"].peak == 8 and series["busy_model_slots"].peak == 3
    assert max(series["busy_sandboxes"].values) <= 8
    assert max(series["busy_model_slots"].values) <= 3
    assert sum(w > 0 for w in tight.sandbox_wait_s) > 10
    assert sum(r.model_wait_s > 0 for r in tight.records) > 10
    assert all(r.queue_s == pytest.approx(w, abs=1e-9)
               for r, w in zip(tight.records, tight.sandbox_wait_s, strict=True))
    assert [work(r) for r in tight.records] == [work(r) for r in free.records]
    # a model call's wait for a slot is active time: the harness saw it
    assert sum(r.active_s for r in tight.records) > sum(r.active_s for r in free.records)


def test_tenant_caps_hold_and_only_the_capped_tenant_waits():
    """Tenant a is capped at 3 tasks at once and queues; tenant b, uncapped,
    never waits (sandboxes are unlimited)."""
    _, result, _ = simulate(["des.tenants=[{name: a, rate_per_hour: 300, max_concurrency: 3}, "
                             "{name: b, rate_per_hour: 300}]"], tasks=400)
    assert result.series["running:a"].peak == 3
    assert result.series["running:b"].peak > 3
    waits = {"a": [], "b": []}
    for r in result.records:
        waits[r.tenant].append(r.queue_s)
    assert sum(w > 0 for w in waits["a"]) > 20
    assert max(waits["b"]) == 0


# ------------------------------------------------------------- approvals
def test_approvals_park_tasks_outside_their_active_time():
    """Approval waits are parked time: the time series of parked tasks
    integrates to the tasks' parked time (wall - active); an active-time
    budget shorter than some tasks' wall time stops none of them for the
    wait; no task's active time passes its budget."""
    budget = 400.0
    _, result, _ = simulate([ONE_TENANT, "harness.approval_required=[external]",
                             "harness.approval_timeout_s=100000",
                             f"harness.budgets.active_s={budget}"], tasks=400)
    records = result.records
    parked = [r.wall_s - r.active_s for r in records]
    assert result.series["parked"].integral(result.horizon_s) == pytest.approx(sum(parked))
    assert sum(p > 0 for p in parked) > 100
    assert all(r.active_s <= budget for r in records)
    assert any(r.wall_s > budget and r.outcome == "succeeded" for r in records)


def test_approval_timeouts_cancel_the_task():
    """A human who does not answer within the approval timeout ends the task
    as cancelled:approval_timeout, after waiting the whole timeout."""
    timeout = 200.0
    _, result, _ = simulate([ONE_TENANT, "harness.approval_required=[external]",
                             f"harness.approval_timeout_s={timeout}"], tasks=400)
    timed_out = [r for r in result.records if r.outcome == "cancelled:approval_timeout"]
    assert len(timed_out) > 10
    assert all(r.wall_s - r.active_s >= timeout - 1e-9 for r in timed_out)


# -------------------------------------------------------- operator controls
PAUSE_AT, RESUME_AT = 1000.0, 1600.0


def test_pause_parks_everything_and_resume_loses_nothing():
    """Paused at 1,000 s and resumed at 1,600 s: every task still in the
    system is parked at its next step boundary (by 1,599 s all of them are,
    and no model call is in flight); after the resume every task ends exactly
    once, doing the same work as without the pause; tasks caught by the
    pause end later, and their wall time includes the pause (parked, not
    active)."""
    _, free, _ = simulate([ONE_TENANT], tasks=400)
    _, paused, _ = simulate([ONE_TENANT, f"des.operations=[{{at_s: {PAUSE_AT}, action: pause}},"
                                         f" {{at_s: {RESUME_AT}, action: resume}}]"], tasks=400)
    series = paused.series
    before = RESUME_AT - 1
    assert value_at(series["tasks_in_system"], before) > 10
    assert value_at(series["parked"], before) == value_at(series["tasks_in_system"], before)
    assert value_at(series["busy_model_slots"], before) == 0
    assert [work(r) for r in paused.records] == [work(r) for r in free.records]
    caught = [(p, f) for p, f in zip(paused.records, free.records, strict=True)
              if f.arrival_s < RESUME_AT and f.end_s > PAUSE_AT]
    assert len(caught) > 10
    assert all(p.end_s >= RESUME_AT and p.active_s == pytest.approx(f.active_s)
               for p, f in caught)
    assert all(p.wall_s - p.active_s > 0 for p, _ in caught)


def test_pausing_one_tenant_leaves_the_others_alone():
    """Pausing tenant:b parks only b's tasks; a's tasks run exactly as they
    would without the pause (capacity is unlimited, so nothing couples them)."""
    tenants = "des.tenants=[{name: a, rate_per_hour: 300}, {name: b, rate_per_hour: 300}]"
    _, free, _ = simulate([tenants], tasks=400)
    _, paused, _ = simulate([tenants, "des.operations=[{at_s: 1000, action: pause, scope: "
                                      "'tenant:b'}, {at_s: 3000, action: resume, scope: "
                                      "'tenant:b'}]"], tasks=400)
    for p, f in zip(paused.records, free.records, strict=True):
        assert work(p) == work(f)
        if p.tenant == "a":
            assert (p.start_s, p.end_s) == (f.start_s, f.end_s)
    assert any(p.end_s > f.end_s for p, f in zip(paused.records, free.records, strict=True)
               if p.tenant == "b")


def test_cancel_aborts_in_flight_calls_and_spends_nothing_more():
    """Cancelling everything at 1,000 s ends every task then in the system
    as cancelled:external_signal at that instant (in-flight model calls are
    aborted: no call is in flight right after), with no more steps, tokens or
    spend than the same task had without the cancel; tasks arriving later run
    as if nothing happened."""
    at = 1000.0
    _, free, _ = simulate([ONE_TENANT], tasks=300)
    _, cut, _ = simulate([ONE_TENANT, f"des.operations=[{{at_s: {at}, action: cancel}}]"],
                         tasks=300)
    assert value_at(cut.series["busy_model_slots"], at) == 0
    assert value_at(cut.series["tasks_in_system"], at) == 0
    alive = [(c, f) for c, f in zip(cut.records, free.records, strict=True)
             if f.arrival_s <= at < f.end_s]
    assert len(alive) > 10
    for c, f in alive:
        assert c.outcome == "cancelled:external_signal" and c.end_s == at
        assert c.steps <= f.steps and c.prompt_tokens <= f.prompt_tokens
        assert c.cost_usd <= f.cost_usd
    assert sum(c.cost_usd < f.cost_usd for c, f in alive) > len(alive) / 2
    for c, f in zip(cut.records, free.records, strict=True):
        if f.arrival_s > at:
            assert work(c) == work(f) and c.end_s == f.end_s


def test_cancel_of_one_tenant_spares_the_other():
    """A cancel scoped to tenant:a cancels only a's tasks."""
    tenants = "des.tenants=[{name: a, rate_per_hour: 300}, {name: b, rate_per_hour: 300}]"
    _, cut, _ = simulate([tenants, "des.operations=[{at_s: 1000, action: cancel, scope: "
                                   "'tenant:a'}]"])
    by = Counter((r.tenant, r.outcome == "cancelled:external_signal") for r in cut.records)
    assert by[("a", True)] > 5 and by[("b", True)] == 0


def test_operations_that_would_park_forever_are_refused():
    """A pause never resumed, or an unknown scope, is bad input."""
    with pytest.raises(InputError, match="never resumed"):
        load_scenario(BOUNDED, ["engine=des", "des.operations=[{at_s: 5, action: pause}]"])
    with pytest.raises(InputError, match="unknown scope"):
        load_scenario(BOUNDED, ["engine=des",
                                "des.operations=[{at_s: 5, action: cancel, scope: 'tenant:x'}]"])


# ---------------------------------------------------------------- humans
def test_resumption_extends_budgets_and_some_stopped_runs_then_succeed():
    """With a 15-step budget many runs stop (budget_exhausted:steps,
    needs_human); humans resume every one once with budgets doubled: some
    then succeed, none runs past 30 steps, and tasks that were not stopped
    are untouched."""
    base = [ONE_TENANT, "harness.budgets.steps=15"]
    _, plain, _ = simulate(base, tasks=400)
    _, resumed, _ = simulate([*base, "des.resume={share: 1.0, delay: {median_s: 600, sigma: 0.5},"
                                     " budget_factor: 2, max_times: 1}"], tasks=400)
    stopped = [(r, p) for r, p in zip(resumed.records, plain.records, strict=True)
               if p.state in STOPPED]
    assert len(stopped) > 30
    assert all(r.resumptions == 1 for r, _ in stopped)
    assert all(r.steps <= 30 for r in resumed.records)
    assert sum(r.outcome == "succeeded" and r.steps > 15 for r, _ in stopped) > 10
    for r, p in zip(resumed.records, plain.records, strict=True):
        if p.state not in STOPPED:
            assert work(r) == work(p) and r.resumptions == 0
    parked = [r.wall_s - r.active_s for r, _ in stopped]
    assert min(parked) > 0  # the wait for a human is parked time


def test_the_share_of_stopped_runs_resumed_matches_the_setting():
    """With ``resume.share`` 0.4, the share of stopped runs resumed is 0.4
    within sampling error (binomial, four standard errors)."""
    base = [ONE_TENANT, "harness.budgets.steps=12"]
    _, plain, _ = simulate(base, tasks=600)
    _, resumed, _ = simulate([*base, "des.resume={share: 0.4, max_times: 1}"], tasks=600)
    stopped = [r for r, p in zip(resumed.records, plain.records, strict=True)
               if p.state in STOPPED]
    n = len(stopped)
    share = sum(r.resumptions for r in stopped) / n
    assert n > 100
    assert abs(share - 0.4) <= 4 * math.sqrt(0.4 * 0.6 / n)


# ------------------------------------------------------------------ time
def test_time_never_goes_backwards():
    """Series refuse a change dated before the previous one; a run's series
    and task times are ordered (checked for every run by ``simulate``)."""
    s = Series("x")
    s.add(1.0, 1)
    s.add(1.0, 1)
    with pytest.raises(ValueError, match="backwards"):
        s.add(0.5, -1)
    _, result, _ = simulate([ONE_TENANT, "des.capacity={sandboxes: 5}"], tasks=200)
    for series in result.series.values():
        assert all(np.diff(series.times) > 0)  # one point per instant, increasing


# -------------------------------------------------------------- arrivals
def write_csv(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_arrivals_are_read_sorted_and_run(tmp_path):
    """A CSV trace gives the arrival times (sorted), tenants and agent types;
    ``tasks`` keeps the earliest rows; the scenario resolves a relative path
    from its own folder, and the DES engine runs it."""
    write_csv(tmp_path / "trace.csv", "arrival_s,tenant,agent_type\n30,b,\n0,a,x\n10.5,,\n")
    (tmp_path / "s.yaml").write_text(
        "engine: des\ntasks: 3\ndes:\n  arrivals: {kind: csv, path: trace.csv}\n"
        "  tenants: [{name: a, agent_type: coder}, {name: b}]\n", encoding="utf-8")
    scenario = load_scenario(tmp_path / "s.yaml")
    arrivals = arrival_schedule(scenario.des, 3, 0)
    assert [(a.index, a.time_s, a.tenant, a.agent_type) for a in arrivals] == [
        (0, 0.0, "a", "x"), (1, 10.5, "a", "coder"), (2, 30.0, "b", "agent")]
    assert [a.time_s for a in arrival_schedule(scenario.des, 2, 0)] == [0.0, 10.5]
    _, result, _ = simulate([], tasks=3, path=str(tmp_path / "s.yaml"))
    assert [r.arrival_s for r in result.records] == [0.0, 10.5, 30.0]


def test_a_csv_a_spreadsheet_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Excel's "CSV UTF-8" opens with a byte-order mark; it was read as part
    of the first column's name, so arrival_s was "missing"."""
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffarrival_s,tenant\r\n5,a\r\n1.5,a\r\n".encode())
    scenario = load_scenario(BOUNDED, ["engine=des", "tasks=2",
                                       f"des.arrivals={{kind: csv, path: {path}}}",
                                       "des.tenants=[{name: a}]"])
    assert [a.time_s for a in arrival_schedule(scenario.des, 2, 0)] == [1.5, 5.0]


@pytest.mark.parametrize(("text", "message"), [
    ("arrival_s\n1\nsoon\n", "line 3: arrival_s 'soon' is not a number"),
    ("arrival_s\n-4\n", "line 2: arrival_s must be >= 0"),
    ("arrival_s,tenant\n1,zed\n", "line 2: unknown tenant 'zed'"),
    ("time\n1\n", "needs a column named arrival_s (columns: 'time')"),
])
def test_a_bad_csv_is_input_error_naming_file_and_line(tmp_path, text, message):
    """Each kind of bad row is an InputError naming the file and the line,
    when the scenario loads (the arrivals are read before anything runs)."""
    path = write_csv(tmp_path / "bad.csv", text)
    with pytest.raises(InputError) as caught:
        load_scenario(BOUNDED, ["engine=des", f"des.arrivals={{kind: csv, path: {path}}}"])
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_an_unreadable_csv_is_input_error_at_load_and_in_the_engine(tmp_path):
    """An arrivals file that does not exist, is a folder or is a symlink loop
    is an InputError at des.arrivals.path when the scenario loads (before
    anything runs), and an InputError too if it goes missing before the
    engine reads it."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for name, message in (("nope.csv", "not found"), ("folder", "not a file"),
                          ("loop1", "cannot read")):
        path = tmp_path / name
        with pytest.raises(InputError, match=message) as caught:
            load_scenario(BOUNDED, ["engine=des", f"des.arrivals={{kind: csv, path: {path}}}"])
        assert caught.value.path == "des.arrivals.path"
    good = tmp_path / "arrivals.csv"
    good.write_text("arrival_s\n0\n", encoding="utf-8")
    scenario = load_scenario(BOUNDED, ["engine=des", "tasks=1",
                                       f"des.arrivals={{kind: csv, path: {good}}}"])
    for name in ("nope.csv", "folder", "loop1"):
        arrivals = scenario.des.arrivals.model_copy(update={"path": str(tmp_path / name)})
        des = scenario.des.model_copy(update={"arrivals": arrivals})
        with pytest.raises(InputError) as caught:
            arrival_schedule(des, 10, 0)
        assert caught.value.path == "des.arrivals.path"


def test_poisson_arrivals_have_exponential_gaps_and_poisson_counts():
    """Two tenants at 300 and 900 tasks/hour: each tenant's gaps fit its
    exponential distribution and the merged gaps the exponential at the
    summed rate (KS tests); counts per minute have variance equal to their
    mean (index of dispersion, chi-square); tenant a's share is 1/4 within
    four standard errors."""
    n = 6000
    scenario = load_scenario(BOUNDED, ["engine=des", "des.tenants=[{name: a, rate_per_hour: 300},"
                                                     " {name: b, rate_per_hour: 900}]"])
    arrivals = arrival_schedule(scenario.des, n, 7)
    times = np.array([a.time_s for a in arrivals])
    assert np.all(np.diff(times) >= 0) and [a.index for a in arrivals] == list(range(n))
    total = 1200 / 3600
    assert stats.kstest(np.diff(times, prepend=0.0), "expon", args=(0, 1 / total)).pvalue > ALPHA
    for name, rate in (("a", 300 / 3600), ("b", 900 / 3600)):
        own = np.array([a.time_s for a in arrivals if a.tenant == name])
        assert stats.kstest(np.diff(own, prepend=0.0), "expon",
                            args=(0, 1 / rate)).pvalue > ALPHA
    counts = np.bincount((times[times < times[-1] // 60 * 60] // 60).astype(int))
    k = len(counts)
    dispersion = (k - 1) * counts.var(ddof=1) / counts.mean()
    p = 2 * min(stats.chi2.cdf(dispersion, k - 1), stats.chi2.sf(dispersion, k - 1))
    assert p > ALPHA
    share = sum(a.tenant == "a" for a in arrivals) / n
    assert abs(share - 0.25) <= 4 * math.sqrt(0.25 * 0.75 / n)


def test_batch_arrivals_split_tenants_by_weight():
    """A batch arrives at time 0, tenants in proportion to their weights."""
    scenario = load_scenario(BOUNDED, [
        "engine=des", "des.arrivals.kind=batch",
        "des.tenants=[{name: a, weight: 1}, {name: b, weight: 3}]"])
    arrivals = arrival_schedule(scenario.des, 400, 0)
    assert {a.time_s for a in arrivals} == {0.0}
    assert Counter(a.tenant for a in arrivals) == {"a": 100, "b": 300}
