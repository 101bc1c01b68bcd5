"""Prompt caching: where the cache breakpoints of a request go, and what a run of calls would read.

Pure parts, after the Messages API's prompt-caching documentation (platform.claude.com/docs/
en/build-with-claude/prompt-caching, read 2026-12-03), one module each; their public names are
all here:

1. `placement`: `place_breakpoints` marks a request with ``cache_control`` so that the tools and
   system prompt, and the conversation up to the newest message, are cached across the calls of
   an agent loop, as `CacheSettings` say.
2. `prefix`: `PrefixTracker` follows, from each call's usage, where the cached prefix of a
   session's history ends (`CachedPrefix`): what a cache-aware compaction weighs. Prefix keys
   (`start_key`, `prefix_key`, `PrefixChain`) identify prefixes by a hash chain, and
   `cache_request` turns a marked request into the modelled cache's input.
3. `simulation`: `PrefixCache` is an offline model of the server's prefix cache: given each
   call's breakpoints (token counts and identities of the prefixes) and its time, it says which
   prompt tokens would be read from the cache, written to it (by TTL) or sent uncached, as the
   API's ``usage`` would. `clearing_saving` prices the choice a cache-aware compaction faces.

The minimum cacheable lengths are the model catalog's (`evo_magic.catalog`).

The rules followed (all from that page):

- The prompt is processed as ``tools``, then ``system``, then ``messages``; a breakpoint caches
  the whole prefix up to and including the marked block. At most 4 breakpoints per request.
- A write happens only at a breakpoint: one entry, keyed by the exact prefix. A read at a
  breakpoint finds an entry written by an earlier call at that block or, walking back one block
  at a time, at one of the 19 blocks before it (a 20-block lookback window). Only the longest
  hit counts.
- ``cache_control`` may not go on ``thinking`` or ``redacted_thinking`` blocks, nor on empty text
  blocks; it may go on tool definitions, system text blocks and the other message blocks.
- TTL is "5m" (default) or "1h"; a read refreshes the entry for free. When TTLs are mixed, every
  1-hour breakpoint must come before every 5-minute one.
- Billing with A the longest hit, B the last 1-hour breakpoint after A (else A) and C the last
  breakpoint: cache read A tokens, 1-hour write B - A, 5-minute write C - B, uncached input the
  rest of the prompt.
- A prefix shorter than the model's minimum cacheable length is neither written nor read, and
  no error is returned (`MIN_CACHEABLE_TOKENS`).
"""

from __future__ import annotations

from evo_magic.catalog import MIN_CACHEABLE_TOKENS, min_cacheable_tokens
from evo_magic.prompt_cache.placement import (
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    TTL_SECONDS,
    CacheSettings,
    MarkedMessages,
    PlacedRequest,
    Spot,
    estimate_tokens,
    place_breakpoints,
)
from evo_magic.prompt_cache.prefix import (
    CachedPrefix,
    PrefixChain,
    PrefixTracker,
    cache_request,
    prefix_key,
    start_key,
)
from evo_magic.prompt_cache.simulation import (
    Breakpoint,
    CacheRequest,
    CacheUsage,
    PrefixCache,
    clearing_saving,
    simulate,
)

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "MIN_CACHEABLE_TOKENS",
    "TTL_SECONDS",
    "Breakpoint",
    "CacheRequest",
    "CacheSettings",
    "MarkedMessages",
    "CacheUsage",
    "CachedPrefix",
    "PlacedRequest",
    "PrefixCache",
    "PrefixChain",
    "PrefixTracker",
    "Spot",
    "cache_request",
    "clearing_saving",
    "estimate_tokens",
    "min_cacheable_tokens",
    "place_breakpoints",
    "prefix_key",
    "simulate",
    "start_key",
]
