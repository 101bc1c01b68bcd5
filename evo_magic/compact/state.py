"""What the session remembers about compaction for its whole life (across asks)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CompactState:
    """The seed's CompactState, plus the back-off of automatic compaction."""

    has_compacted: bool = False
    last_summary: str = ""
    recent_files: list[str] = field(default_factory=list)
    compact_count: int = 0
    consecutive_failures: int = 0
    """Failed automatic (or model-requested) compactions in a row; at `max_failures` automatic
    compaction pauses until a compaction by hand succeeds or the session is reset."""
    retry_after_chars: int = 0
    """After a failure, automatic compaction waits until the context is at least this big."""
    refills: int = 0
    """Automatic compactions in a row after which the context was over the limit again within
    two calls; at `max_refills` automatic compaction pauses (thrash detection)."""
    calls_since_auto: int | None = None
    """Model calls since the last automatic full compaction, while a refill is watched for."""

    def note_file(self, path: str, limit: int) -> None:
        """Remember a touched file: FIFO of at most `limit`; a repeated path moves last."""
        if path in self.recent_files:
            self.recent_files.remove(path)
        self.recent_files.append(path)
        del self.recent_files[: max(0, len(self.recent_files) - limit)]
