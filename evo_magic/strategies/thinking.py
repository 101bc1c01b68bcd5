"""ClearThinking: the thinking of older assistant turns leaves the context, on the client.

Source: Inspect AI's `CompactionEdit(keep_thinking_turns=1)` and the API's own
`clear_thinking_20251015` edit (`server-clear-thinking`), whose rule it applies: the thinking
and redacted thinking blocks of all but the newest `keep_turns` assistant turns are dropped, a
turn being the model's whole answer with its tool use loop (`compact.server_edits`, the one
implementation replay's modelled server uses too). The newest turn keeps its thinking, as the
API requires while a tool loop goes on.

Done on the client, every edit is visible and recorded, works with any model, and is
cache-aware (on by default): dropping old thinking breaks the prompt cache from that message
on, so it waits until the tokens freed, read `calls_ahead` more times, cost more than the
cache write (`Context.clearing_pays`); then every turn due is cleared at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.catalog import CLEAR_THINKING
from evo_magic.compact.base import Context, Edited, Message
from evo_magic.compact.server_edits import clear_thinking
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import json_chars
from evo_magic.strategies.params import calls_ahead_parameter


@dataclass(frozen=True)
class ClearThinking:
    """Drop the thinking blocks of all but the newest `keep_turns` assistant turns (see the
    module)."""

    keep_turns: int = setting(1, "Newest assistant turns whose thinking is kept.", minimum=1)
    cache_aware: bool = setting(
        True,
        "Clear only when that saves more than the prompt-cache write it causes; False: as soon "
        "as a turn is old enough.",
    )
    calls_ahead: int = calls_ahead_parameter()

    name = "clear-thinking"
    when = "every_call"
    source = "Inspect AI's keep_thinking_turns; the API's clear_thinking_20251015, on the client"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        edit = {
            "type": CLEAR_THINKING,
            "keep": {"type": "thinking_turns", "value": self.keep_turns},
        }
        # Only from the oldest message that still held thinking at the last run on: what is
        # older was cleared (or never had any), so a run costs the turns since, not the history.
        start = _first_thinking(messages, _known_clear(ctx, len(messages)))
        ctx.memo[_FROM] = start
        # The freed size is counted below from the changed messages alone, not the history.
        done = clear_thinking(messages[start:], edit, lambda _: 0)
        if done is None:
            return None
        edited, _ = done
        changes = {start + i: m for i, m in enumerate(edited) if m is not messages[start + i]}
        freed = sum(json_chars(messages[i]) - json_chars(m) for i, m in changes.items())
        if freed <= 0:
            return None
        if self.cache_aware and not ctx.clearing_pays(min(changes), freed, self.calls_ahead):
            return None  # the cache write it causes costs more than it saves: wait
        return Edited(messages, changes)


_FROM = "thinking_from"
"""The memo's note: no message before this index held thinking at the last run."""


def _known_clear(ctx: Context, length: int) -> int:
    """Where the last run's scan may resume (0 when there was none, or the history shrank)."""
    start = ctx.memo.get(_FROM, 0)
    return start if isinstance(start, int) and 0 <= start <= length else 0


def _first_thinking(messages: Sequence[Message], start: int) -> int:
    """The index of the first assistant message from `start` on that holds thinking (the
    length when none does). Starting a turn there counts the same turns as the whole list."""
    for index in range(start, len(messages)):
        message = messages[index]
        content = message.get("content")
        if (
            message.get("role") == "assistant"
            and isinstance(content, list)
            and any(b.get("type") in ("thinking", "redacted_thinking") for b in content)
        ):
            return index
    return len(messages)
