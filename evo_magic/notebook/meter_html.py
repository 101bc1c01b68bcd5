"""The context meter as self-contained HTML: inline styles and SVG, no scripts.

What a saved notebook keeps: it shows wherever HTML outputs show (JupyterLab, Notebook 7, VS
Code, nbconvert), without a kernel. Everything interactive is plain HTML: each point of the
chart and each compaction marker has an SVG `<title>` (its tooltip), and each compaction is a
`<details>` element that opens on a click to show its summary, its focus and what it replaced.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from evo_magic.events import ContextSize
from evo_magic.notebook.meter import (
    LAYERS,
    SYSTEM,
    TRIGGERS,
    CallPoint,
    Compaction,
    MeterData,
    Share,
    clip,
    counted,
    micro_text,
    plural,
    scope_title,
    size_text,
    usd,
)

WIDTH, HEIGHT = 600, 220
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 18, 42
MAX_TOOLTIPS = 300
"""Points with a tooltip at most (the newest); older points are in the line only."""
BLUE, PURPLE, RED, GREY = "#1565c0", "#7b1fa2", "#c62828", "#757575"
KIND_COLOURS = {
    SYSTEM: "#9e9e9e",
    "summaries": "#7b1fa2",
    "user text": "#1e88e5",
    "assistant text": "#43a047",
    "thinking": "#a5d6a7",
    "tool calls": "#fdd835",
    "other": "#bdbdbd",
}
RESULT_COLOURS = ("#ef6c00", "#8d6e63", "#f4a261", "#d84315", "#bcaaa4", "#ffb74d", "#6d4c41")
NO_MATH = "mathjax_ignore tex2jax_ignore"
"""Classes that keep front ends from typesetting "$0.01 ... $0.02" as LaTeX."""
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif"


def e(text: object) -> str:
    """Escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def meter_html(data: MeterData) -> str:
    """The whole meter: header, the cell's before -> after, the fill bar, the chart, what the
    context holds, and the compactions."""
    return (
        f"<div class='evo-magic-meter {NO_MATH}' data-scope='{e(data.scope.label)}' "
        f"style='{FONT};"
        "font-size:13px;line-height:1.4;border:1px solid #ccc;border-radius:4px;"
        "padding:8px 10px;max-width:640px;color:#212121;background:#fff'>"
        f"{_header(data)}{_fill_bar(data)}{_chart(data)}{_composition(data)}"
        f"{_compactions(data)}</div>"
    )


# -- header and fill ---------------------------------------------------------------------------


def _size_span(css: str, label: str, size: ContextSize) -> str:
    approx = "" if size.tokens_exact else "~"
    return (
        f"<span class='{css}' data-messages='{size.messages}' data-chars='{size.chars}' "
        f"data-tokens='{size.tokens}'>{label} <b>{plural(size.messages, 'message')}</b> · "
        f"{size.chars:,} chars · {approx}{size.tokens:,} tokens</span>"
    )


def _header(data: MeterData) -> str:
    title = (
        f"<div><b>context meter</b> · {e(scope_title(data))} · session "
        f"<code style='font-size:12px'>{e(data.session_id)}</code></div>"
    )
    now = _size_span("evo-now", "now", data.current)
    if data.scope.before is not None:
        story = f"{_size_span('evo-before', 'before the cell', data.scope.before)} → {now}"
    else:
        story = now
    calls = data.own_calls
    span = f" ({calls[0].call}–{calls[-1].call})" if len(calls) > 1 else ""
    if len(calls) == 1:
        span = f" (call {calls[0].call})"
    full = [row for row in data.full if row.success]
    failed = len(data.full) - len(full)
    counts = [plural(len(calls), "model call") + span, plural(len(full), "full compaction")]
    if failed:
        counts.append(f"{failed} failed")
    counts.append(plural(len(data.micro), "micro-compaction"))
    cost = f"cost <span class='evo-cost'>{e(usd(data.cost_usd))}</span>"
    if data.scope.label == "cell":
        cost += f" (session so far {e(usd(data.session_cost_usd))})"
    return (
        f"{title}<div>{story}</div>"
        f"<div style='color:#555'>{' · '.join(e(c) for c in counts)} · {cost}</div>"
    )


def _fill_bar(data: MeterData) -> str:
    fill = data.fill()
    colour = "#2e7d32" if fill < 0.7 else "#f9a825" if fill < 1.0 else RED
    limits = f"{fill:.0%} of the {data.context_limit:,}-character limit"
    if data.token_limit:
        share = data.current.tokens / data.token_limit
        limits += f" · {share:.0%} of the {data.token_limit:,}-token limit"
    return (
        f"<div style='margin:4px 0 2px;font-size:12px;color:#555'>{e(limits)}</div>"
        "<div style='background:#eee;height:8px;border-radius:4px'>"
        f"<div style='background:{colour};width:{min(fill, 1.0):.1%};height:8px;"
        "border-radius:4px'></div></div>"
    )


# -- the chart ---------------------------------------------------------------------------------


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


class _Frame:
    """Where calls and characters land on the chart."""

    def __init__(self, data: MeterData):
        calls = data.calls
        self.first = calls[0].call if calls else 1
        last = calls[-1].call if calls else 1
        after_last = any(self.position(row, calls) > last for row in data.compactions)
        self.x0 = self.first - 0.5
        self.x1 = last + (1.0 if after_last else 0.5)
        peak = max([p.before.chars for p in calls] + [p.sent.chars for p in calls] + [1])
        peak = max(peak, data.context_limit, *(row.before.chars for row in data.compactions))
        self.step = nice_step(peak * 1.08, 4)
        self.top = math.ceil(peak * 1.08 / self.step) * self.step
        self.width, self.height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    @staticmethod
    def position(row: Compaction, calls: Sequence[CallPoint]) -> float:
        """Between the call before it and the next one."""
        if row.after_call <= 0:
            return (calls[0].call if calls else 1) - 0.5
        return calls[min(row.after_call, len(calls)) - 1].call + 0.5

    def x(self, call: float) -> float:
        return LEFT + (call - self.x0) / (self.x1 - self.x0) * self.width

    def y(self, chars: float) -> float:
        return TOP + self.height - chars / self.top * self.height


def _chart(data: MeterData) -> str:
    """Characters sent per model call; the limit, every compaction where it happened, the
    cell's own calls shaded; a tooltip per point and per marker."""
    if not data.calls and not data.compactions:
        return (
            "<div class='evo-chart-empty' style='color:#777;font-size:12px;margin:6px 0'>"
            "no model call yet</div>"
        )
    f = _Frame(data)
    parts = [_band(data, f), _axes(data, f), _limit(data, f), _drops(data, f), _line(data, f)]
    parts += [_marks(data, f), _points(data, f)]
    legend = (
        f"<span style='color:{BLUE}'>● context sent per call</span> · "
        f"<span style='color:{PURPLE}'>¦ removed before a call</span> · "
        f"<span style='color:{RED}'>│ full compaction</span> · "
        f"<span style='color:{PURPLE}'>▲ micro-compaction</span> · "
        "<span style='color:#999'>- - limit</span> · hover a point or a mark for details"
    )
    return (
        f"<svg class='evo-chart' width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}'"
        f" role='img' aria-label='context size per model call' style='display:block;"
        f"max-width:100%;height:auto;margin-top:6px' font-family='sans-serif' font-size='11'>"
        f"{''.join(parts)}</svg>"
        f"<div style='font-size:11px;color:#555;margin:0 0 4px {LEFT}px'>{legend}</div>"
    )


def _band(data: MeterData, f: _Frame) -> str:
    if data.scope.label != "cell":
        return ""
    own = data.own_calls
    starts = [p.call - 0.5 for p in own[:1]]
    starts += [f.position(row, data.calls) - 0.25 for row in data.own_compactions[:1]]
    if not starts:
        return ""
    x = max(f.x(min(starts)), LEFT)
    width = LEFT + f.width - x
    label = (  # too narrow for a label: the cell's own marks say it
        f"<text x='{x + 4:.1f}' y='{TOP + 11}' fill='{BLUE}' font-size='10'>this cell</text>"
        if width >= 60
        else ""
    )
    return (
        f"<rect class='evo-cell-band' x='{x:.1f}' y='{TOP}' width='{width:.1f}' "
        f"height='{f.height}' fill='{BLUE}' opacity='0.07'/>{label}"
    )


def _axes(data: MeterData, f: _Frame) -> str:
    bottom, right = TOP + f.height, LEFT + f.width
    out = [
        "<g class='evo-axis-y'>",
        f"<line x1='{LEFT}' x2='{LEFT}' y1='{TOP}' y2='{bottom}' stroke='#444'/>",
    ]
    value = 0.0
    while value <= f.top + 1e-6:
        y = f.y(value)
        out.append(
            f"<line x1='{LEFT - 4}' x2='{right}' y1='{y:.1f}' y2='{y:.1f}' "
            f"stroke='{'#444' if value == 0 else '#eee'}'/>"
            f"<text x='{LEFT - 6}' y='{y + 4:.1f}' text-anchor='end' fill='#444'>"
            f"{chars_label(value)}</text>"
        )
        value += f.step
    middle = TOP + f.height / 2
    out.append(
        f"<text class='evo-axis-title' x='14' y='{middle:.1f}' text-anchor='middle' fill='#444' "
        f"transform='rotate(-90 14 {middle:.1f})'>context sent (characters)</text></g>"
    )
    out.append(
        "<g class='evo-axis-x'>"
        f"<line x1='{LEFT}' x2='{right}' y1='{bottom}' y2='{bottom}' stroke='#444'/>"
    )
    first, last = math.ceil(f.x0), math.floor(f.x1)
    step = max(int(nice_step(max(last - first, 1), 8)), 1)
    call = first if first % step == 0 else first + step - first % step
    ticks = sorted({first, *range(call, last + 1, step)}) if data.calls else []
    for call in ticks:
        x = f.x(call)
        out.append(
            f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{bottom}' y2='{bottom + 4}' stroke='#444'/>"
            f"<text x='{x:.1f}' y='{bottom + 15}' text-anchor='middle' fill='#444'>{call}</text>"
        )
    out.append(
        f"<text class='evo-axis-title' x='{LEFT + f.width / 2:.1f}' y='{HEIGHT - 6}' "
        "text-anchor='middle' fill='#444'>model call (number in the session)</text></g>"
    )
    return "".join(out)


def _limit(data: MeterData, f: _Frame) -> str:
    y = f.y(data.context_limit)
    right = LEFT + f.width
    return (
        f"<g class='evo-limit'><line x1='{LEFT}' x2='{right}' y1='{y:.1f}' y2='{y:.1f}' "
        "stroke='#999' stroke-dasharray='5 3'/>"
        f"<text x='{right - 2}' y='{y - 4:.1f}' text-anchor='end' fill='#777' font-size='10'>"
        f"limit {data.context_limit:,} chars</text></g>"
    )


def _drops(data: MeterData, f: _Frame) -> str:
    """At each call whose context shrank before it was sent: from before to as sent."""
    out = []
    for point in data.calls:
        if point.before.chars > point.sent.chars:
            x = f.x(point.call)
            out.append(
                f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{f.y(point.before.chars):.1f}' "
                f"y2='{f.y(point.sent.chars):.1f}' stroke='{PURPLE}' stroke-width='1' "
                "stroke-dasharray='2 2' opacity='0.7'/>"
            )
    return "".join(out)


def _line(data: MeterData, f: _Frame) -> str:
    if not data.calls:
        return ""
    points = " ".join(f"{f.x(p.call):.1f},{f.y(p.sent.chars):.1f}" for p in data.calls)
    return (
        f"<polyline class='evo-line' fill='none' stroke='{BLUE}' stroke-width='1.5' "
        f"points='{points}'/>"
    )


def _points(data: MeterData, f: _Frame) -> str:
    own_from = data.scope.first_call
    out = []
    for index in range(max(len(data.calls) - MAX_TOOLTIPS, 0), len(data.calls)):
        point = data.calls[index]
        x, y = f.x(point.call), f.y(point.sent.chars)
        fill = BLUE if index >= own_from else "#90caf9"
        out.append(
            f"<g class='evo-point' data-call='{point.call}'><title>{e(point_tooltip(point))}"
            f"</title><circle cx='{x:.1f}' cy='{y:.1f}' r='3' fill='{fill}'/>"
            f"<circle cx='{x:.1f}' cy='{y:.1f}' r='8' fill='transparent'/></g>"
        )
    return "".join(out)


def point_tooltip(point: CallPoint) -> str:
    """A point's tooltip: the call, its size in characters and tokens, what came before it."""
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
        lines.append(f"before the per-call strategies: {point.before.chars:,} chars")
    if point.cost_usd is not None:
        lines.append(f"cost {usd(point.cost_usd)}")
    if point.before_it:
        lines.append("before it: " + "; ".join(point.before_it))
    return "\n".join(lines)


def _marks(data: MeterData, f: _Frame) -> str:
    """Every compaction up to the scope's end: a line for a full one, a triangle for a micro
    one; those before the scope are drawn faint."""
    bottom = TOP + f.height
    out = []
    stacked: dict[float, int] = {}
    for index, row in enumerate(data.compactions):
        x = f.x(f.position(row, data.calls))
        faint = " opacity='0.4'" if index < data.scope.first_compaction else ""
        kind = "micro" if row.micro else "full"
        title = f"<title>{e(compaction_tooltip(row))}</title>"
        head = (
            f"<g class='evo-mark' data-kind='{kind}' data-label='{e(row.label)}' "
            f"data-own='{'false' if faint else 'true'}'{faint}>{title}"
        )
        if row.micro:
            level = stacked[x] = stacked.get(x, -1) + 1
            y = bottom - 2 - level * 7
            out.append(
                f"{head}<path d='M{x - 4:.1f},{y:.1f} L{x + 4:.1f},{y:.1f} L{x:.1f},{y - 7:.1f} Z'"
                f" fill='{PURPLE}'/><rect x='{x - 6:.1f}' y='{y - 9:.1f}' width='12' height='11'"
                " fill='transparent'/></g>"
            )
            continue
        colour = RED if row.success else GREY
        dash = "" if row.success else " stroke-dasharray='3 3'"
        label = row.label if row.success else "failed"
        out.append(
            f"{head}<line x1='{x:.1f}' x2='{x:.1f}' y1='{TOP}' y2='{bottom}' stroke='{colour}' "
            f"stroke-width='1.5'{dash}/><rect x='{x - 6:.1f}' y='{TOP}' width='12' "
            f"height='{f.height}' fill='transparent'/><text x='{x + 3:.1f}' y='{TOP + 22}' "
            f"fill='{colour}' font-size='10' font-weight='bold'>{e(label)}</text></g>"
        )
    return "".join(out)


def compaction_tooltip(row: Compaction) -> str:
    """A compaction marker's tooltip."""
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


# -- what the context holds --------------------------------------------------------------------


def share_colour(kind: str, holds: Sequence[Share]) -> str:
    if kind in KIND_COLOURS:
        return KIND_COLOURS[kind]
    results = [s.kind for s in holds if s.kind not in KIND_COLOURS]
    index = results.index(kind) if kind in results else 0
    return RESULT_COLOURS[index % len(RESULT_COLOURS)]


def _composition(data: MeterData) -> str:
    holds = data.holds
    total = sum(share.chars for share in holds)
    if not total:
        return ""
    segments, legend = [], []
    for share in holds:
        colour = share_colour(share.kind, holds)
        part = share.chars / total
        tip = f"{share.kind}: {share.chars:,} chars, ~{share.tokens:,} tokens ({part:.0%})"
        segments.append(
            f"<div class='evo-share' data-kind='{e(share.kind)}' data-chars='{share.chars}' "
            f"title='{e(tip)}' style='background:{colour};width:{part:.2%};height:14px'></div>"
        )
        legend.append(
            f"<span style='white-space:nowrap;margin-right:10px'><span style='display:inline-block;"
            f"width:9px;height:9px;background:{colour};margin-right:3px'></span>{e(share.kind)} "
            f"{share.chars:,} ({part:.0%})</span> "
        )
    return (
        "<div class='evo-composition' style='margin-top:6px'>"
        "<div style='font-size:12px;color:#555'>what the context holds now (the whole prompt, "
        f"characters; ~{data.current.tokens:,} tokens in all)</div>"
        "<div style='display:flex;border:1px solid #ddd;border-radius:3px;overflow:hidden;"
        f"margin:2px 0'>{''.join(segments)}</div>"
        f"<div style='font-size:11px;color:#444;line-height:1.6'>{''.join(legend)}</div></div>"
    )


# -- the compactions ---------------------------------------------------------------------------


def _compactions(data: MeterData) -> str:
    rows = [
        _full_row(item, data.holds) if isinstance(item, Compaction) else _micro_row(*item)
        for item in data.timeline()
    ]
    where = "this cell" if data.scope.label == "cell" else "this session"
    if not rows:
        return (
            f"<div class='evo-compactions' style='color:#777;font-size:12px;margin-top:6px'>"
            f"no compaction in {where}</div>"
        )
    return (
        "<div class='evo-compactions' style='margin-top:6px;font-size:12px'>"
        f"<div style='color:#555'>compactions in {where} (click one for its details)</div>"
        f"{''.join(rows)}</div>"
    )


_ROW = (
    "margin:2px 0;border-left:3px solid {colour};padding:1px 6px;background:#fafafa;"
    "border-radius:2px"
)


def _full_row(row: Compaction, holds: Sequence[Share]) -> str:
    colour = RED if row.success else GREY
    trigger = TRIGGERS.get(row.trigger, row.trigger)
    layer = LAYERS.get(row.layer, row.layer)
    focus = f" · focus “{e(clip(row.focus, 60))}”" if row.focus else ""
    if row.success:
        change = (
            f"{_size_short(row.before)} → {_size_short(row.after)} · cost {e(usd(row.cost_usd))}"
        )
        label = row.label
    else:
        change = f"failed: {e(clip(row.error or '', 90))}; the history was kept"
        label = "failed"
    summary = (
        f"<summary style='cursor:pointer'><b style='color:{colour}'>{e(label)}</b> after call "
        f"{row.after_call} · <b>{e(row.strategy)}</b> ({e(layer)}; {e(trigger)}){focus}"
        f"<br><span style='margin-left:1.2em'>{change}</span></summary>"
    )
    return (
        f"<details class='evo-compaction' data-kind='full' data-label='{e(row.label)}' "
        f"style='{_ROW.format(colour=colour)}'>{summary}{_full_detail(row, holds)}</details>"
    )


def _size_short(size: ContextSize) -> str:
    approx = "" if size.tokens_exact else "~"
    return (
        f"{plural(size.messages, 'message')} / {size.chars:,} chars / "
        f"{approx}{size.tokens:,} tokens"
    )


def _full_detail(row: Compaction, holds: Sequence[Share]) -> str:
    focus = (
        f"<div><b>focus</b>: <span class='evo-focus' style='white-space:pre-wrap'>"
        f"{e(row.focus)}</span></div>"
        if row.focus
        else "<div><b>focus</b>: none</div>"
    )
    if row.summary:
        summary = (
            f"<div><b>summary</b> ({len(row.summary):,} chars):</div><div class='evo-summary' "
            "style='white-space:pre-wrap;max-height:16em;overflow-y:auto;background:#fff;"
            f"border:1px solid #eee;padding:3px 5px;font-size:12px'>{e(row.summary)}</div>"
        )
    else:
        summary = "<div><b>summary</b>: none (this strategy does not summarise)</div>"
    extra = [f"took {row.duration:.2f}s"]
    if row.summary_tokens != (0, 0):
        extra.append(
            f"summarising read {row.summary_tokens[0]:,} and wrote {row.summary_tokens[1]:,} tokens"
        )
    if row.snapshot_path:
        extra.append(f"the replaced history is saved in {row.snapshot_path}")
    return (
        f"<div style='margin:4px 0 4px 1.2em'>{focus}{summary}{_replaced(row, holds)}"
        f"<div style='color:#555'>{e('; '.join(extra))}</div></div>"
    )


def _replaced(row: Compaction, holds: Sequence[Share]) -> str:
    """What the compaction cleared or replaced: the history's kinds before and after."""
    if not row.success:
        return ""
    head = (
        f"<div><b>replaced</b> {_size_short(row.before)} with {_size_short(row.after)} "
        f"(freed {row.freed_chars:,} chars, ~{row.freed_tokens:,} tokens)</div>"
    )
    if not row.replaced:
        return head
    after = {share.kind: share.chars for share in row.kept}
    before = {share.kind: share.chars for share in row.replaced}
    kinds = [s.kind for s in row.replaced] + [s.kind for s in row.kept if s.kind not in before]
    rows = [
        [e(kind), f"{before.get(kind, 0):,}", "→", f"{after.get(kind, 0):,}"]
        for kind in kinds
        if kind != SYSTEM
    ]
    return head + _table(["kind", "chars before", "", "after"], rows, "evo-replaced")


def _micro_row(ask: int, rows: Sequence[Compaction]) -> str:
    cache = any(row.cache_invalidated_tokens for row in rows)
    head = ["when", "strategy", "rewrote", "chars before", "", "after", "freed"]
    head += ["cached tokens invalidated"] if cache else []
    cells = []
    for row in rows:
        cells.append(
            [
                f"before call {row.after_call + 1}",
                e(row.strategy),
                e(counted(row.cleared) or "-"),
                f"{row.before.chars:,}",
                "→",
                f"{row.after.chars:,}",
                f"{row.freed_chars:,}",
            ]
            + ([f"{row.cache_invalidated_tokens:,}"] if cache else [])
        )
    return (
        f"<details class='evo-compaction' data-kind='micro' data-ask='{ask}' "
        f"data-count='{len(rows)}' style='{_ROW.format(colour=PURPLE)}'>"
        f"<summary style='cursor:pointer'>{e(micro_text(ask, rows))}</summary>"
        f"<div style='margin:2px 0 4px 1.2em'>{_table(head, cells, 'evo-micro')}</div></details>"
    )


_NUMBER = frozenset("0123456789,.-")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], css: str) -> str:
    """A small table; numbers right-aligned, cells spaced (inline styles: no stylesheet)."""

    def cell(tag: str, text: str) -> str:
        align = "right" if text and set(text) <= _NUMBER else "left"
        return f"<{tag} style='padding:0 6px;text-align:{align}'>{text}</{tag}>"

    body = "".join("<tr>" + "".join(cell("td", c) for c in row) + "</tr>" for row in rows)
    return (
        f"<table class='{css}' style='border-collapse:collapse;font-size:12px;margin:2px 0'>"
        f"<tr>{''.join(cell('th', h) for h in head)}</tr>{body}</table>"
    )
