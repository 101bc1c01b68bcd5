"""Benchmark: the live meter widget's refresh (`ContextMeter` as a model call makes it refresh
while an ask runs: the data, the HTML, the synced state and the rows sent) at 100, 1,000 and
10,000 calls (some 200, 2,000 and 20,000 messages; from 160 calls on the chart draws all its
columns), the three timed in turns.

    python -m benchmarks.bench_meter_widget

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_percall import meter_call
from evo_magic.compact.policy import CompactPolicy
from evo_magic.meter.log import MeterLog
from evo_magic.notebook.widget import ContextMeter
from evo_magic.session import Session

SMALL, PLATEAU, LARGE = 100, 1_000, 10_000
REPEATS = 31
RATIO_TARGET = 1.2


def meter(session: Session, calls: int) -> tuple[ContextMeter, MeterLog]:
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_call(log, n)
    return ContextMeter(session, log=log), log


def widget_times(session: Session) -> dict[int, float]:
    """Microseconds per live refresh after one more call, at each size (medians)."""
    meters = {calls: meter(session, calls) for calls in (SMALL, PLATEAU, LARGE)}
    times: dict[int, list[float]] = {calls: [] for calls in meters}
    for _ in range(REPEATS):
        for calls, (widget, log) in meters.items():
            meter_call(log, len(log.calls) + 1)
            started = time.perf_counter()
            widget.refresh(whole=False)
            times[calls].append(time.perf_counter() - started)
    for widget, _ in meters.values():
        widget.close()
    return {calls: statistics.median(samples) * 1e6 for calls, samples in times.items()}


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        policy = CompactPolicy(context_limit=12_000)
        with Session(Path(folder), model="offline", policy=policy) as session:
            us = widget_times(session)
    drawn, grown = us[LARGE] / us[PLATEAU], us[LARGE] / us[SMALL]
    target = f"<= {RATIO_TARGET:g}"
    name = "live meter widget refresh"
    return [
        *(_row(f"{name}, {calls:,} calls", us[calls], "us", None, None) for calls in us),
        _row(f"{name}, {LARGE:,} vs {PLATEAU:,} calls (all columns drawn)", drawn, "ratio",
             target, drawn <= RATIO_TARGET),
        _row(f"{name}, {LARGE:,} vs {SMALL} calls (the chart fills up to 160 calls)", grown,
             "ratio", None, None),
    ]  # fmt: skip


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<72} {row['median']:>10,.3f} {row['unit']}")
