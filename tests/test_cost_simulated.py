"""Simulated cost against the closed forms of :mod:`sim.cost` and against genai-prices.

DESIGN.md "Cost": closed forms exist for deterministic runs and the simulation
must equal them exactly. A deterministic world here is one task shape (fixed
difficulty ``N``, every policy probability 0, one tool of fixed duration,
prefix ``P``, output ``O``, tool result ``R``): it runs ``N`` steps (``N - 1``
productive tool calls, then the final answer) and its history grows by
``h = O + R`` tokens per step (plus the thinking tokens when thinking is on).
Each task runs through the real harness on the direct engine, built from a
scenario mapping exactly as ``python -m sim sweep`` builds it.

Every model response and verdict the world gives is recorded (a
:class:`Recording` task), so the harness's counters and money can be checked
call by call: against :meth:`Prices.cost` for the cell's prices, and against
``genai_prices.calc_price`` for a catalogue model (genai-prices' convention:
its ``input_tokens`` include cache reads and writes, its ``output_tokens``
include reasoning tokens).

Statistical checks derive their tolerance from the sample size: a share ``p``
estimated from ``n`` independent trials lies within ``K`` binomial standard
errors.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import ClassVar

import pytest
from genai_prices import Usage as GPUsage
from genai_prices import calc_price
from hypothesis import given, settings
from hypothesis import strategies as st
from stats_helpers import within

from sim import cost
from sim.bad_input import InputError
from sim.engines import direct
from sim.engines.cell import Cell
from sim.harness.effects import ModelRequest, ModelResponse, Verdict, VerifyRequest
from sim.harness.messages import Usage
from sim.harness.params import Prices
from sim.scenario.model import VerifierConfig, build_verifier, validate
from sim.sweeps.cells import CellRun, build_cell
from sim.task_record import TaskRecord
from sim.world.streams import task_streams
from sim.world.task import SimulatedTask
from sim.world.verifiers import (
    VERIFIERS,
    Check,
    Claim,
    ModelGraderVerifier,
    NoisyVerifier,
    OracleVerifier,
    run_check,
)

K = 4.5  # standard errors allowed for a share: two-sided false alarm about 7e-6
EXACT = 1e-12  # relative tolerance of "exact": float rounding of sums of products only
PRICES = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
PRICES_DATE = date(2026, 1, 15)
WHEN = datetime(2026, 1, 15, 12, tzinfo=UTC)  # an instant of PRICES_DATE, for calc_price
"""The models priced here have no time-of-day prices: every instant of the day
prices as the day does (the day's prices: :func:`sim.cost.prices.lookup_prices`)."""
FAST = settings(max_examples=40, deadline=None)

steps_st = st.integers(1, 12)
prefix_st = st.integers(1, 6_000)
output_st = st.integers(1, 2_000)
result_st = st.integers(0, 3_000)
price_st = st.floats(0, 100, allow_nan=False, allow_infinity=False)
prices_st = st.fixed_dictionaries({"input": price_st, "output": price_st,
                                   "cache_read": price_st, "cache_write": price_st,
                                   "thinking": st.none() | price_st})


# ------------------------------------------------------------------ helpers
def scenario(steps: int, prefix: int, output: int, tool_result: int, *, tool_s: float = 1.0,
             world: dict | None = None, **harness: object) -> dict:
    """A scenario mapping for the deterministic world (see the module
    docstring): one tool taking ``tool_s`` seconds, no detector, no verifier,
    explicit prices, and catalogue prices (if any) pinned to PRICES_DATE.
    ``world`` and ``harness`` entries override the defaults."""
    raw_world = {
        "difficulty": {"distribution": "fixed", "steps": steps},
        "policy": {"loop": 0.0, "transient": 0.0, "validation": 0.0, "premature": 0.0},
        "tools": [{"name": "run_shell", "timeout_s": 1e6, "definition_tokens": 0,
                   "duration": {"median_s": tool_s, "sigma": 0.0}}],
        "tokens": {"prefix": prefix, "task": 1, "output": output, "tool_result": tool_result},
    }
    raw_harness = {"model": "claude-sonnet-4-20250514", "prices": dict(PRICES),
                   "prices_date": PRICES_DATE.isoformat(), "max_output_tokens": output,
                   "detector": {"enabled": False}, "verifier": {"name": "none"}}
    for key, value in (world or {}).items():
        if isinstance(value, dict) and isinstance(raw_world.get(key), dict):
            raw_world[key] = {**raw_world[key], **value}
        else:
            raw_world[key] = value
    raw_harness.update(harness)
    return {"name": "test", "tasks": 1, "seed": 11, "harness": raw_harness, "world": raw_world}


def make_cell(raw: dict, *, allow_plugins: bool = False) -> Cell:
    """The engine's cell for a scenario mapping (validated as a file would be;
    ``allow_plugins`` for components given by import path)."""
    return build_cell(CellRun("test", validate(raw, "test", allow_plugins=allow_plugins), ()))


class Recording(SimulatedTask):
    """A simulated task that logs every answer it gives the harness:
    ``(request, ModelResponse)`` for model calls and ``(request, Verdict)``
    for verifications."""

    made: ClassVar[list[Recording]] = []

    def __init__(self, world, streams) -> None:
        super().__init__(world, streams)
        self.log: list[tuple[object, object]] = []
        Recording.made.append(self)

    def respond(self, request: ModelRequest, now: float = 0.0):
        result = super().respond(request, now)
        self.log.append((request, result))
        return result

    def verify(self, request: VerifyRequest, now: float = 0.0) -> Verdict:
        verdict = super().verify(request, now)
        self.log.append((request, verdict))
        return verdict

    # what the log holds, by kind
    def responses(self, purpose: str | None = None) -> list[tuple[ModelRequest, ModelResponse]]:
        return [(q, a) for q, a in self.log if isinstance(a, ModelResponse)
                and (purpose is None or q.purpose == purpose)]

    def verdicts(self) -> list[Verdict]:
        return [a for _, a in self.log if isinstance(a, Verdict)]

    def usages(self) -> list[Usage]:
        """Every priced call: model responses and verdicts with usage."""
        return [a.usage for _, a in self.log
                if isinstance(a, ModelResponse) or (isinstance(a, Verdict) and a.usage)]


@contextmanager
def recording():
    """Make the direct engine build :class:`Recording` tasks; yields the list
    of tasks made, in order."""
    saved = direct.SimulatedTask
    Recording.made = []
    direct.SimulatedTask = Recording
    try:
        yield Recording.made
    finally:
        direct.SimulatedTask = saved


def run(cell: Cell, index: int = 0) -> tuple[TaskRecord, Recording]:
    """Task ``index`` of ``cell`` through the direct engine, with its log."""
    with recording() as made:
        record = direct.run_task(cell, index)
    assert len(made) == 1
    return record, made[0]


def priced(usages: list[Usage], prices: Prices) -> float:
    """USD of ``usages`` at ``prices``, call by call."""
    return sum(prices.cost(u.input_tokens, u.output_tokens, u.cache_read_tokens,
                           u.cache_write_tokens, u.thinking_tokens) for u in usages)


def assert_counters_match(record: TaskRecord, task: Recording, prices: Prices) -> None:
    """The record's token counters and money are the sums over the logged calls."""
    usages = task.usages()
    assert record.input_tokens == sum(u.input_tokens for u in usages)
    assert record.output_tokens == sum(u.output_tokens for u in usages)
    assert record.cache_read_tokens == sum(u.cache_read_tokens for u in usages)
    assert record.cache_write_tokens == sum(u.cache_write_tokens for u in usages)
    assert record.thinking_tokens == sum(u.thinking_tokens for u in usages)
    assert record.cost_usd == pytest.approx(priced(usages, prices), rel=EXACT, abs=1e-15)


def gp_price(usage: Usage, model: str, ttl: str | None, when: datetime = WHEN) -> float:
    """genai-prices' price of one call (its input_tokens include cache tokens,
    its output_tokens include reasoning tokens)."""
    gp = GPUsage(input_tokens=usage.prompt_tokens, cache_read_tokens=usage.cache_read_tokens,
                 cache_write_tokens=usage.cache_write_tokens,
                 output_tokens=usage.output_tokens + usage.thinking_tokens)
    if usage.thinking_tokens:
        gp.output_reasoning_tokens = usage.thinking_tokens
    if ttl == "1h":
        gp.cache_write_1h_tokens = usage.cache_write_tokens
    return float(calc_price(gp, model, genai_request_timestamp=when).total_price)


# ------------------------------------------------------------------ closed forms
@FAST
@given(steps_st, prefix_st, output_st, result_st, prices_st)
def test_uncached_run_equals_the_closed_form(steps, prefix, output, result, prices):
    """Without caching, an N-step deterministic run sends step n a prompt of
    P + h*n tokens (h = O + R), all uncached: input(N) = N*P + h*N(N-1)/2
    prompt tokens, N*O output tokens, and costs run_cost(N, P, h, O) exactly."""
    cell = make_cell(scenario(steps, prefix, output, result, prices=prices))
    record, task = run(cell)
    h = output + result
    assert (record.outcome, record.steps) == ("succeeded", steps)
    assert [q.prompt_tokens for q, _ in task.responses()] == [prefix + h * n
                                                             for n in range(steps)]
    assert record.input_tokens == cost.input_tokens(steps, prefix, h)
    assert record.cache_read_tokens == record.cache_write_tokens == 0
    assert record.output_tokens == steps * output
    want = cost.run_cost(steps, prefix, h, output, cell.params.prices)
    assert record.cost_usd == pytest.approx(want, rel=EXACT, abs=1e-15)
    assert_counters_match(record, task, cell.params.prices)


@FAST
@given(steps_st, prefix_st, output_st, result_st, prices_st, st.sampled_from(["5m", "1h"]))
def test_cached_run_splits_reads_and_writes_as_the_closed_form(steps, prefix, output, result,
                                                               prices, ttl):
    """With prompt caching and calls well within the cache's lifetime, step 0
    writes P and step n >= 1 reads P + h*(n-1) and writes h: the cache-read
    and cache-write totals and the cost are cached_run_tokens /
    cached_run_cost exactly, and reads plus writes are input(N)."""
    cell = make_cell(scenario(steps, prefix, output, result, prices=prices, prompt_cache=ttl))
    record, _ = run(cell)
    h = output + result
    want = cost.cached_run_tokens(steps, prefix, h, output).total
    assert record.steps == steps
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_tokens,
            record.output_tokens) == (want.input, want.cache_read, want.cache_write, want.output)
    assert record.prompt_tokens == cost.input_tokens(steps, prefix, h)
    cached = cost.cached_run_cost(steps, prefix, h, output, cell.params.prices)
    assert record.cost_usd == pytest.approx(cached, rel=EXACT, abs=1e-15)


@FAST
@given(steps_st, prefix_st, output_st, result_st, prices_st)
def test_cache_outlived_by_slow_tools_is_rewritten_every_step(steps, prefix, output, result,
                                                              prices):
    """A 400 s tool call outlives a 5-minute cache: every step writes its whole
    prompt and reads nothing, the expired closed form; a 1-hour cache outlives
    the same calls and gives the append-only closed form."""
    h = output + result
    for ttl, expired in (("5m", True), ("1h", False)):
        cell = make_cell(scenario(steps, prefix, output, result, tool_s=400.0, prices=prices,
                                  prompt_cache=ttl))
        record, _ = run(cell)
        want = cost.cached_run_tokens(steps, prefix, h, output, expired=expired).total
        assert (record.input_tokens, record.cache_read_tokens,
                record.cache_write_tokens) == (want.input, want.cache_read, want.cache_write)
        cached = cost.cached_run_cost(steps, prefix, h, output, cell.params.prices,
                                      expired=expired)
        assert record.cost_usd == pytest.approx(cached, rel=EXACT, abs=1e-15)


def test_seed001_thirty_step_run_costs_3_31_uncached_77_cents_cached_4_07_expired():
    """Seed 001's 30-step run (P 12,000, h 1,500, O 600) simulated at the
    seed001 prices: $3.3075 uncached, $0.765225 with a live 5-minute cache and
    $4.066875 when every step outlives it."""
    base = scenario(30, 12_000, 600, 900, prices="seed001")
    assert run(make_cell(base))[0].cost_usd == pytest.approx(3.3075, rel=EXACT)
    cached = make_cell({**base, "harness": {**base["harness"], "prompt_cache": "5m"}})
    assert run(cached)[0].cost_usd == pytest.approx(0.765225, rel=EXACT)
    slow = scenario(30, 12_000, 600, 900, tool_s=400.0, prices="seed001", prompt_cache="5m")
    assert run(make_cell(slow))[0].cost_usd == pytest.approx(4.066875, rel=EXACT)


# ------------------------------------------------------------------ thinking
@FAST
@given(steps_st, prefix_st, output_st, result_st, st.integers(0, 3_000),
       st.integers(1, 3_000), st.none() | price_st, st.sampled_from([None, "5m"]))
def test_thinking_tokens_are_capped_priced_and_kept_in_the_history(
        steps, prefix, output, result, thinking, budget, think_price, ttl):
    """With thinking enabled (temperature 0, budget B) and a model that thinks
    T tokens, every step reports t = min(T, B) thinking tokens, priced at
    Prices.thinking (the output price when None) and kept in the history: step
    n's prompt is P + n*(O + R + t), and the run costs the closed form with
    h = O + R + t and t thinking tokens per step."""
    prices = {**PRICES, "thinking": think_price}
    cell = make_cell(scenario(
        steps, prefix, output, result, world={"tokens": {"thinking": thinking}},
        prices=prices, prompt_cache=ttl, temperature=0.0, max_output_tokens=output + budget,
        thinking={"enabled": True, "budget_tokens": budget}))
    record, task = run(cell)
    t = min(thinking, budget)
    h = output + result + t
    steps_log = task.responses("step")
    assert [a.usage.thinking_tokens for _, a in steps_log] == [t] * steps
    assert [q.prompt_tokens for q, _ in steps_log] == [prefix + h * n for n in range(steps)]
    assert record.thinking_tokens == steps * t
    assert cell.params.prices.thinking == think_price
    if ttl is None:
        want = cost.run_cost(steps, prefix, h, output, cell.params.prices, thinking=t)
    else:
        want = cost.cached_run_cost(steps, prefix, h, output, cell.params.prices, thinking=t)
    assert record.cost_usd == pytest.approx(want, rel=EXACT, abs=1e-15)
    assert_counters_match(record, task, cell.params.prices)


def test_thinking_at_the_output_price_costs_as_much_as_output():
    """Thinking billed as output (no thinking price): a run thinking T tokens a
    step costs what the same run would cost with T more output tokens a step
    and no thinking, both uncached."""
    think = scenario(6, 3_000, 400, 500, world={"tokens": {"thinking": 700}},
                     max_output_tokens=2_000, thinking={"enabled": True, "budget_tokens": 1_000})
    record, _ = run(make_cell(think))
    want = cost.run_cost(6, 3_000, 400 + 500 + 700, 400 + 700, Prices(**PRICES))
    assert record.cost_usd == pytest.approx(want, rel=EXACT)


# ------------------------------------------------------------------ catalogue
# seed 001's process plus truncations, and a model that thinks 400 tokens a step
CATALOGUE_WORLD = {"faults": {"max_tokens": 0.05}, "tokens": {"thinking": 400}}


@pytest.mark.parametrize("model", ["claude-sonnet-4-20250514", "claude-haiku-4-5"])
@pytest.mark.parametrize("ttl", [None, "5m", "1h"])
def test_catalogue_model_prices_every_call_as_genai_prices(model, ttl):
    """A scenario on a real catalogue model with its catalogue prices (pinned
    to a date) pays for every call (steps, compaction calls, retries after a
    truncation, model-grader calls) what genai_prices.calc_price charges for
    that call's usage, cache reads and writes and thinking included, within
    1e-9."""
    raw = {"name": "catalogue", "seed": 3, "world": CATALOGUE_WORLD,
           "harness": {"model": model, "prices": None, "prices_date": PRICES_DATE.isoformat(),
                       "max_output_tokens": 1_200, "prompt_cache": ttl,
                       "thinking": {"enabled": True, "budget_tokens": 500},
                       "budgets": {"steps": 40},
                       "verifier": {"name": "model_grader",
                                    "options": {"false_reject": 0.3}}}}
    cell = make_cell(raw)
    assert cell.params.prices == cost.lookup_prices(model, cache_ttl=ttl or "5m",
                                                    when=PRICES_DATE)
    kinds: set[str] = set()
    for index in range(12):
        record, task = run(cell, index)
        usages = task.usages()
        theirs = sum(gp_price(u, model, ttl) for u in usages)
        assert record.cost_usd == pytest.approx(theirs, rel=1e-9), (index, record.outcome)
        assert_counters_match(record, task, cell.params.prices)
        kinds |= {q.purpose for q, _ in task.responses()}
        kinds |= {"grader"} if task.verdicts() else set()
        kinds |= {"cache_read"} if record.cache_read_tokens else set()
        kinds |= {"thinking"} if record.thinking_tokens else set()
    assert {"step", "compaction", "grader", "thinking"} <= kinds
    assert ("cache_read" in kinds) == (ttl is not None)


def test_tiered_catalogue_model_prices_long_prompts_at_their_tier():
    """A catalogue model whose prices rise above 200,000 prompt tokens, run
    with a 400,000-token window, pays genai-prices' tier for each call."""
    raw = scenario(3, 150_000, 1_000, 60_000, prices=None, model="claude-sonnet-4-5",
                   context_window=400_000)
    record, task = run(make_cell(raw))
    theirs = sum(gp_price(u, "claude-sonnet-4-5", None) for u in task.usages())
    assert record.cost_usd == pytest.approx(theirs, rel=1e-9)


# ------------------------------------------------------------------ recovery
@pytest.mark.parametrize("ttl", [None, "5m"])
def test_max_tokens_recovery_compaction_and_retry_are_counted_and_priced(ttl):
    """With truncated responses (world.faults.max_tokens > 0): each truncated
    step bills max_output_tokens of output, is followed by a compaction call
    (when there is history to compact) and a new step (the retry); the
    compaction calls are counted in state.compactions, and the run's money and
    token counters are the sums over every call the world answered."""
    cell = make_cell(scenario(12, 3_000, 200, 800, world={"faults": {"max_tokens": 0.25}},
                              max_output_tokens=1_000, prompt_cache=ttl))
    compactions = truncations = 0
    for index in range(40):
        record, task = run(cell, index)
        steps = task.responses("step")
        summaries = task.responses("compaction")
        assert record.steps == len(steps)
        assert record.compactions == len(summaries)
        for i, (_, answer) in enumerate(steps):
            if answer.stop_reason == "max_tokens":
                truncations += 1
                assert answer.usage.output_tokens == 1_000
                assert i + 1 < len(steps), "a truncated step is retried"
        for _, answer in summaries:
            assert answer.usage.cache_read_tokens == answer.usage.cache_write_tokens == 0
        assert_counters_match(record, task, cell.params.prices)
        compactions += record.compactions
    assert truncations > 0 and compactions > 0


@pytest.mark.parametrize("ttl", [None, "5m"])
def test_emergency_compaction_is_counted_and_priced(ttl):
    """A run that outgrows a small context window is compacted to half the
    window (emergency compaction) and continues to success; the compaction
    calls are counted and priced, and after a compaction the cache keeps only
    the stable prefix."""
    cell = make_cell(scenario(20, 2_000, 300, 700, context_window=8_000, prompt_cache=ttl))
    record, task = run(cell)
    assert record.outcome == "succeeded" and record.steps == 20
    assert record.compactions == len(task.responses("compaction")) > 0
    assert_counters_match(record, task, cell.params.prices)
    if ttl:
        stable = cell.world.stable_prefix_tokens
        after = [a.usage.cache_read_tokens for (q, a), (q0, _) in
                 zip(task.responses()[1:], task.responses(), strict=False)
                 if q.purpose == "step" and q0.purpose == "compaction"]
        assert after and all(read == stable for read in after)


# ------------------------------------------------------------------ model grader
def grader_scenario(steps: int = 6, **options: float) -> dict:
    return scenario(steps, 3_000, 400, 600, world={"grader": {"prompt": 2_500, "output": 120}},
                    verifier={"name": "model_grader", "options": options})


@pytest.mark.parametrize("ttl", [None, "5m"])
def test_grader_call_is_counted_and_priced_on_top_of_the_run(ttl):
    """A model grader that accepts the (correct) claim makes one uncached call
    of grader.prompt + answer prompt tokens and grader.output output tokens:
    the run costs the closed form plus that call exactly, its tokens are in the
    counters, and its latency is in the active time."""
    raw = grader_scenario(false_reject=0.0, false_accept=0.0)
    raw["harness"]["prompt_cache"] = ttl
    cell = make_cell(raw)
    record, task = run(cell)
    (verdict,) = task.verdicts()
    assert verdict.passed and record.outcome == "succeeded" and record.steps == 6
    assert verdict.usage == Usage(input_tokens=2_500 + 400, output_tokens=120)
    prices = cell.params.prices
    closed = (cost.cached_run_cost if ttl else cost.run_cost)(6, 3_000, 1_000, 400, prices)
    grader = prices.cost(2_900, 120)
    assert record.cost_usd == pytest.approx(closed + grader, rel=EXACT)
    assert record.prompt_tokens == cost.input_tokens(6, 3_000, 1_000) + 2_900
    assert_counters_match(record, task, prices)

    oracle_raw = scenario(6, 3_000, 400, 600, prompt_cache=ttl, verifier={"name": "oracle"})
    oracle, _ = run(make_cell(oracle_raw))
    world = cell.world
    assert verdict.duration_s == pytest.approx(world.ttft_s + 120 * world.decode_s_per_token)
    assert record.active_s - oracle.active_s == pytest.approx(verdict.duration_s)


def test_every_grader_call_is_priced_including_rejections():
    """A grader that rejects correct claims half the time: the run makes one
    grader call per claim (rejections plus the final acceptance), and money
    equals the step calls plus the grader calls, call by call."""
    cell = make_cell(grader_scenario(false_reject=0.5, false_accept=0.0))
    rejections = 0
    for index in range(30):
        record, task = run(cell, index)
        verdicts = task.verdicts()
        assert len(verdicts) == record.verifier_rejections + 1 and verdicts[-1].passed
        assert all(v.usage == Usage(2_900, 120) for v in verdicts)
        steps = [a.usage for _, a in task.responses()]
        grader = [v.usage for v in verdicts]
        assert record.cost_usd == pytest.approx(priced(steps, cell.params.prices)
                                                + priced(grader, cell.params.prices), rel=EXACT)
        assert_counters_match(record, task, cell.params.prices)
        rejections += record.verifier_rejections
    assert rejections > 0


@pytest.mark.parametrize(("false_accept", "false_reject"), [(0.2, 0.3), (0.05, 0.0)])
def test_grader_error_rates_hold(false_accept, false_reject):
    """The grader rejects correct claims with false_reject and accepts wrong
    ones with false_accept: directly (20,000 draws each) and through the
    harness, where the shares are taken over all grader calls of many runs
    (each call an independent trial), within K standard errors."""
    grader = ModelGraderVerifier(false_accept=false_accept, false_reject=false_reject)
    draws = task_streams(5, 0)[2]
    n = 20_000
    rejected_right = sum(not grader.check(True, draws) for _ in range(n))
    assert within(rejected_right / n, false_reject, n, z=K)
    accepted_wrong = sum(grader.check(False, draws) for _ in range(n))
    assert within(accepted_wrong / n, false_accept, n, z=K)

    right = make_cell(grader_scenario(3, false_accept=false_accept, false_reject=false_reject))
    calls = rejected = 0
    for index in range(1_500):
        record, task = run(right, index)
        calls += len(task.verdicts())
        rejected += record.verifier_rejections
    assert within(rejected / calls, false_reject, calls, z=K)

    wrong_raw = grader_scenario(10**6, false_accept=false_accept, false_reject=false_reject)
    wrong_raw["world"]["policy"] = {**wrong_raw["world"]["policy"], "premature": 1.0,
                                    "premature_after": 0.0}
    wrong_raw["harness"]["budgets"] = {"steps": 40}
    wrong = make_cell(wrong_raw)
    calls = accepted = 0
    for index in range(400):
        record, task = run(wrong, index)
        calls += len(task.verdicts())
        accepted += record.outcome == "false_success"
        assert record.outcome in ("false_success", "budget_exhausted:steps")
    assert within(accepted / calls, false_accept, calls, z=K)


def test_grader_is_registered_and_validates_its_options():
    """``model_grader`` is a registered verifier built from its options; rates
    outside [0, 1] and unknown options are input errors naming the options."""
    assert VERIFIERS["model_grader"] is ModelGraderVerifier
    built = build_verifier(VerifierConfig(name="model_grader",
                                          options={"false_accept": 0.1, "false_reject": 0.2}))
    assert (built.false_accept, built.false_reject) == (0.1, 0.2)
    for bad in ({"false_accept": 1.5}, {"false_reject": -0.1}, {"rubric": 3}):
        with pytest.raises(InputError, match="cannot build model_grader"):
            build_verifier(VerifierConfig(name="model_grader", options=bad))


def test_free_verifiers_report_no_usage_and_no_duration():
    """The oracle, the noisy verifier and a custom verifier with only
    ``check`` cost nothing through run_check: no usage, zero duration."""
    world = make_cell(scenario(2, 100, 10, 10)).world
    draws = task_streams(1, 0)[2]
    for verifier in (OracleVerifier(), NoisyVerifier(0.5, 0.5), OnlyCheck()):
        check = run_check(verifier, Claim(True, "done", 10, 1), draws, world)
        assert check.usage is None and check.duration_s == 0.0


class OnlyCheck:
    """A user's verifier by import path with only the basic protocol."""

    def check(self, correct: bool, draws) -> bool:
        return correct


class FlatFee:
    """A user's verifier by import path that reports the usage of its check."""

    def __init__(self, prompt: int = 1_000) -> None:
        self.prompt = prompt

    def check(self, correct: bool, draws) -> bool:
        return correct

    def assess(self, claim: Claim, draws, world) -> Check:
        return Check(claim.correct, Usage(self.prompt + claim.answer_tokens, 50), 2.0)


@pytest.mark.parametrize("name", ["test_cost_simulated:OnlyCheck", "test_cost_simulated:FlatFee"])
def test_custom_verifiers_by_import_path_work_with_or_without_usage(name):
    """A custom verifier named by import path works with only ``check`` (free)
    or with ``assess`` (its usage priced, its duration in the active time)."""
    cell = make_cell(scenario(4, 2_000, 300, 300, verifier={"name": name, "options": {}}),
                     allow_plugins=True)
    record, task = run(cell)
    assert record.outcome == "succeeded"
    closed = cost.run_cost(4, 2_000, 600, 300, cell.params.prices)
    (verdict,) = task.verdicts()
    extra = 0.0 if verdict.usage is None else cell.params.prices.cost(1_300, 50)
    assert (verdict.usage is None) == name.endswith("OnlyCheck")
    assert record.cost_usd == pytest.approx(closed + extra, rel=EXACT)
