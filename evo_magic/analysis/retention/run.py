"""`retention`: what each compaction strategy keeps and loses of a recorded session, measured
in the same replay pass that prices it, then (with a reader) probed one question at a time."""

from __future__ import annotations

import functools
import pickle
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.conversation import Call, Message
from evo_magic.analysis.replay import Recording, ReplayedCall, StrategySpec, recordings, replay
from evo_magic.analysis.replay.results import totals as replay_totals
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
    SENT_COLUMNS,
    SPAN_COLUMNS,
    TOTAL_COLUMNS,
    Retention,
    frame,
)
from evo_magic.cost import price_table
from evo_magic.models import resolve_model
from evo_magic.models.base import Model

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.lake_transcripts import LakeTranscripts
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
    *,
    engine: str | None = None,
    workers: int | None = None,
    client: Any = None,
    out: str | Path | None = None,
    progress: bool = True,
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

    Many sessions: `engine`, `workers`, `client`, `out` and `progress` are replay's (see
    `replay`): the sessions are measured one by one on the engine, each result kept under
    `out` as it finishes, with the same numbers as without an engine; a session that fails is a
    row of `failures`. Probes run on the workers, so a `reader` or `judge` object must pickle
    (a model name does; an object that does not is refused before the sweep starts). A lake is
    measured session by session, in this process without an engine.
    """
    from evo_magic.analysis.lake_transcripts import LakeTranscripts

    if replicates < 1:
        raise ValueError("replicates must be at least 1")
    if "on_call" in replay_options:
        raise TypeError("retention observes the replay itself: on_call is not an option")
    t = _transcripts(source)
    spec = Measure(
        strategies=dict(strategies),
        given=None if facts is None else [as_fact(f) for f in facts],
        reader=None if reader is None else resolve_model(reader),
        judge=None if judge is None else resolve_model(judge),
        replicates=replicates,
        options=replay_options,
    )
    failures = None
    if engine is not None or out is not None or isinstance(t, LakeTranscripts):
        if engine is None:  # a lake without an engine: one session at a time, here
            engine, workers = "local", 1
        frames, failures = _measure_sweep(t, spec, engine, workers, client, out, progress)
    else:
        frames = _measure(t, spec)
    if spec.given is not None:
        _warn_unseen(_records(frames["sent"]))
    return _assembled(frames, spec, failures)


@dataclass(frozen=True)
class Measure:
    """What `retention` measures: the same for every session of a sweep (it is sent to the
    workers, so it pickles when its models do)."""

    strategies: dict[str, StrategySpec]
    given: list[Fact] | None
    reader: Model | None
    judge: Model | None
    replicates: int
    options: dict[str, Any]


FRAMES = {
    "facts": FACT_COLUMNS,
    "kept": KEPT_COLUMNS,
    "calls": CALL_COLUMNS,
    "probes": PROBE_COLUMNS,
    "spans": SPAN_COLUMNS,
    "sent": SENT_COLUMNS,
}
"""The frames one measure gives (with replay's own `replayed` calls): everything the totals
and the warnings are computed from, so a sweep's sessions concatenate into one measure."""


def _measure(t: Transcripts, spec: Measure) -> dict[str, pd.DataFrame]:
    """The frames of `spec` measured on `t` in one replay pass (then probed, with a reader)."""
    found = {c.session_id: c for c in _conversations(t, spec.given)}
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

    replayed = replay(t, spec.strategies, on_call=observe, **spec.options)
    for follow in follows.values():
        follow.finish()
    probe_rows = []
    if spec.reader is not None:
        cache_dir = spec.options.get("cache_dir")
        prober = Prober(
            spec.reader,
            spec.judge,
            price_table(spec.options.get("prices")),
            Path(cache_dir).expanduser() if cache_dir else default_cache_dir(),
        )
        probe_rows = _probe_rows(follows, prober, spec.replicates)
    fact_rows = [_fact_row(c, i) for c in found.values() for i in range(len(c.facts))]
    kept_rows = [
        _kept_row(f, found[session_id], i)
        for (_, session_id), f in follows.items()
        for i in range(len(f.facts))
    ]
    span_rows = [_span_row(f, i) for f in follows.values() for i in range(len(f.facts))]
    sent_rows = [
        {"text": fact.text, "sent": first is not None}
        for c in found.values()
        for fact, first in zip(c.facts, c.first_ordinals, strict=True)
    ]
    rows = {
        "facts": fact_rows,
        "kept": kept_rows,
        "calls": _call_rows(follows),
        "probes": probe_rows,
        "spans": span_rows,
        "sent": sent_rows,
    }
    frames = {name: frame(rows[name], columns) for name, columns in FRAMES.items()}
    return {**frames, "replayed": replayed.calls}


def _assembled(
    frames: dict[str, pd.DataFrame], spec: Measure, failures: pd.DataFrame | None
) -> Retention:
    """The Retention of measured frames (of one pass, or of a sweep's sessions concatenated):
    the totals computed from them, the cost of each setting from replay's own totals."""
    order = list(spec.strategies)
    replayed = replay_totals(frames["replayed"], order)
    costs = dict(zip(replayed["strategy"], replayed["cost_usd"], strict=True))
    rows = _totals(
        order,
        _records(frames["spans"]),
        _records(frames["probes"]),
        costs,
        spec.replicates,
        spec.reader is not None,
    )
    return Retention(
        facts=frames["facts"],
        kept=frames["kept"],
        calls=frames["calls"],
        totals=frame(rows, TOTAL_COLUMNS),
        probes=frames["probes"],
        reader=None if spec.reader is None else spec.reader.name,
        judge=None if spec.judge is None else spec.judge.name,
        temperature=getattr(spec.reader, "temperature", None),
        failures=failures,
    )


def _measure_sweep(
    t: Transcripts | LakeTranscripts,
    spec: Measure,
    engine: str,
    workers: int | None,
    client: Any,
    out: str | Path | None,
    progress: bool,
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """`_measure` session by session on an engine (replay's sweep, with retention's work):
    each session's frames concatenated in session order, and the sessions that failed."""
    import pandas as pd

    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.replay import CALL_COLUMNS as REPLAY_COLUMNS
    from evo_magic.analysis.replay import stand_in_summary_tokens, sweep_settings
    from evo_magic.analysis.sweep import Unit, run_sweep

    if engine == "dask" or workers != 1:
        for role, model in (("reader", spec.reader), ("judge", spec.judge)):
            _check_picklable(role, model)
    # The stand-in summary size is the median over the whole source, as without an engine.
    tokens = spec.options.get("summary_tokens") or stand_in_summary_tokens(t)
    spec = replace(spec, options={**spec.options, "summary_tokens": tokens})
    if isinstance(t, LakeTranscripts):  # the worker reads its session from the lake
        units = [Unit(sid, (str(t.lake), sid)) for sid in t.session_ids()]
    else:
        units = [Unit(sid, t.session(sid)) for sid in t.session_ids()]
    described = {
        **spec.options,
        "retention": {
            "facts": None if spec.given is None else [repr(f) for f in spec.given],
            "reader": None if spec.reader is None else spec.reader.name,
            "judge": None if spec.judge is None else spec.judge.name,
            "replicates": spec.replicates,
        },
    }
    swept = run_sweep(
        units,
        functools.partial(_measure_session, spec=spec),
        engine=engine,
        workers=workers,
        client=client,
        out=out,
        settings=sweep_settings(spec.strategies, described),
        progress=progress,
    )
    frames = {
        name: frame(_records(swept.frames[name]), columns)
        if name in swept.frames
        else frame([], columns)
        for name, columns in FRAMES.items()
    }
    replayed = swept.frames.get("replayed", pd.DataFrame(columns=REPLAY_COLUMNS))
    return {**frames, "replayed": replayed}, swept.failures


def _measure_session(
    payload: Transcripts | tuple[str, str], *, spec: Measure
) -> dict[str, pd.DataFrame]:
    """One session's measure: the unit of work of a sweep (a session's Transcripts, or a
    lake's folder and the session's id)."""
    if isinstance(payload, tuple):
        from evo_magic.analysis.lake_transcripts import LakeTranscripts
        from evo_magic.analysis.transcripts import Transcripts

        payload = LakeTranscripts(payload[0], Transcripts).session(payload[1])
    return _measure(payload, spec)


def _check_picklable(role: str, model: Model | None) -> None:
    """A model object sent to the workers must pickle: say which one does not, and why."""
    if model is None:
        return
    try:
        pickle.dumps(model)
    except Exception as exc:
        raise ValueError(
            f"the {role} {model.name!r} cannot be sent to the sweep's workers "
            f"({type(exc).__name__}: {exc}); give a model name, or a model that pickles "
            f"(e.g. a FunctionModel of a module-level function), or run without an engine"
        ) from exc


def _records(data: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of `data` as dicts, a missing value as None (however the frame spells it)."""
    plain = data.astype(object)
    return plain.where(plain.notna(), None).to_dict("records")


def _span_row(f: Follow, index: int) -> dict[str, Any]:
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


def _warn_unseen(sent: Sequence[Mapping[str, Any]]) -> None:
    """Say which given facts no conversation ever sent (a typo, or another session's fact)."""
    unseen = {row["text"] for row in sent if not row["sent"]}
    missing = sorted(unseen - {row["text"] for row in sent if row["sent"]})
    if missing:
        shown = ", ".join(repr(text[:60]) for text in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        warnings.warn(
            f"{len(missing)} given fact(s) appear in no context of the session: {shown}{more}",
            stacklevel=3,
        )


def _transcripts(source: Any) -> Transcripts | LakeTranscripts:
    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.analysis.transcripts import Transcripts, load_transcripts

    if isinstance(source, Transcripts | LakeTranscripts):
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
    spans: list[dict[str, Any]],
    probes: list[dict[str, Any]],
    costs: Mapping[str, Any],
    replicates: int,
    probed: bool,
) -> list[dict[str, Any]]:
    """One row per (strategy, kind) present, then the strategy's "all" row, from each fact's
    span under each setting (`spans`) and the probe answers."""
    import pandas as pd

    rows = []
    for strategy in order:
        mine = [row for row in spans if row["strategy"] == strategy]
        answers = [p for p in probes if p["strategy"] == strategy]
        kinds = sorted({row["kind"] for row in mine})
        cost = costs.get(strategy)
        for kind in [*kinds, "all"]:
            chosen = [r for r in mine if (kind == "all" or r["kind"] == kind) and r["span"]]
            spanned = sum(r["span"] for r in chosen)
            kept = sum(r["kept_calls"] for r in chosen)
            at_end = sum(bool(r["kept_at_end"]) for r in chosen)
            orders = [r for r in chosen if r["kind"] == "instruction"]
            graded = [p for p in answers if kind == "all" or p["kind"] == kind]
            right = sum(bool(p["correct"]) for p in graded)
            low, high = wilson(right, len(graded))
            prices = [p["cost_usd"] for p in graded]
            rows.append(
                {
                    "strategy": strategy,
                    "kind": kind,
                    "facts": len(chosen),
                    "kept_share": kept / spanned if spanned else None,
                    "kept_at_end_share": at_end / len(chosen) if chosen else None,
                    "verbatim_share": (
                        sum(bool(r["kept_at_end"]) for r in orders) / len(orders)
                        if orders
                        else None
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
