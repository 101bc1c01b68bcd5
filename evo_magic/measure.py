"""How big a context is: characters as the seed measures them, and tokens without a request.

Characters are the length of the compact JSON encoding of the messages (the seed's measure; the
system prompt and tool schemas are not counted). Tokens count the whole prompt a call sends
(system, tools and messages), as the API's usage does: exact from the last response for the
messages that call sent, plus an estimate for any change since, at the messages' tokens per
character fitted on the session's counts (`TokenRate`; four characters a token until then).

The history keeps each message's size as it changes (see `evo_magic.history`); the functions
here measure from scratch and are the reference it is tested against.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class ContextSize:
    """How big the context is: messages, characters of their JSON, and tokens of the prompt."""

    messages: int
    chars: int
    """Characters of the compact JSON of the messages (the seed's measure)."""
    tokens: int
    """Tokens of the whole prompt: system prompt, tools and messages."""
    tokens_exact: bool = False
    """True when `tokens` is the model's own count for exactly these messages."""

    def over(self, chars_limit: int | None, tokens_limit: int | None) -> bool:
        """True when this size exceeds `chars_limit` characters or `tokens_limit` tokens (a
        limit of None is off)."""
        over_chars = chars_limit is not None and self.chars > chars_limit
        return over_chars or (tokens_limit is not None and self.tokens > tokens_limit)


# json.dumps builds a new encoder for every call with non-default options; this runs per record
# and per message appended, so keep one.
def _as_list(value: Any) -> list[Any]:
    """A read-only sequence (the history's view a request holds) encodes as the list it reads
    like; anything else is not JSON."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_as_list)


def to_json(value: Any) -> str:
    """The compact JSON encoding used for every size in evo_magic."""
    return _ENCODER.encode(value)


def message_chars(messages: Sequence[dict[str, Any]]) -> int:
    """Characters of the JSON encoding of `messages` (a list of messages)."""
    return len(to_json(list(messages)))


def list_chars(item_chars: int, count: int) -> int:
    """Characters of a JSON list of `count` items whose encodings add up to `item_chars`:
    the brackets and the commas between the items."""
    return item_chars + max(count - 1, 0) + 2


def estimate_tokens(chars: int) -> int:
    """A rough token count for `chars` characters of JSON (about four per token)."""
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class TokenAnchor:
    """The exact count the API gave for the last request: its messages' size and its tokens,
    and the tokens per character of message JSON fitted so far (`TokenRate`)."""

    chars: int
    tokens: int
    rate: float = 1 / CHARS_PER_TOKEN

    @property
    def overhead_tokens(self) -> int:
        """Tokens of what is not messages (system prompt, tools) in that request."""
        return max(self.tokens - round(self.chars * self.rate), 0)


def anchored_tokens(chars: int, anchor: TokenAnchor) -> int:
    """Tokens of a prompt whose messages measure `chars`, from the last exact count."""
    return max(anchor.tokens + round((chars - anchor.chars) * anchor.rate), 0)


@dataclass
class TokenRate:
    """Tokens per character of message JSON, fitted on a session's exact counts.

    Each model call gives the prompt's tokens for messages of known characters; the system
    prompt and tools add the same tokens to every call, so a least-squares line through the
    counts has the messages' rate as its slope (the whole prompt's tokens over the messages'
    characters would count the fixed part as messages: twice the rate in a small session).
    Until the counts span `MIN_SPREAD` characters, or when the fit is implausible, the rate
    is the usual four characters a token.
    """

    MIN_SPREAD = 2_000
    n: int = 0
    mean_chars: float = 0.0
    mean_tokens: float = 0.0
    _sxx: float = 0.0
    _sxy: float = 0.0
    _low: int | None = None
    _high: int | None = None

    def add(self, chars: int, tokens: int) -> None:
        """One exact count: a prompt whose messages measured `chars` was `tokens` tokens."""
        self.n += 1
        dx = chars - self.mean_chars
        self.mean_chars += dx / self.n
        self.mean_tokens += (tokens - self.mean_tokens) / self.n
        self._sxx += dx * (chars - self.mean_chars)
        self._sxy += dx * (tokens - self.mean_tokens)
        self._low = chars if self._low is None else min(self._low, chars)
        self._high = chars if self._high is None else max(self._high, chars)

    @property
    def rate(self) -> float:
        """The fitted tokens per character (1/4 until there is a basis)."""
        if self._low is None or self._high is None or self._high - self._low < self.MIN_SPREAD:
            return 1 / CHARS_PER_TOKEN
        slope = self._sxy / self._sxx
        return slope if 0.05 <= slope <= 1.0 else 1 / CHARS_PER_TOKEN

    @property
    def overhead(self) -> float:
        """The fitted tokens of what is not messages (the line's value at no characters)."""
        return max(self.mean_tokens - self.rate * self.mean_chars, 0.0)

    @classmethod
    def of(cls, points: Iterable[tuple[int, int]]) -> TokenRate:
        """The fit of `(chars, tokens)` counts."""
        fit = cls()
        for chars, tokens in points:
            fit.add(chars, tokens)
        return fit


def measure(
    messages: Sequence[dict[str, Any]],
    anchor: TokenAnchor | None,
    overhead_chars: int = 0,
) -> ContextSize:
    """The size of `messages`, measured from scratch.

    Tokens are anchored on the last exact count when there is one; without one they are
    estimated from the messages plus `overhead_chars` (the system prompt and tool schemas).
    """
    chars = message_chars(messages)
    if anchor is None:
        return ContextSize(len(messages), chars, estimate_tokens(chars + overhead_chars))
    exact = chars == anchor.chars
    return ContextSize(len(messages), chars, anchored_tokens(chars, anchor), tokens_exact=exact)
