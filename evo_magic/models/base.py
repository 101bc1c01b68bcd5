"""The model interface the loop talks to, whatever answers behind it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evo_magic.measure import to_json
from evo_magic.prompt_cache import CacheSettings
from evo_magic.usage import Usage

TextCallback = Callable[[str], None]


@dataclass
class ModelRequest:
    """One Messages API call in parameter shape. `tools` empty means no tools are offered.
    `messages` may be a snapshot of the session's history (`evo_magic.history_snapshot`, not
    a copy): read it, never change it (`list(request.messages)` for a list of one's own)."""

    messages: Sequence[dict[str, Any]]
    max_tokens: int
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    prompt_chars: int | None = None
    """Characters of the prompt (JSON of the messages, system prompt, tool schemas), when the
    sender measured them already: models that estimate tokens need not measure again."""
    cache: CacheSettings | None = None
    """How the request is marked for prompt caching; None: no cache breakpoints. Models that
    do not talk to the API ignore it."""
    edited_from: int | None = None
    """The first message changed in place since the previous request, for breakpoint
    placement (see `evo_magic.prompt_cache.place_breakpoints`)."""
    cache_newest: bool = True
    """False: no cache breakpoint on the newest message (a request never sent again, such as
    a summary in context: it reads the cache and writes nothing)."""
    tool_choice: dict[str, Any] | None = None
    """The API's `tool_choice` (e.g. `{"type": "none"}`: tools defined, none may be called);
    None: the API's default."""
    context_management: dict[str, Any] | None = None
    """The API's `context_management` (server strategies' edits); None: not sent."""
    compaction: dict[str, Any] | None = None
    """The API's on-demand `compaction` parameter; None: not sent."""
    betas: tuple[str, ...] = ()
    """Beta features the request needs (sent through the SDK's beta messages API)."""
    diagnostics: dict[str, Any] | None = None
    """The API's `diagnostics` (`{"previous_message_id": ...}`: why the prompt missed the
    cache, beta `cache-diagnosis-2026-04-07`); None: not sent."""
    turn_note: str | None = None
    """A note for this turn only, sent after the newest message as a mid-conversation system
    message (`clear_at: "next_user_message"`, beta `mid-conversation-system-clear-at-2026-08-21`)
    past the cache breakpoints; the history does not hold it. None: none. Models that do not
    talk to the API ignore it."""

    def measured_chars(self) -> int:
        """Characters of the prompt: `prompt_chars` when given, else measured now."""
        if self.prompt_chars is not None:
            return self.prompt_chars
        chars = len(to_json(list(self.messages))) + len(self.system) + len(to_json(self.tools))
        return chars + note_chars(self.turn_note)


MID_SYSTEM_BETA = "mid-conversation-system-clear-at-2026-08-21"
"""The beta of a mid-conversation system message shown for one turn (`ModelRequest.turn_note`)."""


def system_note(text: str) -> dict[str, Any]:
    """The mid-conversation system message that carries `text` for the turn it follows: once a
    later user message exists the API no longer shows it to the model."""
    return {"role": "system", "content": text, "clear_at": "next_user_message"}


@dataclass
class ModelReply:
    """The assistant's answer as plain JSON-able content blocks."""

    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: Usage
    model: str
    iterations: tuple[dict[str, Any], ...] = ()
    """`usage.iterations` as the API reported them (a server compaction's own tokens are in
    its `compaction` entry, not in `usage`)."""
    applied_edits: tuple[dict[str, Any], ...] = ()
    """`context_management.applied_edits`: what the server's clearing edits did."""
    id: str | None = None
    """The response's id (`msg_...`), when the model has one."""
    cache_miss_reason: dict[str, Any] | None = None
    """`diagnostics.cache_miss_reason` as the API reported it (`type`, and
    `cache_missed_input_tokens` for a change): None when not asked, or no divergence."""


class ModelError(Exception):
    """A model call failed for good (after the SDK's retries). The history is left untouched."""

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None):
        super().__init__(message)
        self.status = status
        self.error_type = error_type


def prompt_too_long(exc: ModelError) -> bool:
    """True when the API refused the request because its prompt does not fit the model's
    context window (400 invalid_request_error "prompt is too long: N tokens > M maximum")."""
    return (
        exc.status == 400
        and exc.error_type == "invalid_request_error"
        and "prompt is too long" in str(exc).lower()
    )


class Model(Protocol):
    """Anything that answers a ModelRequest: the Anthropic adapter or the offline stand-in."""

    name: str
    """The model name sent in requests (or the offline model's label)."""
    offline: bool
    """True for a scripted stand-in: front-ends label its output as such."""

    def respond(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelReply:
        """Answer the request, calling `on_text` with each piece of streamed assistant text."""
        ...


def note_chars(note: str | None) -> int:
    """Characters a turn note adds to the prompt's messages (0: none)."""
    return len(to_json([system_note(note)])) - len("[]") + len(",") if note else 0
