"""The events a session emits. Front-ends (display, meter, transcript writer) observe this stream;
the core itself never prints.

Every event is a small dataclass; `kind` names it in transcripts and DataFrames.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from evo_magic.state import Usage


@dataclass(frozen=True)
class ContextSize:
    """How big the context is: messages, characters of their JSON, and tokens."""

    messages: int
    chars: int
    tokens: int
    tokens_exact: bool = False
    """True when `tokens` is the model's own count for exactly these messages."""


@dataclass
class Event:
    kind: ClassVar[str] = "event"

    def as_record(self) -> dict[str, Any]:
        """A JSON-able dict of the event, with its kind: what the transcript stores."""
        return {"kind": self.kind, **asdict(self)}


@dataclass
class AskStarted(Event):
    kind: ClassVar[str] = "ask_started"
    text: str
    context: ContextSize


@dataclass
class MessageAppended(Event):
    """A message joined the history (or, for a user turn, was merged into the last one)."""

    kind: ClassVar[str] = "message"
    index: int
    message: dict[str, Any]
    turn: int
    """Which ask of the session (1-based) the message belongs to."""
    epoch: int
    """How many full compactions came before it."""


@dataclass
class TextDelta(Event):
    kind: ClassVar[str] = "text_delta"
    text: str


@dataclass
class ModelCalled(Event):
    """A model call is about to be sent with a context of this size."""

    kind: ClassVar[str] = "model_called"
    call: int
    context: ContextSize


@dataclass
class ModelResponded(Event):
    kind: ClassVar[str] = "model_response"
    call: int
    """Model calls of the session so far, this one included (summaries not counted)."""
    turn: int
    model: str
    stop_reason: str | None
    usage: Usage
    duration: float
    context_before_micro: ContextSize
    context_sent: ContextSize


@dataclass
class ToolStarted(Event):
    kind: ClassVar[str] = "tool_started"
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass
class ToolFinished(Event):
    kind: ClassVar[str] = "tool_finished"
    tool_use_id: str
    name: str
    input: dict[str, Any]
    output: str
    is_error: bool
    duration: float
    saved_to: str | None = None
    original_chars: int = 0

    def as_record(self) -> dict[str, Any]:
        # The output is already in the transcript as the tool_result of the next message.
        record = super().as_record()
        record.pop("output")
        return record


@dataclass
class MicroCompacted(Event):
    """Layer 1 replaced old tool results by the placeholder."""

    kind: ClassVar[str] = "micro_compaction"
    cleared_ids: list[str]
    chars_freed: int
    before: ContextSize
    after: ContextSize


@dataclass
class CompactionStarted(Event):
    kind: ClassVar[str] = "compaction_started"
    trigger: str
    focus: str | None
    before: ContextSize


@dataclass
class CompactionFinished(Event):
    """Layer 2 or 3 ran: the history was replaced by a summary (or, on failure, kept as it was)."""

    kind: ClassVar[str] = "compaction"
    trigger: str
    """"auto", "model" (the compact tool) or "user" (Session.compact / %compact)."""
    focus: str | None
    before: ContextSize
    after: ContextSize
    success: bool
    duration: float
    summary: str = ""
    error: str | None = None
    snapshot_path: str | None = None
    summary_usage: Usage = field(default_factory=Usage)

    @property
    def summary_chars(self) -> int:
        return len(self.summary)


@dataclass
class Notice(Event):
    """Something the user should know that is not an error (turn limit, max_tokens, paused)."""

    kind: ClassVar[str] = "notice"
    code: str
    message: str


@dataclass
class ErrorOccurred(Event):
    kind: ClassVar[str] = "error"
    error_type: str
    message: str


@dataclass
class AskFinished(Event):
    kind: ClassVar[str] = "ask_finished"
    text: str
    turns: int
    stop_reason: str
    usage: Usage
    duration: float
    context: ContextSize
