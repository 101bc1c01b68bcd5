"""Benchmark: what compaction costs per model call, and what a full compaction saves.

1. Layer 1 plus measurement per model call, as `_call_model` in `evo_magic/loop.py` runs it
   before every request (measure, micro_compact, measure), on realistic histories of 50, 200,
   1,000 and 5,000 messages. The history is built the way the loop builds it (a batch, then a
   pass), so its old results are already placeholders: each timed call is the steady state of a
   real loop, one new batch appended and then compacted.
2. The size reduction of a full compaction (layer 3, `Session.compact`) on a long session of
   the offline model in the demo workspace.

    python benchmarks/bench_compaction.py            # prints a table

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.measure import measure
from evo_magic.compact.micro import micro_compact
from evo_magic.compact.policy import CompactPolicy

SIZES = (50, 200, 1_000, 5_000)
TARGET_SIZE = 200
WARMUP = 5
CALL_US_TARGET = 1_000.0
GROWTH_TARGET = 1.5
REDUCTION_TARGET = 90.0
ASKS = (
    "Survey the project and list what needs fixing.",
    "Look at the expiry logic in inventory.py: which samples count as expired?",
    "Check samples.csv against the loader: columns, types, odd rows.",
    "Find every TODO and say which one matters most for the report.",
    "Review the notes you wrote and tighten them.",
    "Summarise the freezer grouping and what the report would print today.",
)

_VOCABULARY = (
    "def class return import self sample freezer expires kind date path open read line count "
    "total TODO error result csv row column group report render today value list dict None"
)
_WORDS = _VOCABULARY.split()


@dataclass
class _History:
    """Grows a plausible agent history: requests, parallel tool calls, results, answers."""

    rng: random.Random
    messages: list[dict[str, Any]] = field(default_factory=list)
    ids: int = 0

    def words(self, low: int, high: int) -> str:
        """Text of `low`..`high` characters, code-like."""
        target = self.rng.randint(low, high)
        parts: list[str] = []
        size = 0
        while size < target:
            word = self.rng.choice(_WORDS)
            parts.append(word)
            size += len(word) + 1
        return " ".join(parts)[:target]

    def ask(self) -> None:
        self.messages.append(
            {"role": "user", "content": [{"type": "text", "text": self.words(40, 300)}]}
        )

    def batch(self) -> list[dict[str, Any]]:
        """One model step: an assistant message with 1-3 tool calls and the user message of
        their results (a few hundred to a few thousand characters each, some errors)."""
        uses = []
        for _ in range(self.rng.choice((1, 1, 2, 3))):
            self.ids += 1
            name = self.rng.choice(("bash", "bash", "read_file", "edit_file"))
            tool_input = (
                {"command": f"grep -n {self.rng.choice(_WORDS)} src/m{self.ids % 40}.py | head -40"}
                if name == "bash"
                else {"path": f"src/m{self.ids % 40}.py"}
            )
            uses.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{self.ids:08d}",
                    "name": name,
                    "input": tool_input,
                }
            )
        assistant = {
            "role": "assistant",
            "content": [{"type": "text", "text": self.words(30, 300)}, *uses],
        }
        results = []
        for use in uses:
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "content": self.words(200, 3_000),
            }
            if self.rng.random() < 0.05:
                result["is_error"] = True
            results.append(result)
        return [assistant, {"role": "user", "content": results}]

    def answer(self) -> None:
        self.messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": self.words(80, 600)}]}
        )


def build_history(size: int, policy: CompactPolicy, seed: int = 0) -> list[dict[str, Any]]:
    """A history of about `size` messages, micro-compacted after every batch as the loop does."""
    history = _History(random.Random(seed))
    history.ask()
    while len(history.messages) < size - 2:
        history.messages += history.batch()
        micro_compact(history.messages, policy)
        if history.rng.random() < 0.1 and len(history.messages) < size - 3:
            history.answer()
            history.ask()
    return history.messages


def per_call(messages: list[dict[str, Any]], policy: CompactPolicy) -> None:
    """What `_call_model` does before it sends: measure, micro-compact, measure."""
    measure(messages, None)
    micro_compact(messages, policy)
    measure(messages, None)


def time_calls(
    sizes: tuple[int, ...], repeats: int, policy: CompactPolicy
) -> dict[int, list[float]]:
    """Seconds per call at each size, each call after appending a fresh batch (removed after,
    so the history keeps its size; what the pass cleared stays cleared, as in a real loop).

    Sizes take turns call by call, so a burst of load on the machine hits them all alike.
    """
    histories = {size: build_history(size, policy) for size in sizes}
    source = _History(random.Random(1), ids=10**7)
    batches = [source.batch() for _ in range(repeats + WARMUP)]
    times: dict[int, list[float]] = {size: [] for size in sizes}
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()  # as timeit does: a collection would time the heap, not the code
    try:
        for number, batch in enumerate(batches):
            for size in sizes:
                messages = histories[size]
                # Fresh copies: every call encodes its new batch, as a real call does.
                messages += copy.deepcopy(batch)
                started = time.perf_counter()
                per_call(messages, policy)
                elapsed = time.perf_counter() - started
                del messages[-2:]
                if number >= WARMUP:  # the first calls learn the sizes of the history
                    times[size].append(elapsed)
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


def full_compaction_reduction(asks: int = len(ASKS)) -> tuple[int, int]:
    """Characters of the history before and after `Session.compact` on a long offline session."""
    from evo_magic.demo import make_demo_workspace
    from evo_magic.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        workspace = make_demo_workspace(Path(tmp) / "work")
        # A limit no session reaches, so only the compaction measured here runs.
        policy = CompactPolicy(context_limit=10_000_000)
        with Session(workspace, model="offline", policy=policy) as session:
            for n in range(asks):
                session.ask(ASKS[n % len(ASKS)])
            event = session.compact("the open TODOs and the state of the notes")
            if not event.success:
                raise RuntimeError(f"the compaction failed: {event.error}")
            return event.before.chars, event.after.chars


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main(repeats: int = 200) -> list[dict[str, Any]]:
    """Run every measurement; one row per figure."""
    policy = CompactPolicy()
    rows = []
    per_message: dict[int, float] = {}
    for size, times in time_calls(SIZES, repeats, policy).items():
        median_us = statistics.median(times) * 1e6
        per_message[size] = median_us / size
        target = f"< {CALL_US_TARGET:,.0f}" if size == TARGET_SIZE else None
        met = median_us < CALL_US_TARGET if size == TARGET_SIZE else None
        figure = f"measure+micro+measure per call, {size:,} messages"
        rows.append(_row(figure, median_us, "us", target, met))
    for size in SIZES:
        rows.append(_row(f"  per message, {size:,} messages", per_message[size], "us", None, None))
    growth = per_message[SIZES[-1]] / per_message[TARGET_SIZE]
    rows.append(
        _row(
            f"time per message, {SIZES[-1]:,} vs {TARGET_SIZE} messages",
            growth,
            "ratio",
            f"<= {GROWTH_TARGET}",
            growth <= GROWTH_TARGET,
        )
    )
    before, after = full_compaction_reduction()
    reduction = 100 * (1 - after / before)
    rows.append(_row("offline session before full compaction", before, "chars", None, None))
    rows.append(_row("offline session after full compaction", after, "chars", None, None))
    rows.append(
        _row(
            "full compaction size reduction",
            reduction,
            "%",
            f">= {REDUCTION_TARGET:.0f}",
            reduction >= REDUCTION_TARGET,
        )
    )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    width = max(len(row["figure"]) for row in rows)
    print(f"{'figure':<{width}}  {'median':>12}  {'unit':<6}  {'target':<9}  met")
    for row in rows:
        value = row["median"]
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3f}"
        met = "" if row["met"] is None else ("yes" if row["met"] else "NO")
        target = row["target"] or ""
        print(f"{row['figure']:<{width}}  {shown:>12}  {row['unit']:<6}  {target:<9}  {met}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per size")
    print_table(main(parser.parse_args().repeats))
