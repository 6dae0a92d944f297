"""How an importer says which of a call's counts it computed: provenance from the totals read.

Sources record usage in their own conventions (:mod:`sim.traces.usage` reads
them into the trace model's). A count that is not the recorded figure itself
is **derived** (:data:`~sim.traces.model.DERIVED`): the uncached input when
the cache was subtracted from a prompt total, the output when the reasoning
was subtracted from a completion total. A call whose source records no usage
has every count **unknown** (:data:`~sim.traces.model.UNKNOWN`), its
:class:`~sim.traces.model.Usage` all 0, and is kept with its run.
"""

from __future__ import annotations

from typing import Any

from sim.traces.model import DERIVED, PROVENANCE_FIELDS, UNKNOWN, Usage
from sim.traces.usage import count


def derived(counts: Usage, prompt: Any, output: Any, where: str) -> dict[str, str]:
    """The provenance of ``counts`` read from the recorded ``prompt`` and
    ``output`` figures (the values the usage reading took as its input and
    output totals; already checked as counts): ``input_tokens`` derived when
    it differs from ``prompt``, ``output_tokens`` when it differs from
    ``output``; the rest exact (not listed).

    >>> derived(Usage(input_tokens=400, cache_read_tokens=600, output_tokens=50), 1000, 50, "x")
    {'input_tokens': 'derived'}
    """
    provenance = {}
    if counts.input_tokens != count(prompt, "prompt tokens", where):
        provenance["input_tokens"] = DERIVED
    if counts.output_tokens != count(output, "output tokens", where):
        provenance["output_tokens"] = DERIVED
    return provenance


def unknown_usage() -> tuple[Usage, dict[str, str]]:
    """The usage of a call whose source records none: counts 0, every
    provenance unknown (so the writer writes null, not 0)."""
    return Usage(), dict.fromkeys(PROVENANCE_FIELDS, UNKNOWN)
