"""A sweep's progress: one line on standard error, units done, failed and left."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Redrawn in place on a terminal or in a notebook (at most 5 times a second), a new line
    every 10 s in a log."""

    def __init__(self, total: int, *, enabled: bool, stream: TextIO | None = None):
        self.total = total
        self.enabled = enabled and total > 0
        self.stream = stream or sys.stderr
        self.live = _is_live(self.stream)
        self.last = 0.0
        self.text = ""

    def update(self, done: int, failed: int) -> None:
        if not self.enabled:
            return
        left = self.total - done - failed
        self.text = (
            f"sweep: {done:,} of {self.total:,} sessions done, {failed:,} failed, {left:,} left"
        )
        now = time.monotonic()
        if now - self.last < (0.2 if self.live else 10.0) and left:
            return
        self.last = now
        self.stream.write(f"\r{self.text}" if self.live else f"{self.text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.live:
            self.stream.write(f"\r{self.text}\n")
            self.stream.flush()


def _is_live(stream: TextIO) -> bool:
    if "ipykernel" in sys.modules:  # a notebook's stream honours the carriage return
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
