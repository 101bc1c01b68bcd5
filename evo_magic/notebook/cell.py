"""What a `%%agent` cell shows while it runs: streamed text, one line per tool call (expanding to
its input and output), compactions as they happen, errors, and a footer.

Two renderings of the same events: rich (one display updated in place, HTML with a plain-text
fallback, throttled) for Jupyter front ends, and plain text written as it comes for terminal
IPython. The events come redacted of every credential the session knows (the loop redacts
streamed text with a streaming-safe redactor); what the view composes itself (its HTML, its
own lines) is redacted once more where it leaves.
"""

from __future__ import annotations

import contextvars
import html
import json
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evo_magic import render
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    CompactionSkipped,
    ErrorOccurred,
    Event,
    MicroCompacted,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from evo_magic.secrets import redact

THROTTLE_SECONDS = 0.1
TICK_AFTER = 2.0
"""Seconds a tool runs before its line shows the time it has taken, updated every second."""
OUTPUT_PREVIEW = 4_000
TEXT_WIDTH = 100
"""Columns of the plain-text footer of a quiet cell (wrapped between words)."""
ICONS = {"compaction": "↓ ", "micro": "↓ ", "error": "✗ "}
"""Marks in front of log lines: glyphs every common font has (a notice says "note:")."""
SAID_BY_THE_MAGIC = frozenset({"interrupted"})
"""Notices a cell leaves out: the magic ends such a cell with one line that says it (and how
much history was kept), so the cell would say it twice."""
FOOTER_STYLE = "color:#555;border-top:1px solid #ddd;margin-top:4px;padding-top:2px"
NO_MATH = "mathjax_ignore tex2jax_ignore"
"""Classes that keep front ends from typesetting "$0.01 this cell, $0.02" as LaTeX."""


@dataclass
class Item:
    """One entry of the cell's log."""

    kind: str  # text, tool, compaction, skipped, micro, notice, error, footer
    text: str = ""
    event: Event | None = None
    started: ToolStarted | None = None
    started_at: float = 0.0
    """When the view saw the tool start (time.monotonic()), for the seconds it has run."""


@dataclass
class CellLog:
    """The entries of one cell, folded from its events."""

    items: list[Item] = field(default_factory=list)
    compactions: int = 0

    def add(self, event: Event) -> bool:
        """Fold in an event; True when what the cell shows changed."""
        if isinstance(event, TextDelta):
            if self.items and self.items[-1].kind == "text":
                self.items[-1].text += event.text
            else:
                self.items.append(Item("text", event.text))
            return True
        if isinstance(event, ToolStarted):
            self.items.append(Item("tool", started=event, started_at=time.monotonic()))
            return True
        if isinstance(event, ToolFinished):
            for item in reversed(self.items):
                if item.started and item.started.tool_use_id == event.tool_use_id:
                    item.event = event
                    return True
            self.items.append(Item("tool", event=event))
            return True
        kinds: dict[type, str] = {
            CompactionFinished: "compaction",
            CompactionSkipped: "skipped",
            MicroCompacted: "micro",
            Notice: "notice",
            ErrorOccurred: "error",
        }
        kind = kinds.get(type(event))
        if kind is None:
            return False
        if isinstance(event, CompactionFinished) and event.success:
            self.compactions += 1
        self.items.append(Item(kind, render.event_line(event) or "", event))
        return True

    def finish(self, event: AskFinished) -> None:
        self.items.append(Item("footer", render.footer(event, self.compactions), event))

    def running_tool(self) -> Item | None:
        """The tool call that has started and not ended, if any."""
        last = next((item for item in reversed(self.items) if item.kind == "tool"), None)
        return last if last is not None and last.event is None else None

    def plain(self) -> str:
        lines = []
        for item in self.items:
            if item.kind == "text":
                lines.append(item.text.strip("\n"))
            elif item.kind == "tool":
                lines.append("  · " + _tool_summary(item))
            else:
                lines.append(f"  · {item.text}")
        return "\n".join(lines)

    def html(self) -> str:
        parts = [_item_html(item) for item in self.items]
        return (
            f"<div class='evo-magic-cell {NO_MATH}' style='font-size:13px'>"
            + "".join(parts)
            + "</div>"
        )


def _tool_summary(item: Item) -> str:
    if item.event is not None:
        assert isinstance(item.event, ToolFinished)
        return render.tool_line(item.event)
    started = item.started
    assert started is not None
    elapsed = time.monotonic() - item.started_at
    ticking = f" {elapsed:.0f}s" if elapsed >= TICK_AFTER else ""
    return f"{render.tool_head(started)} …{ticking}"


def _item_html(item: Item) -> str:
    if item.kind == "text":
        return f"<div style='white-space:pre-wrap;margin:4px 0'>{html.escape(item.text)}</div>"
    if item.kind == "tool":
        return _tool_html(item)
    styles = {
        "compaction": "color:#6a1b9a;font-weight:bold",
        "micro": "color:#6a1b9a",
        "notice": "color:#e65100",
        "skipped": "color:#555",
        "error": "color:#c62828;font-weight:bold",
        "footer": FOOTER_STYLE,
    }
    icon = ICONS.get(item.kind, "")
    style = styles.get(item.kind, "")
    return f"<div style='{style};font-family:monospace'>{icon}{html.escape(item.text)}</div>"


def wrapped(line: str, width: int = TEXT_WIDTH) -> str:
    """A log line as plain text: "  · " in front, wrapped between words (never inside one)
    at `width` columns, continued with an indent."""
    return textwrap.fill(
        line,
        width=width,
        initial_indent="  · ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def footer_bundle(text: str) -> dict[str, str]:
    """A quiet cell's footer as its own output: HTML that wraps between words, and text."""
    return {
        "text/plain": wrapped(text),
        "text/html": (
            f"<div class='evo-magic-cell evo-magic-footer {NO_MATH}' style='font-size:13px'>"
            f"<div style='{FOOTER_STYLE};font-family:monospace;white-space:normal;"
            f"overflow-wrap:normal;word-break:normal'>{html.escape(text)}</div></div>"
        ),
    }


def _tool_html(item: Item) -> str:
    started = item.started
    event = item.event if isinstance(item.event, ToolFinished) else None
    name = event.name if event else started.name if started else "?"
    tool_input = event.input if event else started.input if started else {}
    summary = html.escape(_tool_summary(item))
    mark = "…" if event is None else "✗" if event.is_error else "✓"
    body = f"<pre style='margin:2px 0'>{html.escape(json.dumps(tool_input, indent=1))}</pre>"
    if event is not None:
        output = event.output
        if len(output) > OUTPUT_PREVIEW:
            output = output[:OUTPUT_PREVIEW] + f"\n… ({len(event.output):,} chars in all)"
        body += (
            "<pre style='margin:2px 0;max-height:20em;overflow:auto;background:#f6f6f6'>"
            f"{html.escape(output)}</pre>"
        )
    return (
        f"<details style='margin:1px 0' data-tool='{html.escape(name)}'><summary "
        f"style='font-family:monospace;cursor:pointer'>{mark} {summary}</summary>{body}</details>"
    )


class CellView:
    """Observer that shows one cell's events, rich (updated display) or plain (streamed text).

    Create it on the main thread: the display handle must belong to the cell.
    """

    def __init__(
        self,
        rich: bool,
        write: Callable[[str], Any],
        *,
        quiet: bool = False,
        throttle: float = THROTTLE_SECONDS,
    ):
        self.rich = rich
        self.quiet = quiet
        self.log = CellLog()
        self._write = write
        self._throttle = throttle
        self._last_update = 0.0
        self._handle: Any = None
        self._plain = render.TextRenderer(write)
        self._lock = threading.Lock()
        self._ticking: threading.Event | None = None
        if rich and not quiet:
            from IPython.display import display

            self._handle = display(self._bundle(), raw=True, display_id=True)

    def __call__(self, event: Event) -> None:
        if isinstance(event, Notice) and event.code in SAID_BY_THE_MAGIC:
            return
        with self._lock:
            changed = self.log.add(event)
        if self.quiet:
            return
        if not self.rich:
            self._plain(event)
            return
        if isinstance(event, ToolStarted) and self._ticking is None:
            self._start_ticking()
        running = isinstance(event, ToolStarted | ToolFinished)  # a tool line starts or ends
        if changed and (running or time.monotonic() - self._last_update >= self._throttle):
            self.update()

    def _start_ticking(self) -> None:
        """Update the display every second while a tool has run for TICK_AFTER seconds or
        more, so its line shows the time it takes (the cell's thread is busy running it)."""
        stop = self._ticking = threading.Event()

        def tick() -> None:
            while not stop.wait(1.0):
                tool = self.log.running_tool()
                if tool is not None and time.monotonic() - tool.started_at >= TICK_AFTER:
                    self.update()

        # In the cell's context: the kernel routes the updates to this cell's output.
        context = contextvars.copy_context()
        ticker = threading.Thread(target=context.run, args=(tick,), daemon=True)
        ticker.start()

    def finish(self, event: AskFinished | None) -> None:
        """Add the footer (when the ask finished) and show the final state; streamed text
        or a tool's line that something stopped is ended, so what follows starts a line."""
        if self._ticking is not None:
            self._ticking.set()
        if not self.rich and not self.quiet:
            self._plain.end_line()
        if event is not None:
            with self._lock:
                self.log.finish(event)
            if self.quiet:  # otherwise the live view has shown it already
                self._show_footer(redact(self.log.items[-1].text))
        self.update()

    def _show_footer(self, text: str) -> None:
        if self.rich:  # its own output, not a stream: a stream wraps inside words
            from IPython.display import display

            display(footer_bundle(text), raw=True)
        else:
            self._write(wrapped(text) + "\n")

    def update(self) -> None:
        if self._handle is not None:
            with self._lock:
                bundle = self._bundle()
            self._handle.update(bundle, raw=True)
            self._last_update = time.monotonic()

    def _bundle(self) -> dict[str, str]:
        return {
            "text/plain": redact(self.log.plain()),
            "text/html": redact(self.log.html()),
        }
