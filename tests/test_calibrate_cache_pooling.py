"""A class of few runs borrows strength for its cache hits: each class's hit
parameters are shrunk toward its provider family's pooled fit by an
empirical-Bayes weight of its run count (``estimate.cache_hits`` with
``pooled``, ``estimate.prior_runs``, ``estimate.cache_family``).

The fixtures are small hand-made call tables (every call 1,000 prompt tokens,
2 s apart), so every expected figure is counted by hand in the test's
docstring.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sim.calibration.estimate import cache_family, cache_hits, prior_runs


def _calls(runs: list[list[bool]], prefix: str) -> pd.DataFrame:
    """One row per call: run ``prefix + index``, 1,000 prompt tokens, a read of
    the whole previous prompt where ``True`` (the first call reads 1,000 too),
    calls 1 s long, started 3 s apart."""
    rows = []
    for r, reads in enumerate(runs):
        for i, hit in enumerate(reads):
            rows.append({"run_id": f"{prefix}{r}", "call": i, "prompt": 1000.0,
                         "cache_read_tokens": 1000.0 if hit else 0.0,
                         "started_s": 3.0 * i, "latency_s": 1.0})
    return pd.DataFrame(rows)


def test_the_family_is_the_names_first_word():
    """Claude models share a family, routes and fine-tune prefixes are
    stripped, and the OpenAI o-series is ``gpt``."""
    assert cache_family("claude-opus-4-6") == cache_family("claude-sonnet-4-6") == "claude"
    assert cache_family("deepseek/deepseek-chat") == cache_family("deepseek-chat") == "deepseek"
    assert cache_family("ft:gpt-4.1-2025-04-14:sierra:x") == "gpt"
    assert cache_family("o3") == cache_family("gpt-4o") == "gpt"


def test_prior_strength_is_the_method_of_moments_beta_binomial():
    """Two classes of 100 runs, cached shares 0.3 and 0.7: pooled p = 0.5,
    sum R (p_i - p)^2 = 100 * 0.04 * 2 = 8, less (k - 1) p (1 - p) = 0.25:
    7.75; N - sum R^2 / N = 200 - 100 = 100; tau^2 = 0.0775; M = 0.25 / 0.0775
    - 1 = 2.2258. Equal shares: no spread, M infinite (pool fully)."""
    assert prior_runs(np.array([100.0, 100.0]), np.array([0.3, 0.7])) == pytest.approx(
        0.25 / 0.0775 - 1, rel=1e-9)
    assert prior_runs(np.array([100.0, 100.0]), np.array([0.5, 0.5])) == math.inf


def test_a_small_class_is_pulled_toward_the_pooled_fit_by_its_run_weight():
    """Class A: 4 runs of 3 calls, 1 cached (its 2 later calls hit, its first
    misses): run_share 1/4. Class B: 16 runs of 3 calls, 12 cached the same
    way. Pooled: 13 of 20 runs, 0.65. With strength 4 pseudo-runs, A's weight
    is 4 / 8 = 0.5: run_share 0.5 * 0.25 + 0.5 * 0.65 = 0.45; its later-call
    hit share is 1 (own and pooled) and its first-call hit share 0 in both:
    both stay. Without ``pooled``, A keeps its own 0.25; with infinite
    strength it takes the pooled 0.65."""
    a = _calls([[False, True, True]] + [[False] * 3] * 3, "a")
    b = _calls([[False, True, True]] * 12 + [[False] * 3] * 4, "b")
    pooled = pd.concat([a, b], ignore_index=True)
    alone = cache_hits(a)
    shrunk = cache_hits(a, pooled, 4.0)
    full = cache_hits(a, pooled)
    assert alone is not None and shrunk is not None and full is not None
    assert alone["run_share"] == 0.25
    assert shrunk["run_share"] == pytest.approx(0.45, abs=1e-6)
    assert full["run_share"] == pytest.approx(0.65, abs=1e-6)
    assert shrunk["first_hit"] == 0.0 and shrunk["hit"] == [[1.0]]
    assert "weight 0.50 on its own 4 runs" in shrunk["note"]


def test_a_class_none_of_whose_runs_reads_caches_no_run_and_stays_out_of_the_pool():
    """Class U: 5 runs of 3 calls, none reads: its hits say no run is cached
    (``run_share`` 0, so the world reads nothing, rather than the harness's
    whole-previous-prompt default). Pooled with class A (10 runs, 8 cached as
    in the test above) and C (4 runs, 1 cached) of the same family, U keeps
    run_share 0, and C's pooled fit is the one of A and C alone: U's 5
    uncached runs do not pull the family's share (8 + 1 of 14 runs) down to
    9 of 19."""
    from types import SimpleNamespace

    from sim.calibration.estimate import _pool_hits

    u = _calls([[False] * 3] * 5, "u")
    a = _calls([[False, True, True]] * 8 + [[False] * 3] * 2, "a")
    c = _calls([[False, True, True]] + [[False] * 3] * 3, "c")
    hits_u = cache_hits(u)
    assert hits_u is not None and hits_u["run_share"] == 0.0 and hits_u["hit"] == [[1.0]]
    assert "none of 5 runs" in hits_u["note"]
    classes = [SimpleNamespace(model=m, automatic_cache=False, cache_hits=cache_hits(x),
                               notes={}) for m, x in (("claude-a", a), ("claude-u", u),
                                                      ("claude-c", c))]
    _pool_hits(classes, [a, u, c])  # type: ignore[arg-type]
    assert classes[1].cache_hits["run_share"] == 0.0
    strength = prior_runs(np.array([10.0, 4.0]), np.array([0.8, 0.25]))
    expected = cache_hits(c, pd.concat([a, c], ignore_index=True), strength)
    assert expected is not None
    expected.pop("note")
    assert classes[2].cache_hits == expected
    assert classes[2].cache_hits["run_share"] == pytest.approx(
        (4 / (4 + strength)) * 0.25 + (strength / (4 + strength)) * 9 / 14, abs=1e-6)


def test_classes_that_cache_every_run_still_keep_how_much_their_hits_read():
    """Two classes of one family cache every run and every call hits, but A's
    hits read the whole previous prompt and B's 40% of it (a partial read,
    under ``PARTIAL_CUT``). Their run shares (both 1) say nothing about
    that: the pooling's prior strength is per unit, and the hits' spread
    (partial share 0 against 1 over 40 hits each) leaves each class its own
    ``partial`` (weight 1, prior strength 0), where the run shares' alone
    would have pooled both to one half."""
    from types import SimpleNamespace

    from sim.calibration.estimate import _pool_hits

    a = _calls([[True] * 5] * 10, "a")
    b = _calls([[True] * 5] * 10, "b")
    b["cache_read_tokens"] = 400.0
    classes = [SimpleNamespace(model=m, automatic_cache=True, cache_hits=cache_hits(x),
                               notes={}) for m, x in (("gpt-a", a), ("gpt-b", b))]
    _pool_hits(classes, [a, b])  # type: ignore[arg-type]
    assert classes[0].cache_hits["partial"] == pytest.approx(0.0, abs=1e-9)
    assert classes[1].cache_hits["partial"] == pytest.approx(1.0, abs=1e-9)
    assert classes[0].cache_hits["run_share"] == classes[1].cache_hits["run_share"] == 1.0
    assert "weight 1.00 on its own 40 hits against 0.0 pseudo-hits" in classes[0].notes["cache"]


def test_a_class_without_a_hit_takes_its_familys_hits_however_much_they_differ():
    """Class C's runs are cached (their first calls hit) but no later call
    hits: it has no hits to fit ``partial`` on. Pooled with A (whole reads)
    and B (40% reads), whose hits differ so much that the prior strength in
    hits is 0, C takes the pooled share of partial hits (40 of 80: 0.5)
    rather than dividing by no evidence at all."""
    from types import SimpleNamespace

    from sim.calibration.estimate import _pool_hits

    a = _calls([[True] * 5] * 10, "a")
    b = _calls([[True] * 5] * 10, "b")
    b["cache_read_tokens"] = 400.0
    c = _calls([[True, False]] * 5, "c")
    classes = [SimpleNamespace(model=m, automatic_cache=True, cache_hits=cache_hits(x),
                               notes={}) for m, x in (("gpt-a", a), ("gpt-b", b), ("gpt-c", c))]
    _pool_hits(classes, [a, b, c])  # type: ignore[arg-type]
    assert classes[2].cache_hits["partial"] == pytest.approx(0.5, abs=1e-9)
    assert "weight 0.00 on its own 0 hits against 0.0 pseudo-hits" in classes[2].notes["cache"]
