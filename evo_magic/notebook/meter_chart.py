"""The meter's chart: the context sent at each model call, drawn in plain HTML and CSS.

One column per call (what was sent, and on top of it what the per-call strategies or a
compaction removed just before), the limit as a dashed line, a mark for every compaction where
it happened, and the cell's own calls shaded. Each column and each mark has a `title`: its
tooltip, which needs no script.

Why not SVG: a notebook opened by someone else is untrusted, and JupyterLab (and Notebook 7)
sanitise untrusted HTML with an allow-list that has no SVG: the drawing is dropped and the text
of its labels and tooltips spills into the output as one paragraph. Positioned `div`s with
inline styles and `title` attributes pass that sanitiser, so the chart reads the same trusted,
untrusted, exported or on GitHub.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from evo_magic.notebook.meter import (
    LAYERS,
    TRIGGERS,
    CallPoint,
    Compaction,
    MeterData,
    clip,
    counted,
    plural,
    size_text,
)
from evo_magic.render import usd

WIDTH, HEIGHT = 600, 236
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 26, 40
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
CONTEXT_CALLS = 40
"""A cell's chart shows its own calls and at most this many before them."""
MAX_COLUMNS = 160
"""Columns at most: beyond, consecutive calls share a column (the largest of them drawn), so
a meter stays small however long the session."""
BLUE, LIGHT_BLUE, PURPLE, LIGHT_PURPLE = "#1565c0", "#90caf9", "#7b1fa2", "#ce93d8"
RED, GREY = "#c62828", "#757575"


def attr(text: object) -> str:
    """Escaped for an attribute value; newlines kept (a tooltip's lines)."""
    return html.escape(str(text), quote=True).replace("\n", "&#10;")


def nice_step(span: float, ticks: int) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = max(span / max(ticks, 1), 1e-9)
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def chars_label(value: float) -> str:
    """ "0", "500", "12k", "12.5k", "1.2M"."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def position(row: Compaction, calls: Sequence[CallPoint]) -> float:
    """Where a compaction happened on the call axis: between the call before it and the next."""
    if row.after_call <= 0:
        return (calls[0].call if calls else 1) - 0.5
    return calls[min(row.after_call, len(calls)) - 1].call + 0.5


class Frame:
    """What the chart shows (a window of the calls, grouped into columns, and the compactions
    among them) and where it lands (pixels from the plot's left and bottom)."""

    def __init__(self, data: MeterData):
        all_calls = data.calls
        self.start = 0
        if data.scope.label == "cell":
            self.start = max(data.scope.first_call - CONTEXT_CALLS, 0)
        self.calls = all_calls[self.start :]
        self.marks = [
            (index, row)
            for index, row in enumerate(data.compactions)
            if row.after_call >= self.start
        ]
        self.group = max(math.ceil(len(self.calls) / MAX_COLUMNS), 1)
        self.columns = [
            self.calls[i : i + self.group] for i in range(0, len(self.calls), self.group)
        ]
        first = self.calls[0].call if self.calls else 1
        last = self.calls[-1].call if self.calls else 1
        after_last = any(position(row, all_calls) > last for _, row in self.marks)
        self.x0 = first - 0.5
        self.x1 = last + (1.0 if after_last else 0.5)
        sizes = [p.before.chars for p in self.calls] + [row.before.chars for _, row in self.marks]
        peak = max([*sizes, data.context_limit, 1]) * 1.08
        self.step = nice_step(peak, 4)
        self.top = math.ceil(peak / self.step) * self.step

    @property
    def slot(self) -> float:
        """The width of one call on the call axis."""
        return PLOT_W / (self.x1 - self.x0)

    def x(self, call: float) -> float:
        return (call - self.x0) * self.slot

    def y(self, chars: float) -> float:
        return chars / self.top * PLOT_H


def chart_html(data: MeterData) -> str:
    """The chart, or a line saying there is nothing to draw yet."""
    if not data.calls and not data.compactions:
        return (
            "<div class='evo-chart-empty' style='color:#777;font-size:12px;margin:6px 0'>"
            "no model call yet</div>"
        )
    f = Frame(data)
    plot = _band(data, f) + _grid(f) + _limit(data, f) + _columns(data, f) + _marks(data, f)
    return (
        f"<div class='evo-chart' style='position:relative;width:{WIDTH}px;height:{HEIGHT}px;"
        "margin-top:6px;font-size:11px;color:#444;line-height:1.2'>"
        f"{_y_axis(f)}{_x_axis(data, f)}"
        f"<div class='evo-plot' style='position:absolute;left:{LEFT}px;top:{TOP}px;"
        f"width:{PLOT_W}px;height:{PLOT_H}px;border-left:1px solid #444;"
        f"border-bottom:1px solid #444'>{plot}</div></div>{_legend()}"
    )


def _box(css: str, style: str, inner: str = "", title: str | None = None, extra: str = "") -> str:
    """An absolutely positioned div."""
    tip = f" title='{attr(title)}'" if title is not None else ""
    return f"<div class='{css}'{extra}{tip} style='position:absolute;{style}'>{inner}</div>"


def _y_axis(f: Frame) -> str:
    labels = []
    value = 0.0
    while value <= f.top + 1e-6:
        labels.append(
            f"<div style='position:absolute;right:6px;bottom:{f.y(value) - 6:.1f}px'>"
            f"{chars_label(value)}</div>"
        )
        value += f.step
    title = (
        "<div class='evo-axis-title' style='position:absolute;left:0;top:-24px;"
        "white-space:nowrap'>context sent (characters)</div>"
    )
    style = f"left:0;top:{TOP}px;width:{LEFT}px;height:{PLOT_H}px"
    return _box("evo-axis-y", style, title + "".join(labels))


def _x_axis(data: MeterData, f: Frame) -> str:
    first, last = math.ceil(f.x0), math.floor(f.x1)
    step = max(int(nice_step(max(last - first, 1), 8)), 1)
    start = first if first % step == 0 else first + step - first % step
    ticks = sorted({first, *range(start, last + 1, step)}) if data.calls else []
    labels = "".join(
        f"<div style='position:absolute;left:{f.x(call) - 15:.1f}px;width:30px;"
        f"text-align:center;top:3px'>{call}</div>"
        for call in ticks
    )
    title = (
        f"<div class='evo-axis-title' style='position:absolute;left:0;width:{PLOT_W}px;"
        "text-align:center;top:20px'>model call (number in the session)</div>"
    )
    return _box(
        "evo-axis-x",
        f"left:{LEFT}px;top:{TOP + PLOT_H}px;width:{PLOT_W}px;height:{BOTTOM}px",
        labels + title,
    )


def _grid(f: Frame) -> str:
    lines = []
    value = f.step
    while value <= f.top + 1e-6:
        lines.append(
            f"<div style='position:absolute;left:0;width:{PLOT_W}px;height:0;"
            f"bottom:{f.y(value):.1f}px;border-top:1px solid #eee'></div>"
        )
        value += f.step
    return "".join(lines)


def _limit(data: MeterData, f: Frame) -> str:
    label = (
        "<div style='position:absolute;right:2px;bottom:2px;color:#777;font-size:10px;"
        f"white-space:nowrap'>limit {data.context_limit:,} chars</div>"
    )
    return _box(
        "evo-limit",
        f"left:0;width:{PLOT_W}px;height:0;bottom:{f.y(data.context_limit):.1f}px;"
        "border-top:1px dashed #999;z-index:1",
        label,
    )


def _band(data: MeterData, f: Frame) -> str:
    """The cell's own stretch, shaded (a cell's meter only)."""
    if data.scope.label != "cell":
        return ""
    starts = [p.call - 0.5 for p in data.own_calls[:1]]
    starts += [position(row, data.calls) - 0.25 for row in data.own_compactions[:1]]
    if not starts:
        return ""
    x = max(f.x(min(starts)), 0.0)
    width = PLOT_W - x
    label = (  # too narrow for a label: the cell's own marks say it
        f"<div style='position:absolute;left:{x + 4:.1f}px;top:2px;color:{BLUE};"
        "font-size:10px'>this cell</div>"
        if width >= 60
        else ""
    )
    shade = _box(
        "evo-cell-band",
        f"left:{x:.1f}px;width:{width:.1f}px;top:0;height:{PLOT_H}px;background:{BLUE};"
        "opacity:0.07",
    )
    return shade + label


def _columns(data: MeterData, f: Frame) -> str:
    """One column per call (or per group of calls, in a long session): what was sent, and
    above it what was removed just before."""
    out = []
    for number, group in enumerate(f.columns):
        first, last = group[0], group[-1]
        own = f.start + (number + 1) * f.group > data.scope.first_call  # holds an own call
        slot = f.slot * len(group)
        width = max(min(slot * 0.6, 16.0), 1.0)
        inset = (slot - width) / 2
        sent = f.y(max(p.sent.chars for p in group))
        before = f.y(max(p.before.chars for p in group))
        bars = (
            f"<div style='position:absolute;left:{inset:.1f}px;width:{width:.1f}px;bottom:0;"
            f"height:{sent:.1f}px;background:{BLUE if own else LIGHT_BLUE}'></div>"
        )
        if before > sent:
            bars += (
                f"<div style='position:absolute;left:{inset:.1f}px;width:{width:.1f}px;"
                f"bottom:{sent:.1f}px;height:{before - sent:.1f}px;background:{LIGHT_PURPLE};"
                "opacity:0.8'></div>"
            )
        calls = f" data-call='{first.call}'"
        if last is not first:
            calls += f" data-last-call='{last.call}'"
        if len(group) > 1:
            tip = group_tooltip(group)
        elif own:
            tip = point_tooltip(first)
        else:  # before the cell: the numbers only (the cell above has the whole story)
            tip = f"call {first.call} (ask {first.turn}): {first.sent.chars:,} chars sent"
        style = f"left:{f.x(first.call - 0.5):.1f}px;width:{slot:.1f}px;bottom:0;height:{PLOT_H}px"
        out.append(_box("evo-point", style, bars, tip, calls))
    return "".join(out)


def group_tooltip(group: Sequence[CallPoint]) -> str:
    """The tooltip of a column that stands for several calls."""
    biggest = max(group, key=lambda p: p.sent.chars)
    asks = sorted({p.turn for p in group})
    span = f"ask {asks[0]}" if len(asks) == 1 else f"asks {asks[0]}-{asks[-1]}"
    return (
        f"calls {group[0].call}-{group[-1].call} ({span})\n"
        f"largest: call {biggest.call}, {biggest.sent.chars:,} chars, {biggest.tokens:,} tokens"
    )


def point_tooltip(point: CallPoint) -> str:
    """A column's tooltip: the call, its size in characters and tokens, what came before it."""
    tokens = (
        f"{point.tokens:,} tokens (the API's count)"
        if point.api_tokens is not None
        else f"~{point.tokens:,} tokens (estimated)"
    )
    lines = [
        f"call {point.call} (ask {point.turn})",
        f"sent {plural(point.sent.messages, 'message')}, {point.sent.chars:,} chars, {tokens}",
    ]
    if point.before.chars != point.sent.chars:
        lines.append(f"{point.before.chars:,} chars before the compactions just before it")
    if point.cost_usd is not None:
        lines.append(f"cost {usd(point.cost_usd)}")
    if point.before_it:
        lines.append("before it: " + "; ".join(point.before_it))
    return "\n".join(lines)


def _marks(data: MeterData, f: Frame) -> str:
    """Every compaction in the chart's window: a line for a full one, a triangle for
    micro-compactions (one per column when calls share columns); those before the scope are
    drawn faint."""
    out = []
    micro: dict[int, list[tuple[Compaction, bool]]] = {}
    for index, row in f.marks:
        own = index >= data.scope.first_compaction
        if row.micro:
            column = max(row.after_call - f.start, 0) // f.group if f.group > 1 else index
            micro.setdefault(column, []).append((row, own))
            continue
        colour = RED if row.success else GREY
        line = "solid" if row.success else "dashed"
        inner = (
            f"<div style='position:absolute;left:4px;width:0;top:0;height:{PLOT_H}px;"
            f"border-left:2px {line} {colour}'></div>"
            f"<div style='position:absolute;left:9px;top:14px;color:{colour};font-size:10px;"
            f"font-weight:bold'>{attr(row.label if row.success else 'failed')}</div>"
        )
        extra = f" data-kind='full' data-label='{attr(row.label)}' data-own='{_yes(own)}'"
        x = f.x(position(row, data.calls))
        style = f"left:{x - 5:.1f}px;width:10px;top:0;height:{PLOT_H}px;z-index:2;"
        out.append(_box("evo-mark", style + _faint(own), inner, compaction_tooltip(row), extra))
    stacked: dict[float, int] = {}
    for group in micro.values():
        rows = [row for row, _ in group]
        own = any(mine for _, mine in group)
        x = f.x(position(rows[0], data.calls))
        level = stacked[x] = stacked.get(x, -1) + 1  # several at one place: stacked up
        style = (
            f"left:{x - 6:.1f}px;width:12px;bottom:{1 + level * 9}px;height:10px;z-index:2;"
            f"color:{PURPLE};font-size:9px;line-height:10px;text-align:center;"
        )
        if len(rows) > 1:
            tip = micro_group_tooltip(rows)
        elif own:
            tip = compaction_tooltip(rows[0])
        else:
            tip = f"micro-compaction before call {rows[0].after_call + 1}"
        extra = f" data-kind='micro' data-count='{len(rows)}' data-own='{_yes(own)}'"
        out.append(_box("evo-mark", style + _faint(own), "▲", tip, extra))
    return "".join(out)


def _yes(value: bool) -> str:
    return "true" if value else "false"


def _faint(own: bool) -> str:
    """Marks from before the scope are drawn faint."""
    return "" if own else "opacity:0.4;"


def micro_group_tooltip(rows: Sequence[Compaction]) -> str:
    freed = sum(row.freed_chars for row in rows)
    return (
        f"{plural(len(rows), 'micro-compaction')} before calls {rows[0].after_call + 1}-"
        f"{rows[-1].after_call + 1}: {plural(sum(len(r.cleared) for r in rows), 'tool result')}"
        f" rewritten, freed {freed:,} chars"
    )


def compaction_tooltip(row: Compaction) -> str:
    """A compaction mark's tooltip."""
    if row.micro:
        return (
            f"micro-compaction ({row.strategy}) before call {row.after_call + 1}: "
            f"{plural(len(row.cleared), 'tool result')} rewritten ({counted(row.cleared)}), "
            f"{row.before.chars:,} -> {row.after.chars:,} chars, freed {row.freed_chars:,}"
        )
    lines = [
        f"{row.label if row.success else 'failed compaction'}: {row.strategy} "
        f"({LAYERS.get(row.layer, row.layer)}; {TRIGGERS.get(row.trigger, row.trigger)})",
        f"after call {row.after_call}",
    ]
    if row.focus:
        lines.append(f"focus: {clip(row.focus, 120)}")
    if row.success:
        lines.append(f"{size_text(row.before)}\n-> {size_text(row.after)}")
    else:
        lines.append(f"{row.error or 'failed'}; the history was kept")
    return "\n".join(lines)


def _legend() -> str:
    def key(colour: str, text: str, shape: str = "width:9px;height:9px") -> str:
        return (
            f"<span style='white-space:nowrap;margin-right:10px'><span style='display:"
            f"inline-block;{shape};background:{colour};margin-right:3px'></span>{text}</span>"
        )

    return (
        f"<div class='evo-chart-legend' style='font-size:11px;color:#555;margin:0 0 4px "
        f"{LEFT}px'>{key(BLUE, 'context sent')}{key(LIGHT_PURPLE, 'removed just before the call')}"
        f"{key(RED, 'full compaction', 'width:2px;height:10px')}"
        f"<span style='white-space:nowrap;margin-right:10px'><span style='color:{PURPLE}'>▲"
        "</span> micro-compaction</span>"
        "<span style='white-space:nowrap'>hover a column or a mark for details</span></div>"
    )
