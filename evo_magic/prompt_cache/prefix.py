"""Where the cached prefix of a conversation ends, and what identifies a prefix.

`PrefixTracker` follows, from each call's usage, where the cached prefix of a session's history
ends (`CachedPrefix`): what a cache-aware compaction weighs. Prefix keys chain a hash of the
model and of every block before (`start_key`, `prefix_key`), so equal keys mean identical
prefixes: `PrefixChain` keeps them for a conversation as it changes, and `cache_request` turns a
marked request into the input of the modelled cache (`evo_magic.prompt_cache.simulation`).
"""

from __future__ import annotations

import hashlib
import operator
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.catalog import model_family
from evo_magic.encoded import PLAIN, EncodedBlocks
from evo_magic.measure import to_json
from evo_magic.price import Price
from evo_magic.prompt_cache.placement import (
    LOOKBACK_BLOCKS,
    TTL_SECONDS,
    CacheSettings,
    Spot,
    estimate_tokens,
)
from evo_magic.prompt_cache.simulation import Breakpoint, CacheRequest
from evo_magic.usage import Usage


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

    def __init__(self, start: bytes, encoded: EncodedBlocks = PLAIN):
        self.start = start
        self._encoded = encoded
        """The JSON of blocks known already (a replayed conversation's, shared by its runs)."""
        self.compared = 0
        """Messages compared by identity so far, to find where the conversation changed."""
        self._messages: list[Any] = []
        self._keys: list[bytes] = []
        """The key of the prefix that ends at each block, message after message (a message
        without blocks has one, ending with it)."""
        self._ends: list[int] = []
        """Where each of those prefixes ends in the characters of the messages' JSON list."""
        self._offsets: list[int] = []
        """Where each message's first entry is in `_keys` and `_ends`."""

    def update(self, messages: Sequence[dict[str, Any]], unchanged: int = 0) -> None:
        """Follow ``messages`` (a history's messages, treated as immutable). The caller may
        know that the first ``unchanged`` of them are the ones followed before (a history
        says what it changed): those are not compared again, so a call costs what changed."""
        known = min(unchanged, len(self._messages), len(messages))
        # The first message after those that is not the one followed: compared by identity at
        # C speed (`map` stops at the shorter list), since this runs at every call of a replay.
        same = list(map(operator.is_, self._messages[known:], messages[known:]))
        self.compared += len(same)
        first = known + (same.index(False) if False in same else len(same))
        cut = self._offsets[first] if first < len(self._offsets) else len(self._keys)
        del self._messages[first:], self._offsets[first:], self._keys[cut:], self._ends[cut:]
        key = self.key()
        end = self._ends[-1] if self._ends else 0
        shared = self._encoded.prefix_keys
        for message in messages[first:]:
            role = message.get("role", "")
            role_json = _ROLE_JSON.get(role) or to_json(role)
            prefix = "[" + role_json + ","
            # `{"role":<role>,"content":[` after the list's bracket or comma, then the blocks.
            end += 1 + len(role_json) + _MESSAGE_FRAMING
            keys: list[bytes] = []
            ends: list[int] = []
            for position, block in enumerate(_message_blocks(message)):
                encoded = self._encoded.unmarked(block)
                if shared is None:
                    key = _next_key(key, prefix + encoded + "]")
                else:  # the same prefix as another run of the conversation: its key
                    pair = (key, role_json, encoded)
                    found = shared.get(pair)
                    if found is None:
                        found = shared[pair] = _next_key(key, prefix + encoded + "]")
                    key = found
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
            self._offsets.append(len(self._keys))
            self._keys += keys
            self._ends += ends

    def key(self) -> bytes:
        """The key of the whole conversation's prefix."""
        return self._keys[-1] if self._keys else self.start

    @property
    def chars(self) -> int:
        """Characters of the messages' JSON list (as `measure.message_chars` counts them)."""
        return self._ends[-1] + 1 if self._ends else 2

    def breakpoint(self, spot: Spot, overhead: int, tokens_per_char: float) -> Breakpoint:
        """The cache's view of a breakpoint at ``spot`` (a message spot of `place_breakpoints`):
        its key, its tokens and its lookback window, a prefix of ``chars`` characters of the
        messages counting ``overhead + round(tokens_per_char * chars)`` tokens (``overhead``:
        the tools and system prompt)."""
        at = self._offsets[spot.index] + (spot.block or 0)
        need = LOOKBACK_BLOCKS - 1
        # The blocks before it, nearest first: the prefixes they end (the lookback window).
        since = max(at - need, 0)
        pairs = zip(reversed(self._ends[since:at]), reversed(self._keys[since:at]), strict=True)
        window = [(overhead + round(tokens_per_char * chars), key) for chars, key in pairs]
        if at < need:  # the window reaches back to the start: the tools and system prompt
            window.append((overhead, self.start))
        tokens = overhead + round(tokens_per_char * self._ends[at])
        return Breakpoint(tokens, self._keys[at], spot.ttl, tuple(window))


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
