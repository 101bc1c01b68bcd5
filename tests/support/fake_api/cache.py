"""The fake's prompt cache, as the prompt-caching docs describe it: the fake's token count of a
prompt (`estimate_input_tokens`, `cached_block_tokens`), the per-model minimum cacheable
length, and the prefix cache itself with lifetimes on a `FakeClock`."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from support.fake_api.script import text

CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}

MAX_CACHE_BREAKPOINTS = 4

CACHE_LOOKBACK_BLOCKS = 20

DEFAULT_MIN_CACHEABLE_TOKENS = 1024

MIN_CACHEABLE_TOKENS = {
    # The docs' per-model minimums (Claude API); Haiku 5.5 and the 5.2 models assumed at 512.
    **dict.fromkeys(
        [
            "fable-5-2",
            "mythos-5-2",
            "fable-5-1",
            "mythos-5-1",
            "fable-5",
            "mythos-5",
            "opus-5-5",
            "opus-5",
            "sonnet-5-5",
            "haiku-5-5",
        ],
        512,
    ),
    **dict.fromkeys(
        ["opus-4-8", "sonnet-5", "sonnet-4-6", "sonnet-4-5", "opus-4-1", "opus-4", "sonnet-4"], 1024
    ),
    **dict.fromkeys(["opus-4-7", "mythos-preview", "3-5-haiku"], 2048),
    **dict.fromkeys(["opus-4-6", "opus-4-5", "haiku-4-5"], 4096),
}
"""Minimum cacheable prompt length by model (``claude-`` prefix and snapshot date left out)."""


UNMARKABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def may_be_cached(block: dict) -> bool:
    if block.get("type") in UNMARKABLE_BLOCKS:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


class FakeClock:
    """The fake's clock for cache lifetimes: seconds that move only when a test advances them."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (>= 0)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._now += seconds


def cached_block_tokens(block: dict) -> int:
    """The fake's token count of one prompt block: its JSON without ``cache_control``, over 4."""
    unmarked = {key: value for key, value in block.items() if key != "cache_control"}
    return len(json.dumps(unmarked)) // 4


@dataclass
class _Unit:
    """One block of the prompt, in processing order, as the cache sees it."""

    tokens: int  # prompt tokens up to and including this block
    key: bytes  # hash of the model and every block up to this one
    ttl: str | None  # its breakpoint's TTL, or None when it has no breakpoint


def cache_units(body: dict) -> list[_Unit]:
    """The prompt's blocks (tools, system, message blocks) with running tokens and prefix keys.

    A string system prompt or message content counts as one text block, as the API treats it.
    A marker inside a tool_result's content counts at the end of that tool_result.
    """
    digest = hashlib.sha256(_model_key(body.get("model", "")).encode()).digest()
    automatic = body.get("cache_control")
    units: list[_Unit] = []
    tokens = 0
    last_cacheable = -1
    for role, block, opens_message in _prompt_blocks(body):
        unmarked = {key: value for key, value in block.items() if key != "cache_control"}
        digest = hashlib.sha256(digest + json.dumps([role, unmarked]).encode()).digest()
        tokens += cached_block_tokens(block)
        if opens_message:  # a message's framing is part of the prefix that holds it
            tokens += len(json.dumps({"role": role, "content": []})) // 4
        control = _block_marker(block)
        units.append(_Unit(tokens, digest, control.get("ttl", "5m") if control else None))
        if may_be_cached(block):
            last_cacheable = len(units) - 1
    if automatic is not None and last_cacheable >= 0 and units[last_cacheable].ttl is None:
        units[last_cacheable].ttl = automatic.get("ttl", "5m")
    return units


def _block_marker(block: dict) -> dict | None:
    if block.get("cache_control") is not None:
        return block["cache_control"]
    inner = block.get("content") if block.get("type") == "tool_result" else None
    if isinstance(inner, list):
        markers = [b["cache_control"] for b in inner if b.get("cache_control") is not None]
        return markers[-1] if markers else None
    return None


def _prompt_blocks(body: dict) -> Iterator[tuple[str, dict, bool]]:
    """(role, block, whether it is the first block of a message), in processing order."""
    for tool in body.get("tools") or []:
        yield "tools", tool, False
    system = body.get("system")
    if isinstance(system, str):
        if system:
            yield "system", text(system), False
    else:
        yield from (("system", block, False) for block in system or [])
    for message in body["messages"]:
        content = message["content"]
        blocks = [text(content)] if isinstance(content, str) else content
        yield from ((message["role"], block, i == 0) for i, block in enumerate(blocks))


def _model_key(model: str) -> str:
    """``model`` without its ``claude-`` prefix and snapshot date (caches are per model)."""
    return re.sub(r"-\d{8}$", "", model.lower()).removeprefix("claude-")


@dataclass
class _CacheEntry:
    ttl: str
    expires: float


class PromptCache:
    """The server-side prompt cache, as the prompt-caching docs describe it.

    Entries are keyed by the exact prefix up to a breakpoint. A breakpoint reads the entry at its
    own block or, walking back, at one of the 19 blocks before it (20 positions); a read
    refreshes the entry for its TTL. A breakpoint that finds no entry of its own writes one.
    Billing: read the longest hit A; write at 1 hour up to the last 1-hour breakpoint B after A;
    write at 5 minutes up to the last breakpoint C; the rest is uncached input. Prefixes below
    the model's minimum cacheable length are neither written nor read.
    """

    def __init__(self, clock: FakeClock, min_tokens: int | Mapping[str, int] | None) -> None:
        self.clock = clock
        self.min_tokens = min_tokens
        self._entries: dict[bytes, _CacheEntry] = {}
        self._lock = threading.Lock()

    def minimum(self, model: str) -> int:
        if isinstance(self.min_tokens, int):
            return self.min_tokens
        if isinstance(self.min_tokens, Mapping) and model in self.min_tokens:
            return self.min_tokens[model]
        return MIN_CACHEABLE_TOKENS.get(_model_key(model), DEFAULT_MIN_CACHEABLE_TOKENS)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def usage(self, body: dict) -> dict[str, Any]:
        """The cache part of the usage of ``body``, updating the cache as the API would."""
        units = cache_units(body)
        # The prompt as the cache sees it: every block and the framing of each message (the
        # markers themselves are not tokens), so what follows the last breakpoint is all that
        # is billed as uncached input.
        total = estimate_input_tokens(body)
        minimum = max(1, self.minimum(body.get("model", "")))
        marked = [i for i, unit in enumerate(units) if unit.ttl and unit.tokens >= minimum]
        with self._lock:
            now = self.clock.now()
            hit = max([0, *(self._read(units, i, now) for i in marked)])
            for i in marked:
                if self._live(units[i].key, now) is None:
                    ttl = units[i].ttl or "5m"
                    self._entries[units[i].key] = _CacheEntry(ttl, now + CACHE_TTL_SECONDS[ttl])
        last = max([hit, *(units[i].tokens for i in marked)])
        upto_1h = max([hit, *(units[i].tokens for i in marked if units[i].ttl == "1h")])
        return {
            "input_tokens": total - last,
            "cache_creation_input_tokens": last - hit,
            "cache_read_input_tokens": hit,
            "cache_creation": {
                "ephemeral_5m_input_tokens": last - upto_1h,
                "ephemeral_1h_input_tokens": upto_1h - hit,
            },
        }

    def _live(self, key: bytes, now: float) -> _CacheEntry | None:
        entry = self._entries.get(key)
        return entry if entry is not None and now < entry.expires else None

    def _read(self, units: list[_Unit], index: int, now: float) -> int:
        for j in range(index, max(-1, index - CACHE_LOOKBACK_BLOCKS), -1):
            entry = self._live(units[j].key, now)
            if entry is not None:
                entry.expires = now + CACHE_TTL_SECONDS[entry.ttl]
                return units[j].tokens
        return 0


def estimate_input_tokens(body: dict) -> int:
    """The fake's token count of a request's prompt: each tool, system and message block (its
    JSON without ``cache_control``, over 4) and each message's framing. The prompt cache counts
    the same blocks, so cached, written and uncached tokens always add up to this."""
    units = cache_units(body) if isinstance(body.get("messages"), list) else []
    return max(1, units[-1].tokens if units else 0)
