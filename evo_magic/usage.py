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
    not reported, price them all at the 5-minute rate). `evo_magic.cost.call_cost` prices a
    Usage as it is.
    """

    input_tokens: int = 0
    """Uncached input: the prompt after the last cache breakpoint."""
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_5m_tokens: int | None = None
    cache_write_1h_tokens: int | None = None

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """A Usage from the API's ``usage``, in any of the shapes the project meets.

        ``usage`` is the API's JSON dict, the SDK's ``Usage`` object, or anything with the same
        field names. The TTL split comes from a nested ``cache_creation`` (dict or object) or
        from flat ``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` fields. Missing
        or null counts are 0 (a split that is absent stays None: not reported). Raises
        ValueError, naming the field, for a count that is not a whole number >= 0.
        """
        split = _field(usage, "cache_creation")
        source = split if split is not None else usage
        reported = any(
            _field(source, name) is not None
            for name in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
        )
        return cls(
            input_tokens=_count(usage, "input_tokens"),
            output_tokens=_count(usage, "output_tokens"),
            cache_creation_input_tokens=_count(usage, "cache_creation_input_tokens"),
            cache_read_input_tokens=_count(usage, "cache_read_input_tokens"),
            cache_write_5m_tokens=_count(source, "ephemeral_5m_input_tokens") if reported else None,
            cache_write_1h_tokens=_count(source, "ephemeral_1h_input_tokens") if reported else None,
        )

    @property
    def context_tokens(self) -> int:
        """Tokens of the prompt that was sent: input plus both kinds of cache tokens."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def cache_hit_rate(self) -> float:
        """The share of the prompt read from the cache: cache reads over context tokens (0.0
        for an empty prompt)."""
        context = self.context_tokens
        return self.cache_read_input_tokens / context if context else 0.0

    def cache_writes(self) -> tuple[int, int]:
        """The tokens written to the cache with the 5-minute and the 1-hour lifetime, as billed.

        Without a split every write is 5-minute (the API's default TTL). When the split
        disagrees with `cache_creation_input_tokens` (a sum of calls of which only some reported
        one), the total wins: the 1-hour count stands and the rest is 5-minute, so no written
        token goes unpriced and none twice.
        """
        written = self.cache_creation_input_tokens
        write_1h = self.cache_write_1h_tokens or 0
        if not written:
            return self.cache_write_5m_tokens or 0, write_1h
        return max(written - write_1h, 0), write_1h

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


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(obj: Any, name: str) -> int:
    value = _field(obj, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage field {name} must be a whole number >= 0, not {value!r}")
    return value
