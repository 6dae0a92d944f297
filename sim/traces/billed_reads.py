"""Cache reads a source's billed costs tell, where its usage does not split the prompt.

tau2-bench keeps of each response's usage only ``prompt_tokens`` and
``completion_tokens`` (and the call's cost, as LiteLLM billed it), so a call
whose provider read most of its prompt from the cache reads as uncached. The
cost says otherwise: tau2's OpenAI runs were billed for 80-98% of their prompt
tokens at the cache price. :func:`with_billed_reads` gives such calls the
reads their recorded costs imply (:func:`sim.cost.unreported_cache.model_reads`:
automatic caching's prices, no call of the model recording a cache count, at
least 95% of its costed calls consistent with the listed prices), model by
model over one file's runs, each call at the catalogue's price at the
instant it was made (its run's start plus its own offset; the run's start
where the call has none): a time-of-day price, DeepSeek's off-peak
discount say, is the one that call was billed at. Each call so read has
``cache_read_tokens`` the tokens it read and ``input_tokens`` the rest of
its prompt, both with provenance ``derived`` (computed from recorded
figures: the cost and the prompt), and its run says so in its
``conventions`` (counted per source in ``import.json``). The tau2 importer
reads each file so; the observability formats gathered across files
(Langfuse, LangSmith, the OpenTelemetry dialects) are read so format by
format over the whole import (Claude Code and OpenHands record the split).
A source that splits the prompt, or bills cache writes at a surcharge, is
left as it is.
Where a model's prices are automatic caching's, its usage does not split the
prompt and its costs cannot tell the reads (too few calls with a trustworthy
cost, or costs the listed prices cannot give: a price the catalogue does not
list), its calls keep their counts (every prompt token uncached input) and
their runs' ``conventions`` say so, an ``undetermined`` note that ``traces
summary`` flags (:func:`sim.cost.unreported_cache.untold`).
So every command reads the cache as the provider billed it: calibration fits
the hits, replay and tune charge a money budget what the provider charged,
``traces summary`` shows the read share, and ``traces import`` says how many
runs were read so. Calls without a
trustworthy recorded cost, of unknown usage, or of a model the bill does not
tell keep their counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from sim.cost.recorded import Listed, catalogue
from sim.cost.unreported_cache import CallPrices, model_reads, unsplit, untold
from sim.harness.messages import Usage
from sim.harness.prices import Prices
from sim.traces.model import CallRecord, RunRecord
from sim.traces.schema import DERIVED, MAX_SECONDS, UNDETERMINED, UNKNOWN
from sim.traces.skips import Skip

CONVENTION = ("cache_read_tokens",
              "implied by each call's recorded cost at the model's listed prices "
              "(the usage does not split the prompt)")
"""``(what, how)`` a run whose calls were read so names in its ``conventions``."""


def with_billed_reads(records: Sequence[RunRecord | Skip],
                      listed: Listed | None = None) -> list[RunRecord | Skip]:
    """``records`` (one file's runs and skips, in order) with the cache reads
    their recorded costs imply (module docstring); ``listed``: the price
    source, one price for every call (default: the catalogue at each call's
    instant, :func:`call_prices`)."""
    out = list(records)
    spots: dict[str, list[tuple[RunRecord, int]]] = {}  # per model: (run, call index)
    for record in out:
        if isinstance(record, RunRecord):
            for j, call in enumerate(record.calls):
                if call.provenance.get("input_tokens") != UNKNOWN:
                    spots.setdefault(call.model or record.model or "", []).append((record, j))
    untold_in: dict[int, tuple[RunRecord, str]] = {}
    for model, found_at in spots.items():
        if not model:
            continue
        calls = [run.calls[j] for run, j in found_at]
        prices = listed(model) if listed is not None else call_prices(model, found_at)
        usages, costs = [c.usage for c in calls], [c.cost_usd for c in calls]
        found = model_reads(model, prices, usages, costs)
        if found is None:
            why = untold(prices, usages, costs)
            if why:
                for run, _ in found_at:
                    untold_in[id(run)] = (run, f"{UNDETERMINED}: {model}'s usage does not split "
                                               f"the prompt and its recorded costs do not tell "
                                               f"the cache reads ({why})")
            continue
        for (run, j), call, read in zip(found_at, calls, found.reads, strict=True):
            if read >= 0:
                run.calls[j] = _read(call, int(read))
                run.conventions[CONVENTION[0]] = CONVENTION[1]
    for run, note in untold_in.values():  # what a run's figures cannot say comes first
        run.conventions[CONVENTION[0]] = note
    return out


def _read(call: CallRecord, read: int) -> CallRecord:
    """``call`` (its whole prompt counted as input) reading ``read`` tokens."""
    u = call.usage
    usage = Usage(input_tokens=u.input_tokens - read, output_tokens=u.output_tokens,
                  cache_read_tokens=read, cache_write_tokens=0,
                  thinking_tokens=u.thinking_tokens)
    return replace(call, usage=usage, provenance={
        **call.provenance, "input_tokens": DERIVED, "cache_read_tokens": DERIVED})


def call_prices(model: str, found_at: Sequence[tuple[RunRecord, int]]
                ) -> CallPrices:
    """``model``'s catalogue prices for each of its calls (``(run, call
    index)``) at the instant the call was made (:func:`call_instant`; today
    where no time is recorded), or None when the catalogue lacks the model.
    Only a model whose calls the bill could tell (automatic caching's prices,
    no recorded split) is priced call by call; for any other one price is
    enough to say so."""
    first = catalogue(call_instant(*found_at[0]))(model)
    if first is None or not unsplit([first], [run.calls[j].usage for run, j in found_at]):
        return first
    listed: dict[datetime | None, Prices | None] = {}
    each: list[Prices] = []
    for run, j in found_at:
        when = call_instant(run, j)
        if when not in listed:
            listed[when] = catalogue(when)(model)
        price = listed[when]
        if price is None:  # not priced per token at this instant
            return None
        each.append(price)
    return each


def call_instant(run: RunRecord, j: int) -> datetime | None:
    """When ``run``'s call ``j`` was made: the run's start plus the call's
    ``started_s`` (seconds), the run's start where the call records no
    offset or one outside ``[0, MAX_SECONDS]`` (the files are read before
    their values are bounded), None where the run records no start."""
    start, offset = run.started_at, run.calls[j].started_s
    if start is None or offset is None or not 0.0 <= offset <= MAX_SECONDS:
        return start
    try:
        return start + timedelta(seconds=offset)
    except OverflowError:  # a start near the year 9999
        return start
