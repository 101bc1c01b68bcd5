"""The API's own compaction and context editing, as strategies: the baseline every client-side
strategy is measured against.

- `server-compact` (`ServerCompact`): `context_management.edits[]` gets `compact_20260112`
  (SDK 2.17 `types/beta/beta_compact_20260112_edit_param.py`), beta `compact-2026-01-12`.
- `server-clear-tool-uses` (`ServerClearToolUses`): `clear_tool_uses_20250919`
  (`beta_clear_tool_uses_20250919_edit_param.py`), beta `context-management-2025-06-27`.
- `server-clear-thinking` (`ServerClearThinking`): `clear_thinking_20251015`
  (`beta_clear_thinking_20251015_edit_param.py`), beta `context-management-2025-06-27`.
- `server-summarise` (`ServerSummarise`): the top-level `compaction: {"type": "summarize"}`
  (`beta_compaction_config_param.py`), beta `compact-2026-09-04`.

The first three edit nothing in the history: the loop sends their edits with every call and
the server applies them (the clearing ones to the prompt only; the compaction one returns a
`compaction` block that replaces what it summarised). `ServerSummarise` compacts when asked
(`%compact --strategy server-summarise`): one request returns the signed block alone.

A `fallback` (any client strategy, e.g. `Summarise()`) takes over from the first rejection of
the feature (a 400 naming it, or a model the capability table says lacks it), said once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Message, ServerEdit, Strategy, server_edit
from evo_magic.compact.server import COMPACT_BETA, SUMMARIZE_BETA
from evo_magic.models.catalog import CLEAR_THINKING, CLEAR_TOOL_USES, COMPACT_EDIT, SUMMARIZE

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
MIN_COMPACT_TRIGGER = 50_000
"""The API's lowest compaction trigger (input tokens), from the compaction docs."""


def _fallback(value: object) -> Strategy | None:
    """A fallback given as a strategy or a spec string ("summarise", "micro(keep_recent=5)")."""
    if value is None:
        return None
    from evo_magic.strategies.registry import make_strategy  # the registry imports this module

    fallback = make_strategy(value)  # type: ignore[arg-type]
    if server_edit(fallback) is not None:
        raise ValueError(f"the fallback must be a client strategy, not {fallback.name!r}")
    return fallback


def _whole(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum:,}, not {value!r}")


@dataclass
class ServerCompact:
    """The API compacts the conversation itself when its input passes `trigger_tokens`
    (`compact_20260112`): the reply starts with a `compaction` block that replaces everything
    before it. `pause_after_compaction` returns the block alone (the loop then continues the
    ask); `instructions` replace the server's summary prompt; `fallback` runs instead when the
    server or the model does not offer it."""

    trigger_tokens: int = 150_000
    pause_after_compaction: bool = False
    instructions: str | None = None
    fallback: Strategy | None = None

    name = "server-compact"
    when = "every_call"

    def __post_init__(self) -> None:
        _whole("trigger_tokens", self.trigger_tokens, MIN_COMPACT_TRIGGER)
        self.fallback = _fallback(self.fallback)

    def server_edit(self) -> ServerEdit:
        edit: dict[str, Any] = {
            "type": COMPACT_EDIT,
            "trigger": {"type": "input_tokens", "value": self.trigger_tokens},
            "pause_after_compaction": self.pause_after_compaction,
        }
        if self.instructions:
            edit["instructions"] = self.instructions
        return ServerEdit(COMPACT_EDIT, COMPACT_BETA, edit)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        return None  # the server compacts


@dataclass
class ServerClearToolUses:
    """The API clears the oldest tool results from the prompt when its input passes
    `trigger_tokens`, keeping the newest `keep` tool uses (`clear_tool_uses_20250919`);
    the history itself keeps them."""

    trigger_tokens: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: Sequence[str] = ()
    clear_tool_inputs: bool = False
    fallback: Strategy | None = None

    name = "server-clear-tool-uses"
    when = "every_call"

    def __post_init__(self) -> None:
        _whole("trigger_tokens", self.trigger_tokens, 1)
        _whole("keep", self.keep, 0)
        self.fallback = _fallback(self.fallback)
        _whole("clear_at_least", self.clear_at_least, 0)
        if isinstance(self.exclude_tools, str) or not all(
            isinstance(name, str) for name in self.exclude_tools
        ):
            raise ValueError("exclude_tools must be a list of tool names")
        self.exclude_tools = tuple(self.exclude_tools)

    def server_edit(self) -> ServerEdit:
        edit: dict[str, Any] = {
            "type": CLEAR_TOOL_USES,
            "trigger": {"type": "input_tokens", "value": self.trigger_tokens},
            "keep": {"type": "tool_uses", "value": self.keep},
        }
        if self.clear_at_least:
            edit["clear_at_least"] = {"type": "input_tokens", "value": self.clear_at_least}
        if self.exclude_tools:
            edit["exclude_tools"] = list(self.exclude_tools)
        if self.clear_tool_inputs:
            edit["clear_tool_inputs"] = True
        return ServerEdit(CLEAR_TOOL_USES, CONTEXT_MANAGEMENT_BETA, edit)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        return None  # the server clears


@dataclass
class ServerClearThinking:
    """The API drops the thinking blocks of all but the newest `keep_turns` assistant turns
    from the prompt (`clear_thinking_20251015`)."""

    keep_turns: int = 1
    fallback: Strategy | None = None

    name = "server-clear-thinking"
    when = "every_call"

    def __post_init__(self) -> None:
        _whole("keep_turns", self.keep_turns, 1)
        self.fallback = _fallback(self.fallback)

    def server_edit(self) -> ServerEdit:
        keep = {"type": "thinking_turns", "value": self.keep_turns}
        edit = {"type": CLEAR_THINKING, "keep": keep}
        return ServerEdit(CLEAR_THINKING, CONTEXT_MANAGEMENT_BETA, edit)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        return None  # the server clears


@dataclass
class ServerSummarise:
    """On request, the API summarises the whole conversation (the `compaction` parameter):
    the history becomes its signed `compaction` block (and the pending request, verbatim).
    The focus becomes the summary's `instructions`."""

    fallback: Strategy | None = None

    name = "server-summarise"
    when = "on_request"

    def __post_init__(self) -> None:
        self.fallback = _fallback(self.fallback)

    def server_edit(self) -> ServerEdit:
        return ServerEdit(SUMMARIZE, SUMMARIZE_BETA, None)

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message]:
        block = ctx.server_summarise(messages, ctx.focus)
        return [{"role": "assistant", "content": [block]}, *ctx.pending_request_message()]
