"""Holding a kernel interrupt back for the few lines that must run as one unit.

A kernel interrupt arrives as SIGINT, and Python raises KeyboardInterrupt at whatever line runs
then. The history's changes (a message joins, its record reaches the transcript) must not be
cut in half, so they run inside `interrupts_deferred()`: a SIGINT that arrives meanwhile is
delivered, to the handler that was installed before, as soon as the block ends.
"""

from __future__ import annotations

# The C module under `signal`: the same functions without the enum conversions, which cost
# more than the rest of a history change (these blocks run several times per model call).
import _signal
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block without being interrupted by SIGINT; deliver one that arrived after it.

    Only the main thread receives signals, so elsewhere this does nothing. Nested blocks
    deliver to the outer one, which delivers when it ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = _signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN or SIG_DFL: nothing of ours to defer to
        yield
        return
    pending: list[tuple[int, FrameType | None]] = []
    _signal.signal(signal.SIGINT, lambda signum, frame: pending.append((signum, frame)))
    try:
        yield
    finally:
        _signal.signal(signal.SIGINT, previous)
        if pending:
            previous(*pending[0])
