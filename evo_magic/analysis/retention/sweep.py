"""`retention`: what each compaction strategy keeps and loses of a recorded session, measured
in the same replay pass that prices it, then (with a reader) probed one question at a time."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.conversation import Call, Message
from evo_magic.analysis.replay import Recording, ReplayedCall, StrategySpec, recordings, replay
from evo_magic.analysis.retention.facts import Fact, Tracked, as_fact, extract, tracked
from evo_magic.analysis.retention.kept import Follow, Matcher
from evo_magic.analysis.retention.probes import (
    Prober,
    context_digest,
    default_cache_dir,
    wilson,
)
from evo_magic.analysis.retention.results import (
    CALL_COLUMNS,
    FACT_COLUMNS,
    KEPT_COLUMNS,
    PROBE_COLUMNS,
    TOTAL_COLUMNS,
    Retention,
    frame,
)
from evo_magic.cost import price_table
from evo_magic.models import resolve_model
from evo_magic.models.base import Model

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts


@dataclass
class Conversation:
    """A main conversation's facts, the call (ordinal) where each was first sent, and the
    numbers of its calls in order."""

    session_id: str
    facts: list[Tracked]
    first_ordinals: list[int | None]
    calls: list[int | None]
    matcher: Matcher

    def first_call(self, index: int) -> int | None:
        ordinal = self.first_ordinals[index]
        return None if ordinal is None else self.calls[ordinal]


def retention(
    source: Any,
    strategies: Mapping[str, StrategySpec],
    facts: Sequence[Fact | str] | None = None,
    reader: Model | str | None = None,
    replicates: int = 1,
    judge: Model | str | None = None,
    **replay_options: Any,
) -> Retention:
    """What each strategy setting keeps of the facts of `source`'s main conversations.

    `source` and `strategies` are what `replay` takes (a Session too); the other keyword
    arguments go to `replay` (`model`, `policy`, `prices`, `cache`, `cache_dir`, ...), whose
    pass measures what is kept: `totals.cost_usd` is replay's cost of each setting. `facts`:
    None extracts them (instructions, paths, errors, identifiers; see
    `evo_magic.analysis.retention.facts`), else the given texts or `Fact`s, followed in every
    main conversation. With a `reader` (a Model or a model name), every fact with a question
    (given, or a cloze) is asked `replicates` times after each setting's final context, one
    question a request, graded by containment or by `judge`. Subagents are not followed.
    """
    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    if "on_call" in replay_options:
        raise TypeError("retention observes the replay itself: on_call is not an option")
    t = _transcripts(source)
    given = None if facts is None else [as_fact(f) for f in facts]
    found = {c.session_id: c for c in _conversations(t, given)}
    follows: dict[tuple[str, str], Follow] = {}

    def observe(replayed: ReplayedCall) -> None:
        if replayed.agent_id is not None or replayed.session_id not in found:
            return
        key = (replayed.strategy, replayed.session_id)
        follow = follows.get(key)
        if follow is None:
            c = found[replayed.session_id]
            last = c.calls[-1] if c.calls else None
            follow = Follow(replayed.strategy, c.facts, c.first_ordinals, c.matcher, last)
            follows[key] = follow
        follow(replayed)

    if given is not None:
        _warn_unseen(list(found.values()))
    replayed = replay(t, strategies, on_call=observe, **replay_options)
    for follow in follows.values():
        follow.finish()
    reader_model = None if reader is None else resolve_model(reader)
    judge_model = None if judge is None else resolve_model(judge)
    probe_rows = []
    if reader_model is not None:
        cache_dir = replay_options.get("cache_dir")
        prober = Prober(
            reader_model,
            judge_model,
            price_table(replay_options.get("prices")),
            Path(cache_dir).expanduser() if cache_dir else default_cache_dir(),
        )
        probe_rows = _probe_rows(follows, prober, replicates)
    costs = dict(zip(replayed.totals["strategy"], replayed.totals["cost_usd"], strict=True))
    fact_rows = [_fact_row(c, i) for c in found.values() for i in range(len(c.facts))]
    kept_rows = [
        _kept_row(f, found[session_id], i)
        for (_, session_id), f in follows.items()
        for i in range(len(f.facts))
    ]
    totals = _totals(list(strategies), follows, probe_rows, costs, replicates, reader is not None)
    return Retention(
        facts=frame(fact_rows, FACT_COLUMNS),
        kept=frame(kept_rows, KEPT_COLUMNS),
        calls=frame(_call_rows(follows), CALL_COLUMNS),
        totals=frame(totals, TOTAL_COLUMNS),
        probes=frame(probe_rows, PROBE_COLUMNS),
        reader=None if reader_model is None else reader_model.name,
        judge=None if judge_model is None else judge_model.name,
        temperature=getattr(reader_model, "temperature", None),
    )


def _call_rows(follows: Mapping[tuple[str, str], Follow]) -> list[dict[str, Any]]:
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


def _warn_unseen(found: Sequence[Conversation]) -> None:
    """Say which given facts no conversation ever sent (a typo, or another session's fact)."""
    unseen = {
        fact.text
        for c in found
        for fact, first in zip(c.facts, c.first_ordinals, strict=True)
        if first is None
    }
    sent = {
        fact.text
        for c in found
        for fact, first in zip(c.facts, c.first_ordinals, strict=True)
        if first is not None
    }
    missing = sorted(unseen - sent)
    if missing:
        shown = ", ".join(repr(text[:60]) for text in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        warnings.warn(
            f"{len(missing)} given fact(s) appear in no context of the session: {shown}{more}",
            stacklevel=3,
        )


def _transcripts(source: Any) -> Transcripts:
    from evo_magic.analysis.transcripts import Transcripts, load_transcripts

    if isinstance(source, Transcripts):
        return source
    directory = getattr(source, "directory", None)  # a Session: its own transcript
    if directory is not None and hasattr(source, "transcript"):
        return load_transcripts(Path(directory))
    return load_transcripts(Path(source).expanduser())


def _conversations(t: Transcripts, given: list[Fact] | None) -> Iterator[Conversation]:
    for recording in recordings(t):
        if recording.agent_id is not None:
            continue
        messages = list(_sent_messages(recording))
        if given is None:
            facts = extract(recording.session_id, ((m.role, m.kind, m.content) for m in messages))
        else:
            facts = tracked(recording.session_id, given)
        matcher = Matcher(facts)
        firsts: list[int | None] = [None] * len(facts)
        sent = {id(m) for m in messages}
        calls: list[int | None] = []
        started = False
        for item in recording.items:
            if isinstance(item, Message):
                started = True  # replay calls once the history holds a message
                if id(item) not in sent:
                    continue
                for block in item.content:
                    for index in matcher.in_block(block):
                        if firsts[index] is None:
                            firsts[index] = len(calls)  # first sent at the next call
            elif isinstance(item, Call) and started:
                calls.append(item.call)
        # A fact that came after the last call was never sent.
        firsts = [f if f is not None and f < len(calls) else None for f in firsts]
        yield Conversation(recording.session_id, facts, firsts, calls, matcher)


def _sent_messages(recording: Recording) -> Iterator[Message]:
    """The messages as recorded, without the histories that replaced old ones (a replacement
    repeats what came before)."""
    for item in recording.items:
        if not isinstance(item, Message):
            continue
        opening = recording.opening.get((item.segment, item.epoch))
        if item.epoch > 0 and opening is not None and item.index < opening:
            continue
        if item.kind in ("compact_summary", "compact_history"):
            continue
        yield item


def _fact_row(c: Conversation, index: int) -> dict[str, Any]:
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


def _kept_row(f: Follow, c: Conversation, index: int) -> dict[str, Any]:
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


def _probe_rows(
    follows: Mapping[tuple[str, str], Follow], prober: Prober, replicates: int
) -> list[dict[str, Any]]:
    rows = []
    for (strategy, session_id), follow in follows.items():
        if follow.final is None:
            continue
        digest = context_digest(follow.final)
        for fact, first in zip(follow.facts, follow.first_ordinals, strict=True):
            if fact.question is None or fact.answer is None or first is None:
                continue  # no question, or never sent
            for replicate in range(replicates):
                asked = prober.ask(follow.final, digest, fact.question, fact.answer, replicate)
                rows.append(
                    {
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
                )
    return rows


def _totals(
    order: list[str],
    follows: Mapping[tuple[str, str], Follow],
    probes: list[dict[str, Any]],
    costs: Mapping[str, Any],
    replicates: int,
    probed: bool,
) -> list[dict[str, Any]]:
    """One row per (strategy, kind) present, then the strategy's "all" row."""
    import pandas as pd

    rows = []
    for strategy in order:
        mine = [f for (s, _), f in follows.items() if s == strategy]
        answers = [p for p in probes if p["strategy"] == strategy]
        kinds = sorted({fact.kind for f in mine for fact in f.facts})
        cost = costs.get(strategy)
        for kind in [*kinds, "all"]:
            chosen = [
                (f, i)
                for f in mine
                for i, fact in enumerate(f.facts)
                if (kind == "all" or fact.kind == kind) and f.span(i)
            ]
            spans = sum(f.span(i) for f, i in chosen)
            kept = sum(f.states[i].kept_calls for f, i in chosen)
            at_end = sum(f.kept_at_end(i) for f, i in chosen)
            orders = [(f, i) for f, i in chosen if f.facts[i].kind == "instruction"]
            graded = [p for p in answers if kind == "all" or p["kind"] == kind]
            right = sum(bool(p["correct"]) for p in graded)
            low, high = wilson(right, len(graded))
            prices = [p["cost_usd"] for p in graded]
            rows.append(
                {
                    "strategy": strategy,
                    "kind": kind,
                    "facts": len(chosen),
                    "kept_share": kept / spans if spans else None,
                    "kept_at_end_share": at_end / len(chosen) if chosen else None,
                    "verbatim_share": (
                        sum(f.kept_at_end(i) for f, i in orders) / len(orders) if orders else None
                    ),
                    "probes": len(graded) // replicates if probed else 0,
                    "probe_accuracy": right / len(graded) if graded else None,
                    "probe_ci_low": low if graded else None,
                    "probe_ci_high": high if graded else None,
                    "replicates": replicates if probed else None,
                    "cost_usd": None if cost is None or pd.isna(cost) else float(cost),
                    "probe_cost_usd": (
                        None if any(c is None for c in prices) else float(sum(prices))
                    )
                    if probed
                    else None,
                }
            )
    return rows
