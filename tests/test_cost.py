"""Cost model: closed forms against step-by-step sums, seed 001's figures, and
catalogue prices against genai-prices' own calculation."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from genai_prices import Usage, calc_price
from hypothesis import given
from hypothesis import strategies as st

from sim.bad_input import InputError
from sim.cost import (
    NAMED_PRICES,
    Tokens,
    cached_run_cost,
    cached_run_tokens,
    input_split,
    input_tokens,
    lookup_price_tiers,
    lookup_prices,
    resolve_price_tiers,
    resolve_prices,
    run_breakdown,
    run_cost,
    run_tokens,
)
from sim.harness.params import Prices

SEED = NAMED_PRICES["seed001"]
WHEN = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

steps_st = st.integers(0, 300)
prefix_st = st.integers(0, 200_000)
per_step_st = st.integers(0, 20_000)
output_st = st.integers(0, 20_000)
price_st = st.floats(0, 100, allow_nan=False)
prices_st = st.builds(Prices, input=price_st, output=price_st, cache_read=price_st,
                      cache_write=price_st, thinking=st.none() | price_st)


def simulate(steps: int, prefix: int, per_step: int, output: int, thinking: int,
             cache: str) -> list[tuple[Tokens, Tokens, Tokens]]:
    """Brute force: walk the run step by step keeping the cached length, and
    return each step's (prefix, history, generated) tokens."""
    cached = 0
    calls = []
    for n in range(steps):
        prompt = prefix + per_step * n
        if cache == "expired":
            cached = 0
        read = cached if cache != "none" else 0
        prefix_read = min(read, prefix)
        history_read = read - prefix_read
        if cache == "none":
            parts = (Tokens(input=prefix), Tokens(input=per_step * n))
        else:
            parts = (Tokens(cache_read=prefix_read, cache_write=prefix - prefix_read),
                     Tokens(cache_read=history_read, cache_write=per_step * n - history_read))
        calls.append((*parts, Tokens(output=output, thinking=thinking)))
        cached = prompt
    return calls


def total(calls: list[tuple[Tokens, Tokens, Tokens]], index: int) -> Tokens:
    out = Tokens()
    for call in calls:
        out = out + call[index]
    return out


# ------------------------------------------------------------------ closed forms


@given(steps_st, prefix_st, per_step_st)
def test_input_tokens_is_the_sum_of_every_steps_prompt(steps, prefix, per_step):
    """input(N) = N*P + h*N*(N-1)/2 equals the sum of P + h*n over steps n < N,
    split exactly into N*P prefix tokens and the rest history tokens."""
    brute = sum(prefix + per_step * n for n in range(steps))
    assert input_tokens(steps, prefix, per_step) == brute
    assert input_split(steps, prefix, per_step) == (steps * prefix, brute - steps * prefix)


@given(steps_st, prefix_st, per_step_st, output_st, st.integers(0, 5_000),
       st.sampled_from(["none", "append-only", "expired"]))
def test_run_tokens_equal_a_step_by_step_simulation(steps, prefix, per_step, output, thinking,
                                                    cache):
    """Every cache mode's closed-form token split (prefix, history, generated;
    uncached, cache read, cache write) equals a step-by-step walk of the run."""
    calls = simulate(steps, prefix, per_step, output, thinking, cache)
    if cache == "none":
        tokens = run_tokens(steps, prefix, per_step, output, thinking=thinking)
    else:
        tokens = cached_run_tokens(steps, prefix, per_step, output, thinking=thinking,
                                   expired=cache == "expired")
    assert tokens.prefix == total(calls, 0)
    assert tokens.history == total(calls, 1)
    assert tokens.generated == total(calls, 2)
    assert tokens.total.prompt == input_tokens(steps, prefix, per_step)


@given(steps_st, prefix_st, per_step_st, output_st, st.integers(0, 5_000), prices_st,
       st.sampled_from(["none", "append-only", "expired"]))
def test_run_cost_equals_the_sum_of_each_calls_cost(steps, prefix, per_step, output, thinking,
                                                    prices, cache):
    """Closed-form cost (USD) equals the sum over steps of Prices.cost of each call."""
    calls = simulate(steps, prefix, per_step, output, thinking, cache)
    brute = sum((a + b + c).cost(prices) for a, b, c in calls)
    if cache == "none":
        got = run_cost(steps, prefix, per_step, output, prices, thinking=thinking)
    else:
        got = cached_run_cost(steps, prefix, per_step, output, prices, thinking=thinking,
                              expired=cache == "expired")
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-12)
    parts = run_breakdown(steps, prefix, per_step, output, prices, thinking=thinking,
                          cache=cache)
    assert parts.prefix_usd == pytest.approx(total(calls, 0).cost(prices), rel=1e-9, abs=1e-12)
    assert parts.history_usd == pytest.approx(total(calls, 1).cost(prices), rel=1e-9,
                                              abs=1e-12)


@given(steps_st, prefix_st, per_step_st, output_st, prices_st, prices_st, prices_st,
       st.lists(st.integers(0, 3_000_000), min_size=2, max_size=2, unique=True),
       st.sampled_from(["none", "append-only", "expired"]))
def test_tiered_prices_price_each_step_at_the_tier_of_its_prompt(
        steps, prefix, per_step, output, base, tier1, tier2, starts, cache):
    """With cliff tiers, the run costs the sum over steps of each call priced at
    the tier its whole prompt P + h*n falls in."""
    lo, hi = sorted(starts)
    tiers = replace(base, tiers=((lo, tier1), (hi, tier2)))
    calls = simulate(steps, prefix, per_step, output, 0, cache)
    brute = sum((a + b + c).cost(tiers.at(a.prompt + b.prompt)) for a, b, c in calls)
    got = run_breakdown(steps, prefix, per_step, output, tiers, cache=cache).total_usd
    assert got == pytest.approx(brute, rel=1e-9, abs=1e-12)


def test_price_tiers_apply_strictly_above_their_threshold():
    """A tier starting at 200,000 applies to prompts of 200,001 tokens or more."""
    tiers = Prices(input=1, tiers=((200_000, Prices(input=2)), (300_000, Prices(input=3))))
    assert [tiers.at(n).input for n in (0, 200_000, 200_001, 300_000, 300_001)] == [1, 1, 2, 2, 3]


def test_zero_steps_cost_nothing():
    """A run of no steps sends no tokens and costs nothing in every cache mode."""
    for cache in ("none", "append-only", "expired"):
        result = run_breakdown(0, 12_000, 1_500, 600, SEED, cache=cache)
        assert result.tokens.total == Tokens()
        assert result.total_usd == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_counts_must_be_non_negative_integers(bad):
    """Negative, fractional or non-integer counts are an InputError naming the count."""
    with pytest.raises(InputError, match="steps must be a non-negative integer"):
        run_cost(bad, 12_000, 1_500, 600, SEED)
    with pytest.raises(InputError, match="per_step"):
        input_tokens(3, 12_000, bad)


def test_unknown_cache_mode_is_an_input_error():
    """A cache mode other than none, append-only or expired is an InputError."""
    with pytest.raises(InputError, match="cache must be one of"):
        run_breakdown(3, 1, 1, 1, SEED, cache="forever")  # type: ignore[arg-type]


# ------------------------------------------------------------------ seed 001


def test_seed001_thirty_step_run_reads_1012500_tokens_and_costs_3_31():
    """Seed 001: P=12,000, h=1,500, 30 steps read 1,012,500 input tokens
    (360,000 prefix + 652,500 history) and with 600 output tokens per step at
    $3/$15 per million cost $3.0375 + $0.27 = $3.3075, about $3.31."""
    assert input_tokens(30, 12_000, 1_500) == 1_012_500
    assert input_split(30, 12_000, 1_500) == (360_000, 652_500)
    result = run_breakdown(30, 12_000, 1_500, 600, Prices(input=3, output=15))
    assert result.input_usd == pytest.approx(3.0375)
    assert result.output_usd == pytest.approx(0.27)
    assert result.total_usd == pytest.approx(3.3075)
    assert f"{run_cost(30, 12_000, 1_500, 600, SEED):.2f}" == "3.31"


def test_seed001_126_step_run_costs_about_41_dollars_twelve_times_more():
    """Seed 001: a 126-step run costs about $41, twelve times the 30-step run
    for about four times the steps, and output stays under 2% of the tokens."""
    long_run = run_cost(126, 12_000, 1_500, 600, SEED)
    assert long_run == pytest.approx(41.1075)
    assert round(long_run) == 41
    assert round(long_run / run_cost(30, 12_000, 1_500, 600, SEED)) == 12
    tokens = run_tokens(126, 12_000, 1_500, 600).total
    assert tokens.output / (tokens.prompt + tokens.output) < 0.02


def test_seed001_token_budget_binds_at_about_45_steps_and_50_steps_read_2_4_million():
    """Seed 001: a 2,000,000-token budget allows 44 whole steps (the 45th would
    overshoot), while a 50-step budget allows 2,437,500 tokens."""
    fits = max(n for n in range(200) if input_tokens(n, 12_000, 1_500) <= 2_000_000)
    assert fits == 44
    assert input_tokens(50, 12_000, 1_500) == 2_437_500


def test_seed001_prompt_caching_cuts_the_thirty_step_run_to_77_cents():
    """With an append-only cached context at the seed001 set (reads at a tenth
    of input, writes at 1.25x), the 30-step run writes P + 29h = 55,500 tokens,
    reads 957,000 and costs $0.765225; an expired cache costs 1.25x input."""
    tokens = cached_run_tokens(30, 12_000, 1_500, 600).total
    assert (tokens.cache_write, tokens.cache_read, tokens.input) == (55_500, 957_000, 0)
    assert cached_run_cost(30, 12_000, 1_500, 600, SEED) == pytest.approx(0.765225)
    expired = cached_run_cost(30, 12_000, 1_500, 600, SEED, expired=True)
    assert expired == pytest.approx(1_012_500 * 3.75 / 1e6 + 0.27)


# ------------------------------------------------------------------ catalogue

MODELS = [  # (model id, provider): flat, tiered, dated, time-of-day, no cache prices, ...
    ("claude-sonnet-4-20250514", None),
    ("claude-haiku-4-5", "anthropic"),
    ("claude-opus-4-1", None),
    ("claude-sonnet-4-5", None),            # tiered above 200k, 1h cache writes
    ("claude-sonnet-4-6", None),            # tiered until 2026-03-13, flat after
    ("claude-3-5-sonnet", "google"),        # no 1h cache-write price
    ("gpt-4o", None),                       # cache reads, no cache-write price
    ("gpt-5", "openai"),
    ("gpt-5.4", None),                      # tiered above 272k
    ("gemini-2.5-pro", None),               # tiered above 200k
    ("claude-2", None),                     # no cache prices at all
    ("deepseek-chat", None),                # peak / off-peak by time of day
    ("sonar-deep-research", "perplexity"),  # reasoning tokens priced apart
    ("qwen/qwen3-coder-flash", "openrouter"),  # two tiers
]
USAGES = [  # (uncached, cache read, cache write, output, thinking) tokens of one call
    (1_000, 0, 0, 200, 0),
    (0, 150_000, 5_000, 800, 0),
    (12_000, 0, 12_000, 600, 0),
    (3_000, 190_000, 20_000, 1_000, 500),       # prompt 213,000: above 200k
    (50_000, 250_000, 10_000, 2_000, 3_000),    # prompt 310,000: above 272k
    (200_000, 0, 0, 10, 0),                     # exactly at a 200k threshold
    (20_000, 12_000, 0, 100, 4_000),
]
TIMES = [WHEN, datetime(2026, 1, 15, 20, 0, tzinfo=UTC)]


@pytest.mark.parametrize("when", TIMES, ids=["nov-noon", "jan-evening"])
@pytest.mark.parametrize("ttl", ["5m", "1h"])
@pytest.mark.parametrize(("model", "provider"), MODELS, ids=[m for m, _ in MODELS])
def test_catalogue_prices_agree_with_genai_prices_calc_price(model, provider, ttl, when):
    """For real catalogue models and mixes of uncached, cache-read, cache-write,
    output and thinking tokens, Prices.cost at lookup_prices (tier chosen by the
    whole prompt) agrees with genai_prices.calc_price's total within 1e-9."""
    for uncached, read, write, output, thinking in USAGES:
        prompt = uncached + read + write
        prices = lookup_prices(model, provider, cache_ttl=ttl, prompt_tokens=prompt, when=when)
        ours = prices.cost(uncached, output, read, write, thinking)
        usage = Usage(input_tokens=prompt, cache_read_tokens=read, cache_write_tokens=write,
                      output_tokens=output + thinking, output_reasoning_tokens=thinking)
        if ttl == "1h":
            usage.cache_write_1h_tokens = write
        theirs = calc_price(usage, model, provider_id=provider, genai_request_timestamp=when)
        assert ours == pytest.approx(float(theirs.total_price), rel=1e-9, abs=1e-15), (
            model, ttl, (uncached, read, write, output, thinking))


@pytest.mark.parametrize("cache", ["none", "append-only", "expired"])
def test_tiered_run_cost_agrees_with_genai_prices_call_by_call(cache):
    """A 140-step run on a model whose prices double above 200k prompt tokens
    costs what genai-prices charges summed call by call."""
    model, n_steps, prefix, per_step, output = "claude-sonnet-4-5", 140, 12_000, 1_500, 600
    tiers = lookup_price_tiers(model, when=WHEN)
    assert tiers.tiers and tiers.tiers[0][0] == 200_000
    calls = simulate(n_steps, prefix, per_step, output, 0, cache)
    theirs = sum(
        float(calc_price(Usage(input_tokens=a.prompt + b.prompt,
                               cache_read_tokens=a.cache_read + b.cache_read,
                               cache_write_tokens=a.cache_write + b.cache_write,
                               output_tokens=c.output),
                         model, genai_request_timestamp=WHEN).total_price)
        for a, b, c in calls)
    ours = run_breakdown(n_steps, prefix, per_step, output, tiers, cache=cache).total_usd
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_lookup_reads_cache_write_price_for_the_ttl_and_falls_back_like_genai_prices():
    """5m/1h cache-write prices come from the catalogue; a missing 1h price falls
    back to the generic cache-write price, missing cache prices to the input
    price, and a missing reasoning price leaves thinking billed as output."""
    sonnet = lookup_prices("claude-sonnet-4-0", when=WHEN)
    assert sonnet == Prices(input=3, output=15, cache_read=0.3, cache_write=3.75)
    assert lookup_prices("claude-sonnet-4-0", cache_ttl="1h", when=WHEN).cache_write == 6
    assert lookup_prices("claude-3-5-sonnet", "google", cache_ttl="1h",
                         when=WHEN).cache_write == 3.75
    gpt = lookup_prices("gpt-4o", when=WHEN)
    assert (gpt.cache_read, gpt.cache_write) == (1.25, gpt.input)
    old = lookup_prices("claude-2", when=WHEN)
    assert old.cache_read == old.cache_write == old.input
    assert lookup_prices("sonar-deep-research", "perplexity", when=WHEN).thinking == 3
    assert sonnet.thinking is None


def test_lookup_picks_the_tier_of_the_prompt_size():
    """Tiered catalogue prices: the base price up to 200,000 prompt tokens, the
    tier price above."""
    base = lookup_prices("claude-sonnet-4-5", prompt_tokens=200_000, when=WHEN)
    above = lookup_prices("claude-sonnet-4-5", prompt_tokens=200_001, when=WHEN)
    assert (base.input, above.input) == (3, 6)
    assert (base.cache_write, above.cache_write) == (3.75, 7.5)


def test_lookups_are_cached_per_model_and_time():
    """Repeated lookups for one cell return the same cached object."""
    first = lookup_price_tiers("claude-haiku-4-5", when=WHEN)
    assert lookup_price_tiers("claude-haiku-4-5", when=WHEN) is first
    assert lookup_prices("claude-haiku-4-5", when=WHEN) is first.base


def test_unknown_model_is_an_input_error_naming_it_with_close_matches():
    """A misspelt model id is an InputError that names it and suggests close ids."""
    with pytest.raises(InputError) as caught:
        lookup_prices("claude-sonet-4-5")
    message = str(caught.value)
    assert "unknown model 'claude-sonet-4-5'" in message
    assert "did you mean" in message and "claude-sonnet-4-5" in message


def test_model_listed_only_under_another_provider_names_that_provider():
    """A model genai-prices cannot place by id alone, or asked of the wrong
    provider, is an InputError naming the provider that lists it."""
    with pytest.raises(InputError, match="listed under provider perplexity"):
        lookup_prices("sonar-deep-research")
    with pytest.raises(InputError, match=r"for provider 'anthropic'.*provider openai"):
        lookup_prices("gpt-5", "anthropic")


def test_unknown_provider_and_ttl_are_input_errors():
    """An unknown provider (with a suggestion) or cache TTL is an InputError."""
    with pytest.raises(InputError, match=r"unknown provider 'openia'.*openai"):
        lookup_prices("gpt-5", "openia")
    with pytest.raises(InputError, match="cache TTL"):
        lookup_prices("gpt-5", cache_ttl="10m")


def test_model_without_token_prices_is_an_input_error():
    """An embedding model (input price only) cannot price an agent run."""
    with pytest.raises(InputError, match="no per-token input and output prices"):
        lookup_prices("text-embedding-3-small", "openai", when=WHEN)


# ------------------------------------------------------------------ resolve_prices


def test_resolve_prices_uses_the_catalogue_a_named_set_or_overrides():
    """None: catalogue prices; a name: that set; a mapping: overrides on top of
    the catalogue prices (every tier)."""
    assert resolve_prices("gpt-4o", when=WHEN) == lookup_prices("gpt-4o", when=WHEN)
    assert resolve_prices("anything", "seed001") is SEED
    cheaper = resolve_prices("claude-sonnet-4-0", {"input": 1, "thinking": 2}, when=WHEN)
    assert cheaper == Prices(input=1, output=15, cache_read=0.3, cache_write=3.75, thinking=2)
    tiers = resolve_price_tiers("claude-sonnet-4-5", {"output": 1}, when=WHEN)
    assert tiers.base.output == tiers.tiers[0][1].output == 1
    assert tiers.tiers[0][1].input == 6


def test_resolve_prices_of_unknown_model_needs_a_full_mapping():
    """An unknown model priced by a full mapping is fine (thinking defaults to
    output); a partial one is an InputError naming the model and what is missing."""
    full = {"input": 1, "output": 2, "cache_read": 0.1, "cache_write": 1.25}
    assert resolve_prices("in-house-7b", full) == Prices(**full)
    with pytest.raises(InputError, match=r"in-house-7b.*missing cache_read, cache_write"):
        resolve_prices("in-house-7b", {"input": 1, "output": 2})


@pytest.mark.parametrize(("spec", "pattern"), [
    ("seed999", "unknown price set 'seed999'"),
    ({"inptu": 1}, "unknown price field"),
    ({"input": -1}, "prices.input: must be a non-negative number"),
    ({"output": True}, "prices.output"),
    ({"output": float("nan")}, "prices.output"),
    (["input", 3], "named price set or a mapping"),
])
def test_resolve_prices_rejects_bad_specs(spec, pattern):
    """Unknown set names, unknown fields, negative, boolean or NaN prices and
    other types are InputErrors naming the field."""
    with pytest.raises(InputError, match=pattern):
        resolve_prices("claude-sonnet-4-0", spec)
