"""ClearToolUses: the Anthropic API's context editing `clear_tool_uses_20250919`, applied on the
client so that every step is visible and recorded.

Source: Anthropic's context-editing documentation. When the prompt is over `trigger_tokens`
input tokens (default 100,000), or holds more than `trigger_tool_uses` tool uses when that is
set, the oldest tool results are cleared in chronological order, all but the `keep` most
recent tool uses (default 3); nothing is cleared unless at least `clear_at_least` tokens are
freed (each clearing breaks the prompt cache from that point); tools in `exclude_tools` are
never cleared; `clear_tool_inputs` also clears the calls' inputs (True for every tool, or a
list of tool names). Each clearing reports the tool uses cleared and the tokens freed, as the
API's `applied_edits` do (the event's `cleared_ids` and `cleared_tokens`), and the cached tokens
it invalidated (`cache_invalidated_tokens`).

Cache-aware mode (`cache_aware=True`, evo_magic's addition): a clearing also waits until it
pays for the cache write it causes: the freed tokens, read `calls_ahead` more times, must cost
more than writing the rest of the conversation again (`Context.clearing_saving`); over the
session's limit it clears when that brings the history under it, and otherwise leaves the
history to the full compaction that follows. This replaces a fixed `clear_at_least` by one
derived from the prices and the cached prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, json_chars, rewrite_blocks
from evo_magic.strategies.params import calls_ahead_parameter, non_empty, tool_inputs
from evo_magic.strategies.placeholders import placeholder_for

CLEARED = "[Tool result cleared to save context. Run the tool again if you need it.]"


@dataclass(frozen=True)
class ClearToolUses:
    """Clear old tool results (and optionally inputs) past a token threshold; see the module."""

    trigger_tokens: int = setting(
        100_000, "Clear when the prompt is over this many tokens.", minimum=0
    )
    trigger_tool_uses: int | None = setting(
        None, "Instead: clear when the context holds more than this many tool uses.", minimum=0
    )
    keep: int = setting(3, "Most recent tool uses kept.", minimum=0)
    clear_at_least: int = setting(
        0, "Tokens a clearing must free, else nothing is cleared.", minimum=0
    )
    exclude_tools: frozenset[str] = setting(frozenset(), "Tools whose results are never cleared.")
    clear_tool_inputs: bool | frozenset[str] = setting(
        False,
        "Also clear the calls' inputs: True for every tool, or a list of tool names.",
        check=tool_inputs,
        rule="True, False or a list of tool names",
    )
    placeholder: str = setting(
        CLEARED, "Text of a cleared tool result.", check=non_empty, rule="not empty"
    )
    cache_aware: bool = setting(
        False, "Clear only when that saves money given the prompt cache (see the module)."
    )
    calls_ahead: int = calls_ahead_parameter()

    name = "clear-tool-uses"
    when = "every_call"
    source = "the API's clear_tool_uses_20250919, on the client"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        refs = ctx.tool_results(messages)
        if not self._triggered(ctx, len(refs)):
            return None
        # Results before memo["done"] were cleared (or excluded) by an earlier pass (a
        # strategy's parameters never change: its notes hold for it as long as the history).
        end = max(len(refs) - self.keep, 0)
        replacements: list[tuple[int, int, dict]] = []
        freed = 0
        for ref in refs[min(ctx.memo.get("done", 0), end) : end]:
            block = block_at(messages, ref)
            name = ctx.tool_name(block)
            if name in self.exclude_tools:
                continue
            placeholder = placeholder_for(self.placeholder, ref.tool_use_id, ctx)
            if block.get("content") not in (self.placeholder, placeholder):
                freed += json_chars(block.get("content", "")) - json_chars(placeholder)
                cleared = {**block, "content": placeholder}
                replacements.append((ref.index, ref.block_index, cleared))
            found = _tool_use(messages, ref.index - 1, ref.tool_use_id)
            if found is not None and found[1].get("input") and self._clears_input(name):
                position, use = found
                freed += json_chars(use["input"]) - json_chars({})
                replacements.append((ref.index - 1, position, {**use, "input": {}}))
        if freed <= 0 or ctx.tokens_of_chars(freed) < self.clear_at_least:
            return None  # nothing worth breaking the cache for yet
        first = min(index for index, _, _ in replacements)
        if self.cache_aware and not ctx.clearing_pays(first, freed, self.calls_ahead):
            return None  # the cache write it causes costs more than it saves: wait
        ctx.memo["done"] = end
        return rewrite_blocks(messages, replacements)

    def _triggered(self, ctx: Context, tool_uses: int) -> bool:
        if self.trigger_tool_uses is not None:
            return tool_uses > self.trigger_tool_uses
        return ctx.size.tokens > self.trigger_tokens

    def _clears_input(self, name: str | None) -> bool:
        if isinstance(self.clear_tool_inputs, bool):
            return self.clear_tool_inputs
        return name in self.clear_tool_inputs


def _tool_use(messages: Sequence[Message], index: int, tool_use_id: str) -> tuple[int, dict] | None:
    """The position and block of the tool_use `tool_use_id` in the assistant message `index`."""
    if index < 0 or messages[index].get("role") != "assistant":
        return None
    for position, block in enumerate(messages[index].get("content") or []):
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("id") == tool_use_id
        ):
            return position, block
    return None
