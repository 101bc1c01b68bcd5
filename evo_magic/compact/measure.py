"""How big a context is: characters as the seed measures them, and tokens without a request.

Characters are the length of the compact JSON encoding of the messages (the seed's measure; the
system prompt and tool schemas are not counted). Tokens are exact from the last response's usage
for the messages that call sent, plus an estimate for anything appended or changed since.

`measure` runs several times before every model call, on a history that only grows at its end,
so it remembers each message's size (see `cached_message_chars`) instead of encoding the whole
history each time; `message_chars` is the uncached reference.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from evo_magic.events import ContextSize

CHARS_PER_TOKEN = 4


# json.dumps builds a new encoder for every call with non-default options; this runs per record
# and per measured message, so keep one.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def to_json(value: Any) -> str:
    """The compact JSON encoding used for every size in evo_magic."""
    return _ENCODER.encode(value)


def message_chars(messages: list[dict[str, Any]]) -> int:
    """Characters of the JSON encoding of `messages`."""
    return len(to_json(messages))


# Message id -> (message, its content, len(content), chars of the message's JSON). The entry holds
# the message so that its id cannot be reused while the entry exists.
_SizeEntry = tuple[dict[str, Any], Any, int, int]
_sizes: dict[int, _SizeEntry] = {}
# Lists shorter than this are encoded directly: cheap, and not worth an entry per message.
CACHE_MIN_MESSAGES = 16
# When the cache holds more entries than this, those of messages nothing else holds are dropped;
# the next check comes when the cache has doubled, so the cost per message stays constant.
CACHE_SLACK = 4_096
_prune_at = CACHE_SLACK


def cached_message_chars(messages: list[dict[str, Any]]) -> int:
    """`message_chars(messages)`, exactly, encoding only the messages not measured before.

    A remembered size is used while the message's content is the same object with the same
    length. Every change evo_magic makes passes that test: appending a message, merging into the
    last one (a new content list), and micro-compaction (which calls `forget`). Code that edits a
    content block in place must call `forget(message)`.
    """
    if len(messages) < CACHE_MIN_MESSAGES:
        return message_chars(messages)
    sizes = _sizes
    total = 0
    for message in messages:
        content = message.get("content")
        # The entry holds its message, so an entry under this id is this message's.
        entry = sizes.get(id(message))
        if entry is not None and entry[1] is content and entry[2] == len(content):
            total += entry[3]
            continue
        chars = len(to_json(message))
        if isinstance(content, list | str):  # else len() above would fail: never remembered
            sizes[id(message)] = (message, content, len(content), chars)
        total += chars
    if len(sizes) > _prune_at:
        _prune()
    # "[" + messages joined by "," + "]"
    return total + len(messages) + 1


def forget(message: dict[str, Any]) -> None:
    """Drop the remembered size of `message` (its content was edited in place)."""
    _sizes.pop(id(message), None)


def _prune() -> None:
    """Drop the entries of messages that only the cache still holds (replaced histories, other
    sessions gone). Several live sessions keep all their entries: no thrashing between them."""
    global _prune_at
    for key, entry in list(_sizes.items()):  # a copy: another thread may be adding entries
        # References: the entry tuple and getrefcount's argument. CPython counts exactly; on
        # another interpreter a higher count only means the entry is kept.
        if sys.getrefcount(entry[0]) <= 2:
            _sizes.pop(key, None)
    _prune_at = max(CACHE_SLACK, 2 * len(_sizes))


def estimate_tokens(chars: int) -> int:
    """A rough token count for `chars` characters of JSON (about four per token)."""
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class TokenAnchor:
    """The exact count the API gave for the last request: its messages' size and its tokens."""

    chars: int
    tokens: int


def measure(messages: list[dict[str, Any]], anchor: TokenAnchor | None) -> ContextSize:
    """The size of `messages`, with tokens anchored on the last exact count when there is one."""
    chars = cached_message_chars(messages)
    if anchor is None:
        return ContextSize(len(messages), chars, estimate_tokens(chars))
    delta = chars - anchor.chars
    tokens = anchor.tokens + (estimate_tokens(delta) if delta >= 0 else -estimate_tokens(-delta))
    return ContextSize(len(messages), chars, max(tokens, 0), tokens_exact=delta == 0)
