"""Cache reads a recorded cost implies where the usage does not split the prompt
(``sim.cost.unreported_cache``; at import, ``sim.traces.billed_reads``).

Synthetic calls are billed by the harness's own price rule with known reads
and their cost rounded as tau2-bench records it (seven decimals); the reads
the costs imply must be those reads. On a real tau2-bench file (gpt-4.1, whose
usage keeps only ``prompt_tokens`` and ``completion_tokens``), the implied
reads must land on OpenAI's cache granularity (whole 128-token blocks): a
fact of the provider the inference does not assume.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from traces_helpers import data_folder

from sim.calibration.data import load
from sim.cost.unreported_cache import MIN_CALLS, implied_share, model_reads
from sim.harness.messages import Usage
from sim.harness.prices import Prices

GPT41 = Prices(input=2.0, output=8.0, cache_read=0.5, cache_write=2.0)
"""gpt-4.1's list prices (USD per million tokens): automatic caching."""
TIERED = Prices(input=1.25, output=10.0, cache_read=0.125, cache_write=1.25, tiers=(
    (200_000, Prices(input=2.5, output=15.0, cache_read=0.25, cache_write=2.5)),))
"""A model billed at a higher tier above 200,000 prompt tokens."""


def _billed(prices: Prices, n: int, seed: int = 0, *, large: bool = False
            ) -> tuple[list[Usage], list[float | None], np.ndarray]:
    """``n`` calls as an unsplit source records them (the whole prompt as
    input), their costs billed with ``reads`` (whole 128-token blocks, a
    quarter of the calls missing) and rounded to seven decimals."""
    rng = np.random.default_rng(seed)
    prompts = rng.integers(150_000 if large else 2_000, 260_000 if large else 40_000, n)
    outputs = rng.integers(10, 2_000, n)
    reads = np.where(rng.random(n) < 0.25, 0, (rng.uniform(0.5, 1.0, n) * prompts) // 128 * 128)
    usages, costs = [], []
    for p, o, r in zip(prompts, outputs, reads, strict=True):
        usages.append(Usage(int(p), int(o), 0, 0, 0))
        costs.append(round(prices.call_cost(int(p - r), int(o), int(r)), 7))
    return usages, costs, reads.astype(np.int64)


@pytest.mark.parametrize("prices,large", [(GPT41, False), (TIERED, True)])
def test_the_reads_a_bill_implies_are_the_reads_billed(prices, large):
    """Each call's implied reads are its billed reads within the rounding of
    its recorded cost (1e-7 USD: under a token at these prices), at the tier
    its prompt reaches."""
    usages, costs, reads = _billed(prices, 200, large=large)
    found = model_reads("m", prices, usages, costs)
    assert found is not None and found.calls == 200
    assert np.abs(found.reads - reads).max() <= 1
    assert found.share == pytest.approx(reads.sum() / sum(u.input_tokens for u in usages),
                                        abs=1e-6)
    assert implied_share(prices, 10_000, 100, 0, prices.call_cost(10_000, 100)) == 0.0


def test_calls_without_a_trustworthy_cost_keep_their_counts():
    """A call whose cost is missing or $0 is marked -1 (kept as recorded)."""
    usages, costs, _ = _billed(GPT41, 40)
    costs[3], costs[7] = None, 0.0
    found = model_reads("m", GPT41, usages, costs)
    assert found is not None and found.calls == 38
    assert found.reads[3] == found.reads[7] == -1


def test_what_the_bill_cannot_tell_is_left_as_recorded():
    """No reads are implied for: a source that splits the prompt (one call
    recording a read), a write surcharge (explicit caching: two unknowns per
    cost), no prices, fewer than MIN_CALLS costed calls, costs above the
    uncached price (a mark-up the catalogue lacks: negative shares), and a
    model billed its uncached price (nothing read)."""
    usages, costs, _ = _billed(GPT41, 60)
    split = [Usage(u.input_tokens - 100, u.output_tokens, 100, 0, 0) if i == 0 else u
             for i, u in enumerate(usages)]
    assert model_reads("m", GPT41, split, costs) is None
    surcharge = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    assert model_reads("m", surcharge, usages, costs) is None
    assert model_reads("m", None, usages, costs) is None
    assert model_reads("m", GPT41, usages[:MIN_CALLS - 1], costs[:MIN_CALLS - 1]) is None
    marked_up = [1.1 * GPT41.call_cost(u.input_tokens, u.output_tokens) for u in usages]
    assert model_reads("m", GPT41, usages, marked_up) is None
    uncached = [GPT41.call_cost(u.input_tokens, u.output_tokens) for u in usages]
    assert model_reads("m", GPT41, usages, uncached) is None


@pytest.fixture(scope="module")
def gpt41(tmp_path_factory) -> Path:
    """One tau2-bench results file of gpt-4.1 (retail), imported."""
    from sim.traces import import_traces

    raw = Path(data_folder("tau2", "raw"))
    source = next(raw.glob("src_experiments_model_training_results_gpt-4.1_retail*"))
    out = tmp_path_factory.mktemp("gpt41") / "traces"
    import_traces([source], out)
    return out


def test_a_tau2_file_billed_for_reads_it_does_not_count_imports_them(gpt41):
    """tau2-bench keeps no cache split, yet gpt-4.1 billed most prompt tokens
    at its cache price. The import gives its calls the reads their costs
    imply (provenance derived): most calls read, the prompt (input + read)
    is the recorded ``prompt_tokens``, repricing each call at the catalogue's
    prices gives back its recorded cost, the runs name the convention in
    import.json, and the reads are whole 128-token blocks (OpenAI's cache
    granularity, which the inference does not assume) in at least 99% of the
    calls that read."""
    import gzip
    import json

    from sim.traces.billed_reads import CONVENTION
    from sim.traces.model import read_traces

    runs, calls = read_traces(gpt41)
    hits = calls["cache_read_tokens"] > 0
    assert hits.mean() > 0.8
    share = calls["cache_read_tokens"].sum() / (calls["input_tokens"]
                                                + calls["cache_read_tokens"]).sum()
    assert 0.5 < share < 1.0
    assert (calls["provenance"].map(lambda p: p["cache_read_tokens"]) == "derived").all()
    raw = Path(data_folder("tau2", "raw"))
    source = next(raw.glob("src_experiments_model_training_results_gpt-4.1_retail*"))
    doc = json.loads(gzip.decompress(source.read_bytes()))
    recorded = {(s["id"], i): m["usage"]["prompt_tokens"]
                for s in doc["simulations"]
                for i, m in enumerate(x for x in s["messages"] if x.get("usage")
                                      and x["role"] == "assistant")}
    prompts = calls["input_tokens"] + calls["cache_read_tokens"] + calls["cache_write_tokens"]
    assert [int(v) for v in prompts] == [recorded[(r, int(c))] for r, c in
                                         zip(calls["run_id"], calls["call"], strict=True)]
    repriced = [GPT41.call_cost(int(i), int(o), int(r)) for i, o, r in zip(
        calls["input_tokens"], calls["output_tokens"], calls["cache_read_tokens"], strict=True)]
    assert np.allclose(repriced, calls["cost_usd"].astype(float), atol=2e-7)
    report = json.loads((gpt41 / "import.json").read_text())
    assert report["conventions"]["tau2"][CONVENTION[0]][CONVENTION[1]] == len(runs)
    blocks = (calls.loc[hits, "cache_read_tokens"] % 128 == 0).mean()
    assert blocks >= 0.99


def test_calibration_fits_the_hits_and_keeps_the_list_prices(gpt41):
    """Calibrated on the file, gpt-4.1 is a cached class of automatic
    caching (its hits fitted, most runs cached) priced at the catalogue's
    list prices (scale 1, within a percent), where before the import read the
    bill it was an uncached class at a third of them."""
    traces = load(gpt41)
    from sim.calibration.estimate import estimate

    est = estimate(traces, np.zeros(traces.n, dtype=int))
    (cls,) = est.classes
    assert cls.automatic_cache and cls.cache_hits is not None
    assert cls.cache_hits["run_share"] > 0.9
    price = est.prices["gpt-4.1"]
    assert price.input == pytest.approx(GPT41.input, rel=0.01)
    assert price.cache_read == pytest.approx(GPT41.cache_read, rel=0.01)


def test_a_langfuse_trace_whose_usage_omits_the_cache_is_read_as_billed(tmp_path):
    """A Langfuse trace (written by the real SDK) of 12 gpt-4o generations
    whose ``usage_details`` give only input and output, their
    ``cost_details`` what the provider billed with most of each prompt read
    from the cache: the import reads the reads the bills imply (within a
    token), derived, at the catalogue's gpt-4o prices."""
    pytest.importorskip("langfuse", reason="needs the 'test' extra (langfuse)")
    import uuid

    from langfuse import Langfuse
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.trace import TracerProvider

    from sim.cost.prices import lookup_prices
    from sim.traces import import_traces
    from sim.traces.model import read_traces

    prices = lookup_prices("gpt-4o")
    path = tmp_path / "spans.jsonl"
    lf = Langfuse(public_key=f"pk-lf-{uuid.uuid4().hex}", secret_key="sk-lf-test",
                  base_url="http://127.0.0.1:9", span_exporter=FileSpanExporter(path),
                  tracer_provider=TracerProvider())
    reads = []
    with lf.start_as_current_observation(as_type="agent", name="agent", input="go"):
        for n in range(12):
            prompt, output = 3_000 + 700 * n, 50 + n
            read = 0 if n == 0 else (prompt - 700) // 128 * 128
            reads.append(read)
            cost = prices.call_cost(prompt - read, output, read)
            with lf.start_as_current_observation(
                    as_type="generation", name=f"llm {n}", model="gpt-4o",
                    usage_details={"input": prompt, "output": output},
                    cost_details={"total": cost}, output={"role": "assistant",
                                                          "content": f"step {n}"}):
                pass
    lf.flush()
    lf.shutdown()
    import_traces([path], tmp_path / "traces")
    _, calls = read_traces(tmp_path / "traces")
    got = calls["cache_read_tokens"].astype(int).tolist()
    assert max(abs(a - b) for a, b in zip(got, reads, strict=True)) <= 1
    assert (calls["provenance"].map(lambda p: p["cache_read_tokens"])[1:] == "derived").all()


def test_the_import_says_how_many_runs_it_read_from_their_costs(tmp_path):
    """``traces import``'s report names the runs whose cache reads came from
    their recorded costs, per source."""
    from sim.traces import import_traces

    raw = Path(data_folder("tau2", "raw"))
    source = next(raw.glob("src_experiments_model_training_results_gpt-4.1_retail*"))
    report = import_traces([source], tmp_path / "traces")
    (line,) = [x for x in report.lines() if "recorded costs" in x]
    assert line.startswith(f"read the cache reads of {report.runs} runs ({report.runs} tau2)")


def test_untold_says_why_a_bill_cannot_tell_the_reads():
    """Too few costed calls and costs the listed prices cannot give (a
    mark-up) are untold, each with its reason; a source that splits the
    prompt, a write surcharge, no prices, a readable bill and a bill of no
    reads have nothing untold."""
    from sim.cost.unreported_cache import untold

    usages, costs, _ = _billed(GPT41, 60)
    few = [None] * 55 + costs[55:]
    assert untold(GPT41, usages, few) == (f"5 of its 60 calls record a trustworthy cost, "
                                          f"{MIN_CALLS} are needed")
    assert untold(GPT41, usages, [None] * 60) == "none of its 60 calls records a trustworthy cost"
    marked_up = [1.1 * GPT41.call_cost(u.input_tokens, u.output_tokens) for u in usages]
    why = untold(GPT41, usages, marked_up)
    assert why is not None and why.startswith("0% of its costed calls") and "-0." in why
    split = [Usage(u.input_tokens - 100, u.output_tokens, 100, 0, 0) if i == 0 else u
             for i, u in enumerate(usages)]
    surcharge = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    uncached = [GPT41.call_cost(u.input_tokens, u.output_tokens) for u in usages]
    assert untold(GPT41, split, costs) is None
    assert untold(surcharge, usages, costs) is None
    assert untold(None, usages, costs) is None
    assert untold(GPT41, usages, costs) is None
    assert untold(GPT41, usages, uncached) is None


def test_runs_whose_bill_cannot_tell_the_reads_say_so():
    """At import, a model whose costs tell its reads is read (its runs name
    the convention); one whose costs cannot (a mark-up the catalogue lacks)
    keeps its counts and its runs carry an ``undetermined`` note naming the
    model and the reason, which ``traces summary`` flags; a run of both
    models carries the note."""
    from sim.traces.billed_reads import CONVENTION, with_billed_reads
    from sim.traces.model import CallRecord, RunRecord
    from sim.traces.schema import UNDETERMINED

    usages, costs, reads = _billed(GPT41, 40)
    read = [RunRecord(f"r{i}", "tau2", "f", [CallRecord(usages[i], cost_usd=costs[i],
                                                        model="gpt-4.1")]) for i in range(30)]
    dear = [RunRecord(f"d{i}", "tau2", "f", [CallRecord(
        u, cost_usd=1.1 * GPT41.call_cost(u.input_tokens, u.output_tokens), model="dear")])
        for i, u in enumerate(usages[:20])]
    both = RunRecord("both", "tau2", "f", [
        CallRecord(usages[30], cost_usd=costs[30], model="gpt-4.1"),
        CallRecord(usages[31], cost_usd=1.1 * GPT41.call_cost(usages[31].input_tokens,
                                                              usages[31].output_tokens),
                   model="dear")])
    out = with_billed_reads([*read, *dear, both], listed=lambda model: GPT41)
    assert all(r.conventions == {CONVENTION[0]: CONVENTION[1]} for r in out[:30])
    assert [r.calls[0].usage.cache_read_tokens for r in out[:30]] == [int(x) for x in
                                                                      reads[:30]]
    for run in out[30:]:
        note = run.conventions[CONVENTION[0]]
        assert note.startswith(f"{UNDETERMINED}: dear's usage does not split the prompt")
        assert "billed at prices the catalogue does not list" in note
    assert all(r.calls[0].usage.cache_read_tokens == 0 for r in out[30:50])
    assert out[-1].calls[0].usage.cache_read_tokens == reads[30]  # gpt-4.1's call still read


def test_a_tau2_file_whose_bill_the_catalogue_cannot_give_is_flagged(tmp_path):
    """A tau2 file of deepseek/deepseek-chat whose recorded costs are below
    what the catalogue's prices give even with every prompt token read (a
    price the catalogue does not list): imported with its counts, and
    ``traces summary`` flags every run's cache split as undetermined, naming
    the model."""
    from sim.traces import import_traces
    from sim.traces.summary import summarize

    raw = Path(data_folder("tau2", "raw"))
    source = next(raw.glob("*ironforge_v3_deepseek*"))
    report = import_traces([source], tmp_path / "traces")
    summary = summarize(tmp_path / "traces")
    (flag,) = [f for f in summary["flags"] if f["flag"] == "cache_convention_undetermined"]
    assert flag["runs"] == report.runs
    assert "deepseek/deepseek-chat's usage does not split the prompt" in flag["what"]


def test_each_call_is_read_at_the_price_of_the_hour_it_was_billed():
    """Runs of a model with an off-peak price (the catalogue's deepseek-chat),
    started either side of the switch, each call billed at the price of its
    own instant (its run's start plus its offset): every call's reads are
    found. Read at one price for all (the first run's), the calls after the
    switch cost what no read gives at it, and the model is left undetermined."""
    from datetime import UTC, datetime, timedelta

    from sim.cost.recorded import catalogue
    from sim.traces.billed_reads import CONVENTION, call_instant, with_billed_reads
    from sim.traces.model import CallRecord, RunRecord
    from sim.traces.schema import UNDETERMINED

    model, first = "deepseek-chat", datetime(2026, 3, 20, 15, 50, tzinfo=UTC)
    assert catalogue(first)(model) != catalogue(first + timedelta(hours=1))(model)
    usages, _, reads = _billed(GPT41, 60, seed=3)
    runs = []
    for i in range(30):  # a run every 3 minutes, its second call 100 s in: 15:50 to 17:17
        calls = [CallRecord(u, model=model, started_s=100.0 * k)
                 for k, u in enumerate(usages[2 * i: 2 * i + 2])]
        runs.append(RunRecord(f"r{i}", "tau2", "f", calls, started_at=first + timedelta(
            minutes=3 * i)))
    for i, run in enumerate(runs):
        for k, call in enumerate(run.calls):
            prices, read = catalogue(call_instant(run, k))(model), int(reads[2 * i + k])
            run.calls[k] = CallRecord(call.usage, model=model, started_s=call.started_s,
                                      cost_usd=round(prices.call_cost(
                                          call.usage.input_tokens - read,
                                          call.usage.output_tokens, read), 9))
    one_price = catalogue(first)
    at_once = with_billed_reads([RunRecord(r.run_id, r.source, r.file, list(r.calls),
                                           started_at=r.started_at) for r in runs],
                                listed=one_price)
    assert all(r.conventions[CONVENTION[0]].startswith(UNDETERMINED) for r in at_once)
    out = with_billed_reads(runs)
    assert all(r.conventions == {CONVENTION[0]: CONVENTION[1]} for r in out)
    found = np.array([c.usage.cache_read_tokens for r in out for c in r.calls])
    assert np.abs(found - reads).max() <= 1


def test_a_call_instant_out_of_bounds_is_its_run_start():
    """A call offset the writer would refuse (negative, not finite, over a
    year, past the year 9999) is read at its run's start, never raised."""
    from datetime import UTC, datetime

    from sim.traces.billed_reads import call_instant
    from sim.traces.model import CallRecord, RunRecord

    usage = Usage(100, 10, 0, 0, 0)
    for start in (datetime(2026, 3, 20, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)):
        for offset in (-5.0, float("nan"), float("inf"), 1e300, 4e7):
            run = RunRecord("r", "tau2", "f", [CallRecord(usage, started_s=offset)],
                            started_at=start)
            assert call_instant(run, 0) == start
    run = RunRecord("r", "tau2", "f", [CallRecord(usage, started_s=90.0)])
    assert call_instant(run, 0) is None
