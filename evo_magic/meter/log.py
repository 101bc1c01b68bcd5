"""What happened to a session's context, as plain data folded from its events: the log the
context meter and the context figure are drawn from.

A `MeterLog` follows one session: every model call (a `CallPoint`, with what happened before
it), every compaction (a `Compaction`, with what it replaced), and the asks. A `Scope` is the
stretch a view tells: one cell (from the context before it to its end) or the whole session.
What one meter shows, a log seen through a scope at one moment, is `evo_magic.meter.data`; what
the context holds by kind is measured by `evo_magic.meter.composition`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from evo_magic.events import (
    AskStarted,
    CompactionFinished,
    CompactionStarted,
    ContextSize,
    Event,
    MessageAppended,
    MicroCompacted,
    ModelResponded,
    SessionReset,
    ToolResultAppended,
)
from evo_magic.meter.composition import HistoryComposition, Share, tool_names
from evo_magic.meter.words import TRIGGERS, counted
from evo_magic.render import clip, plural
from evo_magic.secrets import redact

if TYPE_CHECKING:
    from evo_magic.compact.policy import CompactPolicy
    from evo_magic.history import History


class Followed(Protocol):
    """What a log needs of the session it follows (a `Session`; nothing here imports it)."""

    history: History
    session_id: str

    @property
    def policy(self) -> CompactPolicy: ...

    @property
    def token_limit(self) -> int | None: ...

    def subscribe(self, observer: Callable[[Event], None]) -> Callable[[], None]: ...

    def context(self) -> ContextSize: ...


# -- the log of a session --------------------------------------------------------------------


@dataclass(frozen=True)
class CallPoint:
    """One model call: the context before the every-call strategies and as sent."""

    call: int
    """The session's call number (1-based)."""
    turn: int
    """The ask it belongs to (1-based)."""
    before: ContextSize
    sent: ContextSize
    api_tokens: int | None
    """The prompt's tokens as the API counted them (input plus cache), when it reported them."""
    cost_usd: float | None
    before_it: tuple[str, ...] = ()
    """What happened since the call before: the request, tool results, compactions."""

    @property
    def tokens(self) -> int:
        """The prompt's tokens: the API's count when there is one, else the estimate."""
        return self.api_tokens if self.api_tokens is not None else self.sent.tokens


@dataclass(frozen=True)
class Compaction:
    """One compaction as the meter shows it: a full one (the history replaced, or a failure)
    or a micro-compaction (blocks rewritten before a call)."""

    number: int
    """Full compactions: 1, 2, ... in the session; micro-compactions: 0."""
    micro: bool
    strategy: str
    layer: str
    trigger: str
    focus: str | None
    before: ContextSize
    after: ContextSize
    success: bool
    after_call: int
    """Model calls of the session made before it."""
    turn: int
    error: str | None = None
    summary: str = ""
    cost_usd: float | None = None
    duration: float = 0.0
    summary_tokens: tuple[int, int] = (0, 0)
    """(input, output) tokens of the summarisation calls."""
    snapshot_path: str | None = None
    cleared: tuple[str, ...] = ()
    """Micro: the tool of each result (or call) it rewrote."""
    edits: int = 0
    cache_invalidated_tokens: int = 0
    replaced: tuple[Share, ...] = ()
    """Full: what the history held by kind before."""
    kept: tuple[Share, ...] = ()
    """Full: what it held by kind after."""

    @property
    def label(self) -> str:
        """ "C2" for the session's second full compaction; "micro" for the others."""
        return f"C{self.number}" if not self.micro else "micro"

    @property
    def freed_chars(self) -> int:
        """Characters of messages it removed (negative when it added, e.g. a note)."""
        return self.before.chars - self.after.chars

    @property
    def freed_tokens(self) -> int:
        """Tokens it removed: the size before minus the size after, in tokens."""
        return self.before.tokens - self.after.tokens


Composition = Callable[[], list[Share]]


class MeterLog:
    """Everything the meters of one session show, folded from its events as they come.

    `compose` (optional) says what the history holds now; with it, every full compaction also
    records what the history held by kind before and after. Listeners are told after each
    event is folded in (a live widget refreshes then)."""

    def __init__(self, compose: Composition | None = None):
        self.calls: list[CallPoint] = []
        self.compactions: list[Compaction] = []
        self.asks = 0
        self.compose = compose
        self._tool_names: dict[str, str] = {}
        self._since_call: list[str] = []
        self._results: dict[str, int] = {}
        self._before: tuple[Share, ...] = ()
        self._full = 0
        self._listeners: list[Callable[[Event], None]] = []
        self._unsubscribe: Callable[[], None] | None = None

    # -- following a session -----------------------------------------------------------------

    def stop(self) -> None:
        """Stop following the session (see `follow`)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call `listener(event)` after each event is folded in; returns the way to stop."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def __call__(self, event: Event) -> None:
        """Session observer: fold the event in, then tell the listeners."""
        if self.observe(event):
            for listener in list(self._listeners):
                listener(event)

    def observe(self, event: Event) -> bool:
        """Take in one event; True when it changed what a meter shows."""
        handler = _HANDLERS.get(type(event))
        return bool(handler and handler(self, event))

    def _ask(self, event: AskStarted) -> bool:
        self.asks += 1
        self._since_call.append(f"request {self.asks}: {clip(redact(event.text), 60)!r}")
        return True

    def _reset(self, event: SessionReset) -> bool:
        self._since_call.append("reset: the history and the compaction state were emptied")
        return True

    def _message(self, event: MessageAppended) -> bool:
        message = event.message
        if message.get("role") == "assistant":
            self._tool_names.update(tool_names([message]))
        return False

    def _result(self, event: ToolResultAppended) -> bool:
        name = self._tool_names.get(str(event.block.get("tool_use_id", "")), "tool")
        self._results[name] = self._results.get(name, 0) + 1
        return False

    def _call(self, event: ModelResponded) -> bool:
        self._flush_results()
        tokens = event.usage.context_tokens
        self.calls.append(
            CallPoint(
                event.call,
                event.turn,
                event.context_before_micro,
                event.context_sent,
                tokens if tokens > 0 else None,
                event.cost_usd,
                tuple(self._since_call),
            )
        )
        self._since_call = []
        return True

    def _started(self, event: CompactionStarted) -> bool:
        self._before = tuple(self.compose()) if self.compose else ()
        return False

    def _micro(self, event: MicroCompacted) -> bool:
        self._flush_results()
        cleared = tuple(self._tool_names.get(i, "tool") for i in event.cleared_ids)
        row = Compaction(
            0,
            True,
            event.strategy,
            "every_call",
            "every_call",
            None,
            event.before,
            event.after,
            True,
            len(self.calls),
            self.asks,
            cleared=cleared,
            edits=len(event.edits),
            cache_invalidated_tokens=event.cache_invalidated_tokens,
        )
        self.compactions.append(row)
        note = f"{event.strategy}: freed {event.chars_freed:,} chars ({counted(cleared)})"
        if event.applied is not None:  # the API edited the prompt; the history is unchanged
            note = f"{event.strategy}: the API cleared {event.cleared_tokens:,} prompt tokens"
        self._since_call.append(note)
        return True

    def _full_compaction(self, event: CompactionFinished) -> bool:
        self._flush_results()
        if event.success:
            self._full += 1
        after = tuple(self.compose()) if self.compose and event.success else self._before
        usage = event.summary_usage
        row = Compaction(
            self._full if event.success else 0,
            False,
            event.strategy,
            event.layer,
            event.trigger,
            redact(event.focus) if event.focus else event.focus,
            event.before,
            event.after,
            event.success,
            len(self.calls),
            self.asks,
            error=redact(event.error) if event.error else event.error,
            summary=redact(event.summary),
            cost_usd=event.summary_cost_usd,
            duration=event.duration,
            summary_tokens=(usage.context_tokens, usage.output_tokens),
            snapshot_path=event.snapshot_path,
            replaced=self._before,
            kept=after,
        )
        self.compactions.append(row)
        self._before = ()
        ran = event.strategy + (f" for {event.fallback_for}" if event.fallback_for else "")
        what = f"{row.label} {ran}" if event.success else f"{ran} failed"
        self._since_call.append(f"compaction {what} ({TRIGGERS.get(event.trigger, event.trigger)})")
        return True

    def _flush_results(self) -> None:
        if self._results:
            n = sum(self._results.values())
            self._since_call.append(f"{plural(n, 'tool result')} ({counted(self._results)})")
            self._results = {}

    # -- scopes ------------------------------------------------------------------------------

    def mark(self, label: str, before: ContextSize | None) -> Scope:
        """A scope that starts now (a cell: `before` is the context as it starts)."""
        return Scope(label, len(self.calls), len(self.compactions), before, self.asks)

    def whole(self) -> Scope:
        """The scope of everything the log saw."""
        return Scope("session", 0, 0, None, 0)


def follow(session: Followed) -> MeterLog:
    """A log that follows `session` from now on, knowing what its history holds by kind
    (`log.compose()`); `log.stop()` ends it."""
    history = session.history
    composer = HistoryComposition(history)

    def compose() -> list[Share]:
        return composer.shares(history.overhead_chars, history.size().tokens)

    log = MeterLog(compose)
    log._unsubscribe = session.subscribe(log)
    return log


_HANDLERS: dict[type, Callable[[MeterLog, Any], bool]] = {
    AskStarted: MeterLog._ask,
    SessionReset: MeterLog._reset,
    MessageAppended: MeterLog._message,
    ToolResultAppended: MeterLog._result,
    ModelResponded: MeterLog._call,
    CompactionStarted: MeterLog._started,
    MicroCompacted: MeterLog._micro,
    CompactionFinished: MeterLog._full_compaction,
}


@dataclass
class Scope:
    """The stretch of a session a meter tells: from `first_call` / `first_compaction` (indexes
    into the log) to the end, or to `end_*` once closed (a finished cell)."""

    label: str
    """"cell" or "session"."""
    first_call: int
    first_compaction: int
    before: ContextSize | None
    """The context when the scope began (a cell's "before"); None for the whole session."""
    first_ask: int = 0
    """Asks the session had made before the scope began."""
    end_call: int | None = None
    end_compaction: int | None = None

    @property
    def closed(self) -> bool:
        """True once `close` ended the scope (a finished cell)."""
        return self.end_call is not None

    def close(self, log: MeterLog) -> None:
        """End the scope where the log is now: later events are not part of it."""
        if not self.closed:
            self.end_call, self.end_compaction = len(log.calls), len(log.compactions)
