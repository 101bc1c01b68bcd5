"""The server's prompt cache, modelled offline (`PrefixCache`): given each call's breakpoints
(token counts and identities of the prefixes) and its time, which prompt tokens would be read
from the cache, written to it (by TTL) or sent uncached, as the API's ``usage`` would say; and
`clearing_saving`, the price of the choice a cache-aware compaction faces."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evo_magic.price import Price
from evo_magic.prompt_cache.placement import LOOKBACK_BLOCKS, MAX_BREAKPOINTS, TTL_SECONDS
from evo_magic.usage import Usage


@dataclass(frozen=True)
class Breakpoint:
    """One breakpoint of a call, as the cache sees it.

    ``tokens`` counts the prompt from its start up to and including the marked block. ``key``
    identifies that prefix: two breakpoints share a key exactly when their prefixes are
    identical (same model, same bytes; `cache_request` derives keys by hashing). ``lookback``
    lists earlier block boundaries of the same prompt, nearest first, as ``(tokens, key)``: the
    positions the API checks for an earlier write when the breakpoint itself misses (at most
    ``LOOKBACK_BLOCKS - 1`` are used).
    """

    tokens: int
    key: Hashable
    ttl: str = "5m"
    lookback: tuple[tuple[int, Hashable], ...] = ()


@dataclass(frozen=True)
class CacheRequest:
    """One call: when it starts, how long its prompt is, and its breakpoints in prompt order."""

    time: float
    """Seconds on any clock that only moves forward."""
    prompt_tokens: int
    """Every input token of the call (what usage reports as input plus cache reads and writes)."""
    breakpoints: tuple[Breakpoint, ...] = ()


@dataclass(frozen=True)
class CacheUsage:
    """What one call would be billed for, in the field names of the API's ``usage``."""

    input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def to_usage(self) -> Usage:
        """As a `Usage` (no output tokens), its cache writes split by TTL."""
        return Usage(
            input_tokens=self.input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
            cache_write_5m_tokens=self.ephemeral_5m_input_tokens,
            cache_write_1h_tokens=self.ephemeral_1h_input_tokens,
        )

    def as_usage(self) -> dict[str, Any]:
        """The API's JSON ``usage`` shape (without ``output_tokens``)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


@dataclass
class _Entry:
    ttl: str
    expires: float


@dataclass
class PrefixCache:
    """The server's prompt cache, modelled: entries by prefix key, each with a TTL.

    Feed it calls in time order with `call`; it answers with the usage the API would report and
    updates its entries: a hit refreshes the entry for its own TTL from the call's start, a miss
    at a breakpoint writes an entry there. An entry written at time t serves calls that start
    before t + TTL. Prefixes shorter than ``min_tokens`` are neither written nor read. Entries
    live until they expire: the model is the best case, with no eviction under load.

    Each call costs O(breakpoints x lookback) dictionary lookups, independent of the prompt's
    length; expired entries are swept as the table doubles, so memory follows the live set.
    """

    min_tokens: int = 0
    _entries: dict[Hashable, _Entry] = field(default_factory=dict, repr=False)
    _last_time: float = field(default=float("-inf"), repr=False)
    _sweep_at: int = field(default=1024, repr=False)

    def call(self, request: CacheRequest) -> CacheUsage:
        """The usage of ``request``, after which the cache holds what it read and wrote.

        Raises ValueError for a call that starts before the previous one, or whose breakpoints
        the API would reject or that do not fit its prompt (more than 4, tokens decreasing or
        beyond ``prompt_tokens``, an unknown TTL, a 1-hour breakpoint after a 5-minute one).
        """
        _check_request(request, self._last_time)
        now = request.time
        self._last_time = now
        effective = [b for b in request.breakpoints if b.tokens >= max(self.min_tokens, 1)]
        hit = 0
        for bp in effective:
            found = self._read(bp, now)
            hit = max(hit, found)
        for bp in effective:
            if self._live(bp.key, now) is None:
                self._entries[bp.key] = _Entry(bp.ttl, now + TTL_SECONDS[bp.ttl])
        last = max([hit, *(bp.tokens for bp in effective)])
        long_lived = [bp.tokens for bp in effective if bp.ttl == "1h" and bp.tokens > hit]
        upto_1h = max([hit, *long_lived])
        self._maybe_sweep(now)
        return CacheUsage(
            input_tokens=request.prompt_tokens - last,
            cache_read_input_tokens=hit,
            ephemeral_5m_input_tokens=last - upto_1h,
            ephemeral_1h_input_tokens=upto_1h - hit,
        )

    def cached_tokens(self, positions: Iterable[tuple[int, Hashable]], now: float) -> int:
        """The longest of ``positions`` (``(tokens, key)``) whose prefix is cached at ``now``; 0
        if none. With the positions of a history, this is where its cached prefix ends: an edit
        before that point invalidates the cached tokens after it."""
        return max((tokens for tokens, key in positions if self._live(key, now)), default=0)

    def copy(self) -> PrefixCache:
        """An independent copy, for what-if runs (the live entries only)."""
        twin = PrefixCache(self.min_tokens)
        twin._entries = {key: _Entry(e.ttl, e.expires) for key, e in self._entries.items()}
        twin._last_time = self._last_time
        return twin

    def size(self) -> int:
        """Entries held, expired ones not yet swept included."""
        return len(self._entries)

    def _live(self, key: Hashable, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or now >= entry.expires:
            return None
        return entry

    def _read(self, bp: Breakpoint, now: float) -> int:
        """Tokens read at ``bp``: its own entry, else the nearest earlier write in the window."""
        candidates = ((bp.tokens, bp.key), *bp.lookback[: LOOKBACK_BLOCKS - 1])
        for tokens, key in candidates:
            entry = self._live(key, now)
            if entry is not None:
                entry.expires = now + TTL_SECONDS[entry.ttl]
                return tokens
        return 0

    def _maybe_sweep(self, now: float) -> None:
        if len(self._entries) < self._sweep_at:
            return
        self._entries = {k: e for k, e in self._entries.items() if now < e.expires}
        self._sweep_at = max(1024, 2 * len(self._entries))


def _check_request(request: CacheRequest, last_time: float) -> None:
    if request.time < last_time:
        raise ValueError(f"calls must come in time order: {request.time} after {last_time}")
    if len(request.breakpoints) > MAX_BREAKPOINTS:
        raise ValueError(f"at most {MAX_BREAKPOINTS} breakpoints, not {len(request.breakpoints)}")
    previous = 0
    seen_5m = False
    for bp in request.breakpoints:
        if bp.ttl not in TTL_SECONDS:
            raise ValueError(f"breakpoint ttl must be '5m' or '1h', not {bp.ttl!r}")
        if bp.ttl == "1h" and seen_5m:
            raise ValueError("a 1-hour breakpoint cannot come after a 5-minute one")
        seen_5m = seen_5m or bp.ttl == "5m"
        if not previous <= bp.tokens <= request.prompt_tokens:
            raise ValueError(
                f"breakpoint tokens must grow and fit the prompt ({request.prompt_tokens}): "
                f"{bp.tokens} after {previous}"
            )
        previous = bp.tokens


def simulate(requests: Iterable[CacheRequest], *, min_tokens: int = 0) -> list[CacheUsage]:
    """The usage of each of ``requests`` (in time order) against an initially empty cache."""
    cache = PrefixCache(min_tokens)
    return [cache.call(request) for request in requests]


def clearing_saving(
    *, freed_tokens: int, invalidated_tokens: int, calls_ahead: int, price: Price, ttl: str = "5m"
) -> float:
    """USD a clearing saves over the next ``calls_ahead`` calls; negative when it costs more.

    The clearing removes ``freed_tokens`` from a prompt whose cached prefix extends
    ``invalidated_tokens`` past the edit point (the freed tokens included). Left alone, every
    later call reads the freed tokens from the cache. Cleared, the first call writes the rest of
    the invalidated part again (at the ``ttl`` write rate instead of the read rate) and no call
    pays for the freed tokens. It assumes a warm cache and the same calls either way; with a
    cold cache (idle past the TTL) the rewrite happens regardless, so clearing only saves.
    """
    if min(freed_tokens, invalidated_tokens, calls_ahead) < 0:
        raise ValueError("token counts and calls ahead must be >= 0")
    if freed_tokens > invalidated_tokens:
        raise ValueError("the invalidated part includes the freed tokens: it cannot be smaller")
    write = price.cache_write_1h if ttl == "1h" else price.cache_write_5m
    kept_reads = calls_ahead * freed_tokens * price.cache_read
    rewrite = (invalidated_tokens - freed_tokens) * (write - price.cache_read)
    return (kept_reads - rewrite) / 1_000_000
