"""The figure of `after_compaction`: repetition after the compactions against before them, and
the calls agents took to resume. Matplotlib is imported when it is drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evo_magic.plot_style import COLOURS, SCREEN_WIDTH, SERIES, finish_axes, house_style

if TYPE_CHECKING:
    import pandas as pd


def draw(summary: pd.DataFrame, compactions: pd.DataFrame, ax: Any = None) -> Any:
    """Two panels (or the two axes of `ax`): per row of `summary` (source, trigger, strategy),
    the share of reads that were repeats before and after the compactions with their
    intervals; and how many `compactions` took each number of calls to resume. Returns the
    figure."""
    with house_style(SCREEN_WIDTH):
        return _draw(summary, compactions, ax)


def _draw(summary: pd.DataFrame, compactions: pd.DataFrame, ax: Any) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    if ax is None:
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    else:
        left, right = ax
        figure = left.figure
    labels = [
        " / ".join(map(str, row)) for row in summary[["source", "trigger", "strategy"]].values
    ]
    positions = range(len(summary))
    for offset, (column, name) in enumerate(
        (("repeated_read_share_before", "before"), ("repeated_read_share", "after"))
    ):
        values = summary[column].astype(float)
        shown = values.notna().to_numpy()  # a group that never compacted has no "after"
        low = (values - summary[f"{column}_low"].astype(float)).clip(lower=0)
        high = (summary[f"{column}_high"].astype(float) - values).clip(lower=0)
        left.bar(
            [p + (offset - 0.5) * 0.4 for p, ok in zip(positions, shown, strict=True) if ok],
            values[shown],
            width=0.4,
            yerr=[low[shown], high[shown]],
            capsize=3,
            color=SERIES[offset],
            ecolor=COLOURS["interval"],
            label=f"{name} the compaction",
        )
    left.set_xticks(list(positions), labels, rotation=20, ha="right")
    finish_axes(
        left,
        "Source / trigger / strategy",
        "Share of reads that were repeats",
        title="Repeated reads, before and after",
        width=SCREEN_WIDTH,
    )
    left.set_ylim(0, 1)
    left.legend()
    resume = compactions["calls_to_resume"].dropna().astype(int)
    if len(resume):
        counts = resume.value_counts().sort_index()
        right.bar(counts.index.astype(int), counts.values, color=SERIES[0])
    finish_axes(
        right,
        "Calls after the compaction until new work",
        "Compactions",
        title="Calls to resume",
        width=SCREEN_WIDTH,
    )
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    return figure
