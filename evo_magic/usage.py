"""Token usage of a model call, or of several, as the Messages API reports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts of one model call (or a sum of calls), as the Messages API reports them.

    `cache_creation_input_tokens` is the total written to the cache; of it, the API says how
    many were written with the 5-minute and the 1-hour lifetime when it splits them (`None`:
    not reported, price them all at the 5-minute rate).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None

    @classmethod
    def from_api(cls, usage: Mapping[str, Any]) -> Usage:
        """A Usage from the API's `usage` object (as a dict; missing or null counts are 0)."""
        split = usage.get("cache_creation") or {}
        return cls(
            input_tokens=usage.get("input_tokens") or 0,
            output_tokens=usage.get("output_tokens") or 0,
            cache_creation_input_tokens=usage.get("cache_creation_input_tokens") or 0,
            cache_read_input_tokens=usage.get("cache_read_input_tokens") or 0,
            cache_write_5m_tokens=split.get("ephemeral_5m_input_tokens") if split else None,
            cache_write_1h_tokens=split.get("ephemeral_1h_input_tokens") if split else None,
        )

    @property
    def context_tokens(self) -> int:
        """Tokens of the prompt that was sent: input plus both kinds of cache tokens."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            _add_optional(self.cache_write_5m_tokens, other.cache_write_5m_tokens),
            _add_optional(self.cache_write_1h_tokens, other.cache_write_1h_tokens),
        )

    def as_dict(self) -> dict[str, int]:
        """The four counts every response has, under the API's names."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    def as_record(self) -> dict[str, object]:
        """The usage as the API's JSON has it: the four counts, and `cache_creation` split by
        lifetime when it was reported."""
        record: dict[str, object] = dict(self.as_dict())
        if self.cache_write_5m_tokens is not None or self.cache_write_1h_tokens is not None:
            record["cache_creation"] = {
                "ephemeral_5m_input_tokens": self.cache_write_5m_tokens or 0,
                "ephemeral_1h_input_tokens": self.cache_write_1h_tokens or 0,
            }
        return record


def _add_optional(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)
