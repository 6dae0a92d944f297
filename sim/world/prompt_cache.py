"""The prompt cache of one simulated run, as a provider reports it.

A run's :class:`PromptCache` holds the entry its last cached prompt left
(the message list, its tokens, when it expires); :meth:`PromptCache.usage`
turns a model call into the :class:`~sim.harness.messages.Usage` a provider
with a cache breakpoint at the end of each prompt would report.
"""

from __future__ import annotations

from bisect import bisect_right

from sim.harness.effects import ModelRequest
from sim.harness.messages import Message, Usage
from sim.world.streams import Draws
from sim.world.world import World

_new = object.__new__


class PromptCache:
    """The cache entry of one run: ``history`` (the message list the last
    cached prompt ended with; None before the first), its ``tokens`` and the
    time it expires (``expires_s``, seconds on the task's clock)."""

    __slots__ = ("history", "tokens", "expires_s", "ended_s", "uncached")

    def __init__(self) -> None:
        self.history: list[Message] | None = None
        self.tokens = 0
        self.expires_s = -1.0
        self.ended_s = 0.0  # when the last cached call ended (seconds; provider hits only)
        self.uncached = False  # the provider caches none of this run's calls (provider hits)

    def usage(self, w: World, sizes: Draws, request: ModelRequest, now: float, output: int,
              thinking: int, ttl_s: float, writes: bool = True, latency: float = 0.0
              ) -> Usage:
        """Usage under prompt caching, as a provider with a cache breakpoint at
        the end of each prompt reports it: the part of this prompt that the
        previous prompt already cached is read from the cache, if that cache
        entry is still alive (used within ``ttl_s``); the rest is written (or,
        with automatic caching, ``writes`` False, plain input). A rewritten
        history (compaction: a new message list) keeps only the stable prefix
        (system prompt and tools) cached. At a run's first call, a share
        ``cache.first_prompt_cached`` of the prompt is read (cached by earlier
        runs). A world with partial reads (``cache.miss``, ``cache.read_share``)
        then, on a call that finds a live entry, reads nothing with
        probability ``miss`` and otherwise ``round(share * prompt)`` tokens
        (no more than the stable prefix after a compaction). Partial reads draw
        from ``sizes`` (the task's sizes stream). A world with the provider's
        own hits (``cache.hits``) reads what :meth:`_provider_read` says
        instead, its entry living ``hits.ttl_s`` when that is set (else
        ``ttl_s``); ``latency`` (seconds) dates the call's end, from which the
        next call's gap is measured.

        The common call (the same message list, the entry alive, no partial
        reads) takes ``min(tokens, prompt)`` as a comparison, not a ``min``
        call (a builtin call, its arguments parsed: several hundred machine
        instructions); replaying a capacity.yaml run's calls under callgrind,
        5,870 instructions a call (the replay's own included) before, 4,790
        after."""
        prompt = request.prompt_tokens
        messages = request.messages
        read = 0
        if w.cache_hits:
            if w.hit_ttl_s is not None:  # the lifetime fitted from the traces
                ttl_s = w.hit_ttl_s
            read = self._provider_read(w, sizes, request, now)
            self.ended_s = now + latency
        elif now <= self.expires_s:
            same = messages is self.history
            if same:
                read = self.tokens
                if read > prompt:
                    read = prompt
            else:
                read = min(w.stable_prefix_tokens, self.tokens, prompt)
            if w.partial_cache:
                if w.cache_miss and sizes.uniform() < w.cache_miss:
                    read = 0
                elif w.cache_share is not None:
                    share = min(1.0, max(0.0, w.cache_share.sample(sizes)))
                    partial = int(share * prompt + 0.5)
                    read = min(partial, prompt if same else read)
        elif self.history is None and w.first_prompt_cached:
            read = min(round(w.first_prompt_cached * prompt), prompt)
        self.history = messages
        self.tokens = prompt
        self.expires_s = now + ttl_s
        # Usage(0, output, read, prompt - read, thinking) if writes, else
        # Usage(prompt - read, output, read, 0, thinking): field by field (a
        # dataclass's __init__ is a slow call in CPython 3.11)
        usage: Usage = _new(Usage)
        usage.output_tokens, usage.cache_read_tokens, usage.thinking_tokens = output, read, thinking
        if writes:
            usage.input_tokens, usage.cache_write_tokens = 0, prompt - read
        else:
            usage.input_tokens, usage.cache_write_tokens = prompt - read, 0
        return usage

    def _provider_read(self, w: World, sizes: Draws, request: ModelRequest, now: float) -> int:
        """Tokens a call reads under the provider's own hits
        (:class:`~sim.world.params.CacheHits`): nothing in a run the provider
        does not cache (drawn at its first call with ``run_share``); the first
        call of a cached run an entry of earlier runs with ``first_hit``; a later call with a live
        entry (within the TTL) hits by its call and gap bin and reads the
        previous prompt times ``read_ratio`` (the stable prefix after a
        compaction), all of the prompt at most; a partial hit a drawn share of
        that. Draws from ``sizes`` as the class's docstring says."""
        prompt = request.prompt_tokens
        if self.history is None:
            if w.hit_runs < 1.0 and sizes.uniform() >= w.hit_runs:
                self.uncached = True
            if self.uncached:
                return 0
            if w.hit_first and sizes.uniform() < w.hit_first:
                return min(int(w.hit_first_share * prompt + 0.5), prompt)
            return 0
        if now > self.expires_s or self.uncached:
            return 0
        n = request.turn + 1
        edges = w.hit_edges
        b = bisect_right(edges, n) - 1 if len(edges) > 1 else 0
        gaps = w.hit_gap_edges
        row = w.hit_table[b if b > 0 else 0]
        if len(gaps) > 1:
            g = bisect_right(gaps, now - self.ended_s) - 1
            p = row[g if g > 0 else 0]
        else:
            p = row[0]
        if p < 1.0 and sizes.uniform() >= p:
            return 0
        if request.messages is self.history:
            read = int(w.hit_ratio * self.tokens + 0.5)
        else:
            read = min(w.stable_prefix_tokens, self.tokens)
        if w.hit_partial and sizes.uniform() < w.hit_partial:
            dist = w.hit_partial_share
            share = 0.0 if dist is None else min(1.0, max(0.0, dist.sample(sizes)))
            read = int(share * read + 0.5)
        return read if read < prompt else prompt
