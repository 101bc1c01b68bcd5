"""Compaction strategies: the seed's three layers and the field's other strategies, built in.

    from evo_magic.strategies import LargeOutputs, MicroCompact, Summarise
    Session(ws, strategies=[LargeOutputs(), MicroCompact(keep_recent=3), Summarise()])

| name | class | when | source |
| --- | --- | --- | --- |
| `large-outputs` | `LargeOutputs` | every_call | evo-agent's layer 0 |
| `micro` | `MicroCompact` | every_call | evo-agent's layer 1 |
| `summarise` | `Summarise` | over_limit | evo-agent's layer 2 (and 3, on request) |
| `clear-tool-uses` | `ClearToolUses` | every_call | API `clear_tool_uses_20250919` |
| `observation-masking` | `ObservationMasking` | every_call | "The Complexity Trap" (2508.21433) |
| `sliding-window` | `SlidingWindow` | over_limit | evo-agent article, section 3.1 |
| `summarise-older` | `SummariseOlder` | over_limit | LangChain SummarizationMiddleware |
| `token-budget` | `TokenBudget` | every_call | Codex's TokenBudget (a note, not a compaction) |
| `server-compact` | `ServerCompact` | every_call | the API's `compact_20260112` |
| `server-clear-tool-uses` | `ServerClearToolUses` | every_call | API `clear_tool_uses_20250919` |
| `server-clear-thinking` | `ServerClearThinking` | every_call | API `clear_thinking_20251015` |
| `server-summarise` | `ServerSummarise` | on_request | the API's `compaction` parameter |

The `server-*` strategies edit no history: the API does the work (see `strategies.server`).

`default_pipeline(policy)` is the seed's pipeline with the policy's numbers; `registry` finds
strategies by name, by dotted path, or from other packages' `evo_magic.strategies` entry points.
"""

from __future__ import annotations

from evo_magic.compact.base import Context, Edited, Strategy
from evo_magic.compact.policy import CompactPolicy
from evo_magic.strategies.budget import TokenBudget
from evo_magic.strategies.clear_tool_uses import ClearToolUses
from evo_magic.strategies.large_outputs import LargeOutputs
from evo_magic.strategies.masking import ObservationMasking
from evo_magic.strategies.micro import MicroCompact
from evo_magic.strategies.older import SummariseOlder
from evo_magic.strategies.server import (
    ServerClearThinking,
    ServerClearToolUses,
    ServerCompact,
    ServerSummarise,
)
from evo_magic.strategies.summarise import Summarise
from evo_magic.strategies.window import SlidingWindow

__all__ = [
    "BUILTIN",
    "ClearToolUses",
    "Context",
    "Edited",
    "LargeOutputs",
    "MicroCompact",
    "ObservationMasking",
    "ServerClearThinking",
    "ServerClearToolUses",
    "ServerCompact",
    "ServerSummarise",
    "SlidingWindow",
    "Strategy",
    "Summarise",
    "SummariseOlder",
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
    )
}
"""The built-in strategies by name."""


def default_pipeline(policy: CompactPolicy | None = None) -> list[Strategy]:
    """The seed's three layers with the policy's numbers: large outputs to files, then
    micro-compaction (cache-aware unless `policy.cache_aware` is False), before every call; a
    summary when over the limit or asked for."""
    policy = policy or CompactPolicy()
    return [
        LargeOutputs(limit=policy.large_output_limit, preview_chars=policy.preview_chars),
        MicroCompact(
            keep_recent=policy.keep_recent,
            min_chars=policy.min_chars,
            placeholder=policy.placeholder,
            exclude_tools=policy.exclude_tools,
            clear_at_least=policy.clear_at_least,
            cache_aware=policy.cache_aware,
        ),
        Summarise(),
    ]
