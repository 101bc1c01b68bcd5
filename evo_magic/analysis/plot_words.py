"""What the analysis plots share: axis words for a frame's columns, and point labels placed
so they never overprint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WORDS = {
    "cost_usd": "Cost (USD)",
    "probe_cost_usd": "Cost of the probes (USD)",
    "summary_cost_usd": "Cost of the summaries (USD)",
    "kept_share": "Share of the facts kept",
    "kept_at_end_share": "Share of the facts kept to the end",
    "verbatim_share": "Share of the facts kept verbatim",
    "probe_accuracy": "Probe accuracy",
    "context_tokens": "Context (tokens)",
}
"""Axis words for the columns a plot is usually drawn against."""


def words(column: str) -> str:
    """`column` in words for an axis: "cost_usd" is "Cost (USD)", "kept_share" "Share of the
    facts kept"; another column its name with spaces, capitalised, a `_usd` as "(USD)"."""
    if column in WORDS:
        return WORDS[column]
    name = column.removesuffix("_usd").replace("_", " ")
    name = name[:1].upper() + name[1:]
    return f"{name} (USD)" if column.endswith("_usd") else name


def label_points(ax: Any, points: Sequence[tuple[float, float]], labels: Sequence[str]) -> list:
    """Each point labelled, up and right of it: points at one place share one label ("a, b"),
    and a label that would overprint one placed before moves up a line until it does not.
    Returns the matplotlib annotations, one per distinct place."""
    places: dict[tuple[float, float], list[str]] = {}
    for point, label in zip(points, labels, strict=True):
        if point[0] == point[0] and point[1] == point[1]:  # NaN: nowhere to put it
            places.setdefault(point, []).append(label)
    annotations, boxes = [], []
    for (x, y), names in places.items():
        text = ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(5, 5))
        line = text.get_fontsize() * 1.3
        box = text.get_window_extent()
        while any(box.overlaps(other) for other in boxes):
            text.xyann = (text.xyann[0], text.xyann[1] + line)
            box = text.get_window_extent()
        boxes.append(box)
        annotations.append(text)
    return annotations
