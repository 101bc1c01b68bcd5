"""The meter's chart (`evo_magic.meter.chart`) drawn in plain HTML and CSS.

One column per call, in tokens of the whole prompt (behind it, as a dashed outline, its size
before what the per-call strategies or a compaction removed just before), the limit as a dashed
line, a mark for every compaction where it happened, and the cell's own calls shaded. Each
column and each mark has a `title`: its tooltip (characters too), which needs no script.

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
from functools import partial

from evo_magic.meter.chart import (
    Chart,
    ChartCache,
    Column,
    Mark,
    before_tokens,
    position,
    tokens_label,
)
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import CallPoint, Compaction
from evo_magic.meter.micro_marks import Sums, sums_of
from evo_magic.meter.words import LAYERS, TRIGGERS, counted
from evo_magic.render import clip, plural, size, usd

WIDTH, HEIGHT = 600, 236
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 26, 40
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
BLUE, LIGHT_BLUE, PURPLE, LIGHT_PURPLE = "#1565c0", "#90caf9", "#7b1fa2", "#ce93d8"
RED, GREY = "#c62828", "#757575"


def attr(text: object) -> str:
    """Escaped for an attribute value; newlines kept (a tooltip's lines)."""
    return html.escape(str(text), quote=True).replace("\n", "&#10;")


class Frame:
    """Where the chart lands: pixels from the plot's left and bottom."""

    def __init__(self, chart: Chart):
        self.chart = chart

    @property
    def slot(self) -> float:
        """The width of one call on the call axis."""
        return PLOT_W / (self.chart.x1 - self.chart.x0)

    def x(self, call: float) -> float:
        """Pixels from the plot's left of a place on the call axis."""
        return (call - self.chart.x0) * self.slot

    def y(self, tokens: float) -> float:
        """Pixels from the plot's bottom of a number of tokens."""
        return tokens / self.chart.top * PLOT_H

    @property
    def scale(self) -> tuple[float, float, float]:
        """What places a column or a mark besides its own numbers: the axes' ends."""
        return (self.chart.x0, self.chart.x1, self.chart.top)


def chart_html(data: MeterData, cache: ChartCache | None = None) -> str:
    """The chart, or a line saying there is nothing to draw yet (`cache`: what this meter's
    chart built before, see `ChartCache`)."""
    chart = Chart(data, cache)
    if chart.empty:
        return (
            "<div class='evo-chart-empty' style='color:#777;font-size:12px;margin:6px 0'>"
            "no model call yet</div>"
        )
    f = Frame(chart)
    plot = _band(data, f) + _grid(f) + _limit(f) + _columns(data, f) + _marks(data, f)
    chart.cache.keep_tips([*chart.columns, *chart.marks])
    chart.cache.drawn.forget_unused()
    return (
        f"<div class='evo-chart' style='position:relative;width:{WIDTH}px;height:{HEIGHT}px;"
        "margin-top:6px;font-size:11px;color:#444;line-height:1.2'>"
        f"{_y_axis(f)}{_x_axis(f)}"
        f"<div class='evo-plot' style='position:absolute;left:{LEFT}px;top:{TOP}px;"
        f"width:{PLOT_W}px;height:{PLOT_H}px;border-left:1px solid #444;"
        f"border-bottom:1px solid #444'>{plot}</div></div>{_legend()}"
    )


def _box(css: str, style: str, inner: str = "", title: str | None = None, extra: str = "") -> str:
    """An absolutely positioned div."""
    tip = f" title='{attr(title)}'" if title is not None else ""
    return f"<div class='{css}'{extra}{tip} style='position:absolute;{style}'>{inner}</div>"


def _y_axis(f: Frame) -> str:
    labels = [
        f"<div style='position:absolute;right:6px;bottom:{f.y(value) - 6:.1f}px'>"
        f"{tokens_label(value)}</div>"
        for value in f.chart.y_ticks()
    ]
    title = (
        "<div class='evo-axis-title' style='position:absolute;left:0;top:-24px;"
        "white-space:nowrap'>context sent (tokens, the whole prompt)</div>"
    )
    style = f"left:0;top:{TOP}px;width:{LEFT}px;height:{PLOT_H}px"
    return _box("evo-axis-y", style, title + "".join(labels))


def _x_axis(f: Frame) -> str:
    labels = "".join(
        f"<div style='position:absolute;left:{f.x(call) - 15:.1f}px;width:30px;"
        f"text-align:center;top:3px'>{call}</div>"
        for call in f.chart.x_ticks()
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
    return "".join(
        f"<div style='position:absolute;left:0;width:{PLOT_W}px;height:0;"
        f"bottom:{f.y(value):.1f}px;border-top:1px solid #eee'></div>"
        for value in f.chart.y_ticks()[1:]
    )


def _limit(f: Frame) -> str:
    label = (
        "<div style='position:absolute;right:2px;bottom:2px;color:#777;font-size:10px;"
        "white-space:nowrap;background:rgba(255,255,255,0.85);padding:0 2px'>"
        f"{attr(f.chart.limit_label())}</div>"
    )
    return _box(
        "evo-limit",
        f"left:0;width:{PLOT_W}px;height:0;bottom:{f.y(f.chart.limit):.1f}px;"
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
    behind it, as a dashed outline, the size before what was removed just before the call.
    The whole columns (all but the newest) are kept as one string while they and the axes
    stay, so a call into the newest column draws that one only, not a join of them all."""
    cache, columns = f.chart.cache, f.chart.columns
    whole = columns[: len(cache.whole)]  # the chart's columns are the cache's whole ones first
    kept = cache.drawn.get("whole columns", (*f.scale, *whole), _each_column, whole, f)
    return kept + _each_column(columns[len(whole) :], f)


def _each_column(columns: Sequence[Column], f: Frame) -> str:
    get, scale = f.chart.cache.drawn.get, f.scale
    return "".join(get(id(c), (c, *scale), _column, c, f) for c in columns)


def _column(column: Column, f: Frame) -> str:
    first, last = column.first, column.last
    slot = f.slot * column.width
    width = max(min(slot * 0.6, 16.0), 1.0)
    inset = (slot - width) / 2
    sent, before = f.y(column.tokens), f.y(column.before)
    bars = ""
    if column.removed > 0:  # a ghost behind the column: never read as its height
        bars += (
            f"<div class='evo-removed' style='position:absolute;left:{inset:.1f}px;"
            f"width:{width - 2:.1f}px;bottom:0;height:{before - 1:.1f}px;"
            f"border:1px dashed {PURPLE};opacity:0.7'></div>"
        )
    bars += (
        f"<div class='evo-sent' style='position:absolute;left:{inset:.1f}px;width:{width:.1f}px;"
        f"bottom:0;height:{sent:.1f}px;background:{BLUE if column.own else LIGHT_BLUE}'></div>"
    )
    calls = f" data-call='{first.call}'"
    if column.width > 1:
        calls += f" data-last-call='{last.call}'"
    tip = f.chart.cache.tip(column, lambda: _column_tooltip(column))
    style = f"left:{f.x(column.start):.1f}px;width:{slot:.1f}px;bottom:0;height:{PLOT_H}px"
    return _box("evo-point", style, bars, tip, calls)


def _column_tooltip(column: Column) -> str:
    first = column.first
    if column.width > 1:  # from the column's numbers: its calls are not read again
        return _group_text(first, column.last, column.biggest, column.asks)
    if column.own:
        return point_tooltip(first)
    # Before the cell: the numbers only (the cell above has the whole story).
    return f"call {first.call} (ask {first.turn}): {first.tokens:,} tokens sent"


def group_tooltip(group: Sequence[CallPoint]) -> str:
    """The tooltip of a column that stands for several calls."""
    biggest = max(group, key=lambda p: p.tokens)
    turns = [p.turn for p in group]
    return _group_text(group[0], group[-1], biggest, (min(turns), max(turns)))


def _group_text(
    first: CallPoint, last: CallPoint, biggest: CallPoint, asks: tuple[int, int]
) -> str:
    span = f"ask {asks[0]}" if asks[0] == asks[1] else f"asks {asks[0]}-{asks[1]}"
    return (
        f"calls {first.call}-{last.call} ({span})\n"
        f"largest: call {biggest.call}, {biggest.tokens:,} tokens, {biggest.sent.chars:,} chars"
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
        lines.append(
            f"before the compactions just before it: ~{before_tokens(point):,} tokens, "
            f"{point.before.chars:,} chars (the dashed outline)"
        )
    if point.cost_usd is not None:
        lines.append(f"cost {usd(point.cost_usd)}")
    if point.before_it:
        lines.append("before it: " + "; ".join(point.before_it))
    return "\n".join(lines)


def _marks(data: MeterData, f: Frame) -> str:
    """Every compaction in the chart's window: a line for a full one, a triangle for a
    micro-compaction (one per column when calls share columns); those before the scope are
    drawn faint. The full compactions' marks, and in a long session all micro-compactions'
    marks but the newest, are kept as one string each while they and the axes stay."""
    chart = f.chart
    full, micro = chart.marks[: len(chart.cache.full)], chart.marks[len(chart.cache.full) :]
    get, limit = chart.cache.drawn.get, (chart.limit, chart.limit_label())
    out = get("full marks", (*f.scale, *limit, *full), _full_marks, full, f)
    if chart.group == 1 or not micro:  # several may stand at one call: stacked together
        return out + _micro_marks(micro, f)
    # One a column: each at its own place (never stacked), the newest apart.
    out += get("micro marks", (*f.scale, *micro[:-1]), _micro_marks, micro[:-1], f)
    return out + _micro_marks(micro[-1:], f)


def _full_marks(marks: Sequence[Mark], f: Frame) -> str:
    lines = f.chart.label_lines(
        lambda text: (LABEL_LEFT + label_width(text) + 3) / f.slot, partial(_free_until, f), marks
    )
    get, scale = f.chart.cache.drawn.get, f.scale
    return "".join(
        get(id(mark), (mark, *scale, line), _full_mark, mark, f.x(mark.x), line)
        for mark, line in zip(marks, lines, strict=True)
    )


def _micro_marks(marks: Sequence[Mark], f: Frame) -> str:
    out = []
    stacked: dict[float, int] = {}
    get, scale = f.chart.cache.drawn.get, f.scale
    for mark in marks:
        x = f.x(mark.x)
        level = stacked[x] = stacked.get(x, -1) + 1  # several at one place: stacked up
        out.append(get(id(mark), (mark, *scale, level), _micro_mark, mark, x, level, f.chart.cache))
    return "".join(out)


LABEL_LEFT, LABEL_TOP, LABEL_HEIGHT = 4, 14, 12
"""Pixels: where a compaction's label starts right of its line, and below the plot's top; the
height of one line of labels."""


def label_width(text: str) -> float:
    """Pixels a mark's label takes (bold, 10px): wide enough for its widest letters."""
    return 7.0 * len(text) + 2


def _free_until(f: Frame, line: int) -> float:
    """Where on the call axis the limit's label starts when it takes `line` of the marks'
    labels (infinity when it does not): its box is 13px tall above the limit line, 6px a
    letter from the right."""
    top = LABEL_TOP + line * LABEL_HEIGHT
    limit_bottom = PLOT_H - f.y(f.chart.limit) - 2
    if top >= limit_bottom or top + LABEL_HEIGHT <= limit_bottom - 13:
        return math.inf
    return f.chart.x0 + (PLOT_W - 6 - 6 * len(f.chart.limit_label())) / f.slot


def _full_mark(mark: Mark, x: float, line: int) -> str:
    """A full compaction's line, its label on `line` of the labels (stacked, never over
    another)."""
    row = mark.first
    colour = RED if row.success else GREY
    style = "solid" if row.success else "dashed"
    inner = (
        f"<div style='position:absolute;left:4px;width:0;top:0;height:{PLOT_H}px;"
        f"border-left:2px {style} {colour}'></div>"
        f"<div class='evo-mark-label' style='position:absolute;left:{5 + LABEL_LEFT}px;"
        f"top:{LABEL_TOP + line * LABEL_HEIGHT}px;width:{label_width(mark.label):.0f}px;"
        f"height:{LABEL_HEIGHT}px;white-space:nowrap;color:{colour};font-size:10px;"
        f"font-weight:bold'>{attr(mark.label)}</div>"
    )
    extra = f" data-kind='full' data-label='{attr(row.label)}' data-own='{_yes(mark.own)}'"
    box = f"left:{x - 5:.1f}px;width:10px;top:0;height:{PLOT_H}px;z-index:2;"
    return _box("evo-mark", box + _faint(mark.own), inner, compaction_tooltip(row), extra)


def _micro_mark(mark: Mark, x: float, level: int, cache: ChartCache) -> str:
    style = (
        f"left:{x - 6:.1f}px;width:12px;bottom:{1 + level * 9}px;height:10px;z-index:2;"
        f"color:{PURPLE};font-size:9px;line-height:10px;text-align:center;"
    )
    tip = cache.tip(mark, lambda: _micro_tooltip(mark))
    extra = f" data-kind='micro' data-count='{mark.count}' data-own='{_yes(mark.own)}'"
    return _box("evo-mark", style + _faint(mark.own), "▲", tip, extra)


def _micro_tooltip(mark: Mark) -> str:
    if mark.count > 1 and mark.sums is not None:
        return _micro_group_text(mark.first, mark.last, mark.count, mark.sums)
    if mark.own:
        return compaction_tooltip(mark.first)
    return f"micro-compaction before call {mark.first.after_call + 1}"


def _yes(value: bool) -> str:
    return "true" if value else "false"


def _faint(own: bool) -> str:
    """Marks from before the scope are drawn faint."""
    return "" if own else "opacity:0.4;"


def micro_group_tooltip(rows: Sequence[Compaction]) -> str:
    """The tooltip of a mark that stands for several micro-compactions (a long session)."""
    return _micro_group_text(rows[0], rows[-1], len(rows), sums_of(rows))


def _micro_group_text(first: Compaction, last: Compaction, count: int, sums: Sums) -> str:
    return (
        f"{plural(count, 'micro-compaction')} before calls {first.after_call + 1}-"
        f"{last.after_call + 1}: {plural(sums.cleared, 'tool result')} rewritten, "
        f"freed {sums.freed_chars:,} chars (~{sums.freed_tokens:,} tokens)"
    )


def compaction_tooltip(row: Compaction) -> str:
    """A compaction mark's tooltip."""
    if row.micro:
        return (
            f"micro-compaction ({row.strategy}) before call {row.after_call + 1}: "
            f"{plural(len(row.cleared), 'tool result')} rewritten ({counted(row.cleared)}), "
            f"~{row.before.tokens:,} -> ~{row.after.tokens:,} tokens "
            f"({row.before.chars:,} -> {row.after.chars:,} chars), freed {row.freed_chars:,} chars"
        )
    lines = [
        f"{row.label if row.success else 'failed compaction'}: {row.strategy} "
        f"({LAYERS.get(row.layer, row.layer)}; {TRIGGERS.get(row.trigger, row.trigger)})",
        f"after call {row.after_call}",
    ]
    if row.focus:
        lines.append(f"focus: {clip(row.focus, 120)}")
    if row.success:
        lines.append(f"{size(row.before)}\n-> {size(row.after)}")
    else:
        lines.append(f"{row.error or 'failed'}; the history was kept")
    return "\n".join(lines)


REMOVED = "its size before what was removed just before the call"


def _legend() -> str:
    def key(style: str, text: str) -> str:
        return (
            f"<span style='white-space:nowrap;margin-right:10px'><span style='display:"
            f"inline-block;{style};margin-right:3px;vertical-align:middle'></span>{text}</span>"
        )

    return (
        f"<div class='evo-chart-legend' style='font-size:11px;color:#555;margin:0 0 4px "
        f"{LEFT}px'>{key(f'width:9px;height:9px;background:{BLUE}', 'context sent')}"
        f"{key(f'width:7px;height:9px;border:1px dashed {PURPLE}', REMOVED)}"
        f"{key(f'width:2px;height:10px;background:{RED}', 'full compaction')}"
        f"<span style='white-space:nowrap;margin-right:10px'><span style='color:{PURPLE}'>▲"
        "</span> micro-compaction</span>"
        "<span style='white-space:nowrap'>hover a column or a mark for details</span></div>"
    )
