"""The prompt cache of one simulated run, as a provider reports it.

A run's :class:`PromptCache` holds the entry its last cached prompt left
(the message list, its tokens, when it expires); :meth:`PromptCache.usage`
turns a model call into the :class:`~sim.harness.messages.Usage` a provider
with a cache breakpoint at the end of each prompt would report.
"""

from __future__ import annotations

from sim.harness.effects import ModelRequest
from sim.harness.messages import Message, Usage
from sim.world.streams import Draws
from sim.world.world import World

_new = object.__new__


class PromptCache:
    """The cache entry of one run: ``history`` (the message list the last
    cached prompt ended with; None before the first), its ``tokens`` and the
    time it expires (``expires_s``, seconds on the task's clock)."""

    __slots__ = ("history", "tokens", "expires_s")

    def __init__(self) -> None:
        self.history: list[Message] | None = None
        self.tokens = 0
        self.expires_s = -1.0

    def usage(self, w: World, sizes: Draws, request: ModelRequest, now: float, output: int,
              thinking: int, ttl_s: float, writes: bool = True) -> Usage:
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
        from ``sizes`` (the task's sizes stream).

        The common call (the same message list, the entry alive, no partial
        reads) takes ``min(tokens, prompt)`` as a comparison, not a ``min``
        call (a builtin call, its arguments parsed: several hundred machine
        instructions); replaying a capacity.yaml run's calls under callgrind,
        5,870 instructions a call (the replay's own included) before, 4,790
        after."""
        prompt = request.prompt_tokens
        messages = request.messages
        read = 0
        if now <= self.expires_s:
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
