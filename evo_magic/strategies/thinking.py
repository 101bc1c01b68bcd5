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
        # The freed size is counted below from the changed messages alone, not the history.
        done = clear_thinking(list(messages), edit, lambda _: 0)
        if done is None:
            return None
        edited, _ = done
        changes = {i: m for i, m in enumerate(edited) if m is not messages[i]}
        freed = sum(json_chars(messages[i]) - json_chars(m) for i, m in changes.items())
        if freed <= 0:
            return None
        if self.cache_aware and not ctx.clearing_pays(min(changes), freed, self.calls_ahead):
            return None  # the cache write it causes costs more than it saves: wait
        return Edited(messages, changes)
