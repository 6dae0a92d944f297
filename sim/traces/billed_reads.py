"""Cache reads a source's billed costs tell, where its usage does not split the prompt.

tau2-bench keeps of each response's usage only ``prompt_tokens`` and
``completion_tokens`` (and the call's cost, as LiteLLM billed it), so a call
whose provider read most of its prompt from the cache reads as uncached. The
cost says otherwise: tau2's OpenAI runs were billed for 80-98% of their prompt
tokens at the cache price. :func:`with_billed_reads` gives such calls the
reads their recorded costs imply (:func:`sim.cost.unreported_cache.model_reads`:
automatic caching's prices, no call of the model recording a cache count, at
least 95% of its costed calls consistent with the listed prices), model by
model over one file's runs, at the catalogue's prices on the day of the
model's first run. Each call so read has ``cache_read_tokens`` the tokens it
read and ``input_tokens`` the rest of its prompt, both with provenance
``derived`` (computed from recorded figures: the cost and the prompt), and
its run says so in its ``conventions`` (counted per source in
``import.json``). The tau2 importer reads each file so; the observability formats gathered
across files (Langfuse, LangSmith, the OpenTelemetry dialects) are read so
format by format over the whole import (Claude Code and OpenHands record the
split). A source that
splits the prompt, or bills cache writes at a surcharge, is left as it is.
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
from datetime import datetime

from sim.cost.recorded import Listed, catalogue
from sim.cost.unreported_cache import model_reads, untold
from sim.harness.messages import Usage
from sim.traces.model import CallRecord, RunRecord
from sim.traces.schema import DERIVED, UNDETERMINED, UNKNOWN
from sim.traces.skips import Skip

CONVENTION = ("cache_read_tokens",
              "implied by each call's recorded cost at the model's listed prices "
              "(the usage does not split the prompt)")
"""``(what, how)`` a run whose calls were read so names in its ``conventions``."""


def with_billed_reads(records: Sequence[RunRecord | Skip],
                      listed: Listed | None = None) -> list[RunRecord | Skip]:
    """``records`` (one file's runs and skips, in order) with the cache reads
    their recorded costs imply (module docstring); ``listed``: the price
    source (default: the catalogue at the instant of each model's first run:
    a time-of-day price is the one that run was billed at, not the day's mean;
    the model's later runs are read at the same price)."""
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
        prices = (listed or catalogue(_first_start([run for run, _ in found_at])))(model)
        calls = [run.calls[j] for run, j in found_at]
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


def _first_start(runs: Sequence[RunRecord]) -> datetime | None:
    """The earliest start among ``runs`` (None when none records one)."""
    starts = [r.started_at for r in runs if r.started_at]
    return min(starts) if starts else None
