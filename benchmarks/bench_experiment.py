"""Benchmark: the built-in suite x 4 strategies x 3 replicates with the offline stand-in, on the
local engine and on Dask, 2 workers each, side by side.

The figure with a target is a run's overhead outside the model and the check: the run's wall
time in its worker (copying the workspace, the session, its tools in the sandbox, the
transcript, the compactions, storing the row) less the seconds in model calls and in the
check. The experiment's elapsed time per run (the engine's start included) is shown beside it.

    python -m benchmarks.bench_experiment
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evo_magic import experiment, tasks

STRATEGIES = {
    "seed": "default",
    "masking-2": ["observation-masking(keep_turns=2)", "summarise"],
    "window-8": ["sliding-window(keep=8)"],
    "older-6": ["summarise-older(keep=6)"],
}
REPLICATES = 3
WORKERS = 2
TARGET_SECONDS = 1.0


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def measure(engine: str, out: Path) -> tuple[Any, float]:
    """The experiment on `engine`, and its elapsed seconds."""
    started = time.perf_counter()
    x = experiment(tasks.builtin(), STRATEGIES, replicates=REPLICATES, engine=engine,
                   workers=WORKERS, out=out)  # fmt: skip
    return x, time.perf_counter() - started


def main() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for engine in ("local", "dask"):
            x, elapsed = measure(engine, Path(tmp) / engine)
            runs = x.runs
            overhead = runs["wall_s"] - runs["model_s"] - runs["check_s"]
            median = statistics.median(overhead)
            label = f"experiment offline, {len(runs)} runs, {engine} x{WORKERS}"
            rows += [
                _row(
                    f"{label}: overhead per run (outside model and check)",
                    median,
                    "s",
                    f"< {TARGET_SECONDS:g}",
                    median < TARGET_SECONDS,
                ),  # fmt: skip
                _row(
                    f"{label}: elapsed per run (engine start included)",
                    elapsed / len(runs),
                    "s",
                    None,
                    None,
                ),  # fmt: skip
            ]
            if engine == "local":
                rows[-1]["note"] = _table(x.summary())
    return rows


def _table(summary: Any) -> str:
    return "; ".join(
        f"{r.strategy} {r.success_rate:.0%} [{r.success_low:.0%}, {r.success_high:.0%}]"
        for r in summary.itertuples()
    )


if __name__ == "__main__":
    for row in main():
        print(row)
