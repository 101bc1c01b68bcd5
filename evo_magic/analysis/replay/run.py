"""One recorded conversation under one strategy setting: the live loop's own parts (the
`History`, the `Compactor`, the `PrefixTracker`, `place_breakpoints`) fed with what was recorded,
each model call measured, its breakpoints placed and its usage modelled.

`Run` feeds the recorded items in order (messages, the replacements of recorded compactions,
calls) and composes the parts each concept lives in: the settings timeline (`applied_settings`),
the modelled prompt cache and prices (`pricing`), the modelled server (`server`), one call and
its row (`call`), and what a row reports since the previous one (`tally`)."""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Any

from evo_magic.analysis.conversation import Call, Compaction
from evo_magic.analysis.conversation import Message as RecordedMessage
from evo_magic.analysis.replay import tools
from evo_magic.analysis.replay.applied_settings import AppliedSettings
from evo_magic.analysis.replay.calibration import Calibration, tokens_of
from evo_magic.analysis.replay.call import Calls
from evo_magic.analysis.replay.options import RECORDED, Chosen, ReplaySettings, Skipped
from evo_magic.analysis.replay.pricing import Pricing
from evo_magic.analysis.replay.recording import Recording, first_model
from evo_magic.analysis.replay.server import ServerPart, without_compaction
from evo_magic.analysis.replay.summaries import Summaries
from evo_magic.analysis.replay.tally import Tally
from evo_magic.compact.compactor import CompactionServices, Compactor
from evo_magic.compact.pins import carried_texts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.undo import UNDO
from evo_magic.compacted import is_pin_text
from evo_magic.encoded import PLAIN, EncodedBlocks
from evo_magic.events import CompactionFinished
from evo_magic.history import History
from evo_magic.messages import Message, blocks_of_type, first_text
from evo_magic.strategies import default_pipeline
from evo_magic.strategies.todo import carried_todo
from evo_magic.tools.files import touched_path
from evo_magic.transcript import default_outputs_shown, output_shown


@dataclass
class _Replacement:
    """The recorded compaction being read: the history that replaced the old one, message by
    message, applied (under "recorded") before what follows it."""

    epoch: tuple[int, int] = (-1, -1)
    """(segment, epoch) the compaction ended."""
    summary: str | None = None
    trigger: str | None = None
    messages: list[Message] = field(default_factory=list)
    undo: bool = False
    """The recorded record is an undo: the run undoes its own last compaction there."""


class Run:
    """One conversation under one strategy setting (see the module docstring)."""

    def __init__(
        self,
        recording: Recording,
        label: str,
        chosen: Chosen,
        settings: ReplaySettings,
        calibration: Calibration | None,
        encoded: EncodedBlocks = PLAIN,
    ):
        """`encoded`: the JSON of the recording's blocks, made once for all its runs."""
        self.recording = recording
        self.recorded_mode = chosen == RECORDED
        self.calibration = calibration
        model = settings.model or first_model(recording) or ""
        policy = settings.policy or CompactPolicy()
        self.pricing = Pricing(model, settings.prices, settings.cache, calibration, encoded)
        self.tally = Tally(self.pricing.summary_cost)
        self.history = History(self.tally.observe, encoded=encoded)
        self.summaries = Summaries(
            recording.summaries,
            settings.stand_in_tokens,
            settings.summariser,
            settings.cache_dir,
            policy,
            lambda chars: tokens_of(chars, calibration),
            functools.partial(self.pricing.in_context_usage, self.history),
        )
        self.compactor = self._compactor(model, policy, chosen)
        parts = (self.history, self.compactor, self.summaries, self.pricing, self.tally)
        self.server = ServerPart(self.recorded_mode, calibration, parts, recording.server_usage)
        outputs = default_outputs_shown(recording.session_id)
        in_force = (self.compactor, self.summaries, self.pricing)
        self.applied = AppliedSettings(
            recording.timeline, settings, self.recorded_mode, outputs, in_force
        )
        call_parts = (self.history, self.compactor, self.pricing, self.server, self.tally)
        self.calls = Calls(
            recording, label, self.recorded_mode, calibration, settings.on_call, call_parts,
            self._added_tool_chars,
        )  # fmt: skip
        self.notes: dict[str, Any] = {}
        """What the replayed strategies' tools keep, as live (the carried todo list)."""
        self._replacement = _Replacement()
        self._fed = 0
        """Items replayed so far."""
        self._tools: tuple[str, ...] | None = None
        self._tools_of: tuple[tuple[str, ...], tuple[Any, ...], tuple[str, ...], int] | None = None
        """The recorded tools and strategies `_run_tools` last answered for, and its answer."""
        """The tools the previous call offered (None before the first call)."""
        self._turn: int | None = None
        """The turn of the latest request (a new turn is a new request)."""
        self._stop_reason: str | None = None
        """Why the reply to the latest recorded call ended (whether it answered the request)."""

    def _compactor(self, model: str, policy: CompactPolicy, chosen: Chosen) -> Compactor:
        """The live compactor over the replayed history, with the chosen strategies (a list:
        those; None: the default pipeline; otherwise none are configured here)."""
        compactor = Compactor(
            self.history, self._services(model), policy=policy, cache=self.pricing.tracker
        )
        if isinstance(chosen, list):
            compactor.strategies = chosen
        elif chosen is None:
            compactor.configure(default_pipeline())
        return compactor

    def _services(self, model: str) -> CompactionServices:
        """What the replayed compactor asks of the run. The settings in force (`applied`) and
        the modelled server (`server`) are asked when the compactor needs them, once they
        exist."""
        return CompactionServices(
            emit=self.tally.observe,
            summarise=self.summaries,
            background=False,  # a summary prepared early is made at once: in order
            save_output=lambda tool_use_id, text: output_shown(self.applied.outputs, tool_use_id),
            model=lambda: model or None,
            server_summarise=lambda messages, focus: self.server.summarise(messages, focus),
            pins=lambda reread: (
                *(pin.block_text for pin in self.applied.pins.values()),
                *carried_texts(self.notes),
            ),
            tools=lambda: self._tools_offered(),
        )

    @property
    def _strategies(self) -> tuple[Any, ...]:
        return self.compactor.strategies

    def _tools_offered(self) -> tuple[str, ...]:
        """The names of the tools this call offers (`replay.tools`; as recorded under
        "recorded")."""
        if self.recorded_mode:
            return self.applied.tools
        return self._run_tools()[0]

    def _added_tool_chars(self) -> int:
        """Characters the run's tools add to each request over the recorded ones (0 under
        "recorded": they are its own)."""
        return 0 if self.recorded_mode else self._run_tools()[1]

    def _run_tools(self) -> tuple[tuple[str, ...], int]:
        """The run's tools and the characters they add, worked out again only when the
        recorded tools or the strategies change (the tools depend only on the configuration,
        as live: `offered_tools`)."""
        recorded, strategies = self.applied.tools, tuple(self._strategies)
        held = self._tools_of
        if held is None or held[0] != recorded or not _same_objects(held[1], strategies):
            offered = tools.offered(recorded, strategies)
            held = self._tools_of = (recorded, strategies, offered,
                                     tools.added_chars(recorded, strategies))  # fmt: skip
        return held[2], held[3]

    @property
    def points(self) -> list[tuple[int, int]]:
        """(characters, recorded tokens) of each call (the calibration pass's)."""
        return self.calls.points

    @property
    def stretches(self) -> tuple[list[tuple[int, int, int, int]], dict[int, int]]:
        """(characters, thinking characters, recorded tokens, stretch) of each call, and each
        call's stretch (the calibration pass's)."""
        return self.calls.stretch_points, self.calls.stretch_of

    @property
    def reference(self) -> dict[int, tuple[str, int]]:
        """Per call: the recorded request's digest and characters (the calibration pass's)."""
        return self.calls.reference

    def run(self) -> list[dict[str, Any]]:
        """Replay every item; the rows of the calls. Raises Skipped under "recorded" when the
        session's strategies cannot be rebuilt."""
        self.feed(len(self.recording.items))
        self._settle()
        return self.calls.rows

    def _settle(self) -> None:
        """The session's end: a summary prepared in the background that no compaction took is
        charged, as the live session charges it when it closes (`Compactor.close`), on the
        last call's row."""
        rows = self.calls.rows
        if not rows:
            return
        self.compactor.close()
        charged, last = self.tally.summary_cost, rows[-1]
        if charged != 0.0:
            before = last["summary_cost_usd"]
            both = None if charged is None or before is None else before + charged
            last["summary_cost_usd"] = both
            self.tally.row_written()

    def feed(self, stop: int) -> None:
        """Replay the items not replayed yet before item `stop` (the history then stands as the
        session had it just before that item: a rewind point)."""
        recording = self.recording
        lines = recording.lines or [None] * len(recording.items)
        start, self._fed = self._fed, max(self._fed, stop)
        for item, line in zip(recording.items[start:stop], lines[start:stop], strict=True):
            self.applied.until(line)
            if self.applied.unrebuilt and self.recorded_mode and self.calibration is not None:
                raise Skipped(self.applied.unrebuilt[0])
            if isinstance(item, Compaction):
                self._compaction(item)
            elif isinstance(item, Call):
                self._call(item)
            else:
                self._message(item)

    def flush(self) -> None:
        """Apply a recorded compaction's replacement read so far (as the next call would)."""
        self._flush()

    # -- the recorded items ------------------------------------------------------------------

    def _compaction(self, item: Compaction) -> None:
        """A recorded compaction: the messages that follow it replace the history."""
        replacement = self._replacement
        self.calls.reasoning.turn_began()  # the history is replaced
        replacement.summary, replacement.trigger = item.summary, item.trigger
        replacement.epoch = (item.segment, item.epoch)
        replacement.undo = item.strategy == UNDO
        if not self.recorded_mode and replacement.epoch in self.recording.requests:
            # The user asked for a compaction here: every setting is asked the same.
            self.compactor.request("user", self.recording.requests[replacement.epoch])

    def _call(self, item: Call) -> None:
        """A recorded call: the strategies prepare the history as the live loop does before a
        call, then the call is measured."""
        # A compaction over the limit ran inside this call's preparation, after the
        # every-call strategies: the history it left is what was sent.
        replacement = self._replacement
        automatic = bool(replacement.messages) and self.recorded_mode
        automatic = automatic and replacement.trigger == "auto"
        self._flush()
        self._stop_reason = item.stop_reason  # of the reply that follows
        if self.server.pending:  # a modelled compaction that no reply followed
            self.server.after_compaction(None, self._stop_reason)
        offered = self._tools_offered()
        if self._tools is not None and offered != self._tools:
            self.pricing.tools_changed(offered)  # before the strategies weigh the cache, as live
        self._tools = offered
        if not automatic and (not self.recorded_mode or self.compactor.strategies):
            self.compactor.before_call()
        self.calls.replay(item)

    def _message(self, item: RecordedMessage) -> None:
        """A recorded message: part of a recorded compaction's replacement, or the next
        message of the history."""
        message: Message | None = item.as_api()
        if item.role == "user" and any(b.get("type") != "tool_result" for b in item.content):
            self.calls.reasoning.turn_began()  # a user message, not only tool results
        if not self.recorded_mode:
            # The server's block is the recorded session's; this setting did not get it.
            message = without_compaction(message)
            if message is None:
                return
        replacement = self._replacement
        opening = self.recording.opening.get((item.segment, item.epoch))
        if item.epoch > 0 and opening is not None and item.index < opening:
            replacement.messages.append(message)  # of the history that replaced the old one
            return
        kept: Message | None = message
        if item.epoch > 0 and replacement.summary:
            part, kept = _split_summary(message, replacement.summary)
            if part is not None:
                replacement.messages.append(part)
        self._flush()
        if kept is not None:
            self._append(kept, item.kind, item.turn)

    def _flush(self) -> None:
        """Apply a recorded replacement when replaying what was recorded (else drop it)."""
        replacement = self._replacement
        if replacement.undo:  # the live rule, on this run's own last compaction
            replacement.undo, replacement.messages = False, []
            if self.compactor.undoable is not None:
                self.compactor.undo()
            return
        if replacement.messages and self.recorded_mode:
            self._replace(replacement.messages, replacement.summary)
        replacement.messages = []

    def _replace(self, messages: list[Message], summary: str | None) -> None:
        """The recorded compaction's replacement becomes the history: counted and charged
        here, unless it is the server's, counted on its call's row already."""
        before = self.history.size()
        tally = self.tally
        if self.server.charged(self._replacement.epoch):
            # A server compaction, counted and charged on its call's row already.
            self.compactor.adopt(messages, summary)
            tally.changes.append(
                CompactionFinished("server", None, before, self.history.size(), True, 0.0,
                                   strategy="recorded")
            )  # fmt: skip
            return
        if summary:  # the recorded compaction paid for a summary of the history it replaced
            tally.charge_summary(self.summaries.estimate_usage(self.history.view(), None, summary))
        self.compactor.adopt(messages, summary)
        after = self.history.size()
        tally.compacted(max(before.tokens - after.tokens, 0))
        tally.changes.append(
            CompactionFinished("recorded", None, before, after, True, 0.0, strategy="recorded")
        )

    def _append(self, message: Message, kind: str | None, turn: int | None = None) -> None:
        if self.server.pending:
            message = self.server.after_compaction(message, self._stop_reason)
            if message is None:
                return
        requested = self._note_tool_results(message)
        carried_todo(self._strategies, self.notes, message)  # the live tool's rule
        text = self._request(message, kind, turn)
        if text is not None:
            self.history.begin_request(text, message)
        else:
            self.history.append(message)
        if message["role"] == "assistant":
            self.history.answered(self._stop_reason)
        if requested is not None and not self.recorded_mode:
            self.compactor.request("model", requested or None)

    def _request(self, message: Message, kind: str | None, turn: int | None) -> str | None:
        """The request `message` makes, as live began one (None: it makes none): a person's
        prompt that opens a new turn (a session counts its turns by request, so the notes it
        adds within a turn, such as the one after a reply cut at max_tokens, are no request;
        where a format counts no turns, every prompt), and no pin."""
        if message["role"] != "user" or kind != "prompt":
            return None
        if turn is not None:
            if turn == self._turn:
                return None
            self._turn = turn
        text = first_text(message)
        return None if text is None or is_pin_text(text) else text

    def _note_tool_results(self, message: Message) -> str | None:
        """What the live session did as these results came back: the recent files (as the
        file tools note them), and the focus ("" for none) when they answer a call of the
        `compact` tool (the model asked for a compaction after this batch), else None."""
        requested = None
        for block in blocks_of_type(message, "tool_result"):
            call = self.history.tool_use(block.get("tool_use_id", ""))
            if call is None:
                continue
            name, tool_input = call.get("name"), call.get("input")
            if name == "compact" and requested is None:
                requested = str((tool_input or {}).get("focus") or "")
            path = None if block.get("is_error") else touched_path(name, tool_input)
            if path is not None:
                self.compactor.state.note_file(path, self.compactor.policy.max_recent_files)
        return requested


def _same_objects(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    """Whether `now` holds the very objects `before` held, in order."""
    return len(before) == len(now) and all(map(operator.is_, before, now))


def _split_summary(message: Message, summary: str) -> tuple[Message | None, Message | None]:
    """Sources that merge the summary into the next message: its blocks that hold the summary
    are part of the replacement, the rest joins afterwards. Returns (that part, the rest); None
    for a part that is empty."""
    parts = [b for b in message["content"] if b.get("text") == summary]
    if not parts:
        return None, message
    rest = [b for b in message["content"] if b.get("text") != summary]
    kept = {"role": message["role"], "content": rest} if rest else None
    return {"role": message["role"], "content": parts}, kept
