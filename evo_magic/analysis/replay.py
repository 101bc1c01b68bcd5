"""Trace-driven replay: a recorded session under any compaction strategy, without a model.

    from evo_magic import replay
    r = replay("~/.claude/projects/my-project/", strategies={
        "recorded": "recorded", "none": [], "seed": None,
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
disk by its input's hash so that a sweep never pays twice.
"""

from __future__ import annotations

import hashlib
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
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import DEFAULT_PRICES, PriceTable, call_cost
from evo_magic.events import CompactionFinished, Event, MicroCompacted
from evo_magic.history import History
from evo_magic.measure import to_json
from evo_magic.models.base import Model
from evo_magic.prompt_cache import LOOKBACK_BLOCKS, Breakpoint, CacheRequest, PrefixCache
from evo_magic.prompt_cache import min_cacheable_tokens
from evo_magic.strategies import default_pipeline
from evo_magic.strategies.registry import make_strategy
from evo_magic.summariser import Summariser, Summary
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
    strategies: list[Strategy] | None = None
    """The strategies an evo_magic session ran with (None for other sources)."""
    policy: CompactPolicy | None = None


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
    recording.summaries = _recorded_summaries(recording, compactions)
    if source == "evo_magic":
        recording.strategies, recording.policy = _session_settings(t, session_id)
    return recording


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
    try:
        line = Path(row["file"]).read_text(encoding="utf-8").splitlines()[int(row["line"]) - 1]
        record = json.loads(line)
    except (OSError, IndexError, ValueError):
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
    try:
        return cls(**params, when=described["when"]) if "when" in _init_params(cls) else cls(**params)
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
    try:
        return CompactPolicy(**{k: v for k, v in record.items() if k in known})
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

    def tokens(self, call: int, digest: str, chars: int, recorded: int | None) -> tuple[int, bool]:
        """(tokens, exact) for a request of `chars` characters at recorded call `call`."""
        ref = self.reference.get(call)
        if recorded is not None and ref is not None:
            if ref[0] == digest:
                return recorded, True
            return max(round(recorded + self.tokens_per_char * (chars - ref[1])), 1), False
        return max(round(self.overhead + self.tokens_per_char * chars), 1), False


def _fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """Least squares of tokens on characters: (tokens per char, overhead)."""
    if len(points) >= 2:
        xs, ys = zip(*points, strict=True)
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        if var > 0:
            slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var
            if 0.05 < slope < 2:
                return slope, mean_y - slope * mean_x
    slope = 1 / CHARS_PER_TOKEN
    overheads = [y - slope * x for x, y in points] or [0.0]
    return slope, max(statistics.median(overheads), 0.0)


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
    ):
        self.recorded = recorded
        self.stand_in_tokens = stand_in_tokens
        self.summariser = summariser
        self.cache_dir = cache_dir
        self.used: list[str] = []

    def __call__(self, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        key = _digest(list(messages))
        if key in self.recorded:
            self.used.append("recorded")
            return Summary(self.recorded[key], Usage(), "recorded")
        if self.summariser is not None:
            self.used.append("model")
            return self._real(key, messages, focus)
        self.used.append("stand-in")
        text = STAND_IN.format(tokens=self.stand_in_tokens)
        return Summary(text + "x" * max(int(self.stand_in_tokens * CHARS_PER_TOKEN) - len(text), 0), Usage(), "stand-in")

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
            record = {"text": summary.text, "usage": summary.usage.as_dict(), "model": summary.model}
            path.write_text(json.dumps(record), encoding="utf-8")
        return summary


def _digest(value: Any) -> str:
    return hashlib.blake2b(to_json(value).encode(), digest_size=16).hexdigest()


@dataclass
class _Settings:
    model: str | None
    policy: CompactPolicy
    prices: PriceTable
    cache_ttl: str | None
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
        )
        own = recording.strategies if self.recorded_mode else strategies
        if self.recorded_mode:
            own = [s for s in (own or []) if s.when == "every_call"]
        self.compactor = Compactor(
            self.history,
            emit=self._observe,
            summarise=self.summaries,
            snapshot=lambda messages: "",
            save_output=lambda tool_use_id, text: f"tool-results/{tool_use_id}.txt",
            policy=recording.policy if self.recorded_mode and recording.policy else settings.policy,
            strategies=own or [],
        )
        model = settings.model or _first_model(recording) or ""
        self.model = model
        self.chain = _PrefixChain(model)
        self.cache = PrefixCache(min_tokens=min_cacheable_tokens(model) or 0)
        self.previous_boundary: int | None = None
        self.rows: list[dict[str, Any]] = []
        self.points: list[tuple[int, int]] = []
        self.reference: dict[int, tuple[str, int]] = {}

    def _observe(self, event: Event) -> None:
        if isinstance(event, MicroCompacted):
            self.cleared_tokens += event.cleared_tokens
        elif isinstance(event, CompactionFinished) and event.success:
            self.compactions += 1
            self.cleared_tokens += max(event.before.tokens - event.after.tokens, 0)

    def run(self) -> list[dict[str, Any]]:
        replacing: list[dict[str, Any]] = []
        remaining = 0
        for item in self.recording.items:
            if isinstance(item, Compaction):
                continue
            if isinstance(item, Message):
                opening = self.recording.opening.get((item.segment, item.epoch), 0)
                if item.epoch > 0 and (item.index < opening or item.kind == "compact_summary"):
                    if self.recorded_mode:
                        replacing.append(item.as_api())
                        remaining = max(opening - item.index - 1, 0)
                        if remaining == 0:
                            self._replace(replacing)
                            replacing = []
                    continue
                if replacing:
                    self._replace(replacing)
                    replacing = []
                self._append(item)
            elif isinstance(item, Call):
                if replacing:
                    self._replace(replacing)
                    replacing = []
                self._call(item)
        return self.rows

    def _replace(self, messages: list[dict[str, Any]]) -> None:
        before = self.history.size()
        self.history.replace(messages)
        self.compactions += 1
        self.cleared_tokens += max(before.tokens - self.history.size().tokens, 0)

    def _append(self, item: Message) -> None:
        message = item.as_api()
        if item.role == "user" and item.kind == "prompt":
            text = next((b.get("text") for b in message["content"] if b.get("type") == "text"), None)
            self.history.pending_request = text
        self.history.append(message)
        if item.role == "assistant" and not any(
            b.get("type") == "tool_use" for b in message["content"]
        ):
            self.history.finish_request()

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
        usage = self._cache_usage(tokens, recorded)
        output = recorded.get("output_tokens") or 0
        priced = call_cost(
            {**usage, "output_tokens": output}, self.model or recorded.get("model") or "", self.settings.prices
        )
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
                "cleared_tokens": self.cleared_tokens,
                "compactions_so_far": self.compactions,
                "recorded_tokens": tokens_recorded,
            }
        )
        self.cleared_tokens = 0

    def _cache_usage(self, tokens: int, recorded: Mapping[str, Any]) -> dict[str, Any]:
        """The usage of a call of `tokens` prompt tokens under the prompt cache: breakpoints at
        the end of system and tools, at the message that ended the previous call, and at the
        newest message, as the live loop places them."""
        if self.settings.cache_ttl is None:
            return {
                "input_tokens": tokens,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            }
        ttl = self.settings.cache_ttl
        scale = self.calibration.tokens_per_char if self.calibration else 1 / CHARS_PER_TOKEN
        chain = self.chain
        body = round(scale * chain.chars[-1])
        overhead = max(tokens - body, 0)
        positions = [(overhead + round(scale * c), d) for c, d in zip(chain.chars, chain.digests, strict=True)]
        boundaries = [(overhead, chain.start)] + positions
        breakpoints = [Breakpoint(overhead, chain.start, ttl)]
        previous = self.previous_boundary
        if previous is not None and previous < len(positions) - 1:
            window = tuple(reversed(boundaries[max(previous + 2 - LOOKBACK_BLOCKS, 0) : previous + 1]))
            breakpoints.append(Breakpoint(*positions[previous], ttl, window))
        newest = len(positions) - 1
        window = tuple(reversed(boundaries[max(newest + 2 - LOOKBACK_BLOCKS, 0) : newest + 1]))
        breakpoints.append(Breakpoint(*positions[newest], ttl, window))
        self.previous_boundary = newest
        now = recorded.get("timestamp") or (self.rows and self.rows[-1].get("_time", 0)) or 0.0
        prompt = max(tokens, positions[newest][0])
        usage = self.cache.call(CacheRequest(float(now), prompt, tuple(breakpoints)))
        return {
            "input_tokens": usage.input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": usage.ephemeral_1h_input_tokens,
            },
        }


def _first_model(recording: Recording) -> str | None:
    return next((c["model"] for c in recording.calls.values() if c.get("model")), None)
