"""What the analysis plots share: point labels placed so they never overprint, and the axis
words of the house style (`evo_magic.plot_style`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# The axis words are the house style's (one place for every plot); kept importable from here.
from evo_magic.plot_style import WORDS, words

__all__ = ["WORDS", "label_points", "words"]


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
