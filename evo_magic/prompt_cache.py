"""Prompt caching: where the cache breakpoints of a request go, and what a run of calls would read.

Two pure parts, after the Messages API's prompt-caching documentation (platform.claude.com/docs/
en/build-with-claude/prompt-caching, read 2026-12-03):

1. `place_breakpoints` marks a request with ``cache_control`` so that the tools and system prompt,
   and the conversation up to the newest message, are cached across the calls of an agent loop.
   `PrefixTracker` follows, from each call's usage, where the cached prefix of a session's
   history ends (`CachedPrefix`): what a cache-aware compaction weighs.
2. `PrefixCache` is an offline model of the server's prefix cache: given each call's breakpoints
   (token counts and identities of the prefixes) and its time, it says which prompt tokens would
   be read from the cache, written to it (by TTL) or sent uncached, as the API's ``usage`` would.
   `cache_request` turns a marked request into its input; `clearing_saving` prices the choice a
   cache-aware compaction faces.

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

import hashlib
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.catalog import MIN_CACHEABLE_TOKENS, min_cacheable_tokens, model_family
from evo_magic.measure import estimate_tokens as estimate_chars_tokens
from evo_magic.measure import to_json
from evo_magic.price import Price
from evo_magic.usage import Usage

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "MIN_CACHEABLE_TOKENS",
    "TTL_SECONDS",
    "Breakpoint",
    "CacheRequest",
    "CacheSettings",
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

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
UNCACHEABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})

# When the model is unknown, placement assumes the most common minimum.
DEFAULT_MIN_CACHEABLE_TOKENS = 1024


# --------------------------------------------------------------------------- placement


@dataclass(frozen=True)
class CacheSettings:
    """How requests are cached.

    ``ttl`` applies to the conversation breakpoints and, unless ``static_ttl`` says otherwise,
    to the tools and system breakpoints. ``static_ttl="1h"`` with ``ttl="5m"`` keeps the fixed
    part warm across idle spells for the 1-hour write price; the reverse (a 5-minute static
    part before a 1-hour conversation) is what the API rejects, so it raises ValueError here.
    """

    enabled: bool = True
    ttl: str = "5m"
    static_ttl: str | None = None

    def __post_init__(self) -> None:
        for name in ("ttl", "static_ttl"):
            value = getattr(self, name)
            if value is not None and value not in TTL_SECONDS:
                raise ValueError(f"cache {name} must be '5m' or '1h', not {value!r}")
        if self.prefix_ttl == "5m" and self.ttl == "1h":
            raise ValueError(
                "a 1-hour conversation cache cannot follow a 5-minute tools/system cache "
                "(the API requires 1-hour breakpoints before 5-minute ones)"
            )

    @property
    def prefix_ttl(self) -> str:
        """The TTL of the tools and system breakpoints."""
        return self.static_ttl or self.ttl


@dataclass(frozen=True)
class Spot:
    """Where a breakpoint went: ``section`` index and, in a message, the content block."""

    section: str
    """"tools", "system" or "messages"."""
    index: int
    """The tool, the system block, or the message."""
    block: int | None
    """The content block within the message; None for tools and system."""
    ttl: str


@dataclass(frozen=True)
class PlacedRequest:
    """Request parameters with their cache breakpoints, and where those are."""

    params: dict[str, Any]
    """``messages``, plus ``system`` and ``tools`` when given: ready to pass to the SDK."""
    breakpoints: tuple[Spot, ...]


def place_breakpoints(
    messages: Sequence[dict[str, Any]],
    *,
    system: str | Sequence[dict[str, Any]] = "",
    tools: Sequence[dict[str, Any]] = (),
    settings: CacheSettings | None = None,
    model: str | None = None,
    edited_from: int | None = None,
    mark_newest: bool = True,
) -> PlacedRequest:
    """``system``, ``tools`` and ``messages`` marked for caching; the arguments are not mutated.

    The breakpoints (at most 4, all with the settings' TTLs):

    - the end of the system prompt (or of the tools when there is no system prompt): the fixed
      part is read from the cache even when the conversation changed (after a compaction);
    - the last tool too, when there is a system prompt and the tools alone reach the model's
      minimum cacheable length (estimated), so a changed system prompt keeps the tools cached;
    - the newest message's last block that may carry a breakpoint: writes the whole
      conversation for the next call (not with ``mark_newest=False``: a request whose prompt
      is never sent again, such as a summary, reads what earlier calls wrote and writes
      nothing, its new tail billed as input instead of written at a premium);
    - the same in the message that ended the previous call (three messages back: the loop adds
      an assistant reply and a user message per call). It reads exactly what that call wrote,
      however many blocks the last turn added (the API's lookback only spans 20 blocks);
    - or, when ``edited_from`` says that message was changed in place since the previous call
      (a micro-compaction) and it comes before that call's end, the edited message instead:
      the previous call's entries are gone, and an entry there is what the next request reads
      when the next edit comes later in the history (every clearing strategy moves forward),
      so each clearing rewrites the conversation from the previous edit on, not all of it.

    Thinking blocks and empty text blocks are never marked (the API rejects that): the breakpoint
    goes to the nearest earlier block that may carry one. A string system prompt or message
    content becomes one text block, which the API treats the same.

    Only what changes is copied: the marked system blocks and tools, the (at most two) marked
    messages with their content lists, and the list of message references (a C-level copy; no
    message is visited beyond the marked ones). The messages must not carry ``cache_control`` of
    their own (the history keeps them unmarked), as those are not scanned for. Markers already
    in ``system`` or ``tools`` are replaced by this placement. With caching disabled, the
    request carries no breakpoint: markers in ``system`` and ``tools`` are dropped and the
    messages are passed on as given.
    """
    settings = settings or CacheSettings()
    new_tools = list(tools)
    new_system: str | list[dict[str, Any]] = system if isinstance(system, str) else list(system)
    _strip_markers(new_tools)
    if not isinstance(new_system, str):
        _strip_markers(new_system)
    if not settings.enabled:
        return PlacedRequest(_params(messages, new_system, new_tools), ())
    spots: list[Spot] = []
    static_control = _control(settings.prefix_ttl)
    marked_system = _mark_system(new_system, static_control)
    if marked_system is not None:
        new_system, index = marked_system
        if new_tools and _tools_worth_a_breakpoint(new_tools, model):
            new_tools[-1] = {**new_tools[-1], "cache_control": static_control}
            spots.append(Spot("tools", len(new_tools) - 1, None, settings.prefix_ttl))
        spots.append(Spot("system", index, None, settings.prefix_ttl))
    elif new_tools:
        new_tools[-1] = {**new_tools[-1], "cache_control": static_control}
        spots.append(Spot("tools", len(new_tools) - 1, None, settings.prefix_ttl))
    new_messages = list(messages)
    control = _control(settings.ttl)
    for spot in _conversation_spots(messages, settings.ttl, edited_from, mark_newest):
        new_messages[spot.index] = _marked_message(messages[spot.index], spot.block, control)
        spots.append(spot)
    spots.sort(key=_prompt_order)
    return PlacedRequest(_params(new_messages, new_system, new_tools), tuple(spots))


def _params(messages: Any, system: Any, tools: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"messages": messages}
    if system:
        params["system"] = system
    if tools:
        params["tools"] = tools
    return params


def _control(ttl: str) -> dict[str, str]:
    # The 5-minute TTL is the API's default: leave it implicit, as most clients send it.
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def _strip_markers(blocks: list[dict[str, Any]]) -> None:
    """Drop ``cache_control`` from the items of ``blocks`` (a fresh list), copying only those."""
    for i, block in enumerate(blocks):
        if isinstance(block, dict) and "cache_control" in block:
            blocks[i] = {key: value for key, value in block.items() if key != "cache_control"}


def _mark_system(
    system: str | list[dict[str, Any]], control: dict[str, str]
) -> tuple[list[dict[str, Any]], int] | None:
    if isinstance(system, str):
        if not system.strip():
            return None
        return [{"type": "text", "text": system, "cache_control": control}], 0
    for i in range(len(system) - 1, -1, -1):
        if _may_carry_breakpoint(system[i]):
            system[i] = {**system[i], "cache_control": control}
            return system, i
    return None


def _tools_worth_a_breakpoint(tools: list[dict[str, Any]], model: str | None) -> bool:
    minimum = min_cacheable_tokens(model) if model else None
    return estimate_tokens(tools) >= (minimum or DEFAULT_MIN_CACHEABLE_TOKENS)


def _conversation_spots(
    messages: Sequence[dict[str, Any]], ttl: str, edited_from: int | None, mark_newest: bool
) -> list[Spot]:
    """The newest message's breakpoint (unless not `mark_newest`) and, before it, the previous
    call's end (or the message edited since, when that comes first)."""
    spots: list[Spot] = []
    newest = _last_markable(messages, len(messages) - 1)
    if newest is None:
        return spots
    before = min(newest[0] - 1, len(messages) - 3)
    if edited_from is not None and 0 <= edited_from < before:
        before = edited_from
    previous = _last_markable(messages, before)
    if previous is not None:
        spots.append(Spot("messages", previous[0], previous[1], ttl))
    if mark_newest:
        spots.append(Spot("messages", newest[0], newest[1], ttl))
    return spots


def _last_markable(messages: Sequence[dict[str, Any]], start: int) -> tuple[int, int] | None:
    """(message, block) of the last block at or before message ``start`` that may be marked.

    The walk back is bounded by the lookback window: a breakpoint further back would not help.
    """
    for i in range(start, max(-1, start - LOOKBACK_BLOCKS), -1):
        content = messages[i].get("content")
        if isinstance(content, str):
            if content.strip():
                return i, 0
            continue
        if not isinstance(content, list):
            continue
        for j in range(len(content) - 1, -1, -1):
            if _may_carry_breakpoint(content[j]):
                return i, j
    return None


def _may_carry_breakpoint(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in UNCACHEABLE_BLOCKS:
        return False
    if block.get("type") == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    return True


def _marked_message(message: dict[str, Any], block: int | None, control: dict[str, str]) -> dict:
    content = message["content"]
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content, "cache_control": control}]}
    new_content = list(content)
    index = 0 if block is None else block
    new_content[index] = {**content[index], "cache_control": control}
    return {**message, "content": new_content}


_SECTION_ORDER = {"tools": 0, "system": 1, "messages": 2}


def _prompt_order(spot: Spot) -> tuple[int, int, int]:
    return (_SECTION_ORDER[spot.section], spot.index, spot.block or 0)


# --------------------------------------------------------------------------- a session's prefix


@dataclass(frozen=True)
class CachedPrefix:
    """Where the prompt cache stands for a session's history, as the last model call left it."""

    tokens: int
    """Prompt tokens in the cache after that call (its cache reads plus writes): the tools, the
    system prompt and the messages before `end`, less what edits since invalidated."""
    end: int
    """The messages before this index are inside the cached prefix."""
    age: float
    """Seconds since that call."""
    ttl: str
    """The lifetime its breakpoints were written with."""
    price: Price | None
    """The rates of the model that made the call (None: no price known)."""

    @property
    def warm(self) -> bool:
        """True while the prefix is still in the cache (the last call was within its TTL)."""
        return self.age < TTL_SECONDS[self.ttl]


class PrefixTracker:
    """Follows where the cached prefix of a session's history ends.

    After each model call (`after_call`) the whole request it sent is cached when the usage
    reports cache reads or writes (the newest message carries a breakpoint). An edit of a
    message inside that prefix (`edited`) invalidates the cache from that message on; a
    history replaced or reset (`replaced`) leaves no message in it. `prefix()` says where it
    stands now, or None when nothing of the history is cached (caching off, a prompt below
    the model's minimum cacheable length, no call yet).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        """Seconds on a clock that only moves forward (the age of the prefix)."""
        self._tokens = 0
        self._end = 0
        self._time = 0.0
        self._ttl = "5m"
        self._price: Price | None = None
        self._edited_from: int | None = None

    def after_call(
        self,
        usage: Usage,
        messages_sent: int,
        settings: CacheSettings | None,
        price: Price | None,
    ) -> None:
        """A call that sent ``messages_sent`` messages, with ``settings``, returned ``usage``."""
        cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        enabled = settings is not None and settings.enabled and cached > 0
        self._tokens = cached if enabled else 0
        self._end = messages_sent if enabled else 0
        self._time = self.clock()
        self._ttl = settings.ttl if settings is not None else "5m"
        self._price = price
        self._edited_from = None

    def edited(self, index: int, invalidated_tokens: int) -> None:
        """Message ``index`` changed; ``invalidated_tokens`` of the prefix were after it."""
        if self._edited_from is None or index < self._edited_from:
            self._edited_from = index
        if index < self._end:
            self._end = index
            self._tokens = max(self._tokens - invalidated_tokens, 0)

    def replaced(self) -> None:
        """The history was replaced or emptied: none of its messages is cached any more."""
        self._tokens = 0
        self._end = 0
        self._edited_from = None

    @property
    def edited_from(self) -> int | None:
        """The first message changed in place since the last call (None: none was); the next
        request puts a breakpoint there (see `place_breakpoints`)."""
        return self._edited_from

    def prefix(self) -> CachedPrefix | None:
        """Where the cached prefix ends now; None when no message of the history is in it."""
        if self._end <= 0 or self._tokens <= 0:
            return None
        age = max(self.clock() - self._time, 0.0)
        return CachedPrefix(self._tokens, self._end, age, self._ttl, self._price)


# --------------------------------------------------------------------------- the cache model


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


# --------------------------------------------------------------------------- from a request


def estimate_tokens(value: Any) -> int:
    """A rough token count of `value`: its compact JSON's characters as `measure.estimate_tokens`
    counts them (the project's one estimate)."""
    return estimate_chars_tokens(len(to_json(value)))


def cache_request(
    params: dict[str, Any],
    *,
    time: float,
    model: str = "",
    tokens_of: Callable[[Any], int] = estimate_tokens,
    prompt_tokens: int | None = None,
) -> CacheRequest:
    """The `CacheRequest` of request ``params`` (``tools``, ``system``, ``messages``, marked).

    Walks every block in prompt order, so it costs O(prompt): meant for offline replay, not for
    the request path. Each block's tokens come from ``tokens_of`` (``cache_control`` left out,
    so a marker never changes a count or a key); keys chain a hash of the model and every block
    before, with its role, so equal keys mean identical prefixes. ``prompt_tokens`` defaults to
    the sum over the blocks (pass the recorded usage's total for exact figures).
    """
    digest = start_key(model)
    boundaries: list[tuple[int, bytes]] = []
    breakpoints: list[Breakpoint] = []
    total = 0
    for role, block, opens_message in _prompt_blocks(params):
        unmarked = _unmarked(block)
        digest = prefix_key(digest, role, unmarked)
        total += tokens_of(unmarked)
        if opens_message:  # the message's own framing (role and structure) is prompt too
            total += tokens_of({"role": role, "content": []})
        control = block.get("cache_control") if isinstance(block, dict) else None
        if isinstance(control, dict):
            window = tuple(reversed(boundaries[-(LOOKBACK_BLOCKS - 1) :]))
            breakpoints.append(Breakpoint(total, digest, control.get("ttl", "5m"), window))
        boundaries.append((total, digest))
    if prompt_tokens is None:
        prompt_tokens = total
    return CacheRequest(time, max(prompt_tokens, total), tuple(breakpoints))


def start_key(model: str) -> bytes:
    """The key of the empty prompt of ``model`` (caches are per model): where every chain of
    prefix keys starts."""
    return hashlib.blake2b(model_family(model).encode(), digest_size=16).digest()


def prefix_key(previous: bytes, role: str, block: Any) -> bytes:
    """The key of the prefix that ends with ``block`` (unmarked, in a message of ``role``, or
    "tools" / "system") after the prefix keyed ``previous``: equal keys, identical prefixes.
    Keys keep their order: the API renders a tool_use input as given, so reordered keys are a
    different prefix (its docs warn about languages that shuffle them)."""
    return _next_key(previous, to_json([role, block]))


def _next_key(previous: bytes, encoded: str) -> bytes:
    return hashlib.blake2b(previous + encoded.encode(), digest_size=16).digest()


_ROLE_JSON = {role: to_json(role) for role in ("user", "assistant", "tools", "system")}
_MESSAGE_FRAMING = len('{"role":,"content":[')


class PrefixChain:
    """The prefix keys of a conversation, block by block, after a fixed start (the tools and
    system prompt), kept up to date as the messages change: `update` rehashes from the first
    message that is not the same object as before, so a call costs what changed.

    For each block it keeps the key of the prefix that ends there and where that prefix ends
    in the characters of the messages' JSON list (`chars`), so that a breakpoint anywhere in
    the conversation gets its key, its position and the 20-block lookback window the API
    reads (`breakpoint`).
    """

    def __init__(self, start: bytes):
        self.start = start
        self._messages: list[Any] = []
        self._keys: list[list[bytes]] = []
        self._ends: list[list[int]] = []

    def update(self, messages: Sequence[dict[str, Any]]) -> None:
        """Follow ``messages`` (a history's messages, treated as immutable)."""
        first = 0
        for old, new in zip(self._messages, messages):  # noqa: B905 (lengths differ)
            if old is not new:
                break
            first += 1
        del self._messages[first:], self._keys[first:], self._ends[first:]
        key = self.key()
        end = self._ends[-1][-1] if self._ends else 0
        for message in messages[first:]:
            role = message.get("role", "")
            role_json = _ROLE_JSON.get(role) or to_json(role)
            prefix = "[" + role_json + ","
            # `{"role":<role>,"content":[` after the list's bracket or comma, then the blocks.
            end += 1 + len(role_json) + _MESSAGE_FRAMING
            keys: list[bytes] = []
            ends: list[int] = []
            for position, block in enumerate(_message_blocks(message)):
                encoded = to_json(_unmarked(block))
                key = _next_key(key, prefix + encoded + "]")
                end += len(encoded) + (position > 0)
                keys.append(key)
                ends.append(end)
            end += 2  # `]}`
            if ends:
                ends[-1] = end  # a breakpoint on the last block caches the whole message
            else:
                keys.append(key)
                ends.append(end)
            self._messages.append(message)
            self._keys.append(keys)
            self._ends.append(ends)

    def key(self) -> bytes:
        """The key of the whole conversation's prefix."""
        return self._keys[-1][-1] if self._keys else self.start

    @property
    def chars(self) -> int:
        """Characters of the messages' JSON list (as `measure.message_chars` counts them)."""
        return self._ends[-1][-1] + 1 if self._ends else 2

    def breakpoint(self, spot: Spot, overhead: int, tokens_per_char: float) -> Breakpoint:
        """The cache's view of a breakpoint at ``spot`` (a message spot of `place_breakpoints`):
        its key, its tokens and its lookback window, a prefix of ``chars`` characters of the
        messages counting ``overhead + round(tokens_per_char * chars)`` tokens (``overhead``:
        the tools and system prompt)."""
        index, block = spot.index, spot.block or 0
        need = LOOKBACK_BLOCKS - 1
        ends: list[int] = []
        keys: list[bytes] = []
        i, upto = index, block
        while i >= 0 and len(ends) < need:
            ends += self._ends[i][upto - 1 :: -1] if upto > 0 else []
            keys += self._keys[i][upto - 1 :: -1] if upto > 0 else []
            i -= 1
            upto = len(self._ends[i]) if i >= 0 else 0
        del ends[need:], keys[need:]
        pairs = zip(ends, keys, strict=True)
        window = [(overhead + round(tokens_per_char * chars), key) for chars, key in pairs]
        if i < 0 and len(window) < need:
            window.append((overhead, self.start))
        tokens = overhead + round(tokens_per_char * self._ends[index][block])
        return Breakpoint(tokens, self._keys[index][block], spot.ttl, tuple(window))


def _message_blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or ())


def _prompt_blocks(params: dict[str, Any]) -> Iterable[tuple[str, Any, bool]]:
    """(role, block, whether it opens a message) in the order the API processes the prompt."""
    for tool in params.get("tools") or ():
        yield "tools", tool, False
    system = params.get("system")
    if isinstance(system, str):
        if system:
            yield "system", {"type": "text", "text": system}, False
    else:
        for block in system or ():
            yield "system", block, False
    for message in params.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for position, block in enumerate(content or ()):
            yield message.get("role", ""), block, position == 0


def _unmarked(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block
