"""The rows of one measure: each fact, how each setting kept it (per fact and per call), what
the totals need of it, whether it was ever sent, and the probes' answers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from evo_magic.analysis.retention.conversations import Conversation
from evo_magic.analysis.retention.kept import Follow
from evo_magic.analysis.retention.probes import Prober, context_digest

Follows = Mapping[tuple[str, str], Follow]
"""Each (strategy, session id) followed, in the order replay first called it."""
Row = dict[str, Any]


def measured_rows(
    found: Mapping[str, Conversation], follows: Follows, probes: list[Row]
) -> dict[str, list[Row]]:
    """Every frame's rows (see `measure.FRAMES`) of the conversations `found` followed under
    every setting."""
    each = [(sid, f, i) for (_, sid), f in follows.items() for i in range(len(f.facts))]
    return {
        "facts": [_fact_row(c, i) for c in found.values() for i in range(len(c.facts))],
        "kept": [_kept_row(f, found[sid], i) for sid, f, i in each],
        "calls": _call_rows(follows),
        "probes": probes,
        "spans": [_span_row(f, i) for _, f, i in each],
        "sent": [
            {"text": fact.text, "sent": first is not None}
            for c in found.values()
            for fact, first in zip(c.facts, c.first_ordinals, strict=True)
        ],
    }


def probe_rows(follows: Follows, prober: Prober, replicates: int) -> list[Row]:
    """Every question of every fact that was sent, asked `replicates` times after each
    setting's final context."""
    return [
        row
        for (strategy, session_id), follow in follows.items()
        if follow.final is not None
        for row in _asked(strategy, session_id, follow, prober, replicates)
    ]


def _asked(
    strategy: str, session_id: str, follow: Follow, prober: Prober, replicates: int
) -> Iterator[Row]:
    final = follow.final or []
    digest = context_digest(final)
    for fact, first in zip(follow.facts, follow.first_ordinals, strict=True):
        if fact.question is None or fact.answer is None or first is None:
            continue  # no question, or never sent
        for replicate in range(replicates):
            asked = prober.ask(final, digest, fact.question, fact.answer, replicate)
            yield {
                "strategy": strategy,
                "session_id": session_id,
                "fact_id": fact.fact_id,
                "kind": fact.kind,
                "replicate": replicate,
                "question": fact.question,
                "answer": fact.answer,
                "reply": asked.reply,
                "correct": asked.correct,
                "cost_usd": asked.cost_usd,
            }


def _fact_row(c: Conversation, index: int) -> Row:
    fact = c.facts[index]
    return {
        "session_id": fact.session_id,
        "fact_id": fact.fact_id,
        "kind": fact.kind,
        "text": fact.text,
        "origin": fact.origin,
        "first_call": c.first_call(index),
        "question": fact.question,
        "answer": fact.answer,
    }


def _kept_row(f: Follow, c: Conversation, index: int) -> Row:
    fact, state = f.facts[index], f.states[index]
    span = f.span(index)
    return {
        "strategy": f.strategy,
        "session_id": fact.session_id,
        "fact_id": fact.fact_id,
        "kind": fact.kind,
        "first_call": c.first_call(index),
        "last_kept_call": state.last_kept_call,
        "kept_at_end": f.kept_at_end(index) if span else False,
        "lost_at_call": state.lost_at_call,
        "lost_by": state.lost_by,
        "recoverable": state.recoverable,
        "kept_share": state.kept_calls / span if span else None,
    }


def _span_row(f: Follow, index: int) -> Row:
    """What the totals need of one fact under one setting."""
    span = f.span(index)
    return {
        "strategy": f.strategy,
        "session_id": f.facts[index].session_id,
        "kind": f.facts[index].kind,
        "span": span,
        "kept_calls": f.states[index].kept_calls,
        "kept_at_end": f.kept_at_end(index) if span else False,
    }


def _call_rows(follows: Follows) -> list[Row]:
    return [
        {
            "strategy": f.strategy,
            "session_id": session_id,
            "call": call,
            "facts_seen": seen,
            "facts_kept": kept,
            "kept_share": kept / seen if seen else None,
        }
        for (_, session_id), f in follows.items()
        for call, seen, kept in f.rows
    ]
