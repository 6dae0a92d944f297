"""The prompt cache as a provider runs it (``world.cache.hits``): a hit reads
the previous call's prompt, a miss reads nothing, and which calls hit is an
event drawn by call bin and by the gap since the previous call, not a share
drawn per call.

The worlds here are deterministic in size (fixed prefix ``P``, output ``OUT``,
tool result ``R``: step ``n`` sends ``P + h n`` tokens, ``h = OUT + R``), so
every read is known exactly; shares of hits are checked within binomial
standard errors (``Z`` at a false-alarm rate of 1e-3).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from stats_helpers import within
from worldkit import QUIET, Z, simulate

from sim import cost
from sim.harness.params import Prices
from sim.world.params import CacheHits

P, OUT, R = 5_000, 200, 800
H = OUT + R
PRICES = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def scenario(steps: int, hits: dict | None, *, tool_s: float = 1.0, automatic: bool = False,
             difficulty: dict | None = None) -> dict:
    """A deterministic world of ``steps`` steps (or ``difficulty``), one tool
    of ``tool_s`` seconds, a 5-minute cache breakpoint per step (or the
    provider's automatic caching) and the provider's hits ``hits``."""
    cache: dict = {"automatic": automatic}
    if hits is not None:
        cache["hits"] = hits
    return {
        "name": "hits", "tasks": 1,
        "harness": {"model": "m", "prices": dict(PRICES), "max_output_tokens": OUT,
                    "detector": {"enabled": False}, "verifier": {"name": "none"},
                    "prompt_cache": None if automatic else "5m",
                    "budgets": {"steps": 200}},
        "world": {"difficulty": difficulty or {"distribution": "fixed", "steps": steps},
                  "policy": dict(QUIET),
                  "tools": [{"name": "run_shell", "timeout_s": 1e6, "definition_tokens": 0,
                             "duration": {"distribution": "fixed", "median_s": tool_s}}],
                  "tokens": {"prefix": P, "task": 1, "output": OUT, "tool_result": R},
                  "latency": {"ttft_s": 0.5, "decode_tps": 100.0},
                  "cache": cache},
    }


@pytest.mark.parametrize("steps", [1, 2, 7, 30])
def test_full_prefix_hits_cost_exactly_the_append_only_closed_form(steps):
    """Every later call hitting (hit 1) and the first missing, a run reads
    ``P + h (n - 1)`` at step n >= 1 and writes the rest: its tokens are
    cached_run_tokens and its cost cached_run_cost, exactly."""
    records, _ = simulate(scenario(steps, {"hit": [[1.0]]}), 1)
    record = records[0]
    want = cost.cached_run_tokens(steps, P, H, OUT).total
    assert record.steps == steps
    assert (record.input_tokens, record.cache_read_tokens, record.cache_write_tokens,
            record.output_tokens) == (want.input, want.cache_read, want.cache_write, want.output)
    prices = Prices(**PRICES)
    assert record.cost_usd == pytest.approx(cost.cached_run_cost(steps, P, H, OUT, prices),
                                            rel=1e-12, abs=1e-15)


def test_automatic_hits_send_the_new_suffix_as_plain_input():
    """Under the provider's automatic caching a hit reads the previous prompt
    and the new suffix is plain input: nothing is written."""
    records, tasks = simulate(scenario(5, {"hit": [[1.0]]}, automatic=True), 1)
    log = tasks[0].log
    assert [c.cache_read_tokens for c in log] == [0] + [P + H * (n - 1) for n in range(1, 5)]
    assert [c.input_tokens for c in log] == [P] + [H] * 4
    assert records[0].cache_write_tokens == 0


def test_hits_follow_the_call_bin_probabilities_and_read_the_previous_prompt():
    """With call bins [2, 6) and [6, ...) hitting with 0.3 and 0.9, the shares
    of hits among calls 2-5 and 6-10 are 0.3 and 0.9 within sampling error,
    and every hit reads exactly the previous call's prompt."""
    tasks_n = 400
    _, tasks = simulate(scenario(10, {"edges": [2, 6], "hit": [[0.3], [0.9]]}), tasks_n)
    early = late = early_hits = late_hits = 0
    for task in tasks:
        log = task.log
        assert len(log) == 10
        assert log[0].cache_read_tokens == 0
        for n in range(1, 10):  # 0-based index n: the (n + 1)-th call
            read = log[n].cache_read_tokens
            assert read in (0, log[n - 1].prompt_tokens)
            if n + 1 < 6:
                early, early_hits = early + 1, early_hits + (read > 0)
            else:
                late, late_hits = late + 1, late_hits + (read > 0)
    assert (early, late) == (4 * tasks_n, 5 * tasks_n)
    assert within(early_hits / early, 0.3, early, z=Z)
    assert within(late_hits / late, 0.9, late, z=Z)


@pytest.mark.parametrize(("tool_s", "hits"), [(1.0, True), (10.0, False)])
def test_the_gap_since_the_previous_call_picks_the_gap_bin(tool_s, hits):
    """Gap bins [0, 5 s) hit and [5 s, ...) miss: with 1-second tools every
    later call reads the previous prompt, with 10-second tools none reads."""
    _, tasks = simulate(scenario(6, {"gap_edges_s": [0.0, 5.0], "hit": [[1.0, 0.0]]},
                                 tool_s=tool_s), 3)
    for task in tasks:
        reads = [c.cache_read_tokens for c in task.log[1:]]
        assert reads == ([P + H * n for n in range(5)] if hits else [0] * 5)


def test_an_expired_entry_misses_whatever_the_hit_probability():
    """A tool call longer than the 5-minute TTL leaves no live entry: hit 1
    still reads nothing."""
    _, tasks = simulate(scenario(4, {"hit": [[1.0]]}, tool_s=400.0), 2)
    assert all(c.cache_read_tokens == 0 for t in tasks for c in t.log)


def test_first_calls_hit_an_earlier_runs_entry_with_first_hit():
    """``first_hit`` 0.4 and ``first_share`` 0.5: a share 0.4 of runs read
    round(0.5 P) tokens at their first call, the others nothing."""
    n = 1000
    _, tasks = simulate(scenario(1, {"first_hit": 0.4, "first_share": 0.5, "hit": [[1.0]]}), n)
    reads = [t.log[0].cache_read_tokens for t in tasks]
    assert set(reads) <= {0, round(0.5 * P)}
    assert within(sum(r > 0 for r in reads) / n, 0.4, n, z=Z)


def test_a_partial_hit_reads_its_drawn_share_of_the_previous_prompt():
    """``partial`` 1 with a share fixed at 0.25: every later call reads
    round(0.25 x the previous prompt)."""
    hits = {"hit": [[1.0]], "partial": 1.0, "partial_share": {"distribution": "fixed",
                                                              "value": 0.25}}
    _, tasks = simulate(scenario(4, hits), 1)
    log = tasks[0].log
    assert [c.cache_read_tokens for c in log[1:]] == [
        int(0.25 * log[n - 1].prompt_tokens + 0.5) for n in range(1, 4)]


def test_read_ratio_scales_the_read_and_never_exceeds_the_prompt():
    """``read_ratio`` 0.5 reads half the previous prompt; 2.0 reads the whole
    prompt at most."""
    for ratio, want in ((0.5, lambda prev, prompt: int(0.5 * prev + 0.5)),
                        (2.0, lambda prev, prompt: prompt)):
        _, tasks = simulate(scenario(4, {"hit": [[1.0]], "read_ratio": ratio}), 1)
        log = tasks[0].log
        assert [c.cache_read_tokens for c in log[1:]] == [
            want(log[n - 1].prompt_tokens, log[n].prompt_tokens) for n in range(1, 4)]


@pytest.mark.parametrize(("fields", "words"), [
    ({"edges": [1]}, "edges must start at 2"),
    ({"edges": [2, 2], "hit": [[1.0], [1.0]]}, "edges must increase"),
    ({"gap_edges_s": [1.0]}, "gap_edges_s must start at 0"),
    ({"edges": [2, 5]}, "hit has 1 rows for 2 call bins"),
    ({"gap_edges_s": [0.0, 3.0]}, "each row of hit needs 2 values"),
    ({"hit": [[1.5]]}, "less than or equal to 1"),
])
def test_inconsistent_hit_tables_are_refused_with_a_clear_message(fields, words):
    """Bins that do not start where they must, do not increase, or a table
    whose shape differs from the bins are refused, naming the problem."""
    with pytest.raises(ValidationError, match=words):
        CacheHits.model_validate(fields)


def test_runs_the_provider_does_not_cache_read_nothing_at_any_call():
    """``run_share`` 0.6: a share 0.6 of runs (within sampling error) hit at
    every later call (hit 1), the others read nothing at any call."""
    n = 600
    _, tasks = simulate(scenario(4, {"run_share": 0.6, "first_hit": 1.0, "hit": [[1.0]]}), n)
    cached = 0
    for task in tasks:
        reads = [c.cache_read_tokens for c in task.log]
        assert all(reads) or not any(reads)
        cached += all(reads)
    assert within(cached / n, 0.6, n, z=Z)
