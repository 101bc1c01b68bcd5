"""The events a session emits. Front ends (cell view, meter) and the transcript recorder observe
this one stream; the core itself never prints.

Events are values: frozen dataclasses whose messages and blocks are copies taken when the event
was made, so an event kept in a list still says what happened then, whatever the history became
afterwards. `kind` names an event in transcripts and DataFrames; `as_record()` is what the
transcript stores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cached_property
from typing import Any, ClassVar

from evo_magic.measure import ContextSize
from evo_magic.usage import Usage

__all__ = [
    "AskFinished",
    "AskStarted",
    "CompactionFinished",
    "CompactionSkipped",
    "CompactionStarted",
    "ContextSize",
    "ErrorOccurred",
    "Event",
    "MessageAppended",
    "MicroCompacted",
    "ModelCalled",
    "ModelResponded",
    "Notice",
    "SessionReset",
    "TextDelta",
    "ToolFinished",
    "ToolResultAppended",
    "ToolStarted",
]


def _plain(value: Any) -> Any:
    """A JSON-able form of an event field."""
    if isinstance(value, Usage):
        return value.as_record()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"
    recorded: ClassVar[bool] = True
    """False for live-only events, whose content the transcript has in other records."""
    encoded: ClassVar[dict[str, str]] = {}
    """Record field -> the attribute holding its value as JSON text (copies of messages and
    blocks are kept encoded: taken once, read as a dict on demand, recorded without a
    second encoding)."""

    def as_record(self) -> dict[str, Any]:
        """A JSON-able dict of the event, with its kind: what the transcript stores."""
        record, raw = self.record_parts()
        return {**record, **{name: json.loads(text) for name, text in raw.items()}}

    def record_parts(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The record as plain values, and the fields that are JSON text already."""
        hidden = set(self.encoded.values())
        plain = {
            f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name not in hidden
        }
        raw = {name: getattr(self, attribute) for name, attribute in self.encoded.items()}
        return {"kind": self.kind, **plain}, raw


@dataclass(frozen=True)
class SessionReset(Event):
    """`Session.reset()`: the history and the compaction state start afresh."""

    kind: ClassVar[str] = "reset"


@dataclass(frozen=True)
class AskStarted(Event):
    kind: ClassVar[str] = "ask_started"
    text: str
    context: ContextSize


@dataclass(frozen=True)
class MessageAppended(Event):
    """A message joined the history (a copy of it, as it joined)."""

    kind: ClassVar[str] = "message"
    encoded: ClassVar[dict[str, str]] = {"message": "message_json"}
    index: int
    message_json: str = field(repr=False)
    """The message's JSON, as it joined."""
    turn: int
    """Which ask of the session (1-based) the message belongs to."""
    epoch: int
    """How many full compactions came before it."""

    @cached_property
    def message(self) -> dict[str, Any]:
        """The message, as it joined the history (a copy)."""
        return json.loads(self.message_json)


@dataclass(frozen=True)
class ToolResultAppended(Event):
    """A tool_result block joined the tool-results message at `index`, the moment its tool
    returned (or, with `status` "interrupted" / "not_run", when the loop had to answer a call
    whose tool never finished)."""

    kind: ClassVar[str] = "tool_result"
    encoded: ClassVar[dict[str, str]] = {"block": "block_json"}
    index: int
    block_index: int
    block_json: str = field(repr=False)
    turn: int
    epoch: int
    status: str
    """"ok", "error", "interrupted" or "not_run"."""

    @cached_property
    def block(self) -> dict[str, Any]:
        """The tool_result block, as it joined (a copy)."""
        return json.loads(self.block_json)


@dataclass(frozen=True)
class TextDelta(Event):
    kind: ClassVar[str] = "text_delta"
    recorded: ClassVar[bool] = False
    text: str


@dataclass(frozen=True)
class ModelCalled(Event):
    """A model call is about to be sent with a context of this size."""

    kind: ClassVar[str] = "model_called"
    recorded: ClassVar[bool] = False
    call: int
    context: ContextSize


@dataclass(frozen=True)
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
    """The history before this call's every-call strategies ran."""
    context_sent: ContextSize
    cost_usd: float | None = None
    """This call, priced from the session's table (None: the model has no price)."""
    session_cost_usd: float | None = None
    """Every model and summarisation call of the session so far, this one included (None when
    one of them had no price)."""
    applied_edits: tuple[dict[str, Any], ...] = ()
    """The server's context edits applied to this call's prompt, as the API reported them."""
    cache_miss_reason: dict[str, Any] | None = None
    """Why this call's prompt missed the cache, as the API diagnosed it (`cache_diagnosis`):
    its `type` and `cache_missed_input_tokens`; None when not asked or nothing diverged."""
    turn_note: str | None = None
    """The note this call carried for its turn only, as a mid-conversation system message
    after the newest message (`TokenBudget(as_system=True)`); not in the history."""


@dataclass(frozen=True)
class ToolStarted(Event):
    kind: ClassVar[str] = "tool_started"
    recorded: ClassVar[bool] = False
    tool_use_id: str
    name: str
    input: dict[str, Any]
    summary: str = ""
    """The input field that says what the call does (a command, a path), for one-line views."""


@dataclass(frozen=True)
class ToolFinished(Event):
    kind: ClassVar[str] = "tool_finished"
    tool_use_id: str
    name: str
    input: dict[str, Any]
    output: str
    is_error: bool
    duration: float
    summary: str = ""
    saved_to: str | None = None
    original_chars: int = 0

    def record_parts(self) -> tuple[dict[str, Any], dict[str, str]]:
        # The output is in the `tool_result` record written just before this one; the summary
        # is for views only.
        record, raw = super().record_parts()
        record.pop("output")
        record.pop("summary")
        return record, raw


@dataclass(frozen=True)
class BlockEdit:
    """A content block an every-call strategy rewrote: where it is, and its new version."""

    index: int
    block_index: int
    block: dict[str, Any]
    """A copy of the new block."""


@dataclass(frozen=True)
class MicroCompacted(Event):
    """A strategy that runs before every model call rewrote blocks in place (old tool results
    became a placeholder, a large output a preview, ...). The originals stay in the transcript."""

    kind: ClassVar[str] = "micro_compaction"
    encoded: ClassVar[dict[str, str]] = {"edits": "edits_json"}
    cleared_ids: tuple[str, ...]
    """tool_use_ids of the tool results (or uses) it changed."""
    chars_freed: int
    before: ContextSize
    after: ContextSize
    strategy: str = "micro"
    edits_json: str = field(default="[]", repr=False)
    """The new version of each changed block, as JSON: `[{index, block_index, block}, ...]`."""
    cleared_tokens: int = 0
    """Tokens freed (an estimate from the characters)."""
    cache_invalidated_tokens: int = 0
    """Tokens of cached prompt prefix the change invalidated (0 when caching is off)."""
    applied: dict[str, Any] | None = None
    """For a server strategy: the edit the API reported applying to the prompt of the call
    (`context_management.applied_edits[i]`); the history itself is unchanged."""

    @cached_property
    def edits(self) -> tuple[BlockEdit, ...]:
        """Where each changed block is and its new version (copies)."""
        return tuple(BlockEdit(**edit) for edit in json.loads(self.edits_json))


@dataclass(frozen=True)
class CompactionStarted(Event):
    kind: ClassVar[str] = "compaction_started"
    trigger: str
    focus: str | None
    before: ContextSize
    strategy: str = "summarise"


@dataclass(frozen=True)
class CompactionFinished(Event):
    """A strategy replaced the history (or, on failure, left it exactly as it was)."""

    kind: ClassVar[str] = "compaction"
    trigger: str
    """"auto" (over the limit), "model" (the compact tool), "user" (Session.compact /
    %compact), "every_call", or "server" (the API compacted: `server-compact`)."""
    focus: str | None
    before: ContextSize
    after: ContextSize
    success: bool
    duration: float
    summary: str = ""
    error: str | None = None
    snapshot_path: str | None = None
    summary_usage: Usage = Usage()
    strategy: str = "summarise"
    layer: str = "over_limit"
    """The strategy's `when`: "every_call", "over_limit" or "on_request"."""
    summary_cost_usd: float | None = 0.0
    """The summarisation calls of this compaction, priced (0.0 when none was made; None when
    one had no price); their tokens are `summary_usage`."""
    details: dict[str, Any] = field(default_factory=dict)
    """What the strategy reported keeping besides its summary (`Context.details`): e.g. the
    prompts kept verbatim and the files re-read, with their tokens."""
    fallback_for: str | None = None
    """The server strategy configured in this one's place, when it ran as its fallback."""
    summary_edited: bool = False
    """True when `summary` was given (`Session.compact(summary=...)`: written or edited by a
    person), not made by the summariser."""
    summary_proposed: str | None = None
    """When edited: the summariser's proposal it was edited from (None: none was made)."""

    @property
    def summary_chars(self) -> int:
        return len(self.summary)


@dataclass(frozen=True)
class CompactionSkipped(Event):
    """A compaction was asked for and there was nothing to compact: nothing failed, the
    history is untouched, and no back-off follows."""

    kind: ClassVar[str] = "compaction_skipped"
    trigger: str
    focus: str | None
    reason: str
    """Why, e.g. "the history is empty", "no strategy found anything to do"."""
    strategy: str = ""
    """The strategy asked last (the one given, or the last configured one)."""
    success: ClassVar[bool] = False
    """As `CompactionFinished.success`: no compaction happened."""


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should know that is not an error (turn limit, max_tokens, paused)."""

    kind: ClassVar[str] = "notice"
    code: str
    message: str


@dataclass(frozen=True)
class ErrorOccurred(Event):
    kind: ClassVar[str] = "error"
    error_type: str
    message: str


@dataclass(frozen=True)
class AskFinished(Event):
    kind: ClassVar[str] = "ask_finished"
    text: str
    turns: int
    stop_reason: str
    usage: Usage
    duration: float
    context: ContextSize
    cost_usd: float | None = None
    """The ask's model calls (whose tokens `usage` counts); None when one had no price."""
    summary_cost_usd: float | None = None
    """The summaries made during the ask (0.0 when none; None when one had no price)."""
    session_cost_usd: float | None = None
    """Every model and summarisation call of the session so far (None when one had no
    price)."""
