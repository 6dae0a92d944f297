"""The stochastic world against theory: samplers, streams, the model policy,
tools and verifiers.

Every statistical check derives its tolerance from the sample size (never a
golden number from one seed): a share ``p`` estimated from ``n`` independent
trials must lie within ``K`` binomial standard errors ``sqrt(p (1 - p) / n)``;
a sample from a continuous law must pass a KS test, and a discrete one a
chi-square test and the DKW bound, at ``ALPHA``. The seeds only make a run
reproducible; any seed must pass (the false-alarm rate per check is below
``ALPHA``).

The world is driven directly: :class:`~sim.world.task.SimulatedTask` answers
hand-built harness effects (:mod:`sim.harness.effects`), and each trial's kind
of call is read from what the world does (a tool result that makes progress, a
tool result that makes none, a transient or a validation error, a claim of
success), not from its internals.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy import stats
from stats_helpers import within

from sim.engines.direct import run_task
from sim.harness.detector import canonical_call
from sim.harness.effects import ModelRequest, ToolError, ToolRequest, ToolResult, VerifyRequest
from sim.harness.messages import TextBlock, ToolResultBlock, ToolUseBlock, make_message
from sim.scenario.model import Scenario
from sim.sweeps.cells import CellRun, build_cell
from sim.world.difficulty import continuous_mean, need_cdf, sample_need
from sim.world.params import (
    DurationParams,
    FixedDifficulty,
    LognormalDifficulty,
    PolicyParams,
    ToolParams,
    WorldParams,
)
from sim.world.streams import CONCERNS, Draws, StreamPool, task_states, task_streams
from sim.world.task import SimulatedTask
from sim.world.verifiers import NoisyVerifier, OracleVerifier
from sim.world.world import World

ALPHA = 1e-3  # false-alarm rate of each distribution test
K = 4.5  # standard errors allowed for a share: two-sided false alarm about 7e-6
NEVER = 1e9  # a timeout (seconds) no simulated tool reaches
ENDLESS = 10**9  # productive steps of a task that never completes


# ------------------------------------------------------------------ helpers
def make_world(tools: tuple[ToolParams, ...] | None = None, need: int = ENDLESS,
               retry_success: float = 0.9, verifier=None, **policy: float) -> World:
    """A world whose tasks need ``need`` productive steps (fixed) and whose
    model only does what the test asks: the probabilities of loops, transient
    and validation errors and premature claims are 0 unless given. Tools never
    time out unless given."""
    tools = tools or (ToolParams(name="read_file", timeout_s=NEVER),
                      ToolParams(name="run_shell", timeout_s=NEVER))
    policy = {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0, **policy}
    params = WorldParams(difficulty=FixedDifficulty(steps=need), policy=PolicyParams(**policy),
                         tools=tools, retry_success=retry_success)
    return World(params, verifier)


def request(nudged: bool = False) -> ModelRequest:
    """A step request whose last message is a tool result, followed by the
    harness's nudge when ``nudged`` (what the loop sends after a detection)."""
    blocks = [ToolResultBlock("toolu_0", "ok", tokens=10)]
    if nudged:
        blocks.append(TextBlock("You have repeated the same call; change approach.", 12,
                                origin="nudge"))
    return ModelRequest("model", [make_message("user", blocks)], 12_000, 600)


def only_call(task: SimulatedTask, nudged: bool = False) -> ToolUseBlock:
    """The one tool call the model answers with."""
    response = task.respond(request(nudged))
    (block,) = [b for b in response.content if b.type != "thinking"]
    assert block.type == "tool_use", response
    return block


def classify(task: SimulatedTask) -> str:
    """What the model's next call turns out to be, judged by its effect."""
    response = task.respond(request())
    block = response.content[-1]
    if block.type == "text":
        assert response.stop_reason == "end_turn"
        return "premature"
    assert response.stop_reason == "tool_use"
    before = task.progress
    result = task.execute(ToolRequest(block, NEVER, attempt=0))
    if isinstance(result, ToolError):
        assert result.kind in ("transient", "validation"), result
        return result.kind
    assert isinstance(result, ToolResult)
    return "productive" if task.progress == before + 1 else "loop"


def streams(seed: int) -> tuple[Draws, ...]:
    """One task's streams, shared by many short-lived tasks as long streams."""
    return task_streams(seed, 0)


# --------------------------------------------------------------- difficulty
NEED_SPECS = {
    "seed001": LognormalDifficulty(),
    "wide": LognormalDifficulty(mu=1.2, sigma=1.1, min=1),
}


def chi_square_p(values: np.ndarray, spec: LognormalDifficulty) -> float:
    """Chi-square goodness of fit of integer draws to the exact pmf from
    ``need_cdf``: one bin per value while its expected count is at least 5,
    then one tail bin (merged into the last bin if too small)."""
    n = len(values)
    edges, expected = [], []
    k, previous = spec.min, 0.0
    while True:
        p = need_cdf(spec, k) - previous
        if n * p < 5 or n * (1 - need_cdf(spec, k)) < 5:
            break
        edges.append(k)
        expected.append(n * p)
        previous = need_cdf(spec, k)
        k += 1
    observed = [int(np.sum(values == e)) for e in edges]
    observed.append(int(np.sum(values > (edges[-1] if edges else spec.min - 1))))
    expected.append(n * (1 - previous))
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("name", sorted(NEED_SPECS))
def test_need_sampler_matches_its_exact_cdf(name):
    """20,000 needs fit ``need_cdf``: chi-square p above ALPHA, and the
    empirical CDF within the DKW bound ``sqrt(ln(2/ALPHA) / 2n)`` at every
    value. Seed 001's spec is drawn as the engines draw it (task i's own
    difficulty stream); the other from one long stream."""
    spec = NEED_SPECS[name]
    n = 20_000
    values = np.empty(n, dtype=np.int64)
    if name == "seed001":
        pool = StreamPool()
        for i in range(n):
            task = pool.acquire(2024, i)
            values[i] = sample_need(spec, task[0])
            pool.release(task)
    else:
        draws = streams(2025)[0]
        for i in range(n):
            values[i] = sample_need(spec, draws)
    assert values.min() >= spec.min
    assert chi_square_p(values, spec) > ALPHA
    bound = math.sqrt(math.log(2 / ALPHA) / (2 * n))
    for k in range(spec.min, int(values.max()) + 1):
        assert abs(np.mean(values <= k) - need_cdf(spec, k)) <= bound, k


def test_need_cdf_is_a_cdf():
    """need_cdf is 0 below the floor, non-decreasing, and tends to 1; the
    floor value holds all the mass below it (P(need = min) = P(round(X) <= min))."""
    spec = LognormalDifficulty()
    assert need_cdf(spec, spec.min - 1) == 0.0
    values = [need_cdf(spec, k) for k in range(spec.min, 2_000)]
    assert all(a <= b for a, b in itertools.pairwise(values))
    assert values[-1] == pytest.approx(1.0, abs=1e-9)
    z = (math.log(spec.min + 0.5) - spec.mu) / spec.sigma
    assert need_cdf(spec, spec.min) == pytest.approx(stats.norm.cdf(z), rel=1e-12)


def test_continuous_mean_is_the_lognormal_mean():
    """continuous_mean agrees with the sample mean of exp(mu + sigma Z) within
    K standard errors (the lognormal's variance is known)."""
    spec = LognormalDifficulty(mu=1.5, sigma=0.4)
    z = np.random.default_rng(3).standard_normal(50_000)
    sample = np.exp(spec.mu + spec.sigma * z)
    sd = math.sqrt((math.exp(spec.sigma ** 2) - 1) * math.exp(2 * spec.mu + spec.sigma ** 2))
    assert abs(sample.mean() - continuous_mean(spec)) <= K * sd / math.sqrt(len(z))


def test_fixed_difficulty_is_exact_and_draws_nothing():
    """A fixed difficulty always needs ``steps`` and leaves the stream untouched."""
    spec = FixedDifficulty(steps=17)
    used, fresh = task_streams(5, 1)[0], task_streams(5, 1)[0]
    assert {sample_need(spec, used) for _ in range(100)} == {17}
    assert need_cdf(spec, 16) == 0.0 and need_cdf(spec, 17) == 1.0
    assert used.normal() == fresh.normal()


# ------------------------------------------------------------------ streams
def sample(draws: Draws, n: int = 100) -> list[float]:
    return [draws.uniform() for _ in range(n)] + [draws.normal() for _ in range(n)]


def test_same_seed_and_task_give_identical_draws():
    """task_streams(seed, task) is a pure function of (seed, task): every
    concern's uniform and normal draws repeat exactly."""
    a, b = task_streams(7, 42), task_streams(7, 42)
    for x, y in zip(a, b, strict=True):
        assert sample(x, 300) == sample(y, 300)


def test_pooled_streams_restart_exactly():
    """A StreamPool hands back reused generators positioned afresh, even after
    a partly consumed block: the draws equal those of unpooled streams."""
    pool = StreamPool()
    first = pool.acquire(7, 3)
    for draws in first:
        draws.uniform()
        draws.normal()
    pool.release(first)
    again = pool.acquire(7, 3)
    assert again is first  # really reused
    assert [sample(d) for d in again] == [sample(d) for d in task_streams(7, 3)]
    pool.release(again)
    other = pool.acquire(7, 4)
    assert [sample(d) for d in other] == [sample(d) for d in task_streams(7, 4)]


def test_tasks_concerns_and_seeds_get_different_streams():
    """Different tasks, different concerns of one task and different seeds
    start with different draws; every concern has its own state."""
    firsts = {(seed, task, k): draws.uniform()
              for seed in (0, 1) for task in range(200)
              for k, draws in enumerate(task_streams(seed, task))}
    assert len(set(firsts.values())) == len(firsts)
    assert len(task_streams(0, 0)) == len(set(task_states(0, 0))) == len(CONCERNS)


def test_streams_are_uniform_normal_and_uncorrelated():
    """One stream's uniforms pass a KS test against U(0, 1) and its normals
    against N(0, 1); the concerns of a task and neighbouring tasks are
    uncorrelated (|r| within K / sqrt(n))."""
    n = 5_000
    columns = []
    for task in (0, 1):
        for draws in task_streams(11, task):
            columns.append([draws.uniform() for _ in range(n)])
    first = task_streams(11, 0)[1]
    assert stats.kstest(columns[0], "uniform").pvalue > ALPHA / 2
    assert stats.kstest([first.normal() for _ in range(n)], "norm").pvalue > ALPHA / 2
    r = np.corrcoef(np.array(columns))
    off_diagonal = r[~np.eye(len(columns), dtype=bool)]
    assert np.max(np.abs(off_diagonal)) <= K / math.sqrt(n)


def test_no_global_random_state_is_touched():
    """Streams, samplers, the simulated task and whole engine runs leave
    numpy's and Python's global random states exactly as they were."""
    np_before, py_before = np.random.get_state(), random.getstate()
    task = SimulatedTask(make_world(**PolicyParams().model_dump()), task_streams(1, 1))
    for _ in range(50):
        classify(task)
    sample_need(LognormalDifficulty(), task_streams(1, 2)[0])
    cell = build_cell(CellRun("c", Scenario.model_validate(
        {"harness": {"budgets": {"steps": 30}, "verifier": {"name": "noisy", "options": {
            "false_accept": 0.1, "false_reject": 0.1}}}}), ()))
    for i in range(20):
        run_task(cell, i)
    np_after, py_after = np.random.get_state(), random.getstate()
    assert py_after == py_before
    assert np_after[0] == np_before[0] and np.array_equal(np_after[1], np_before[1])
    assert np_after[2:] == np_before[2:]


def test_task_i_is_the_same_task_in_every_cell():
    """Common random numbers: task i needs the same work whatever the harness
    (the difficulty stream does not depend on what the other concerns drew)."""
    naive = build_cell(CellRun("naive", Scenario.model_validate(
        {"seed": 3, "harness": {"detector": {"enabled": False}, "budgets": {"steps": 60}}}), ()))
    bounded = build_cell(CellRun("bounded", Scenario.model_validate(
        {"seed": 3, "harness": {"budgets": {"steps": 20}, "verifier": {"name": "oracle"}}}), ()))
    a = [run_task(naive, i) for i in range(40)]
    b = [run_task(bounded, i) for i in range(40)]
    assert [r.ground_truth for r in a] == [r.ground_truth for r in b]
    assert len({r.ground_truth for r in a}) > 1


# ------------------------------------------------------------------- policy
POLICIES = {
    "seed001": PolicyParams(),
    "custom": PolicyParams(loop=0.1, transient=0.2, validation=0.15, premature=0.05),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_call_shares_match_the_policy(name):
    """With premature claims allowed from the start, each fresh call is a
    loop, transient error, validation error, premature claim or productive call
    with the policy's probabilities (each share within K standard errors)."""
    policy = POLICIES[name]
    world = make_world(**{**policy.model_dump(), "premature_after": 0.0})
    draws = streams(100 + len(name))
    n = 20_000
    counts = dict.fromkeys(("loop", "transient", "validation", "premature", "productive"), 0)
    for _ in range(n):
        counts[classify(SimulatedTask(world, draws))] += 1
    expected = {"loop": policy.loop, "transient": policy.transient,
                "validation": policy.validation, "premature": policy.premature}
    expected["productive"] = 1 - sum(expected.values())
    for kind, p in expected.items():
        assert within(counts[kind] / n, p, n, z=K), (kind, counts[kind] / n, p)


def test_premature_claims_wait_for_half_the_work():
    """Before ``premature_after`` of the work is done no claim is made: the
    premature band becomes productive work (shares within K standard errors)."""
    policy = PolicyParams(loop=0.05, transient=0.1, validation=0.1, premature=0.2,
                          premature_after=0.5)
    world = make_world(need=1_000, **policy.model_dump())
    draws = streams(8)
    n = 10_000
    counts = {"loop": 0, "transient": 0, "validation": 0, "premature": 0, "productive": 0}
    for _ in range(n):
        counts[classify(SimulatedTask(world, draws))] += 1
    assert counts["premature"] == 0
    assert within(counts["productive"] / n, 1 - 0.05 - 0.1 - 0.1, n, z=K)


def test_completing_call_is_a_correct_final_answer():
    """When one more productive call would finish the work, the model answers
    instead, and that answer is correct (the oracle passes it)."""
    world = make_world(need=3)
    task = SimulatedTask(world, streams(9))
    for _ in range(2):
        call = only_call(task)
        assert isinstance(task.execute(ToolRequest(call, NEVER)), ToolResult)
    response = task.respond(request())
    assert response.content[-1].type == "text" and response.stop_reason == "end_turn"
    assert task.answer_correct and task.progress == 2
    assert task.verify(VerifyRequest("done", 3)).passed


def test_doom_loop_repeats_one_identical_call_until_nudged():
    """Once in a loop the model repeats one call (same name and input, so the
    same canonical key and the same observation) on every un-nudged step; a
    nudge it does not heed (escape 0) changes nothing, a heeded one (escape 1)
    ends the repetition."""
    stubborn = SimulatedTask(make_world(loop=1.0, escape_after_nudge=0.0), streams(12))
    first = only_call(stubborn)
    repeats = [only_call(stubborn, nudged=(i % 10 == 9)) for i in range(40)]
    keys = {canonical_call(c.name, c.input) for c in [first, *repeats]}
    assert len(keys) == 1
    assert len({c.id for c in [first, *repeats]}) == 41  # distinct calls, same content
    outputs = {stubborn.execute(ToolRequest(c, NEVER)).output for c in repeats}
    assert len(outputs) == 1 and stubborn.progress == 0

    heeds = SimulatedTask(make_world(loop=1.0, escape_after_nudge=1.0), streams(13))
    loop = only_call(heeds)
    assert all(only_call(heeds).input == loop.input for _ in range(10))
    after = only_call(heeds, nudged=True)
    assert (after.name, after.input) != (loop.name, loop.input)


@pytest.mark.parametrize("escape", [0.5, 0.2])
def test_share_of_loops_escaped_after_a_nudge(escape):
    """A nudged looping model leaves the loop with ``escape_after_nudge``
    (share within K standard errors over independent loops)."""
    world = make_world(loop=1.0, escape_after_nudge=escape)
    draws = streams(int(escape * 100))
    n = 10_000
    escaped = 0
    for _ in range(n):
        task = SimulatedTask(world, draws)
        loop = only_call(task)
        after = only_call(task, nudged=True)
        escaped += (after.name, after.input) != (loop.name, loop.input)
    assert within(escaped / n, escape, n, z=K)


@pytest.mark.parametrize("retry_success", [0.9, 0.6])
def test_transient_errors_fail_first_and_retries_succeed_with_retry_success(retry_success):
    """A transient call always fails on its first attempt (a 503 the harness
    may retry); a harness retry succeeds, and makes progress, with
    ``retry_success`` (share within K standard errors)."""
    world = make_world(transient=1.0, retry_success=retry_success)
    draws = streams(int(retry_success * 100))
    n = 10_000
    succeeded = 0
    for _ in range(n):
        task = SimulatedTask(world, draws)
        call = only_call(task)
        first = task.execute(ToolRequest(call, NEVER, attempt=0))
        assert isinstance(first, ToolError) and first.kind == "transient" and first.status == 503
        retry = task.execute(ToolRequest(call, NEVER, attempt=1))
        ok = isinstance(retry, ToolResult)
        assert task.progress == int(ok)
        succeeded += ok
    assert within(succeeded / n, retry_success, n, z=K)


# -------------------------------------------------------------------- tools
def test_tool_choice_and_durations_follow_the_tool_parameters():
    """Productive calls pick tools by weight (shares within K standard errors)
    and each tool's durations are lognormal with its median and sigma (KS
    test against scipy.stats.lognorm(s=sigma, scale=median))."""
    tools = (ToolParams(name="fast", weight=3.0, timeout_s=NEVER,
                        duration=DurationParams(median_s=0.4, sigma=0.5)),
             ToolParams(name="slow", weight=1.0, timeout_s=NEVER,
                        duration=DurationParams(median_s=6.0, sigma=0.9)))
    world = make_world(tools=tools)
    task = SimulatedTask(world, streams(21))
    n = 8_000
    durations: dict[str, list[float]] = {"fast": [], "slow": []}
    for _ in range(n):
        call = only_call(task)
        result = task.execute(ToolRequest(call, NEVER))
        durations[call.name].append(result.duration_s)
    assert within(len(durations["fast"]) / n, 0.75, n, z=K)
    for tool in tools:
        law = stats.lognorm(s=tool.duration.sigma, scale=tool.duration.median_s)
        assert stats.kstest(durations[tool.name], law.cdf).pvalue > ALPHA / 2, tool.name


def test_tool_choice_follows_the_weights_before_premature_claims_are_allowed():
    """The premature band falls through to productive work before
    ``premature_after``; those calls must still pick tools by weight."""
    tools = (ToolParams(name="a", timeout_s=NEVER), ToolParams(name="b", timeout_s=NEVER))
    world = make_world(tools=tools, premature=0.5, premature_after=1.0)
    draws = streams(23)
    n = 4_000
    first = sum(only_call(SimulatedTask(world, draws)).name == "a" for _ in range(n))
    assert within(first / n, 0.5, n, z=K)


def test_calls_past_the_timeout_fail_as_timeouts():
    """A call whose drawn duration exceeds the timeout is a timeout error that
    lasted exactly the timeout; the share matches the lognormal tail."""
    tool = ToolParams(name="slow", timeout_s=2.0, duration=DurationParams(median_s=1.0, sigma=1.0))
    world = make_world(tools=(tool,))
    task = SimulatedTask(world, streams(22))
    n = 10_000
    timeouts = 0
    for _ in range(n):
        result = task.execute(ToolRequest(only_call(task), tool.timeout_s))
        if isinstance(result, ToolError):
            assert result.kind == "timeout" and result.duration_s == tool.timeout_s
            timeouts += 1
        else:
            assert result.duration_s <= tool.timeout_s
    assert within(timeouts / n, stats.lognorm(s=1.0, scale=1.0).sf(2.0), n, z=K)


# ---------------------------------------------------------------- verifiers
def test_oracle_passes_exactly_the_correct_claims():
    """The oracle reads the ground truth: a premature claim (work not done) is
    rejected with the configured feedback size, a claim after the work is done
    passes."""
    assert OracleVerifier().check(True, streams(1)[2])
    assert not OracleVerifier().check(False, streams(1)[2])
    early = SimulatedTask(make_world(need=5, premature=1.0, premature_after=0.0), streams(2))
    assert early.respond(request()).content[-1].type == "text"
    verdict = early.verify(VerifyRequest("done", 1))
    assert not early.answer_correct and not verdict.passed
    assert verdict.feedback_tokens == early.world.params.tokens.verifier_feedback


@pytest.mark.parametrize("false_accept,false_reject", [(0.1, 0.25), (0.0, 0.05)])
def test_noisy_verifier_has_its_error_rates(false_accept, false_reject):
    """A noisy verifier rejects correct claims with ``false_reject`` and accepts
    wrong ones with ``false_accept`` (shares within K standard errors), also
    when asked through the simulated task."""
    noisy = NoisyVerifier(false_accept=false_accept, false_reject=false_reject)
    draws = streams(31)[2]
    n = 20_000
    rejected = sum(not noisy.check(True, draws) for _ in range(n))
    accepted = sum(noisy.check(False, draws) for _ in range(n))
    assert within(rejected / n, false_reject, n, z=K)
    assert within(accepted / n, false_accept, n, z=K)

    world = make_world(need=5, premature=1.0, premature_after=0.0, verifier=noisy)
    task = SimulatedTask(world, streams(32))
    task.respond(request())  # a wrong claim
    accepted = sum(task.verify(VerifyRequest("done", 1)).passed for _ in range(n))
    assert within(accepted / n, false_accept, n, z=K)


def test_noisy_verifier_refuses_rates_outside_0_1():
    """Error rates are probabilities."""
    with pytest.raises(ValueError, match="false_accept"):
        NoisyVerifier(false_accept=1.5)
    with pytest.raises(ValueError, match="false_reject"):
        NoisyVerifier(false_reject=-0.1)


def test_shared_call_blocks_give_the_runs_of_fresh_ones() -> None:
    """A world of fixed sizes makes its first calls' blocks once and shares
    them among runs; the runs are those of a world making every block anew,
    and running more tasks alters no shared block."""
    scenario = Scenario.model_validate({"seed": 3, "harness": {
        "budgets": {"steps": 40}, "verifier": {"name": "oracle"}}})
    shared = build_cell(CellRun("shared", scenario, ()))
    fresh = build_cell(CellRun("shared", scenario, ()))
    assert shared.world.made_calls is not None
    fresh.world.made_calls = None  # every block made per call, as before the sharing
    assert [run_task(shared, i) for i in range(40)] == [run_task(fresh, i) for i in range(40)]
    made = [b for b in shared.world.made_calls if b is not None]
    before = [(b.id, b.name, dict(b.input), b.tokens, b.type) for b in made]
    assert len(made) > 20 and all(b.tokens == shared.world.fixed_output for b in made)
    assert [run_task(shared, i) for i in range(40, 80)] == [run_task(fresh, i)
                                                           for i in range(40, 80)]
    assert [(b.id, b.name, dict(b.input), b.tokens, b.type) for b in made] == before
