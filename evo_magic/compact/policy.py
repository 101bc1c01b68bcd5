"""CompactPolicy: every number that steers compaction, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

PLACEHOLDER = "[Earlier tool result compacted. Re-run the tool if you need full detail.]"


@dataclass(frozen=True)
class CompactPolicy:
    """Settings of the three compaction layers. Defaults are those of the evo-agent seed.

    Sizes in characters are measured as the length of the JSON encoding of the messages.
    """

    context_limit: int = 50_000
    """Full compaction (layer 2) runs when the context is over this many characters."""
    token_limit: int | None = None
    """Optional: full compaction also runs when the context is over this many tokens."""
    keep_recent: int = 3
    """Micro-compaction (layer 1) keeps this many most recent tool results whole."""
    min_chars: int = 120
    """Only tool results longer than this are replaced by the placeholder."""
    placeholder: str = PLACEHOLDER
    """The text an old tool result becomes."""
    exclude_tools: frozenset[str] = field(default_factory=frozenset)
    """Tools whose results micro-compaction never clears."""
    clear_at_least: int = 0
    """Micro-compact only when it frees at least this many characters (0: always, as the seed)."""
    summary_input_limit: int = 80_000
    """At most this many characters of conversation go to the summariser (head and tail kept)."""
    summary_max_tokens: int = 2_000
    """max_tokens of the summarisation request."""
    max_recent_files: int = 5
    """How many recently touched files the compacted history lists."""
    large_output_limit: int = 30_000
    """A tool output longer than this is saved to a file and replaced by a preview (layer 0)."""
    preview_chars: int = 2_000
    """Length of that preview."""
    max_failures: int = 3
    """Consecutive failed automatic compactions after which auto-compaction pauses."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "exclude_tools", frozenset(self.exclude_tools))
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"CompactPolicy.{f.name} must be >= 0, got {value}")
        if self.context_limit <= 0:
            raise ValueError("CompactPolicy.context_limit must be > 0")

    def with_changes(self, **changes: object) -> CompactPolicy:
        """A copy with some settings changed (unknown names raise TypeError)."""
        return replace(self, **changes)
