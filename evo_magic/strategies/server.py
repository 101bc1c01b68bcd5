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

from evo_magic.catalog import CLEAR_THINKING, CLEAR_TOOL_USES, COMPACT_EDIT, SUMMARIZE
from evo_magic.compact.base import Context, Message, ServerEdit, Strategy
from evo_magic.compact.server import COMPACT_BETA, SUMMARIZE_BETA
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.params import client_fallback

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
MIN_COMPACT_TRIGGER = 50_000
"""The API's lowest compaction trigger (input tokens), from the compaction docs."""


def _fallback() -> Any:
    """The `fallback` parameter every server strategy declares."""
    return setting(
        None,
        "A client strategy (object or spec) that takes over when the model or the API does "
        "not offer this one (None: none).",
        check=client_fallback,
        rule="a client strategy or None",
    )


@dataclass(frozen=True)
class ServerCompact:
    """The API compacts the conversation itself when its input passes `trigger_tokens`
    (`compact_20260112`): the reply starts with a `compaction` block that replaces everything
    before it. `pause_after_compaction` returns the block alone (the loop then continues the
    ask); `instructions` replace the server's summary prompt; `fallback` runs instead when the
    server or the model does not offer it."""

    trigger_tokens: int = setting(
        150_000,
        "The server compacts when the input passes this many tokens.",
        minimum=MIN_COMPACT_TRIGGER,
    )
    pause_after_compaction: bool = setting(
        False, "Return the compaction block alone (the loop then continues the ask)."
    )
    instructions: str | None = setting(None, "Replace the server's summary prompt (None: its own).")
    fallback: Strategy | None = _fallback()

    name = "server-compact"
    when = "every_call"
    source = "the API's compact_20260112"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

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


@dataclass(frozen=True)
class ServerClearToolUses:
    """The API clears the oldest tool results from the prompt when its input passes
    `trigger_tokens`, keeping the newest `keep` tool uses (`clear_tool_uses_20250919`);
    the history itself keeps them."""

    trigger_tokens: int = setting(
        100_000, "The server clears when the input passes this many tokens.", minimum=1
    )
    keep: int = setting(3, "Most recent tool uses kept.", minimum=0)
    clear_at_least: int = setting(
        0, "Tokens a clearing must free, else nothing is cleared (0: no minimum).", minimum=0
    )
    exclude_tools: tuple[str, ...] = setting((), "Tools whose results are never cleared.")
    clear_tool_inputs: bool = setting(False, "Also clear the calls' inputs.")
    fallback: Strategy | None = _fallback()

    name = "server-clear-tool-uses"
    when = "every_call"
    source = "the API's clear_tool_uses_20250919"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

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


@dataclass(frozen=True)
class ServerClearThinking:
    """The API drops the thinking blocks of all but the newest `keep_turns` assistant turns
    from the prompt (`clear_thinking_20251015`)."""

    keep_turns: int = setting(1, "Newest assistant turns whose thinking is kept.", minimum=1)
    fallback: Strategy | None = _fallback()

    name = "server-clear-thinking"
    when = "every_call"
    source = "the API's clear_thinking_20251015"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def server_edit(self) -> ServerEdit:
        keep = {"type": "thinking_turns", "value": self.keep_turns}
        edit = {"type": CLEAR_THINKING, "keep": keep}
        return ServerEdit(CLEAR_THINKING, CONTEXT_MANAGEMENT_BETA, edit)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        return None  # the server clears


@dataclass(frozen=True)
class ServerSummarise:
    """On request, the API summarises the whole conversation (the `compaction` parameter):
    the history becomes its signed `compaction` block (and the pending request, verbatim).
    The focus becomes the summary's `instructions`."""

    fallback: Strategy | None = _fallback()

    name = "server-summarise"
    when = "on_request"
    source = "the API's compaction parameter"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def server_edit(self) -> ServerEdit:
        return ServerEdit(SUMMARIZE, SUMMARIZE_BETA, None)

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message]:
        block = ctx.server_summarise(messages, ctx.focus)
        if block.get("type") != "compaction":  # its summary held a credential: ours, redacted
            return [ctx.compacted_message(block["text"])]
        return [{"role": "assistant", "content": [block]}, *ctx.pending_request_message()]
