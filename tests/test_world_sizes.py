"""Per-call sizes drawn from distributions, a per-run size multiplier and a
per-run first prompt: what the world draws is what the distributions say, and
the history grows by exactly what was drawn."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from worldkit import ALPHA, QUIET, Z, simulate

from sim.world.distributions import Gamma, Lognormal

BASE = {"harness": {"prices": "seed001", "max_output_tokens": 4000,
                    "detector": {"enabled": False}},
        "world": {"difficulty": {"distribution": "fixed", "steps": 6}, "policy": QUIET}}


def world(**changes):
    raw = {"harness": BASE["harness"], "world": {**BASE["world"], **changes}}
    return raw


def test_default_sizes_are_the_seed_numbers():
    """Without distributions every output is 600 tokens and every result 900."""
    _, tasks = simulate({"harness": BASE["harness"], "world": {}}, 50)
    calls = [c for t in tasks for c in t.log]
    assert {c.output_tokens for c in calls} == {600}
    assert {size for c in calls for _, size, _ in c.results.values()} == {900}


def test_tool_call_outputs_follow_their_distribution_and_answers_theirs():
    """Tool-call outputs pass a KS test against ``tokens.output``; final answers
    all take ``tokens.answer_output``."""
    out = Lognormal(median=400.0, sigma=0.5)
    _, tasks = simulate(world(tokens={"output": out.model_dump(), "answer_output": 77}), 400)
    tool_calls = [c.output_tokens for t in tasks for c in t.log if c.tool_calls]
    answers = {c.output_tokens for t in tasks for c in t.log if not c.tool_calls}
    assert len(tool_calls) == 400 * 5 and answers == {77}
    assert stats.kstest(tool_calls, np.vectorize(out.cdf)).pvalue > ALPHA


def test_each_tool_returns_results_of_its_own_size():
    """A tool with ``result_tokens`` uses it; the others use ``tokens.tool_result``."""
    gamma = Gamma(shape=2.0, scale=150.0)
    tools = [{"name": "search", "weight": 1.0, "result_tokens": gamma.model_dump()},
             {"name": "lookup", "weight": 1.0}]
    _, tasks = simulate(world(tools=tools, tokens={"tool_result": 55}), 400)
    by_tool: dict[str, list[int]] = {"search": [], "lookup": []}
    for t in tasks:
        for c in t.log:
            for name, size, _ in c.results.values():
                by_tool[name].append(size)
    assert set(by_tool["lookup"]) == {55}
    assert stats.kstest(by_tool["search"], np.vectorize(gamma.cdf)).pvalue > ALPHA


def test_history_grows_by_what_was_drawn():
    """Each prompt is the previous prompt plus the previous output and the
    results that answered it, exactly (no other message enters this world)."""
    raw = world(tokens={"output": {"distribution": "lognormal", "median": 80, "sigma": 1.0},
                        "tool_result": {"distribution": "exponential", "mean": 300}})
    _, tasks = simulate(raw, 100)
    for t in tasks:
        for a, b in zip(t.log, t.log[1:], strict=False):
            grown = a.output_tokens + sum(size for _, size, _ in a.results.values())
            assert b.prompt_tokens == a.prompt_tokens + grown


def test_run_scale_makes_runs_differ_by_its_variance():
    """With a lognormal multiplier of log-sd tau per run, the variance between
    runs of the mean log output, less the within-run part, estimates tau^2
    (within Z standard errors tau^2 sqrt(2 / (R - 1)))."""
    tau, sigma, runs = 0.4, 0.3, 600
    raw = world(tokens={"output": {"distribution": "lognormal", "median": 300, "sigma": sigma},
                        "run_scale": {"distribution": "lognormal", "median": 1.0,
                                      "sigma": tau}})
    _, tasks = simulate(raw, runs)
    logs = [np.log([c.output_tokens for c in t.log if c.tool_calls]) for t in tasks]
    means = np.array([x.mean() for x in logs])
    within = np.mean([x.var(ddof=1) / x.size for x in logs])
    estimate = means.var(ddof=1) - within
    assert abs(estimate - tau ** 2) <= Z * tau ** 2 * math.sqrt(2 / (runs - 1))


def test_first_prompt_is_drawn_per_run():
    """Each run's first prompt is one of the empirical values, each about as
    often as the others (binomial tolerances)."""
    values = [13000.0, 15000.0, 21000.0]
    raw = world(tokens={"first_prompt": {"distribution": "empirical", "values": values}})
    _, tasks = simulate(raw, 600)
    first = [t.log[0].prompt_tokens for t in tasks]
    assert set(first) == {13000, 15000, 21000}
    for v in values:
        share = first.count(int(v)) / len(first)
        assert abs(share - 1 / 3) <= Z * math.sqrt(2 / 9 / len(first))


def test_a_share_of_the_first_prompt_is_already_cached():
    """With prompt caching and ``cache.first_prompt_cached`` 0.5, the first
    call reads half its prompt from cache and writes the rest; later calls read
    what the previous prompt cached."""
    raw = world(cache={"first_prompt_cached": 0.5})
    raw["harness"] = {**raw["harness"], "prompt_cache": "5m"}
    _, tasks = simulate(raw, 5)
    for t in tasks:
        first = t.log[0]
        assert first.cache_read_tokens == round(0.5 * first.prompt_tokens)
        assert first.cache_write_tokens == first.prompt_tokens - first.cache_read_tokens
        assert t.log[1].cache_read_tokens == first.prompt_tokens


def test_automatic_caching_reads_without_breakpoints_and_writes_nothing():
    """With ``cache.automatic`` and no harness caching, each prompt reads the
    previous prompt of the run from the cache, the rest is plain input."""
    _, tasks = simulate(world(cache={"automatic": True, "first_prompt_cached": 0.9}), 5)
    for t in tasks:
        assert t.log[0].cache_read_tokens == round(0.9 * t.log[0].prompt_tokens)
        for a, b in zip(t.log, t.log[1:], strict=False):
            assert (b.cache_read_tokens, b.cache_write_tokens) == (a.prompt_tokens, 0)
            assert b.input_tokens == b.prompt_tokens - a.prompt_tokens
