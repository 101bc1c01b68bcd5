"""The context-meter widget: live message count, size against the limits, every compaction as
before -> after, and a small chart of context size per model call.

Displayed, it is a live widget that also carries a static `text/html` rendering and
`text/plain` (terminal IPython). `snapshot()` is the static part alone: what a finished cell
keeps, since a widget view shows only while its kernel is there to serve the model. Nothing
secret is in its state: only sizes, layers, triggers and focus texts.
"""

from __future__ import annotations

import html
import threading
import time
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import traitlets

from evo_magic.events import AskFinished, CompactionFinished, Event, MicroCompacted
from evo_magic.notebook.meter import MeterData, meter_text

if TYPE_CHECKING:
    from evo_magic.session import Session

REFRESH_SECONDS = 0.2
CHART_WIDTH, CHART_HEIGHT = 360, 70
MAX_ROWS = 8


class ContextMeter(widgets.VBox):
    """A live meter for one session. Display it as often as you like; all views update."""

    messages = traitlets.Int(0).tag(sync=True)
    chars = traitlets.Int(0).tag(sync=True)
    tokens = traitlets.Int(0).tag(sync=True)
    context_limit = traitlets.Int(0).tag(sync=True)
    token_limit = traitlets.Int(None, allow_none=True).tag(sync=True)
    model_calls = traitlets.Int(0).tag(sync=True)
    sizes = traitlets.List(traitlets.Int()).tag(sync=True)
    """Characters sent per model call, in order."""
    compactions = traitlets.List(traitlets.Dict()).tag(sync=True)
    """Every compaction: layer, trigger, focus, before/after messages and chars, success."""

    def __init__(self, session: Session, **kwargs: Any):
        self._view = widgets.HTML()
        super().__init__([self._view], **kwargs)
        self.session = session
        self.data = MeterData(
            session.session_id,
            session.policy.context_limit,
            session.policy.token_limit,
            session.context(),
        )
        self._last_refresh = 0.0
        self._lock = threading.Lock()
        self._unsubscribe = session.subscribe(self.on_event)
        self.refresh()

    def on_event(self, event: Event) -> None:
        """Session observer: fold the event in and refresh (throttled, except compactions and
        the end of an ask, so the last state is always shown)."""
        self.data.observe(event)
        urgent = isinstance(event, CompactionFinished | MicroCompacted | AskFinished)
        if urgent or time.monotonic() - self._last_refresh >= REFRESH_SECONDS:
            self.refresh()

    def refresh(self) -> None:
        """Re-read the session's current size and limits and update every view."""
        with self._lock:
            data = self.data
            data.current = self.session.context()
            data.context_limit = self.session.policy.context_limit
            data.token_limit = self.session.policy.token_limit
            with self.hold_sync():
                self.messages = data.current.messages
                self.chars = data.current.chars
                self.tokens = data.current.tokens
                self.context_limit = data.context_limit
                self.token_limit = data.token_limit
                self.model_calls = len(data.calls)
                self.sizes = [point.sent_chars for point in data.calls]
                self.compactions = [_row_state(row) for row in data.compactions]
                self._view.value = meter_html(data)
            self._last_refresh = time.monotonic()

    def close(self) -> None:
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()
        super().close()

    def snapshot(self) -> dict[str, str]:
        """The meter as it is now, as static output: `text/html` and `text/plain`, no widget
        view. A finished cell keeps this, so a saved notebook shows its meter without a kernel
        (JupyterLab, Notebook, nbconvert, GitHub) instead of "model not found"."""
        self.refresh()
        return {"text/html": meter_html(self.data), "text/plain": meter_text(self.data)}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        self.refresh()
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        bundle["text/html"] = meter_html(self.data)
        bundle["text/plain"] = meter_text(self.data)
        return bundle


def _row_state(row: Any) -> dict[str, Any]:
    return {
        "layer": row.layer,
        "trigger": row.trigger,
        "focus": row.focus,
        "before_messages": row.before.messages,
        "before_chars": row.before.chars,
        "after_messages": row.after.messages,
        "after_chars": row.after.chars,
        "success": row.success,
        "error": row.error,
        "after_call": row.after_call,
    }


def meter_html(data: MeterData) -> str:
    """The meter as self-contained HTML (inline styles and SVG; no scripts)."""
    c = data.current
    fill = min(data.fill(), 1.0)
    color = "#2e7d32" if fill < 0.7 else "#f9a825" if fill < 1.0 else "#c62828"
    tokens = f"{'' if c.tokens_exact else '~'}{c.tokens:,}"
    if data.token_limit:
        tokens += f" / {data.token_limit:,}"
    rows = "".join(_row_html(row) for row in data.compactions[-MAX_ROWS:])
    hidden = len(data.compactions) - MAX_ROWS
    more = f"<div style='color:#777'>… {hidden} earlier</div>" if hidden > 0 else ""
    table = (
        "<table style='border-collapse:collapse;font-size:12px;margin-top:4px'>"
        "<tr><th align=left>layer</th><th align=left>focus</th><th align=right>before</th>"
        f"<th></th><th align=right>after</th></tr>{rows}</table>{more}"
        if rows
        else "<div style='color:#777;font-size:12px'>no compaction yet</div>"
    )
    return (
        "<div class='evo-magic-meter' style='font-family:sans-serif;font-size:13px;"
        "border:1px solid #ccc;border-radius:4px;padding:6px 8px;max-width:560px'>"
        f"<div><b>context</b> · session <code>{html.escape(data.session_id)}</code></div>"
        f"<div>{c.messages} messages · {c.chars:,} / {data.context_limit:,} chars "
        f"({data.fill():.0%}) · {tokens} tokens · {len(data.calls)} model calls</div>"
        "<div style='background:#eee;height:8px;border-radius:4px;margin:3px 0'>"
        f"<div style='background:{color};width:{fill:.1%};height:8px;border-radius:4px'></div>"
        f"</div>{_chart_svg(data)}{table}</div>"
    )


def _row_html(row: Any) -> str:
    focus = html.escape(row.focus or "")
    if not row.success:
        return (
            f"<tr><td>{html.escape(row.layer)}</td><td>{focus}</td>"
            f"<td colspan=3 style='color:#c62828'>failed: {html.escape(row.error or '')}; "
            "history kept</td></tr>"
        )
    return (
        f"<tr><td>{html.escape(row.layer)}</td><td>{focus}</td>"
        f"<td align=right>{row.before.messages} msgs / {row.before.chars:,}</td><td>→</td>"
        f"<td align=right>{row.after.messages} msgs / {row.after.chars:,}</td></tr>"
    )


def _chart_svg(data: MeterData) -> str:
    """Characters per model call as a line; the dashed line is the limit, drops are compactions."""
    if not data.calls:
        return ""
    top = max(max(p.before_chars for p in data.calls), data.context_limit) * 1.05
    n = len(data.calls)
    step = CHART_WIDTH / max(n - 1, 1)

    def y(chars: int) -> float:
        return CHART_HEIGHT - chars / top * CHART_HEIGHT

    sent = " ".join(f"{i * step:.1f},{y(p.sent_chars):.1f}" for i, p in enumerate(data.calls))
    limit_y = y(data.context_limit)
    marks = "".join(
        f"<line x1='{(row.after_call - 0.5) * step:.1f}' x2='{(row.after_call - 0.5) * step:.1f}' "
        f"y1='0' y2='{CHART_HEIGHT}' stroke='#c62828' stroke-width='1' opacity='0.6'/>"
        for row in data.full_compactions
        if row.success and 0 < row.after_call <= n
    )
    return (
        f"<svg width='{CHART_WIDTH}' height='{CHART_HEIGHT}' viewBox='-2 -2 {CHART_WIDTH + 4} "
        f"{CHART_HEIGHT + 4}' role='img' aria-label='context size per model call'>"
        f"<line x1='0' x2='{CHART_WIDTH}' y1='{limit_y:.1f}' y2='{limit_y:.1f}' stroke='#999' "
        f"stroke-dasharray='4 3'/>{marks}"
        f"<polyline fill='none' stroke='#1565c0' stroke-width='1.5' points='{sent}'/></svg>"
    )
