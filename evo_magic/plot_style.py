"""The house style of evo_magic's figures: one font, one set of sizes, one palette, and axes in
words, shared by the context figure (`evo_magic.meter.figure`), `Replay.plot` and
`Retention.frontier`, and meant for every new plot.

A plot draws inside `house_style()` (matplotlib's rcParams for the font, sizes and colour
cycle, for that plot only: a user's own settings are untouched outside it), takes its colours
from `COLOURS` (a role: what is sent, a compaction, the limit) or `SERIES` (one per strategy),
labels its axes with `words(column)` and ends with `finish_axes(ax, ...)`. Text sizes are in
points at a paper's column width (`COLUMN_WIDTH`); `sizes(width)` scales them up for a wider
figure, never down, so no text falls under `SMALL` points.

matplotlib is imported by `house_style()` only, when a figure is made: importing this module
costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

COLUMN_WIDTH = 3.4
"""Inches: one column of a two-column paper, the width figures are designed at."""
SCREEN_WIDTH = 5.1
"""The width whose text sizes a figure for the screen uses whatever its own width (a notebook's
`Replay.plot`, `frontier()`): labels of 11.25 points and ticks of 9.75, matplotlib's scale."""
LABEL = 7.5
"""Points of axis labels and titles at `COLUMN_WIDTH`."""
SMALL = 6.5
"""Points of tick labels, legends and marks at `COLUMN_WIDTH`: the smallest text drawn."""
FONT = ("DejaVu Sans", "Arial", "Helvetica", "sans-serif")
"""The font, first found: DejaVu Sans ships with matplotlib, so every machine draws the same."""

COLOURS = {
    "sent": "#1565c0",
    "sent_earlier": "#90caf9",
    "removed": "#7b1fa2",
    "compaction": "#c62828",
    "failed": "#757575",
    "limit": "#757575",
    "interval": "#424242",
}
"""Colours by role: a cell's own calls (`sent`) and earlier ones (`sent_earlier`), what
strategies removed, a successful and a failed compaction, the limit, an interval."""

SERIES = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#000000",
)
"""One colour per series (a strategy, a session), in order: Okabe and Ito's palette, told
apart by readers with colour-blindness and in greyscale print."""

WORDS = {
    "cost_usd": "Cost (USD)",
    "probe_cost_usd": "Cost of the probes (USD)",
    "summary_cost_usd": "Cost of the summaries (USD)",
    "kept_share": "Share of the facts kept",
    "kept_at_end_share": "Share of the facts kept to the end",
    "verbatim_share": "Share of the facts kept verbatim",
    "probe_accuracy": "Probe accuracy",
    "context_tokens": "Context sent (tokens)",
    "call": "Model call",
}
"""Axis words for the columns plots are drawn against."""


def words(column: str) -> str:
    """`column` in words for an axis: "cost_usd" is "Cost (USD)", "kept_share" "Share of the
    facts kept"; another column its name with spaces, capitalised, a `_usd` as "(USD)"."""
    if column in WORDS:
        return WORDS[column]
    name = column.removesuffix("_usd").replace("_", " ")
    name = name[:1].upper() + name[1:]
    return f"{name} (USD)" if column.endswith("_usd") else name


@dataclass(frozen=True)
class Sizes:
    """Text sizes in points for a figure of some width."""

    label: float
    """Axis labels and titles."""
    small: float
    """Ticks, legends, marks."""


def sizes(width: float = COLUMN_WIDTH) -> Sizes:
    """The text sizes for a figure `width` inches wide: the column's sizes, scaled up for a
    wider figure and never down for a narrower one."""
    scale = max(width / COLUMN_WIDTH, 1.0)
    return Sizes(LABEL * scale, SMALL * scale)


def rc(width: float = COLUMN_WIDTH) -> dict[str, Any]:
    """The matplotlib rcParams of the house style for a figure `width` inches wide."""
    size = sizes(width)
    return {
        "font.family": "sans-serif",
        "font.sans-serif": list(FONT),
        "font.size": size.small,
        "axes.labelsize": size.label,
        "axes.titlesize": size.label,
        "xtick.labelsize": size.small,
        "ytick.labelsize": size.small,
        "legend.fontsize": size.small,
        "legend.frameon": False,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": _cycler(SERIES),
        "lines.linewidth": 1.2,
    }


@contextmanager
def house_style(width: float = COLUMN_WIDTH) -> Iterator[None]:
    """Draw in the house style inside this block (matplotlib's `rc_context`): the user's
    settings are as they were after it."""
    import matplotlib

    with matplotlib.rc_context(rc(width)):
        yield


def finish_axes(
    ax: Any, x: str, y: str, *, title: str | None = None, width: float = COLUMN_WIDTH
) -> None:
    """Label `ax` in words (`x` and `y` are columns or words already), give its ticks the
    small size, and hide the top and right spines."""
    size = sizes(width)
    ax.set_xlabel(words(x), fontsize=size.label)
    ax.set_ylabel(words(y), fontsize=size.label)
    if title is not None:
        ax.set_title(title, fontsize=size.label)
    ax.tick_params(labelsize=size.small, length=2, width=0.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _cycler(colours: tuple[str, ...]) -> Any:
    from cycler import cycler

    return cycler(color=list(colours))
