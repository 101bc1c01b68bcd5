"""One conversation rewound: at each point, the history rebuilt as the session had it (replay's
`Run` under the recorded settings timeline, fed up to the point), each strategy applied by the
live compactor, what it kept and cost measured, and the probes asked."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evo_magic.analysis.conversation import Message as RecordedMessage
from evo_magic.analysis.intervals import wilson
from evo_magic.analysis.replay import RECORDED, Recording
from evo_magic.analysis.replay.options import ReplaySettings
from evo_magic.analysis.replay.run import Run
from evo_magic.analysis.replay.tally import Tally
from evo_magic.analysis.retention.facts import Fact, tracked
from evo_magic.analysis.retention.kept import Matcher
from evo_magic.analysis.retention.probes import Prober, context_digest
from evo_magic.analysis.rewind.facts import FILE_KINDS, KINDS, PROBES, facts_before, probes_of
from evo_magic.analysis.rewind.points import Point, points_of
from evo_magic.compact.base import Strategy
from evo_magic.compact.compactor import Compactor
from evo_magic.cost import call_cost
from evo_magic.events import CompactionFinished
from evo_magic.history import History
from evo_magic.probe import block_text
from evo_magic.strategies import default_pipeline
from evo_magic.usage import Usage

Chosen = list[Strategy] | str | None


@dataclass(frozen=True)
class Plan:
    """What to rewind and ask: the strategies by label, where, and the probes."""

    strategies: Mapping[str, Chosen]
    at: str | tuple[int, ...] | int
    settings: ReplaySettings
    prober: Prober | None
    replicates: int
    given: Sequence[Fact] | None = None
    """Facts to follow instead of the extracted ones (None: extract them)."""


def rewound(recording: Recording, plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The point rows and probe rows of one conversation, in one pass over its recording: at
    each point every strategy is tried on a fork of the rebuilt history, then the recording
    goes on (under "recorded", what the session did there is that row)."""
    points = points_of(recording, plan.at)
    if not points:
        return [], []
    run = Run(recording, "rewind", RECORDED, plan.settings, None)
    messages = [item for item in recording.items if isinstance(item, RecordedMessage)]
    rows: list[dict[str, Any]] = []
    asked: list[dict[str, Any]] = []
    for point in points:
        run.feed(point.item)
        before = [m for m in recording.items[: point.item] if isinstance(m, RecordedMessage)]
        extracted = facts_before(recording.session_id, before)
        facts = extracted if plan.given is None else seen(recording.session_id, plan.given, before)
        trail = [f for f in extracted if f.kind == "modified"]
        probes = probes_of(facts, before, messages[len(before) :]) if plan.prober else []
        size = run.history.size()
        tried = {
            label: _tried(run, chosen, point)
            for label, chosen in plan.strategies.items()
            if not (chosen == RECORDED and point.compaction)
        }
        if any(chosen == RECORDED for chosen in plan.strategies.values()) and point.compaction:
            tried |= {
                label: _recorded(run, point)
                for label, c in plan.strategies.items()
                if c == RECORDED
            }
        for label in plan.strategies:
            history, tally = tried[label]
            row = _row(recording, point, label, run, size, history, tally, facts)
            row.update(artifact_trail(trail, history.view()))
            if plan.prober is not None:
                answers = _ask(plan, history, probes)
                asked += [{**_where(recording, point, label), **a} for a in answers]
                row.update(_accuracy(answers))
            rows.append(row)
    return rows, asked


def _tried(run: Run, chosen: Chosen, point: Point) -> tuple[History, Tally]:
    """`chosen` applied by the live compactor to a fork of the run's history at the point:
    each strategy run as on request (an every-call one as before a call); "recorded" before a
    call, the strategies in force as before that call."""
    tally = Tally(run.pricing.summary_cost)
    history = run.history.fork(tally.observe)
    services = replace(run.compactor.services, emit=tally.observe)
    cache = copy.deepcopy(run.compactor.cache)  # cache-aware strategies see the same prefix
    compactor = Compactor(history, services, policy=run.compactor.policy, cache=cache)
    compactor.state = copy.deepcopy(run.compactor.state)
    if chosen == RECORDED:
        compactor.strategies = run.compactor.strategies
        compactor.before_call()
        return history, tally
    compactor.strategies = default_pipeline() if chosen is None else list(chosen)
    for strategy in compactor.strategies:
        trigger = "every_call" if strategy.when == "every_call" else "user"
        compactor.run(strategy, trigger, None)
    return history, tally


def _recorded(run: Run, point: Point) -> tuple[History, Tally]:
    """What the session did at a recorded compaction: the run goes on through the history that
    replaced the old one (the run's own history and tally, afterwards)."""
    run.tally.row_written()
    run.tally.take_changes()
    end = _replacement_end(run.recording, point.item)
    run.feed(end)
    run.flush()
    tally = Tally(run.pricing.summary_cost)
    tally.summary_cost = run.tally.summary_cost
    tally.changes = list(run.tally.changes)
    return run.history.fork(tally.observe), tally


REPLACEMENT_KINDS = frozenset({"compact_summary", "compact_history"})
"""Kinds of message that make a recorded compaction's replacement (in sources that mark it)."""


def _replacement_end(recording: Recording, compaction: int) -> int:
    """The item after the recorded compaction's replacement history: the messages that opened
    the next epoch (counted by `opening`, or marked as the summary)."""
    items = recording.items
    end = compaction + 1
    while end < len(items):
        item = items[end]
        if not isinstance(item, RecordedMessage):
            break
        opening = recording.opening.get((item.segment, item.epoch))
        if item.kind not in REPLACEMENT_KINDS and (opening is None or item.index >= opening):
            break
        end += 1
    return end


def _row(
    recording: Recording,
    point: Point,
    label: str,
    run: Run,
    before: Any,
    history: History,
    tally: Tally,
    facts: Sequence[Any],
) -> dict[str, Any]:
    after = history.size()
    summary = Usage()
    for change in tally.changes:
        if isinstance(change, CompactionFinished):
            summary = summary + change.summary_usage
    model = run.pricing.model
    next_call = call_cost(Usage(input_tokens=after.tokens), model, run.pricing.prices)
    kept: set[int] = set()
    matcher = Matcher(facts)
    view = history.view()
    for message in view:
        kept |= matcher.in_message(message)
    text = context_text(view)
    kept |= {i for i, f in enumerate(facts) if f.kind in FILE_KINDS and names_file(text, f.text)}
    row: dict[str, Any] = {
        **_where(recording, point, label),
        "compaction": point.compaction,
        "before_tokens": before.tokens,
        "before_chars": before.chars,
        "after_tokens": after.tokens,
        "after_chars": after.chars,
        "summary_input_tokens": summary.input_tokens,
        "summary_output_tokens": summary.output_tokens,
        "compacting_cost_usd": tally.summary_cost,
        "next_call_cost_usd": None if next_call is None else next_call.total,
        "facts": len(facts),
        "kept_share": len(kept) / len(facts) if facts else None,
    }
    for kind in KINDS:
        mine = [i for i, f in enumerate(facts) if f.kind == kind]
        row[f"facts_{kind}"] = len(mine)
        row[f"kept_{kind}"] = sum(i in kept for i in mine) / len(mine) if mine else None
    return row


def artifact_trail(modified: Sequence[Any], view: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The files modified before the point (`modified_files`) and those the compacted history
    still names (`modified_named`), one a line: the session's own, whatever facts are followed."""
    matcher = Matcher(modified)
    named: set[int] = set()
    for message in view:
        named |= matcher.in_message(message)
    text = context_text(view)
    named |= {i for i, f in enumerate(modified) if names_file(text, f.text)}
    return {
        "modified_files": "\n".join(f.text for f in modified),
        "modified_named": "\n".join(f.text for i, f in enumerate(modified) if i in named),
    }


def seen(session_id: str, given: Sequence[Fact], before: Sequence[RecordedMessage]) -> list[Any]:
    """The given facts that the conversation's messages before the point hold (tracked)."""
    facts = tracked(session_id, given)
    matcher = Matcher(facts)
    held: set[int] = set()
    for message in before:
        held |= matcher.in_message({"role": message.role, "content": message.content})
    return [fact for i, fact in enumerate(facts) if i in held]


def context_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every text of `messages` (tool inputs as JSON), one block a line."""
    parts = []
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"text": content}]:
            if block.get("type") == "tool_use":
                parts.append(json.dumps(block.get("input"), ensure_ascii=False))
            else:
                parts.append(block_text(block))
    return "\n".join(parts)


def names_file(text: str, path: str) -> bool:
    """Whether `text` names the file `path`: the path, or its last two parts or more
    (`services/renderer.ex` names `/home/me/app/lib/services/renderer.ex`; a summary rarely
    repeats the whole absolute path), or its name when it has one part only."""
    parts = [p for p in path.split("/") if p]
    shortest = 2 if len(parts) >= 2 else 1
    return any("/".join(parts[-k:]) in text for k in range(shortest, len(parts) + 1))


def _where(recording: Recording, point: Point, label: str) -> dict[str, Any]:
    return {
        "session_id": recording.session_id,
        "agent_id": recording.agent_id,
        "point": point.number,
        "call": point.call,
        "strategy": label,
    }


def _ask(plan: Plan, history: History, probes: Sequence[Any]) -> list[dict[str, Any]]:
    """Every probe asked `replicates` times after the compacted history."""
    assert plan.prober is not None
    context = list(history.view())
    digest = context_digest(context)
    answers = []
    for probe in probes:
        for replicate in range(plan.replicates):
            got = plan.prober.ask(context, digest, probe.question, probe.answer, replicate)
            answers.append(
                {
                    "probe": probe.kind,
                    "question": probe.question,
                    "answer": probe.answer,
                    "replicate": replicate + 1,
                    "reply": got.reply,
                    "correct": got.correct,
                    "cost_usd": got.cost_usd,
                }
            )
    return answers


def _accuracy(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Probe accuracy, overall (with a Wilson interval) and by probe kind."""
    right = sum(bool(a["correct"]) for a in answers)
    low, high = wilson(right, len(answers))
    out: dict[str, Any] = {
        "probes": len(answers),
        "probe_accuracy": right / len(answers) if answers else None,
        "probe_accuracy_low": low if answers else None,
        "probe_accuracy_high": high if answers else None,
    }
    for kind in PROBES:
        mine = [bool(a["correct"]) for a in answers if a["probe"] == kind]
        out[f"probe_{kind}_accuracy"] = sum(mine) / len(mine) if mine else None
    return out
