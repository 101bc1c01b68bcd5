"""What one ask needs from the session, and what the asks count for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evo_magic.compact.compactor import Compactor
from evo_magic.cost import Ledger
from evo_magic.events import Event
from evo_magic.history import History
from evo_magic.models.base import Model
from evo_magic.prompt_cache import CacheSettings, PrefixTracker
from evo_magic.tools import Tool, ToolContext
from evo_magic.usage import Usage


@dataclass
class Totals:
    """What the session has used over all its asks (owned by the session, counted here)."""

    calls: int = 0
    usage: Usage = Usage()
    last_reply_id: str | None = None
    """The id of the last reply: what the next request's cache diagnosis compares with."""


@dataclass
class LoopParts:
    """What one ask needs from the session."""

    history: History
    compactor: Compactor
    model: Model
    tools: Sequence[Tool]
    tool_context: Callable[[Callable[[str | None], None]], ToolContext]
    """Makes the tools' context, given the hook the compact tool calls."""
    emit: Callable[[Event], None]
    system: str
    max_turns: int
    max_tokens: int
    totals: Totals
    redact: Callable[[str], str] = lambda text: text
    """Applied to tool output before it joins the history (and so reaches the model)."""
    sync: Callable[[], None] = lambda: None
    """Make the transcript durable (called when the ask ends)."""
    cache: CacheSettings | None = None
    """How requests are marked for prompt caching (None: not at all)."""
    ledger: Ledger = field(default_factory=Ledger)
    """Prices each call and keeps what the session spent."""
    prefix: PrefixTracker | None = None
    """Told, after each call, what the prompt cache now holds."""
    cache_diagnosis: bool = False
    """Ask the API why each prompt missed the cache (`diagnostics`, its beta)."""
