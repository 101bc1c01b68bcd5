"""How big a context is: characters as the seed measures them, and tokens without a request.

Characters are the length of the compact JSON encoding of the messages (the seed's measure; the
system prompt and tool schemas are not counted). Tokens are exact from the last response's usage
for the messages that call sent, plus an estimate for anything appended or changed since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evo_magic.events import ContextSize

CHARS_PER_TOKEN = 4


def to_json(value: Any) -> str:
    """The compact JSON encoding used for every size in evo_magic."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def message_chars(messages: list[dict[str, Any]]) -> int:
    """Characters of the JSON encoding of `messages`."""
    return len(to_json(messages))


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
    chars = message_chars(messages)
    if anchor is None:
        return ContextSize(len(messages), chars, estimate_tokens(chars))
    delta = chars - anchor.chars
    tokens = anchor.tokens + (estimate_tokens(delta) if delta >= 0 else -estimate_tokens(-delta))
    return ContextSize(len(messages), chars, max(tokens, 0), tokens_exact=delta == 0)
