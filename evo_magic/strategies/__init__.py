"""Compaction strategies: the seed's three layers and the field's other strategies, built in.

    from evo_magic.strategies import LargeOutputs, MicroCompact, Summarise
    Session(ws, strategies=[LargeOutputs(), MicroCompact(keep_recent=3), Summarise()])

Each strategy owns its parameters: declared once as fields with a default, a help line and a
rule (`evo_magic.declared.setting`), checked when the strategy is made (ValueError naming the
strategy, the parameter and the rule). `%agent strategies` and the docs' tables
(`registry.strategies_markdown()`, in `docs/strategies.md`) are read from those declarations.

The `server-*` strategies edit no history: the API does the work (see `strategies.server`).
`default_pipeline()` is the seed's pipeline; `registry` finds strategies by name, by dotted
path, or from other packages' `evo_magic.strategies` entry points.
"""

from __future__ import annotations

from evo_magic.compact.base import Context, Edited, Strategy
from evo_magic.strategies.budget import TokenBudget
from evo_magic.strategies.clear_tool_uses import ClearToolUses
from evo_magic.strategies.dedupe import DedupeReads
from evo_magic.strategies.fold import FoldFiles
from evo_magic.strategies.handoff import Handoff
from evo_magic.strategies.interval import IntervalSummary
from evo_magic.strategies.large_outputs import LargeOutputs
from evo_magic.strategies.masking import ObservationMasking
from evo_magic.strategies.micro import MicroCompact
from evo_magic.strategies.older import SummariseOlder
from evo_magic.strategies.recall import Recall
from evo_magic.strategies.server import (
    ServerClearThinking,
    ServerClearToolUses,
    ServerCompact,
    ServerSummarise,
)
from evo_magic.strategies.summarise import Summarise
from evo_magic.strategies.thinking import ClearThinking
from evo_magic.strategies.todo import Todo
from evo_magic.strategies.window import SlidingWindow

__all__ = [
    "BUILTIN",
    "ClearThinking",
    "ClearToolUses",
    "Context",
    "DedupeReads",
    "Edited",
    "FoldFiles",
    "Handoff",
    "IntervalSummary",
    "LargeOutputs",
    "MicroCompact",
    "ObservationMasking",
    "Recall",
    "ServerClearThinking",
    "ServerClearToolUses",
    "ServerCompact",
    "ServerSummarise",
    "SlidingWindow",
    "Strategy",
    "Summarise",
    "SummariseOlder",
    "Todo",
    "TokenBudget",
    "default_pipeline",
]

BUILTIN: dict[str, type] = {
    cls.name: cls
    for cls in (
        LargeOutputs,
        MicroCompact,
        Summarise,
        ClearToolUses,
        ObservationMasking,
        SlidingWindow,
        SummariseOlder,
        TokenBudget,
        ServerCompact,
        ServerSummarise,
        ServerClearToolUses,
        ServerClearThinking,
        DedupeReads,
        IntervalSummary,
        ClearThinking,
        FoldFiles,
        Recall,
        Todo,
        Handoff,
    )
}
"""The built-in strategies by name."""


def default_pipeline() -> list[Strategy]:
    """The seed's three layers with their own defaults: large outputs to files, then
    micro-compaction (cache-aware), before every call; a summary when over the limit or asked
    for. To change one of their numbers, give the strategies yourself (e.g.
    `[LargeOutputs(), MicroCompact(keep_recent=5), Summarise()]`)."""
    return [LargeOutputs(), MicroCompact(), Summarise()]
