"""The context meter as the widget's synced state: the numbers of one `MeterData` as plain JSON
values, what a front end (or a test) reads from the live widget's model.
"""

from __future__ import annotations

import json
from typing import Any

from evo_magic.events import ContextSize
from evo_magic.measure import to_json
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import CallPoint, Compaction


def state_of(data: MeterData) -> dict[str, Any]:
    """The widget's synced state: plain JSON values of the scope's numbers."""
    return {
        "scope": data.scope.label,
        "before": _size_state(data.scope.before) if data.scope.before else None,
        "messages": data.current.messages,
        "chars": data.current.chars,
        "tokens": data.current.tokens,
        "context_limit": data.context_limit,
        "token_limit": data.token_limit,
        "model_calls": len(data.own_calls),
        "sizes": [point.sent.chars for point in data.own_calls],
        "calls": [_call_state(point) for point in data.own_calls],
        "compactions": [_compaction_state(row) for row in data.own_compactions],
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
