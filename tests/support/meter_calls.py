"""A long session's calls as a meter log folds them, made without a model: the benchmarks of
the live meter and the tests that count its work grow the same log."""

from __future__ import annotations

from evo_magic.events import ContextSize
from evo_magic.meter.log import CallPoint, Compaction, MeterLog


def meter_call(log: MeterLog, n: int) -> None:
    """Call `n` as the log folds it; a micro-compaction before every other call."""
    size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)
    log.calls.append(CallPoint(n, n // 10 + 1, size, size, None, 0.001, ("tool results",)))
    if n % 2:
        log.compactions.append(
            Compaction(0, True, "micro", "micro", "every_call", None, size, size, True, n,
                       n // 10 + 1, cleared=("read_file",))
        )  # fmt: skip
