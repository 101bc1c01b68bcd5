"""Plain-text rendering of session events: one line per tool call, compaction or notice, and
the words every rendering shares (`plural`, `size`, `clip`, `usd`).

Shared by the terminal front ends (quick start, terminal IPython), the notebook display's
`text/plain` fallback and the context meter. Pure functions; nothing here prints on its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evo_magic.events import (
    AskFinished,
    AskStarted,
    CompactionFinished,
    CompactionSkipped,
    ContextSize,
    ErrorOccurred,
    Event,
    MicroCompacted,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
)


def plural(n: int, noun: str) -> str:
    """ "1 message", "2 messages"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def size(context: ContextSize) -> str:
    """A context's size as people read it: "3 messages, 1,234 chars, ~400 tokens". An empty
    history is "empty, 0 chars": the two characters of its JSON (`[]`) hold nothing. The
    tokens are the whole prompt's, so the system prompt and tools still count."""
    approx = "" if context.tokens_exact else "~"
    held = "empty, 0 chars"
    if context.messages:
        held = f"{plural(context.messages, 'message')}, {context.chars:,} chars"
    return f"{held}, {approx}{context.tokens:,} tokens"


def short(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int, *, one_line: bool = True) -> str:
    """`text` in at most `limit` characters: cut at the last word that fits, with an
    ellipsis (a single word longer than `limit` is cut inside it). `one_line` folds whitespace
    runs, newlines included, into single spaces first."""
    text = " ".join(text.split()) if one_line else text.strip()
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 1)]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit // 3:
        cut = cut[:space]
    return cut.rstrip(" \n,;:.-–—") + "…"


def tool_head(event: ToolStarted | ToolFinished) -> str:
    """What a tool call does, as its line starts when the tool starts: "bash: ls -la"."""
    argument = short(event.summary or json.dumps(event.input, ensure_ascii=False))
    return f"{event.name}: {argument}"


def tool_outcome(event: ToolFinished) -> str:
    """How a tool call ended, as its line ends: " -> ok, 321 chars, 0.04s"."""
    status = "error" if event.is_error else "ok"
    chars = event.original_chars or len(event.output)
    saved = " (saved to file)" if event.saved_to else ""
    return f" -> {status}, {plural(chars, 'char')}{saved}, {event.duration:.2f}s"


def tool_line(event: ToolFinished) -> str:
    return tool_head(event) + tool_outcome(event)


def _trigger(trigger: str) -> str:
    return {"auto": "auto", "model": "model's compact tool", "user": "user"}.get(trigger, trigger)


def _focus(focus: str | None) -> str:
    """The focus as typed (not a Python repr: backslashes and quotes as they are)."""
    return f' focus "{short(focus, 50)}"' if focus else ""


def compaction_line(event: CompactionFinished) -> str:
    layer = _trigger(event.trigger)
    if event.trigger == "server":
        layer = "by the API"
    if event.strategy != "summarise" or event.fallback_for:
        layer += f", {event.strategy}"
    if event.fallback_for:
        layer += f" as the fallback for {event.fallback_for}"
    focus = _focus(event.focus)
    if not event.success:
        return f"compaction ({layer}){focus} FAILED, history kept: {event.error}"
    return f"compaction ({layer}){focus}: {size(event.before)} -> {size(event.after)}"


def skipped_line(event: CompactionSkipped) -> str:
    return f"nothing to compact ({_trigger(event.trigger)}){_focus(event.focus)}: {event.reason}"


def micro_line(event: MicroCompacted) -> str:
    sizes = f"({event.before.chars:,} -> {event.after.chars:,})"
    if event.cache_invalidated_tokens:
        sizes += f", {event.cache_invalidated_tokens:,} cached tokens invalidated"
    if event.applied is not None:  # a server strategy: the API edited the prompt, not the history
        what = event.applied.get("cleared_tool_uses")
        unit = "tool use"
        if what is None:
            what, unit = event.applied.get("cleared_thinking_turns", 0), "thinking turn"
        return (
            f"{event.strategy}: the API cleared {plural(what, unit)}, "
            f"{event.cleared_tokens:,} tokens "
            "from this call's prompt (the history keeps them)"
        )
    if event.strategy == "micro":
        return (
            f"micro-compaction: cleared {plural(len(event.cleared_ids), 'old tool result')}, freed "
            f"{event.chars_freed:,} chars {sizes}"
        )
    if event.chars_freed < 0 and not event.cleared_ids:  # a note added for the model
        said = " ".join(edit.block.get("text", "") for edit in event.edits)
        return f"{event.strategy}: told the model {short(said, 100)!r} {sizes}"
    if event.strategy == "large-outputs":
        return (
            f"large outputs: {plural(len(event.cleared_ids), 'output')} saved to files with a "
            "preview in "
            f"context, freed {event.chars_freed:,} chars {sizes}"
        )
    return (
        f"{event.strategy}: rewrote {plural(len(event.edits), 'block')} of "
        f"{plural(len(event.cleared_ids), 'tool call')}, freed {event.chars_freed:,} chars {sizes}"
    )


def usd(value: float | None) -> str:
    """A cost in US dollars as shown to people: "$0.0123", "$1.23", or "—" (no price), as the
    meter shows it."""
    if value is None:
        return "—"
    return f"${value:.4f}" if abs(value) < 1 else f"${value:,.2f}"


def cell_cost(event: AskFinished) -> float | None:
    """What an ask cost in all, its model calls and its summaries (None: one had no price)."""
    if event.cost_usd is None or event.summary_cost_usd is None:
        return None
    return event.cost_usd + event.summary_cost_usd


def cost_text(event: AskFinished) -> str:
    """This cell's cost (its summaries said apart), the session's so far, and the cell's cache
    hit rate (cache-read tokens over context tokens)."""
    summaries = event.summary_cost_usd
    text = f"cost {usd(cell_cost(event))} this cell"
    if summaries:
        text += f" (summaries {usd(summaries)})"
    return (
        f"{text}, {usd(event.session_cost_usd)} so far; "
        f"cache hit rate {event.usage.cache_hit_rate:.0%}"
    )


def footer(event: AskFinished, compactions: int) -> str:
    u = event.usage
    return (
        f"{plural(event.turns, 'model call')}, stop: {event.stop_reason}; "
        f"tokens in {u.input_tokens:,} / out {u.output_tokens:,} / cache write "
        f"{u.cache_creation_input_tokens:,} / cache read {u.cache_read_input_tokens:,}; "
        f"{cost_text(event)}; {event.duration:.1f}s; "
        f"context {size(event.context)}; {plural(compactions, 'compaction')}"
    )


def event_line(event: Event) -> str | None:
    """The line a terminal shows for `event`, or None for events it does not show."""
    if isinstance(event, ToolFinished):
        return tool_line(event)
    if isinstance(event, CompactionFinished):
        return compaction_line(event)
    if isinstance(event, CompactionSkipped):
        return skipped_line(event)
    if isinstance(event, MicroCompacted):
        return micro_line(event)
    if isinstance(event, Notice):
        return f"note: {event.message}"
    if isinstance(event, ErrorOccurred):
        return f"error: {event.message}"
    return None


class TextRenderer:
    """An observer that writes a session's events as plain text through `write`.

    A tool call's line is written when the tool starts ("  · bash: sleep 30") and completed
    when it ends (" -> ok, 0 chars, 30.01s"); a line that something else interrupts is closed
    with "…" and written whole when the tool ends.
    """

    def __init__(self, write: Callable[[str], Any]):
        self.write = write
        self._in_text = False
        self._open_tool: str | None = None
        self.compactions = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, AskStarted):
            self.compactions = 0
        if isinstance(event, ToolFinished) and event.tool_use_id == self._open_tool:
            self._open_tool = None
            self.write(tool_outcome(event) + "\n")
            return
        if isinstance(event, TextDelta):
            if self._open_tool is not None:
                self.end_line()
            self.write(event.text)
            self._in_text = True
            return
        if isinstance(event, CompactionFinished) and event.success:
            self.compactions += 1
        if isinstance(event, ToolStarted):
            self.end_line()
            self.write(f"  · {tool_head(event)}")
            self._open_tool = event.tool_use_id
            return
        line = footer(event, self.compactions) if isinstance(event, AskFinished) else None
        line = line or event_line(event)
        if line is None:
            return
        self.end_line()
        self.write(f"  · {line}\n")

    def end_line(self) -> None:
        """End what is being written (streamed text, a running tool's line) with a newline."""
        if self._open_tool is not None:
            self.write(" …\n")
            self._open_tool = None
        if self._in_text:
            self.write("\n")
            self._in_text = False
