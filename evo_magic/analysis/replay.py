"""Trace-driven replay: a recorded session under any compaction strategy, without a model.

    from evo_magic import replay
    r = replay("~/.claude/projects/my-project/", strategies={
        "recorded": "recorded", "none": [], "default": None,
        "clear-3": [ClearToolUses(keep=3)], "masking-10": [ObservationMasking(10)],
    }, model="claude-sonnet-4-5")
    r.calls, r.totals, r.plot()

Open loop: the recorded user requests, assistant turns and tool results are fed in order, and
before each recorded model call the strategies run exactly as in the live loop (the same
`Compactor`, the same triggers). What would have been sent is measured and priced, with the
prompt cache modelled: a strategy that edits old messages pays the cache writes it causes.
Output tokens are the recorded ones. The agent's actions are held fixed: replay measures
context and cost, not how the agent would have behaved with another context.

`"recorded"` is what the session really did: its own compactions at their places, with the
histories that replaced the old ones (and, for an evo_magic session, its own every-call
strategies, which are deterministic). `[]` never compacts; `None` is evo_magic's default
pipeline; a list is those strategies (objects or specs such as `"micro(keep_recent=5)"`).

Tokens are the whole prompt (system, tools and messages), calibrated per conversation on the
recorded usage: a call whose replayed request is the recorded one gets the recorded count; any
other gets the recorded count plus the change in characters at the conversation's own tokens
per character (a least-squares fit of recorded tokens on rebuilt characters).

Summaries: where a strategy summarises exactly what the recorded session summarised, the
recorded summary is used; otherwise a stand-in of `summary_tokens` (default: the median size of
the recorded summaries, else 2,000 tokens), or, with `summariser=`, a real summary cached on
disk by its input's hash so that a sweep never pays twice. Each summary is priced as a call
of its own (recorded compactions too): a real one at its usage, the others at the text
request they stand for (`summary_cost_usd`; the totals' `cost_usd` includes it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import statistics
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.conversation import Call, Compaction, Message, conversation, conversations
from evo_magic.compact.base import Strategy
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.pins import Pin, is_pin_text
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import PriceTable, call_cost, price_table
from evo_magic.events import CompactionFinished, Event, MicroCompacted
from evo_magic.history import History
from evo_magic.measure import TokenRate, to_json
from evo_magic.models.base import Model
from evo_magic.prompt_cache import (
    LOOKBACK_BLOCKS,
    Breakpoint,
    CacheRequest,
    CacheSettings,
    PrefixCache,
    PrefixTracker,
    min_cacheable_tokens,
)
from evo_magic.strategies import MicroCompact, default_pipeline
from evo_magic.strategies.registry import make_strategy
from evo_magic.summariser import IN_CONTEXT_NOTE, SUMMARY_INSTRUCTIONS, Summariser, Summary
from evo_magic.usage import Usage

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.transcripts import Transcripts

RECORDED = "recorded"
DEFAULT_SUMMARY_TOKENS = 2_000
CHARS_PER_TOKEN = 4.0
STAND_IN = "[replay stand-in summary, {tokens:,} tokens] "

StrategySpec = str | Sequence[Strategy | str] | None


# -- what a recorded conversation gives replay ---------------------------------------------------


@dataclass
class Recording:
    """One recorded conversation (a session, or one of its subagents) as replay reads it."""

    session_id: str
    agent_id: str | None
    source: str
    items: list[Message | Call | Compaction]
    calls: dict[int, dict[str, Any]]
    """Per recorded call number: `timestamp` (seconds), `tokens` (input + cache), `model`,
    `output_tokens`, `chars` (what it sent, when recorded)."""
    opening: dict[tuple[int, int], int]
    """(segment, epoch) -> how many of its first messages are the replacement history."""
    summaries: dict[str, str] = field(default_factory=dict)
    """Recorded summaries by the hash of what they summarised."""
    requests: dict[tuple[int, int], str | None] = field(default_factory=dict)
    """Compactions the user asked for (`%compact`, `/compact`): (segment, epoch they ended) ->
    the focus. Replay asks every strategy setting for them at the same place."""
    strategies: list[Strategy] | None = None
    """The strategies an evo_magic session ran with (None for other sources)."""
    policy: CompactPolicy | None = None
    pins: list[tuple[tuple[int, int, int], Pin | int]] = field(default_factory=list)
    """An evo_magic session's pin records, in order: (segment, epoch, index of the message
    they came before) -> the pin as it was set, or the id of a pin removed."""


def recordings(t: Transcripts) -> list[Recording]:
    """Every conversation of `t` (subagents as their own), ready for replay."""
    out = []
    for session_id, agent_id in conversations(t):
        items = list(conversation(t, session_id, agent_id))
        if any(isinstance(item, Call) for item in items):
            out.append(_recording(t, session_id, agent_id, items))
    return out


def _recording(
    t: Transcripts, session_id: str, agent_id: str | None, items: list[Message | Call | Compaction]
) -> Recording:
    import pandas as pd

    def mine(frame: pd.DataFrame) -> pd.DataFrame:
        agents = frame["agent_id"].astype(object)
        same = agents.isna() if agent_id is None else agents == agent_id
        return frame[(frame["session_id"].astype(object) == session_id) & same]

    calls = {}
    for row in mine(t.calls).itertuples():
        if pd.isna(row.call) or bool(row.abandoned):
            continue
        tokens = sum(
            int(getattr(row, name) or 0) if not pd.isna(getattr(row, name)) else 0
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        chars = row.context_sent_chars
        calls[int(row.call)] = {
            "timestamp": row.timestamp.timestamp() if not pd.isna(row.timestamp) else None,
            "tokens": tokens or None,
            "model": None if pd.isna(row.model) else str(row.model),
            "output_tokens": 0 if pd.isna(row.output_tokens) else int(row.output_tokens),
            "chars": None if pd.isna(chars) else int(chars),
        }
    compactions = mine(t.compactions)
    opening = {}
    for row in compactions.itertuples():
        if bool(row.success) and not pd.isna(row.after_messages):
            opening[(int(row.segment), int(row.epoch) + 1)] = int(row.after_messages)
    source = str(mine(t.blocks)["source"].iloc[0]) if len(mine(t.blocks)) else "unknown"
    recording = Recording(session_id, agent_id, source, items, calls, opening)
    for row in compactions.itertuples():
        if bool(row.success) and str(row.trigger) in ("user", "manual"):
            focus = None if pd.isna(row.focus) else str(row.focus)
            recording.requests[(int(row.segment), int(row.epoch))] = focus
    recording.summaries = _recorded_summaries(recording, compactions)
    if source == "evo_magic":
        recording.strategies, recording.policy = _session_settings(t, session_id)
        recording.pins = _pin_records(t, session_id)
    return recording


def _pin_records(t: Transcripts, session_id: str) -> list[tuple[tuple[int, int, int], Pin | int]]:
    """The pin and unpin records of an evo_magic session, checked (a record that is not one
    is skipped: a transcript is data)."""
    import pandas as pd

    rows = t.events[
        (t.events["session_id"].astype(object) == session_id)
        & t.events["kind"].astype(object).isin(["pin", "unpin"])
    ]
    found: list[tuple[tuple[int, int, int], Pin | int]] = []
    for row in rows.itertuples():
        try:
            with open(str(row.file), encoding="utf-8") as lines:
                record = json.loads(next(itertools.islice(lines, int(row.line) - 1, None)))
        except (OSError, StopIteration, ValueError, TypeError):
            continue
        pin_id, epoch, index = record.get("id"), record.get("epoch"), record.get("index")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (pin_id, epoch, index)):
            continue
        where = (0 if pd.isna(row.segment) else int(row.segment), epoch, index)
        if record.get("kind") == "unpin":
            found.append((where, pin_id))
        elif isinstance(record.get("text"), str) and isinstance(record.get("path"), str | None):
            found.append((where, Pin(pin_id, record["text"], record.get("path"))))
    return found


def _recorded_summaries(recording: Recording, compactions: pd.DataFrame) -> dict[str, str]:
    """The recorded summaries, keyed by the hash of the history each one replaced (what a
    whole-history summariser was given): the snapshot when there is one, else the rebuilt epoch."""
    import pandas as pd

    found = {}
    for row in compactions.itertuples():
        if not bool(row.success) or pd.isna(row.summary) or not row.summary:
            continue
        messages = None
        if not pd.isna(row.snapshot_path) and Path(row.snapshot_path).is_file():
            lines = Path(row.snapshot_path).read_text(encoding="utf-8").splitlines()
            messages = [json.loads(line) for line in lines if line.strip()]
        else:
            messages = _epoch_messages(recording, int(row.segment), int(row.epoch))
        if messages:
            found[_digest(messages)] = str(row.summary)
    return found


def _epoch_messages(recording: Recording, segment: int, epoch: int) -> list[dict[str, Any]]:
    return [
        item.as_api()
        for item in recording.items
        if isinstance(item, Message) and item.segment == segment and item.epoch == epoch
    ]


def _session_settings(
    t: Transcripts, session_id: str
) -> tuple[list[Strategy] | None, CompactPolicy | None]:
    """The strategies and policy an evo_magic session started with (from its first record)."""
    starts = t.events[
        (t.events["session_id"].astype(object) == session_id)
        & (t.events["kind"] == "session_start")
    ]
    if not len(starts):
        return None, None
    row = starts.iloc[0]
    try:  # that one line, not the whole session file
        with open(row["file"], encoding="utf-8") as lines:
            record = json.loads(next(itertools.islice(lines, int(row["line"]) - 1, None)))
    except (OSError, StopIteration, ValueError):
        return None, None
    policy = _policy(record.get("policy"))
    described = record.get("strategies")
    if described is None:
        return None, policy  # schema 1: the seed's pipeline with the recorded policy
    strategies = []
    for item in described:
        try:
            strategies.append(_rebuild(item))
        except Exception as exc:  # a strategy this environment cannot import: said, not fatal
            warnings.warn(f"cannot rebuild strategy {item.get('name')!r}: {exc}", stacklevel=4)
            return None, policy
    return strategies, policy


def _rebuild(described: Mapping[str, Any]) -> Strategy:
    """A strategy from its `describe()` record: its class with its parameters."""
    import importlib

    module, _, name = str(described["class"]).rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    params = dict(described.get("params") or {})
    if cls is MicroCompact:  # recorded before it became cache-aware by default: eager
        params.setdefault("cache_aware", False)
    try:
        return (
            cls(**params, when=described["when"]) if "when" in _init_params(cls) else cls(**params)
        )
    except TypeError:
        return cls(**params)


def _init_params(cls: type) -> set[str]:
    import inspect

    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _policy(record: Any) -> CompactPolicy | None:
    if not isinstance(record, dict):
        return None
    known = {f for f in CompactPolicy.__dataclass_fields__}
    # Recorded before micro-compaction became cache-aware by default: it cleared eagerly.
    settings = {"cache_aware": False, **{k: v for k, v in record.items() if k in known}}
    try:
        return CompactPolicy(**settings)
    except (TypeError, ValueError):
        return None


# -- one replay ------------------------------------------------------------------------------


@dataclass
class _Calibration:
    """Tokens of a prompt from its characters, fitted on a conversation's recorded calls."""

    tokens_per_char: float
    overhead: float
    reference: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Per call: the recorded request's digest and characters, as rebuilt."""

    def estimate(self, chars: int) -> int:
        """Tokens of a request of `chars` characters by the fit alone."""
        return max(round(self.overhead + self.tokens_per_char * chars), 1)

    def tokens(self, call: int, digest: str, chars: int, recorded: int | None) -> tuple[int, bool]:
        """(tokens, exact) for a request of `chars` characters at recorded call `call`."""
        ref = self.reference.get(call)
        if recorded is not None and ref is not None:
            if ref[0] == digest:
                return recorded, True
            return max(round(recorded + self.tokens_per_char * (chars - ref[1])), 1), False
        return self.estimate(chars), False


class _PrefixChain:
    """Per message of the history: the digest of the prompt up to its end, and its characters
    so far; kept up to date from the first message that changed."""

    def __init__(self, model: str):
        self.model = model
        self.start = hashlib.blake2b(model.encode(), digest_size=16).digest()
        self.messages: list[dict[str, Any]] = []
        self.digests: list[bytes] = []
        self.chars: list[int] = []

    def update(self, messages: Sequence[dict[str, Any]]) -> None:
        first = 0
        limit = min(len(self.messages), len(messages))
        while first < limit and self.messages[first] is messages[first]:
            first += 1
        del self.messages[first:], self.digests[first:], self.chars[first:]
        digest = self.digests[-1] if self.digests else self.start
        total = self.chars[-1] if self.chars else 0
        for message in messages[first:]:
            encoded = to_json(message).encode()
            digest = hashlib.blake2b(digest + encoded, digest_size=16).digest()
            total += len(encoded)
            self.messages.append(message)
            self.digests.append(digest)
            self.chars.append(total)

    def digest(self) -> str:
        return (self.digests[-1] if self.digests else self.start).hex()


class _Summaries:
    """Summaries for a replay: recorded where they fit, real (cached on disk) or stand-ins."""

    def __init__(
        self,
        recorded: dict[str, str],
        stand_in_tokens: int,
        summariser: Model | Summariser | None,
        cache_dir: Path | None,
        policy: CompactPolicy,
        tokens_of: Callable[[int], int],
        in_context: Callable[[Sequence[dict[str, Any]], int, int], Usage | None],
    ):
        self.recorded = recorded
        self.stand_in_tokens = stand_in_tokens
        self.summariser = summariser
        self.cache_dir = cache_dir
        self.policy = policy
        self.request = Summariser(
            input_limit=policy.summary_input_limit, max_tokens=policy.summary_max_tokens
        ).request
        self.tokens_of = tokens_of
        self.in_context = in_context
        self.used: list[str] = []

    def __call__(self, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        key = _digest(list(messages))
        if key in self.recorded:
            self.used.append("recorded")
            text = self.recorded[key]
            return Summary(text, self.estimate_usage(messages, focus, text), "recorded")
        if self.summariser is not None:
            self.used.append("model")
            return self._real(key, messages, focus)
        self.used.append("stand-in")
        text = STAND_IN.format(tokens=self.stand_in_tokens)
        text += "x" * max(int(self.stand_in_tokens * CHARS_PER_TOKEN) - len(text), 0)
        return Summary(text, self.estimate_usage(messages, focus, text), "stand-in")

    def estimate_usage(
        self, messages: Sequence[dict[str, Any]], focus: str | None, text: str
    ) -> Usage:
        """What the summary request costs in tokens: asked in context (the policy's
        `summary_in_context`, for the whole history), the agent's prompt read from the modelled
        cache and the instructions; else the session's text request (instructions and the
        conversation, cut to the input limit); the summary out."""
        output = self.tokens_of(len(text))
        if self.policy.summary_in_context:
            instructions = self.tokens_of(len(IN_CONTEXT_NOTE + SUMMARY_INSTRUCTIONS))
            usage = self.in_context(messages, instructions, output)
            if usage is not None:
                return usage
        sent = self.request(messages, focus).measured_chars()
        return Usage(input_tokens=self.tokens_of(sent), output_tokens=output)

    def _real(self, key: str, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        path = self.cache_dir / f"{key}-{_digest([focus])}.json" if self.cache_dir else None
        if path is not None and path.is_file():
            cached = json.loads(path.read_text(encoding="utf-8"))
            return Summary(cached["text"], Usage(**cached["usage"]), cached["model"])
        summariser = self.summariser
        if not isinstance(summariser, Summariser):
            summariser = Summariser(model=summariser)
        summary = summariser.summarise(messages, focus, summariser.model)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            record = {
                "text": summary.text,
                "usage": summary.usage.as_dict(),
                "model": summary.model,
            }
            path.write_text(json.dumps(record), encoding="utf-8")
        return summary


def _digest(value: Any) -> str:
    return hashlib.blake2b(to_json(value).encode(), digest_size=16).hexdigest()


@dataclass
class _Settings:
    model: str | None
    policy: CompactPolicy
    prices: PriceTable
    cache: CacheSettings
    stand_in_tokens: int
    summariser: Model | Summariser | None
    cache_dir: Path | None


class _Run:
    """One conversation under one strategy setting."""

    def __init__(
        self,
        recording: Recording,
        label: str,
        strategies: list[Strategy] | None,
        settings: _Settings,
        calibration: _Calibration | None,
    ):
        self.recording = recording
        self.label = label
        self.recorded_mode = strategies is None
        self.settings = settings
        self.calibration = calibration
        self.changed = 0
        self.cleared_tokens = 0
        self.compactions = 0
        self.edits: list[Event] = []
        self.history = History(self._observe)
        self.summaries = _Summaries(
            recording.summaries,
            settings.stand_in_tokens,
            settings.summariser,
            settings.cache_dir,
            settings.policy,
            self._tokens_of,
            self._in_context_usage,
        )
        self.summary_cost: float | None = 0.0
        own = recording.strategies if self.recorded_mode else strategies
        if self.recorded_mode:
            own = [s for s in (own or []) if s.when == "every_call"]
        self.now = 0.0
        self.tracker = PrefixTracker(clock=lambda: self.now)
        self.compactor = Compactor(
            self.history,
            emit=self._observe,
            summarise=self.summaries,
            snapshot=lambda messages: "",
            save_output=lambda tool_use_id, text: f"tool-results/{tool_use_id}.txt",
            policy=recording.policy if self.recorded_mode and recording.policy else settings.policy,
            strategies=own or [],
            cache=self.tracker,
            model=lambda: self.model or None,
            pins=lambda reread: tuple(pin.block_text for pin in self.pins.values()),
        )
        self.pins: dict[int, Pin] = {}
        self.pin_records = list(recording.pins)
        model = settings.model or _first_model(recording) or ""
        self.model = model
        self.chain = _PrefixChain(model)
        self.cache = PrefixCache(min_tokens=min_cacheable_tokens(model) or 0)
        self.previous_boundary: int | None = None
        self.calls_by_id: dict[str, dict[str, Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self.points: list[tuple[int, int]] = []
        self.reference: dict[int, tuple[str, int]] = {}

    def _observe(self, event: Event) -> None:
        if isinstance(event, MicroCompacted):
            self.cleared_tokens += event.cleared_tokens
        elif isinstance(event, CompactionFinished):
            if event.success:
                self.compactions += 1
                self.cleared_tokens += max(event.before.tokens - event.after.tokens, 0)
            if event.summary_usage.output_tokens or event.summary_usage.input_tokens:
                self._charge_summary(event.summary_usage)

    def _charge_summary(self, usage: Usage) -> None:
        """Add a summarisation call to the cost of the next call's row (NA without a price)."""
        priced = call_cost(usage, self.model, self.settings.prices)
        if priced is None or self.summary_cost is None:
            self.summary_cost = None
        else:
            self.summary_cost += priced.total

    def _in_context_usage(
        self, messages: Sequence[dict[str, Any]], instructions: int, output: int
    ) -> Usage | None:
        """The usage of a summary asked in the conversation of `messages` when they are the
        whole history (None otherwise: a part is asked as text): the agent's prompt as it
        stands, with the breakpoints the live loop places, then `instructions` tokens."""
        if not len(self.history) or not self.history.is_whole(messages):
            return None
        usage = self._cache_usage(self.history.size().tokens, instructions)
        return Usage.from_api({**usage, "output_tokens": output})

    def _tokens_of(self, chars: int) -> int:
        """Characters of a request in tokens, at the conversation's calibrated rate."""
        if self.calibration is None:
            return round(chars / CHARS_PER_TOKEN)
        return round(chars * self.calibration.tokens_per_char)

    def run(self) -> list[dict[str, Any]]:
        replacing: list[dict[str, Any]] = []
        summary: str | None = None
        for item in self.recording.items:
            self._apply_pins(item)
            if isinstance(item, Compaction):
                summary = item.summary
                if not self.recorded_mode and (item.segment, item.epoch) in self.recording.requests:
                    # The user asked for a compaction here: every setting is asked the same.
                    self.compactor.request(
                        "user", self.recording.requests[(item.segment, item.epoch)]
                    )
                continue
            if isinstance(item, Call):
                replacing = self._flush(replacing, summary)
                self._call(item)
                continue
            opening = self.recording.opening.get((item.segment, item.epoch))
            message = item.as_api()
            kept = message
            if item.epoch > 0 and opening is not None and item.index < opening:
                replacing.append(message)  # a message of the history that replaced the old one
                continue
            if item.epoch > 0 and summary:
                # Sources that merge the summary into the next message: its blocks that hold
                # the summary are the replacement, the rest joined afterwards.
                parts = [b for b in message["content"] if b.get("text") == summary]
                if parts:
                    replacing.append({"role": message["role"], "content": parts})
                    rest = [b for b in message["content"] if b.get("text") != summary]
                    kept = {"role": message["role"], "content": rest} if rest else None
            replacing = self._flush(replacing, summary)
            if kept is not None:
                self._append(kept, item.kind)
        return self.rows

    def _apply_pins(self, item: Message | Call | Compaction) -> None:
        """The pins and unpins recorded before `item` (a message: before its place; a
        compaction: anywhere in the epoch it ended), as the live session set them."""
        if isinstance(item, Call):
            return
        index = item.index if isinstance(item, Message) else float("inf")
        while self.pin_records and self.pin_records[0][0] <= (item.segment, item.epoch, index):
            change = self.pin_records.pop(0)[1]
            if isinstance(change, Pin):
                self.pins[change.id] = change
            else:
                self.pins.pop(change, None)

    def _flush(self, replacing: list[dict[str, Any]], summary: str | None) -> list[dict[str, Any]]:
        """Apply a recorded replacement when replaying what was recorded (else drop it)."""
        if replacing and self.recorded_mode:
            self._replace(replacing, summary)
        return []

    def _replace(self, messages: list[dict[str, Any]], summary: str | None) -> None:
        before = self.history.size()
        if summary:  # the recorded compaction paid for a summary of the history it replaced
            self._charge_summary(self.summaries.estimate_usage(self.history.view(), None, summary))
        self.history.replace(messages)
        self.compactions += 1
        self.cleared_tokens += max(before.tokens - self.history.size().tokens, 0)

    def _append(self, message: dict[str, Any], kind: str | None) -> None:
        requested = self._note_files(message)
        if message["role"] == "user" and kind == "prompt":
            text = next(
                (b.get("text") for b in message["content"] if b.get("type") == "text"), None
            )
            if text is None or not is_pin_text(text):  # a pin is no request
                self.history.pending_request = text
        self.history.append(message)
        if message["role"] == "assistant" and not any(
            b.get("type") == "tool_use" for b in message["content"]
        ):
            self.history.finish_request()
        if requested is not None and not self.recorded_mode:
            self.compactor.request("model", requested or None)

    def _note_files(self, message: dict[str, Any]) -> str | None:
        """Keep what the live session kept from tool calls: the recent files (paths of file
        tools that succeeded). Returns the focus ("" for none) when the results answer a call
        of the `compact` tool: the model asked for a compaction after this batch."""
        requested = None
        for block in message["content"]:
            if block.get("type") == "tool_use" and block.get("name") in (*FILE_TOOLS, "compact"):
                self.calls_by_id[block.get("id", "")] = {
                    "name": block["name"],
                    **(block.get("input") or {}),
                }
            elif block.get("type") == "tool_result":
                call = self.calls_by_id.pop(block.get("tool_use_id", ""), {})
                if call.get("name") == "compact" and requested is None:
                    requested = str(call.get("focus") or "")
                path = call.get("path")
                if isinstance(path, str) and path and not block.get("is_error"):
                    limit = self.compactor.policy.max_recent_files
                    self.compactor.state.note_file(_display_path(path), limit)
        return requested

    def _call(self, item: Call) -> None:
        recorded = self.recording.calls.get(item.call or -1, {})
        if not self.recorded_mode or self.compactor.strategies:
            self.compactor.before_call()
        history = self.history
        if not len(history):
            return
        view = history.view()
        self.chain.update(view)
        chars = self.chain.chars[-1] + len(view) + 1  # the JSON list around the messages
        digest = self.chain.digest()
        tokens_recorded = recorded.get("tokens")
        if self.calibration is None:
            if tokens_recorded:
                self.points.append((chars, tokens_recorded))
            self.reference[item.call or -1] = (digest, chars)
            tokens, exact = tokens_recorded or round(chars / CHARS_PER_TOKEN), bool(tokens_recorded)
        else:
            tokens, exact = self.calibration.tokens(item.call or -1, digest, chars, tokens_recorded)
        history.anchor(history.size().chars, tokens)
        self.now = float(recorded.get("timestamp") or self.now)
        usage = self._cache_usage(tokens)
        output = recorded.get("output_tokens") or 0
        model = self.model or recorded.get("model") or ""
        priced = call_cost({**usage, "output_tokens": output}, model, self.settings.prices)
        price = self.settings.prices.lookup(model) if model else None
        self.tracker.after_call(Usage.from_api(usage), len(view), self.settings.cache, price)
        self.rows.append(
            {
                "strategy": self.label,
                "session_id": self.recording.session_id,
                "agent_id": self.recording.agent_id,
                "source": self.recording.source,
                "call": item.call,
                "context_messages": len(view),
                "context_chars": chars,
                "context_tokens": tokens,
                "tokens_exact": exact,
                "input_tokens": usage["input_tokens"],
                "cache_read_tokens": usage["cache_read_input_tokens"],
                "cache_write_tokens": usage["cache_creation_input_tokens"],
                "output_tokens": output,
                "cost_usd": None if priced is None else priced.total,
                "summary_cost_usd": self.summary_cost,
                "cleared_tokens": self.cleared_tokens,
                "compactions_so_far": self.compactions,
                "recorded_tokens": tokens_recorded,
                "estimated_tokens": None
                if self.calibration is None
                else self.calibration.estimate(chars),
            }
        )
        self.cleared_tokens = 0
        self.summary_cost = 0.0

    def _cache_usage(self, tokens: int, summary: int = 0) -> dict[str, Any]:
        """The usage of a call of `tokens` prompt tokens under the prompt cache, with the
        breakpoints the live loop places: the end of system and tools, the message that ended
        the previous call, the first message edited since (if any), and the newest message.
        With `summary` tokens, a summary asked after the conversation: its instructions end
        the prompt, it marks no newest message (it reads, writes nothing), and it is not a call
        of the conversation (the next call still reads back to the previous one)."""
        settings = self.settings.cache
        if not settings.enabled:
            return {
                "input_tokens": tokens + summary,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            }
        scale = self.calibration.tokens_per_char if self.calibration else 1 / CHARS_PER_TOKEN
        chain = self.chain
        if summary:
            chain.update(self.history.view())
        overhead = max(tokens - round(scale * chain.chars[-1]), 0)
        ends = [overhead + round(scale * c) for c in chain.chars]
        boundaries = [(overhead, chain.start), *zip(ends, chain.digests, strict=True)]
        newest = len(ends) - 1
        marks = {newest}
        if self.previous_boundary is not None and self.previous_boundary < newest:
            marks.add(self.previous_boundary)
        edited = self.tracker.edited_from
        if edited is not None and 0 < edited <= newest:
            marks.add(edited - 1)  # the prefix before the first edited message
        breakpoints = [Breakpoint(overhead, chain.start, settings.prefix_ttl)]
        for index in sorted(marks)[-3:]:
            window = tuple(reversed(boundaries[max(index + 2 - LOOKBACK_BLOCKS, 0) : index + 1]))
            if summary and index == newest:
                continue  # a summary marks no newest message: it writes nothing
            breakpoints.append(Breakpoint(ends[index], chain.digests[index], settings.ttl, window))
        if not summary:
            self.previous_boundary = newest
        prompt = max(tokens, ends[newest]) + summary
        usage = self.cache.call(CacheRequest(self.now, prompt, tuple(breakpoints)))
        return {
            "input_tokens": usage.input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": usage.ephemeral_1h_input_tokens,
            },
        }


FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file"})


def _display_path(path: str) -> str:
    """A file tool's path as the session listed it: relative paths normalised."""
    import posixpath

    return path if path.startswith("/") else posixpath.normpath(path)


def _first_model(recording: Recording) -> str | None:
    return next((c["model"] for c in recording.calls.values() if c.get("model")), None)


# -- the public entry point --------------------------------------------------------------------


@dataclass
class Replay:
    """What `replay` measured: one row per (strategy, conversation, call) in `calls`, one per
    strategy in `totals`."""

    calls: pd.DataFrame
    totals: pd.DataFrame
    summaries: pd.DataFrame
    """Per strategy: how many summaries were recorded ones, real ones, stand-ins."""

    def plot(self, *, figsize: tuple[float, float] = (11, 4)) -> Any:
        """Context tokens per call, one line per strategy; cost per strategy. Returns the figure."""
        import matplotlib.pyplot as plt

        fig, (left, right) = plt.subplots(1, 2, figsize=figsize, width_ratios=(2, 1))
        for name, rows in self.calls.groupby("strategy", sort=False):
            series = rows.reset_index(drop=True)["context_tokens"]
            left.plot(range(1, len(series) + 1), series, label=name, linewidth=1.2)
        left.set_xlabel("model call (in recorded order)")
        left.set_ylabel("context tokens (whole prompt)")
        left.set_title("context sent per call")
        left.legend(loc="upper left", fontsize="small")
        totals = self.totals
        right.barh(totals["strategy"], totals["cost_usd"].fillna(0))
        right.set_xlabel("cost (USD)")
        right.set_title("total cost")
        right.invert_yaxis()
        fig.tight_layout()
        return fig

    def _repr_html_(self) -> str:
        return self.totals.to_html(index=False)

    def __repr__(self) -> str:
        return (
            f"<Replay of {len(self.totals)} strategies, {len(self.calls):,} calls>\n{self.totals}"
        )


def replay(
    source: str | Path | Transcripts,
    strategies: Mapping[str, StrategySpec],
    model: str | None = None,
    *,
    policy: CompactPolicy | None = None,
    prices: Any = None,
    cache: CacheSettings | None = None,
    summary_tokens: int | None = None,
    summariser: Model | Summariser | None = None,
    cache_dir: str | Path | None = None,
) -> Replay:
    """Replay what `source` recorded under each of `strategies` (see the module docstring).

    `source` is anything `load_transcripts` reads, or a `Transcripts`. `strategies` maps a label
    to "recorded", [] (never compact), None (the default pipeline), or a list of strategies or
    specs. `model` prices the calls (default: each conversation's recorded model); `policy` sets
    the limits strategies see (default: `CompactPolicy()`); `cache` the prompt caching modelled
    (default: on, 5 minutes). Summaries: recorded where they fit, else stand-ins of
    `summary_tokens`, or real ones from `summariser` (cached under `cache_dir`).
    """
    import pandas as pd

    from evo_magic.analysis.transcripts import Transcripts, load_transcripts

    t = source if isinstance(source, Transcripts) else load_transcripts(Path(source).expanduser())
    conversations_ = recordings(t)
    settings = _Settings(
        model=model,
        policy=policy or CompactPolicy(),
        prices=price_table(prices),
        cache=cache or CacheSettings(),
        stand_in_tokens=summary_tokens or _median_summary_tokens(t),
        summariser=summariser,
        cache_dir=Path(cache_dir).expanduser() if cache_dir else None,
    )
    resolved = {label: _strategies(spec) for label, spec in strategies.items()}
    rows: list[dict[str, Any]] = []
    used: list[dict[str, Any]] = []
    for recording in conversations_:
        reference = _Run(recording, RECORDED, None, settings, None)
        reference.run()
        fit = TokenRate.of(reference.points)
        slope, overhead = fit.rate, fit.overhead
        calibration = _Calibration(slope, overhead, reference.reference)
        for label, chosen in resolved.items():
            run = _Run(recording, label, chosen, settings, calibration)
            rows += run.run()
            for kind in run.summaries.used:
                used.append({"strategy": label, "kind": kind})
    calls = pd.DataFrame(rows, columns=CALL_COLUMNS)
    summaries = pd.DataFrame(used, columns=["strategy", "kind"])
    return Replay(calls, _totals(calls, list(resolved)), _summary_counts(summaries, list(resolved)))


CALL_COLUMNS = [
    "strategy",
    "session_id",
    "agent_id",
    "source",
    "call",
    "context_messages",
    "context_chars",
    "context_tokens",
    "tokens_exact",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost_usd",
    "summary_cost_usd",
    "cleared_tokens",
    "compactions_so_far",
    "recorded_tokens",
    "estimated_tokens",
]


def _strategies(spec: StrategySpec) -> list[Strategy] | None:
    """None for "recorded"; [] for none; the default pipeline for None; else the list."""
    if spec == RECORDED:
        return None
    if spec is None:
        return default_pipeline()
    if isinstance(spec, str) or not isinstance(spec, Sequence):
        spec = [spec]  # one strategy (or spec) on its own
    return [make_strategy(item) for item in spec]


def _median_summary_tokens(t: Transcripts) -> int:
    chars = t.compactions["summary_chars"].dropna() if len(t.compactions) else []
    chars = [int(c) for c in chars if int(c) > 0]
    if not chars:
        return DEFAULT_SUMMARY_TOKENS
    return max(int(statistics.median(chars) / CHARS_PER_TOKEN), 1)


def _totals(calls: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for label in order:
        mine = calls[calls["strategy"] == label]
        last = mine.groupby(["session_id", "agent_id"], dropna=False)["compactions_so_far"].max()
        cost, summaries = mine["cost_usd"], mine["summary_cost_usd"]
        priced = len(cost) and cost.notna().all() and summaries.notna().all()
        rows.append(
            {
                "strategy": label,
                "calls": len(mine),
                "input_tokens": int(mine["input_tokens"].sum()),
                "cache_read_tokens": int(mine["cache_read_tokens"].sum()),
                "cache_write_tokens": int(mine["cache_write_tokens"].sum()),
                "output_tokens": int(mine["output_tokens"].sum()),
                "cost_usd": float(cost.sum() + summaries.sum()) if priced else None,
                "summary_cost_usd": float(summaries.sum()) if priced else None,
                "peak_context_tokens": int(mine["context_tokens"].max()) if len(mine) else 0,
                "compactions": int(last.sum()) if len(last) else 0,
                "tokens_cleared": int(mine["cleared_tokens"].sum()),
                "cache_hit_rate": (
                    float(mine["cache_read_tokens"].sum() / mine["context_tokens"].sum())
                    if mine["context_tokens"].sum()
                    else 0.0
                ),
            }
        )
    return pd.DataFrame(rows)


def _summary_counts(summaries: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    import pandas as pd

    table = pd.crosstab(summaries["strategy"], summaries["kind"]) if len(summaries) else None
    rows = []
    for label in order:
        row = {"strategy": label}
        for kind in ("recorded", "model", "stand-in"):
            row[kind] = (
                int(table.loc[label, kind])
                if table is not None and label in table.index and kind in table.columns
                else 0
            )
        rows.append(row)
    return pd.DataFrame(rows)
