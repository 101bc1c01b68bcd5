"""What the context meter shows, as plain data built from session events (no widgets here).

The widget (widget.py), the static HTML of an exported notebook and the terminal's text line
are three renderings of one `MeterData`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evo_magic.events import (
    CompactionFinished,
    ContextSize,
    Event,
    MicroCompacted,
    ModelResponded,
)

LAYER = {"auto": "layer 2 (auto)", "model": "layer 3 (compact tool)", "user": "layer 3 (%compact)"}


@dataclass
class CallPoint:
    """One model call: the context before micro-compaction and as sent."""

    call: int
    before_chars: int
    sent_chars: int
    tokens: int


@dataclass
class CompactionRow:
    layer: str
    trigger: str
    focus: str | None
    before: ContextSize
    after: ContextSize
    success: bool
    error: str | None
    after_call: int
    """The number of model calls made before this compaction."""


@dataclass
class MeterData:
    """The numbers a context meter shows for one session."""

    session_id: str
    context_limit: int
    token_limit: int | None
    current: ContextSize
    calls: list[CallPoint] = field(default_factory=list)
    compactions: list[CompactionRow] = field(default_factory=list)
    micro_freed: int = 0
    micro_cleared: int = 0

    def observe(self, event: Event) -> bool:
        """Take in one event; True when it changed what the meter shows."""
        if isinstance(event, ModelResponded):
            point = CallPoint(
                event.call,
                event.context_before_micro.chars,
                event.context_sent.chars,
                event.context_sent.tokens,
            )
            self.calls.append(point)
            return True
        if isinstance(event, MicroCompacted):
            self.micro_freed += event.chars_freed
            self.micro_cleared += len(event.cleared_ids)
            self.compactions.append(
                CompactionRow(
                    "layer 1 (micro)",
                    "auto",
                    None,
                    event.before,
                    event.after,
                    True,
                    None,
                    len(self.calls),
                )
            )
            return True
        if isinstance(event, CompactionFinished):
            self.compactions.append(
                CompactionRow(
                    LAYER.get(event.trigger, event.trigger),
                    event.trigger,
                    event.focus,
                    event.before,
                    event.after,
                    event.success,
                    event.error,
                    len(self.calls),
                )
            )
            return True
        return False

    @property
    def full_compactions(self) -> list[CompactionRow]:
        return [row for row in self.compactions if not row.layer.startswith("layer 1")]

    def fill(self) -> float:
        """How full the context is, as a share of the character limit."""
        return self.current.chars / self.context_limit if self.context_limit else 0.0


def meter_text(data: MeterData) -> str:
    """The meter as plain text (terminal IPython, logs)."""
    c = data.current
    approx = "" if c.tokens_exact else "~"
    tokens = f"{approx}{c.tokens:,}"
    if data.token_limit:
        tokens += f"/{data.token_limit:,}"
    lines = [
        f"context: {c.messages} messages, {c.chars:,}/{data.context_limit:,} chars "
        f"({data.fill():.0%}), {tokens} tokens; {len(data.calls)} model calls",
    ]
    if data.micro_cleared:
        lines.append(
            f"micro-compaction: {data.micro_cleared} results cleared, "
            f"{data.micro_freed:,} chars freed"
        )
    for row in data.full_compactions:
        focus = f" focus={row.focus!r}" if row.focus else ""
        if row.success:
            lines.append(
                f"{row.layer}{focus}: {row.before.messages} msgs/{row.before.chars:,} chars -> "
                f"{row.after.messages} msgs/{row.after.chars:,} chars"
            )
        else:
            lines.append(f"{row.layer}{focus}: FAILED ({row.error}); history kept")
    return "\n".join(lines)
