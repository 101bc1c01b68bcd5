"""Benchmark: one model call's path for every built-in strategy that runs before every call,
at 200 and 20,000 messages, side by side in one run.

A call as the loop makes it: a step joins the history (a reply calling a tool, thinking
included, and the tool's result; a new ask every tenth step), the strategy runs
(`Compactor.before_call`), the server strategies add their part of the request
(`ServerSide.params`) and the request's snapshot is taken. The histories are grown the way a
loop grows them (a step, then the strategy), so the old results are what the strategy already
made of them. The server strategies are measured a second time after a server compaction
block came and a client compaction replaced it (their block's beta remembered): then they
must not look for the block in the whole history at every call. Each strategy's two sizes are
timed in turns, call by call.

    python -m benchmarks.bench_strategies

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from evo_magic.compact.compactor import CompactionServices, Compactor
from evo_magic.compact.policy import CompactPolicy
from evo_magic.history import History
from evo_magic.strategies.registry import BUILTIN, make_strategy

SMALL, LARGE = 200, 20_000
REPEATS = 41
WARMUP = 3
RATIO_TARGET = 1.2
MODEL = "claude-opus-4-6"
EVERY_CALL = [name for name in BUILTIN if make_strategy(name).when == "every_call"]
"""The built-in strategies that run before every call."""
ACTING = {
    "large-outputs": "large-outputs(limit=300)",
    "clear-tool-uses": "clear-tool-uses(trigger_tokens=1000)",
}
"""Specs that make a strategy act at both sizes (its default threshold lies between them:
otherwise the small history would time a strategy that looks and does nothing)."""
SERVER = [name for name in EVERY_CALL if hasattr(make_strategy(name), "server_edit")]
"""Those of them that ride on the request (measured again after a replacement)."""


def batch(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One model step: a turn that calls a tool (with some thinking), and its result."""
    use = {"type": "tool_use", "id": f"toolu_{n:07d}", "name": "read_file",
           "input": {"path": f"src/m{n % 7}.py"}}  # fmt: skip
    turn = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"step {n}", "signature": "sig"},
        {"type": "text", "text": f"Reading file {n % 7}."}, use,
    ]}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": f"line {n}\n" * 60}
    return turn, result


class Caller:
    """A history and its compactor with one strategy, grown as a loop grows them."""

    def __init__(self, name: str, size: int, replaced: bool) -> None:
        services = CompactionServices(
            emit=lambda event: None,
            summarise=lambda messages, focus: None,  # type: ignore[arg-type,return-value]
            save_output=lambda tool_use_id, text: "saved.txt",
        )
        self.history = History(lambda event: None)
        policy = CompactPolicy(context_limit=10**12)  # never over the limit: per-call work only
        strategies = [make_strategy(ACTING.get(name, name))]
        self.compactor = Compactor(self.history, services, policy=policy, strategies=strategies)
        self.steps = 0
        self.history.append(self._ask())
        while len(self.history) < size:
            self.call()
        if replaced:
            self.compactor.server.summarised()  # a server block came and went

    def _ask(self) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": f"request {self.steps}"}]}

    def call(self) -> None:
        """One model call's path: a step joins, the strategy runs, the request is made."""
        self.steps += 1
        turn, result = batch(self.steps)
        self.history.append(turn)
        self.history.add_tool_result(result)
        self.compactor.before_call()
        self.compactor.server.params(MODEL)
        self.history.snapshot()
        if self.steps % 10 == 0:  # the model answers, the user asks again: a new turn
            self.history.append(
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}
            )
            self.history.append(self._ask())


def per_call(name: str, replaced: bool = False) -> tuple[float, float]:
    """Microseconds per call at `SMALL` and `LARGE` messages (medians, timed in turns)."""
    callers = [Caller(name, size, replaced) for size in (SMALL, LARGE)]
    times: list[list[float]] = [[], []]
    for repeat in range(REPEATS + WARMUP):
        for index, caller in enumerate(callers):
            started = time.perf_counter()
            caller.call()
            if repeat >= WARMUP:
                times[index].append(time.perf_counter() - started)
    small, large = (statistics.median(samples) * 1e6 for samples in times)
    return small, large


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def rows_of(label: str, small: float, large: float) -> list[dict[str, Any]]:
    """The two sizes and their ratio, the ratio's target met or not."""
    ratio = large / small
    return [
        _row(f"{label}, {SMALL} messages", small, "us", None, None),
        _row(f"{label}, {LARGE:,} messages", large, "us", None, None),
        _row(f"{label}, per call, {LARGE:,} vs {SMALL} messages", ratio, "ratio",
             f"<= {RATIO_TARGET:g}", ratio <= RATIO_TARGET),
    ]  # fmt: skip


def main() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in EVERY_CALL:
        rows += rows_of(ACTING.get(name, name), *per_call(name))
    for name in SERVER:
        rows += rows_of(f"{name} after a replacement", *per_call(name, replaced=True))
    return rows


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<72} {row['median']:>10,.3f} {row['unit']}")
