"""The experiments of this process, and who shows them while they run.

The core shows nothing: a front end registers a watcher (the notebook layer does, to redraw an
experiment's table in place), and `%agent experiment` lists `started()`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evo_magic.experiments.results import Experiment

Watcher = Callable[["Experiment"], Callable[[], None]]
"""Called when an experiment starts; returns what to call each time it changes."""

_WATCHERS: list[Watcher] = []
_STARTED: list[Experiment] = []
_INTERVAL = 0.25
"""Seconds between two redraws while runs finish (the last one is always drawn)."""


def watch(watcher: Watcher) -> Callable[[], None]:
    """Call `watcher(experiment)` for every experiment started from now on; returns a function
    that stops it."""
    _WATCHERS.append(watcher)
    return lambda: _WATCHERS.remove(watcher) if watcher in _WATCHERS else None


def started() -> list[Experiment]:
    """This process's experiments, oldest first."""
    return list(_STARTED)


class Shown:
    """The redraws of one experiment, at most every `_INTERVAL` seconds until `final`. A
    watcher that fails is dropped: a display must not stop an experiment."""

    def __init__(self, experiment: Experiment) -> None:
        _STARTED.append(experiment)
        self.updates: list[Callable[[], None]] = []
        for watcher in list(_WATCHERS):
            try:
                self.updates.append(watcher(experiment))
            except Exception:  # noqa: S112 - a display that cannot start is not drawn
                continue
        self.last = time.monotonic()

    def changed(self, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.last < _INTERVAL:
            return
        self.last = now
        for update in list(self.updates):
            try:
                update()
            except Exception:
                self.updates.remove(update)
