"""The context meter as the widget's synced state: the numbers of one `MeterData` as plain JSON
values, what a front end (or a test) reads from the live widget's model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evo_magic.events import ContextSize
from evo_magic.measure import to_json
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import CallPoint, Compaction


@dataclass
class StateCache:
    """The states of the calls and compactions a live meter already showed: a log only grows,
    and its rows never change, so a refresh builds the states of the new rows only."""

    first: tuple[int, int] = (-1, -1)
    """The scope's first call and compaction the states below start at."""
    sizes: list[int] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    built: int = 0
    """States built so far (what a refresh costs, for tests)."""
    restarts: int = 0
    """Times the states were built again from the first row (a new scope, or rows rewritten):
    a live view that only appended rows since must take the whole lists again."""

    def states(self, data: MeterData) -> tuple[list[int], list[dict[str, Any]], list[dict]]:
        """The sizes sent and the states of `data`'s own calls, and the states of its own
        compactions: this cache's own lists, which later refreshes extend in place (copy one
        to keep it as it is); the rows a refresh before this one built are reused, and
        nothing else is read (no pass over, or copy of, the earlier rows)."""
        first = (data.scope.first_call, data.scope.first_compaction)
        calls, rows = len(data.calls) - first[0], len(data.compactions) - first[1]
        if first != self.first or calls < len(self.calls) or rows < len(self.compactions):
            self.first, self.sizes, self.calls, self.compactions = first, [], [], []
            self.restarts += 1
        self.built += calls - len(self.calls) + rows - len(self.compactions)
        new_calls = data.calls[first[0] + len(self.calls) :]
        self.sizes += [point.sent.chars for point in new_calls]
        self.calls += [_call_state(point) for point in new_calls]
        new_rows = data.compactions[first[1] + len(self.compactions) :]
        self.compactions += [_compaction_state(row) for row in new_rows]
        return self.sizes, self.calls, self.compactions


def state_of(data: MeterData, cache: StateCache | None = None) -> dict[str, Any]:
    """The widget's synced state: plain JSON values of the scope's numbers (`cache`: the
    states a live meter built at its earlier refreshes, extended with the new rows; the lists
    `sizes`, `calls` and `compactions` are then the cache's own, see `StateCache.states`)."""
    sizes, calls, compactions = (cache or StateCache()).states(data)
    return {
        "scope": data.scope.label,
        "before": _size_state(data.scope.before) if data.scope.before else None,
        "messages": data.current.messages,
        "chars": data.current.chars,
        "tokens": data.current.tokens,
        "context_limit": data.context_limit,
        "token_limit": data.token_limit,
        "model_calls": len(sizes),
        "sizes": sizes,
        "calls": calls,
        "compactions": compactions,
        "composition": [{"kind": s.kind, "chars": s.chars, "tokens": s.tokens} for s in data.holds],
        "cost_usd": data.cost_usd,
    }


def _size_state(size: ContextSize) -> dict[str, Any]:
    return {
        "messages": size.messages,
        "chars": size.chars,
        "tokens": size.tokens,
        "tokens_exact": size.tokens_exact,
    }


def _call_state(point: CallPoint) -> dict[str, Any]:
    return {
        "call": point.call,
        "turn": point.turn,
        "before_chars": point.before.chars,
        "sent_chars": point.sent.chars,
        "tokens": point.tokens,
        "tokens_exact": point.api_tokens is not None,
        "cost_usd": point.cost_usd,
    }


def _compaction_state(row: Compaction) -> dict[str, Any]:
    state = {
        "label": row.label,
        "micro": row.micro,
        "strategy": row.strategy,
        "layer": row.layer,
        "trigger": row.trigger,
        "focus": row.focus,
        "success": row.success,
        "error": row.error,
        "after_call": row.after_call,
        "turn": row.turn,
        "cost_usd": row.cost_usd,
        "summary_chars": len(row.summary),
    }
    for name, size in (("before", row.before), ("after", row.after)):
        state.update({f"{name}_{key}": value for key, value in _size_state(size).items()})
    return json.loads(to_json(state))  # plain JSON values only (no tuples)
