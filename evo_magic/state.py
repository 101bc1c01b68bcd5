"""Session state that outlives a single `ask`: token usage and the compaction state."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Usage:
    """Token counts of one model call (or a sum of calls), as the Messages API reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

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
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass
class CompactState:
    """What the session remembers about compaction for its whole life (across asks)."""

    has_compacted: bool = False
    last_summary: str = ""
    recent_files: list[str] = field(default_factory=list)
    compact_count: int = 0
    consecutive_failures: int = 0
    # Auto-compaction after a failure waits until the context is at least this big again.
    retry_after_chars: int = 0

    def note_file(self, path: str, limit: int) -> None:
        """Remember a touched file: FIFO of at most `limit`; a repeated path moves last."""
        if path in self.recent_files:
            self.recent_files.remove(path)
        self.recent_files.append(path)
        del self.recent_files[: max(0, len(self.recent_files) - limit)]
