"""The context meter as self-contained HTML: inline styles, no scripts, no stylesheet.

What a saved notebook keeps: it shows wherever HTML outputs show (JupyterLab and Notebook 7,
trusted or not, VS Code, nbconvert), without a kernel. Everything interactive is plain HTML:
each column and mark of the chart has a `title` (its tooltip; see `evo_magic.meter.chart_html`),
and each compaction is a `<details>` element that opens on a click to show its summary, its
focus and what it replaced. The markup is also well-formed XML, so tests read it with a parser.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from evo_magic.events import ContextSize
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.chart_html import GREY, PURPLE, RED, chart_html
from evo_magic.meter.composition import SYSTEM, Share
from evo_magic.meter.data import MeterData
from evo_magic.meter.drawn import Drawn
from evo_magic.meter.log import Compaction
from evo_magic.meter.text import (
    change_text,
    cost_note,
    earlier_text,
    limit_text,
    micro_text,
    paid,
    scope_title,
    tokens_text,
)
from evo_magic.meter.words import LAYERS, TRIGGERS, counted
from evo_magic.render import clip, plural

MICRO_ROWS = 40
"""A group's detail lists this many micro-compactions at most (the newest)."""

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
FONT = "font-family:system-ui,-apple-system,Segoe UI,Roboto,DejaVu Sans,sans-serif"


def e(text: object) -> str:
    """Escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def meter_html(data: MeterData, chart: ChartCache | None = None) -> str:
    """The whole meter: header, the cell's before -> after, the fill bar, the chart, what the
    context holds, and the compactions (`chart`: what this meter's chart built at its earlier
    refreshes, a live meter's `ChartCache`)."""
    chart = chart if chart is not None else ChartCache()
    return (
        f"<div class='evo-magic-meter {NO_MATH}' data-scope='{e(data.scope.label)}' "
        f"style='{FONT};"
        "font-size:13px;line-height:1.4;border:1px solid #ccc;border-radius:4px;"
        "padding:8px 10px;max-width:640px;color:#212121;background:#fff'>"
        f"{_header(data)}{_fill_bar(data)}{chart_html(data, chart)}{_composition(data)}"
        f"{_compactions(data, chart.listed)}</div>"
    )


# -- header and fill ---------------------------------------------------------------------------


def _size_span(css: str, size: ContextSize) -> str:
    """A size in tokens and messages; its characters on hover."""
    tip = f"{size.chars:,} characters of messages; the tokens count the whole prompt"
    return (
        f"<span class='{css}' data-messages='{size.messages}' data-chars='{size.chars}' "
        f"data-tokens='{size.tokens}' title='{e(tip)}' style='white-space:nowrap'>"
        f"<b>{e(tokens_text(size))}</b></span>"
    )


def _header(data: MeterData) -> str:
    title = (
        f"<div title='session {e(data.session_id)}'><b>context meter</b> · "
        f"{e(scope_title(data))}</div>"
    )
    now = _size_span("evo-now", data.current)
    if data.scope.before is not None:
        change = change_text(data.scope.before, data.current)
        story = (
            f"before the cell {_size_span('evo-before', data.scope.before)} → now {now} "
            f"<span class='evo-change' style='color:#555;white-space:nowrap'>({e(change)})</span>"
        )
    else:
        story = f"now {now}"
    first = data.scope.first_call
    count = max(len(data.calls) - first, 0)
    calls = data.calls  # the scope's own are those from `first` on (not copied: read three)
    span = f" ({calls[first].call}–{calls[-1].call})" if count > 1 else ""
    if count == 1:
        span = f" (call {calls[first].call})"
    full = [row for row in data.full if row.success]
    failed = len(data.full) - len(full)
    counts = [plural(count, "model call") + span, plural(len(full), "full compaction")]
    if failed:
        counts.append(f"{failed} failed")
    counts.append(plural(data.micro_count, "micro-compaction"))
    cost = cost_note(data)
    if cost:
        counts.append(cost)
    shown = " · ".join(f"<span style='white-space:nowrap'>{e(c)}</span>" for c in counts)
    return (
        f"{title}<div class='evo-story'>{story}</div>"
        f"<div class='evo-counts' style='color:#555'>{shown}</div>"
    )


def _fill_bar(data: MeterData) -> str:
    fill = data.fill()
    colour = "#2e7d32" if fill < 0.7 else "#f9a825" if fill < 1.0 else RED
    return (
        f"<div class='evo-fill' style='margin:4px 0 2px;font-size:12px;color:#555'>"
        f"{e(limit_text(data))}</div>"
        "<div style='background:#eee;height:8px;border-radius:4px'>"
        f"<div style='background:{colour};width:{min(fill, 1.0):.1%};height:8px;"
        "border-radius:4px'></div></div>"
    )


# -- what the context holds --------------------------------------------------------------------


def share_colour(kind: str, holds: Sequence[Share]) -> str:
    """The colour of a kind in the composition bar: its own, or for a tool's results one of
    `RESULT_COLOURS` in the order the tools appear in `holds`."""
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
        part = share.chars / total  # the tokens are split in proportion to the characters
        tip = f"{share.kind}: ~{share.tokens:,} tokens, {share.chars:,} chars ({part:.0%})"
        segments.append(
            f"<div class='evo-share' data-kind='{e(share.kind)}' data-chars='{share.chars}' "
            f"data-tokens='{share.tokens}' title='{e(tip)}' "
            f"style='background:{colour};width:{part:.2%};height:14px'></div>"
        )
        legend.append(
            f"<span title='{e(tip)}' style='white-space:nowrap;margin-right:10px'>"
            f"<span style='display:inline-block;width:9px;height:9px;background:{colour};"
            f"margin-right:3px'></span>{e(share.kind)} ~{share.tokens:,} ({part:.0%})</span> "
        )
    return (
        "<div class='evo-composition' style='margin-top:6px'>"
        "<div style='font-size:12px;color:#555'>what the context holds now: the whole prompt, "
        f"~{data.current.tokens:,} tokens (hover for characters)</div>"
        "<div style='display:flex;border:1px solid #ddd;border-radius:3px;overflow:hidden;"
        f"margin:2px 0'>{''.join(segments)}</div>"
        f"<div style='font-size:11px;color:#444;line-height:1.6'>{''.join(legend)}</div></div>"
    )


# -- the compactions ---------------------------------------------------------------------------


def _compactions(data: MeterData, drawn: Drawn) -> str:
    """The compactions listed; `drawn`: the rows drawn at the refreshes before, an ask's
    drawn again only when a micro-compaction joined it."""
    listed, earlier = data.listing()
    rows = [
        drawn.get(id(item), (item, *data.holds), _full_row, item, data.holds)
        if isinstance(item, Compaction)
        else drawn.get(("ask", item[0]), (item[0], *item[1]), _micro_row, *item)
        for item in listed
    ]
    drawn.forget_unused()
    if earlier.count:
        rows.insert(
            0,
            f"<div class='evo-earlier' style='{_ROW.format(colour=PURPLE)};color:#555'>"
            f"{e(earlier_text(earlier))}</div>",
        )
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
            f"{_size_short(row.before)} → {_size_short(row.after)}{e(paid(row.cost_usd, ' · '))}"
        )
        label = row.label
    else:
        change = f"failed: {e(clip(row.error or '', 90))}; the history was kept"
        label = "failed"
    summary = (
        f"<summary style='cursor:pointer'><b style='color:{colour}'>{e(label)}</b> after call "
        f"{row.after_call} · <b>{e(row.strategy)}</b> ({e(layer)}; {e(trigger)}){focus}"
        f"<br/><span style='margin-left:1.2em'>{change}</span></summary>"
    )
    return (
        f"<details class='evo-compaction' data-kind='full' data-label='{e(row.label)}' "
        f"style='{_ROW.format(colour=colour)}'>{summary}{_full_detail(row, holds)}</details>"
    )


def _size_short(size: ContextSize) -> str:
    """A size in tokens and messages (HTML), its characters on hover."""
    return (
        f"<span title='{size.chars:,} characters of messages' style='white-space:nowrap'>"
        f"{e(tokens_text(size))}</span>"
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
        f"(freed ~{row.freed_tokens:,} tokens, {row.freed_chars:,} chars)</div>"
    )
    if not row.replaced:
        return head
    after = {share.kind: share.tokens for share in row.kept}
    before = {share.kind: share.tokens for share in row.replaced}
    kinds = [s.kind for s in row.replaced] + [s.kind for s in row.kept if s.kind not in before]
    rows = [
        [e(kind), f"{before.get(kind, 0):,}", "→", f"{after.get(kind, 0):,}"]
        for kind in kinds
        if kind != SYSTEM
    ]
    return head + _table(["kind", "~tokens before", "", "after"], rows, "evo-replaced")


def _micro_row(ask: int, rows: Sequence[Compaction]) -> str:
    cache = any(row.cache_invalidated_tokens for row in rows)
    head = ["when", "strategy", "rewrote", "chars before", "", "after", "freed"]
    head += ["cached tokens invalidated"] if cache else []
    cells = []
    for row in rows[-MICRO_ROWS:]:
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
    hidden = len(rows) - len(cells)
    more = f"<div style='color:#777'>and {hidden:,} earlier in this ask</div>" if hidden else ""
    return (
        f"<details class='evo-compaction' data-kind='micro' data-ask='{ask}' "
        f"data-count='{len(rows)}' style='{_ROW.format(colour=PURPLE)}'>"
        f"<summary style='cursor:pointer'>{e(micro_text(ask, rows))}</summary>"
        f"<div style='margin:2px 0 4px 1.2em'>{_table(head, cells, 'evo-micro')}{more}</div>"
        "</details>"
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
