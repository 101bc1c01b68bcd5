"""The context chart as a matplotlib figure, sized for a paper's column (3.4 inches wide).

The same chart as the meter's (`evo_magic.meter.chart`): one bar per model call, the prompt
it sent in tokens (a cell's own calls darker), behind it as a dashed outline its size before
what strategies removed just before the call, the limit as a dashed line, a red line at each
full compaction (labelled C1, C2, ...; failed ones grey and dashed) and a triangle at each
micro-compaction. matplotlib is imported when a figure is made, never before: `%load_ext
evo_magic` and `import evo_magic` do not load it. The figure is made without pyplot (no global
state, no window); `save` writes SVG, PNG or PDF.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic import plot_style
from evo_magic.extras import missing
from evo_magic.meter.chart import Chart, tokens_label
from evo_magic.meter.data import MeterData
from evo_magic.plot_style import COLOURS, house_style, sizes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMN_WIDTH = plot_style.COLUMN_WIDTH
"""Inches: one column of a two-column paper."""
HEIGHT = 2.2
SMALL = plot_style.SMALL
"""Points of tick labels, marks and legend (the house style's; legible in print)."""
FORMATS = (".svg", ".png", ".pdf")
BLUE, LIGHT_BLUE = COLOURS["sent"], COLOURS["sent_earlier"]
PURPLE, RED, GREY = COLOURS["removed"], COLOURS["compaction"], COLOURS["failed"]
AXES_SHARE = 0.75
"""The least share of the figure's width the plot takes (the y axis's labels take the rest):
what places a compaction's label so it clears the next."""
AXES_HIGH = (0.5, 0.85)
"""The least and the most share of the figure's height the plot takes."""
Y_LABEL = plot_style.words("context_tokens")
X_LABEL = plot_style.words("call")


def context_figure(data: MeterData, width: float = COLUMN_WIDTH) -> Figure:
    """The chart of `data` as a matplotlib Figure `width` inches wide, in the house style
    (`evo_magic.plot_style`)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # an optional dependency: one line saying how to install it
        raise missing("matplotlib", "the context figure", "notebooks") from None
    with house_style(width):
        return _draw(data, width)


def _draw(data: MeterData, width: float) -> Figure:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    chart = Chart(data)
    scale = max(width / COLUMN_WIDTH, 1.0)  # a wider figure gets larger text, never smaller
    small = sizes(width).small
    figure = Figure(figsize=(width, HEIGHT * scale), layout="constrained")
    ax = figure.add_subplot()
    _bars(ax, chart)
    ax.axhline(chart.limit, color=GREY, linestyle=(0, (4, 3)), linewidth=0.7, zorder=3)
    ax.annotate(
        chart.limit_label(), (1.0, chart.limit), xycoords=("axes fraction", "data"),
        xytext=(-2, 2), textcoords="offset points", ha="right", va="bottom",
        fontsize=small, color=GREY, zorder=6,
        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.85},
    )  # fmt: skip
    calls_per_point = (chart.x1 - chart.x0) / (width * 72 * AXES_SHARE)
    lines = chart.label_lines(
        lambda text: (label_extent(text, small) + 4) * calls_per_point,
        partial(_free_until, chart, small, calls_per_point, HEIGHT * scale * 72),
    )
    micro_x = _marks(ax, chart, lines, small)
    if micro_x:
        ax.plot(
            micro_x, [0] * len(micro_x), linestyle="none", marker="^", markersize=3.5 * scale,
            color=PURPLE, clip_on=False, zorder=5,
        )  # fmt: skip
    ax.set_xlim(chart.x0, chart.x1)
    ax.set_ylim(0, chart.top)
    plot_style.finish_axes(ax, X_LABEL, Y_LABEL, width=width)
    ax.set_xticks(chart.x_ticks())  # the meter's ticks
    ax.set_yticks(chart.y_ticks())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: tokens_label(value)))
    _legend(figure, small)
    return figure


def _bars(ax: Any, chart: Chart) -> None:
    """A bar a call: the tokens it sent (the scope's darker), and a dashed outline of the size
    before a removal where one came before it."""
    for column in chart.columns:
        middle = column.start + column.width / 2
        bar = column.width * 0.7
        if column.removed > 0:
            ax.bar(
                middle, column.before, bar, fill=False, edgecolor=PURPLE, linestyle="--",
                linewidth=0.6, zorder=1,
            )  # fmt: skip
        colour = BLUE if column.own else LIGHT_BLUE
        ax.bar(middle, column.tokens, bar, color=colour, linewidth=0, zorder=2)


def _marks(ax: Any, chart: Chart, lines: Sequence[int], small: float) -> list[float]:
    """A line a full compaction (red, dashed and grey when it failed), its label on its own
    line of text (`lines`); the micro-compactions' places, drawn apart."""
    micro_x: list[float] = []
    for mark, line in zip(chart.marks, lines, strict=True):
        if mark.micro:
            micro_x.append(mark.x)
            continue
        row = mark.first
        colour = RED if row.success else GREY
        alpha = 1.0 if mark.own else 0.45
        style = "-" if row.success else "--"
        ax.axvline(mark.x, color=colour, linestyle=style, linewidth=1.0, alpha=alpha, zorder=4)
        ax.annotate(
            mark.label, (mark.x, 1.0), xycoords=("data", "axes fraction"),
            xytext=(2, -2 - line * small * 1.25), textcoords="offset points", ha="left",
            va="top", fontsize=small, color=colour, fontweight="bold", alpha=alpha,
        )  # fmt: skip
    return micro_x


def _legend(figure: Any, small: float) -> None:
    """The key above the axes: sent tokens, the size before a removal, compactions, micro."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=BLUE, label="sent"),
        Patch(fill=False, edgecolor=PURPLE, linestyle="--", linewidth=0.6, label="before removal"),
        Line2D([], [], color=RED, linewidth=1.0, label="compaction"),
        Line2D([], [], color=PURPLE, marker="^", linestyle="none", markersize=3.5, label="micro"),
    ]
    figure.legend(
        handles=handles, loc="outside upper center", ncols=4, fontsize=small,
        frameon=False, handlelength=1.2, columnspacing=0.8, handletextpad=0.4,
    )  # fmt: skip


def label_extent(text: str, size: float) -> float:
    """Points a mark's label takes in bold at `size`: enough for its widest letters."""
    return 0.75 * size * len(text)


def _free_until(
    chart: Chart, small: float, calls_per_point: float, high: float, line: int
) -> float:
    """Where on the call axis the limit's label starts when it may take `line` of the marks'
    labels (infinity when it cannot): the plot's height is between `AXES_HIGH` of the
    figure's `high` points, so a line anywhere the limit's label may be counts as taken."""
    top = 2 + line * small * 1.25
    bottom = top + small * 1.25
    share = (chart.top - chart.limit) / chart.top
    lowest, highest = (share * high * s - 2 for s in AXES_HIGH)
    if bottom <= lowest - small * 1.4 or top >= highest:
        return math.inf
    return chart.x1 - (0.62 * small * len(chart.limit_label()) + 4) * calls_per_point


def save(figure: Figure, path: str | Path) -> Path:
    """Write `figure` to `path` as SVG, PNG (300 dpi) or PDF, by its suffix; ValueError for
    another suffix. Returns the path written."""
    target = Path(path).expanduser()
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"cannot save a figure as {target.name!r}: the file name must end with "
            f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}"
        )
    figure.savefig(target, format=suffix[1:], dpi=300 if suffix == ".png" else "figure")
    return target
