"""Session: one conversation with an agent, as long as a kernel (or a script) keeps it.

The composition root: it owns the `History` (messages, sizes, the pending request), the
`Compactor` (the strategies and the guarantees around them), the model, the tools, the pins,
the transcript and the observers, and wires them together. `ask(text)` runs the agent loop;
`compact(focus)` compacts on demand; `configure(**changes)` is the one way to change a setting.
Front ends observe the session's events; nothing here prints, and nothing imports this module
but the front ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evo_magic.ask_result import AskResult
from evo_magic.compact.base import Strategy, check_strategy, server_edit
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.pins import Pins, carried_texts, pin_message
from evo_magic.compact.preview import GivenSummary, Preview, SummaryProposal
from evo_magic.cost import Ledger, price_table
from evo_magic.deprecated import SettersOf01
from evo_magic.events import (
    CompactionFinished,
    CompactionSkipped,
    Event,
    Notice,
    SessionReset,
)
from evo_magic.history import History
from evo_magic.loop import LoopParts, Totals, answer_left_over, run_ask
from evo_magic.measure import to_json
from evo_magic.meter.log import follow
from evo_magic.models import Model, resolve_model
from evo_magic.observers import Observer, ObserverError, Observers
from evo_magic.prompt_cache import PrefixTracker
from evo_magic.records import Record, change_records, pin_record, start_records, strategies_record
from evo_magic.secrets import add_secret, known_secrets, redact
from evo_magic.session_reads import SessionReads
from evo_magic.session_services import SessionServices
from evo_magic.settings import SessionSettings
from evo_magic.strategies import default_pipeline
from evo_magic.strategies.registry import describe
from evo_magic.summariser import Summariser
from evo_magic.tools import Tool, default_tools, offered_tools
from evo_magic.transcript import DEFAULT_ROOT, Transcript

__all__ = ["AskResult", "ObserverError", "Session", "SummaryProposal"]

PARTS = ("model", "strategies", "summariser")
"""What `configure` changes besides the settings: the session's parts."""


class Session(SessionReads, SettersOf01):
    """A conversation with an agent in a workspace.

    Parameters:
        workspace: the directory the agent works in (its file tools cannot leave it).
        model: a `Model` (e.g. `FunctionModel(fn)`), a Claude model name, "offline", or None
            (Claude when ANTHROPIC_API_KEY is set, else the offline stand-in).
        strategies: the compaction strategies, cheapest first (None: the seed's pipeline,
            `default_pipeline()`).
        summariser: how summaries are made (None: the session's model with the seed's prompt
            and the policy's `summary_*` numbers).
        transcripts_root: where transcripts go (None: `<workspace>/.evo_magic`).
        session_id: the transcript directory's name (None: a new sortable id).
        tools: the tools offered (None: bash, read_file, write_file, edit_file, compact).
        settings: a `SessionSettings` (None: the defaults).
        **changes: settings by name, over `settings`: every `SessionSettings` field
            (`system_prompt`, `max_turns`, `max_tokens`, `bash_timeout`, `sandbox`, the bash
            environment and bounds such as `sandbox_network`, `caching`, `cache_ttl`,
            `prices`, `policy`), a `CompactPolicy` field (`context_limit=...`), or
            `cache=CacheSettings(...)`. Each is checked by its one rule (ValueError).

    Change any of them later with `configure(...)`; read them in `settings`.
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        *,
        model: Model | str | None = None,
        strategies: Sequence[Strategy] | None = None,
        summariser: Summariser | None = None,
        transcripts_root: str | Path | None = None,
        session_id: str | None = None,
        tools: list[Tool] | None = None,
        settings: SessionSettings | None = None,
        **changes: Any,
    ):
        workspace = Path(workspace).expanduser().resolve()
        if not workspace.is_dir():
            raise FileNotFoundError(f"workspace {workspace} is not a directory")
        settings = _settings_value(settings).with_changes(**changes)
        chosen = _strategies(strategies)
        self.workspace = workspace
        self._settings = settings
        self._model = resolve_model(model)
        self._summariser = summariser
        self._base_tools = list(tools) if tools is not None else default_tools()
        self._tools = offered_tools(self._base_tools, chosen)  # one list: services read it
        self._notes: dict[str, Any] = {}  # what strategies' tools keep (todo, recall, handoff)
        self._notices: set[str] = set()  # what tools have said once (sandbox warnings)
        self._asking = False  # pins join the history between asks, never inside one
        self._observers = Observers(lambda *record: self._transcript.write(*record))
        self._totals = Totals()
        self._ledger = Ledger(price_table(settings.prices or None))
        self._prefix = PrefixTracker()
        root = Path(transcripts_root) if transcripts_root else workspace / DEFAULT_ROOT
        self._transcript = Transcript(root.expanduser(), session_id, secrets=self.secrets)
        self._history = History(self.emit, overhead_chars=self._prompt_overhead())
        self._services = SessionServices(
            workspace, self._history, self._transcript, self._ledger, self._tools,
            model=lambda: self._model, settings=lambda: self._settings,
            summariser=lambda: self.summariser, emit=self.emit, redact=self.redact,
            pins=lambda reread: self._pins.texts(reread) + carried_texts(self._notes),
        )  # fmt: skip
        self._compactor = Compactor(
            self._history, self._services.compaction(), policy=settings.policy,
            strategies=chosen, cache=self._prefix,
        )  # fmt: skip
        self._pins = Pins(self._services.read_pinned_file, self.redact, self._record_pin, self.emit)
        # A session never closed still charges, at exit, the summary its worker prepared.
        self._transcript.before_exit(self._compactor.close)
        self.secrets()  # the model's credentials are known (and redacted) from now on
        self.context_log = follow(self)
        """Every model call and compaction of the session, as the context meter and
        `context_figure` draw them."""
        self._record_start()

    # -- settings ------------------------------------------------------------------------

    @property
    def settings(self) -> SessionSettings:
        """Every setting the session runs with (change them with `configure`)."""
        return self._settings

    def configure(self, settings: SessionSettings | None = None, /, **changes: Any) -> None:
        """Change settings and parts from the next model call on; each change is recorded
        once. `settings` replaces them all; `changes` are settings by name (as `Session(...)`
        takes them), and `model`, `strategies` (None: the seed's pipeline) or `summariser`
        (None: the policy's). Everything is checked first: a bad value refuses the whole call
        (TypeError or ValueError naming it) and nothing changes."""
        parts = {name: changes.pop(name) for name in PARTS if name in changes}
        new = _settings_value(settings) if settings is not None else self._settings
        new = new.with_changes(**changes)
        strategies = _strategies(parts["strategies"]) if "strategies" in parts else None
        model = resolve_model(parts["model"]) if "model" in parts else None
        summariser = parts.get("summariser", self._summariser)
        if summariser is not None and not isinstance(summariser, Summariser):
            raise TypeError(f"summariser must be a Summariser, got {type(summariser).__name__}")
        # Checked: from here on nothing can be refused.
        old, old_prices = self._settings, self._ledger.prices
        self._settings = new
        self._summariser = summariser
        if new.policy != old.policy:
            self._compactor.policy = new.policy
        if new.prices != old.prices:
            self._ledger.prices = price_table(new.prices or None)
        self._write(change_records(old, new, old_prices, self._ledger.prices))
        if strategies is not None and self._compactor.configure(strategies):
            tools = offered_tools(self._base_tools, strategies)
            if [t.name for t in tools] != [t.name for t in self._tools]:
                self._prefix.replaced()  # new tools start the prompt: nothing cached matches
            self._tools[:] = tools
            names = [tool.name for tool in self._tools]
            self._write([strategies_record([describe(s) for s in strategies], names)])
        if model is not None:
            self._model = model
            self.secrets()  # its credentials are known (and redacted) from now on

    def secrets(self) -> list[str]:
        """Every credential the session knows: the environment's, and those its model holds
        (a key passed in code or held by a client object)."""
        credentials = getattr(self._model, "credentials", None)
        if callable(credentials):
            for value in credentials():
                add_secret(value)
        return known_secrets()

    def redact(self, text: str) -> str:
        """`text` with every credential the session knows replaced."""
        return redact(text, self.secrets())

    # -- observing -----------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event; returns a function that unsubscribes."""
        return self._observers.subscribe(observer)

    def emit(self, event: Event) -> None:
        """Record the event in the transcript, then pass it to every observer (`Observers`):
        one that raises does not stop the others; the first failure is raised afterwards as
        ObserverError (a failed transcript write as TranscriptWriteError)."""
        self._observers.emit(event)

    # -- what users call -------------------------------------------------------------------

    def ask(self, text: str) -> AskResult:
        """Send `text` as the user's next message and run the agent loop until the model stops
        asking for tools or `max_turns` model calls were made.

        Raises ModelError when a model call fails for good, re-raises KeyboardInterrupt, and
        raises ObserverError / TranscriptWriteError when an observer or the transcript fails;
        in every case the history stays valid and the next `ask` continues the conversation.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("ask() needs a non-empty request")
        events: list[Event] = []
        unsubscribe = self.subscribe(events.append)
        self._asking = True
        try:
            self._check_window()
            finished = run_ask(self._loop_parts(), text)
        finally:
            self._asking = False
            unsubscribe()
        return AskResult(finished, events)

    def compact(
        self,
        focus: str | None = None,
        strategy: Strategy | None = None,
        *,
        summary: str | None = None,
    ) -> CompactionFinished | CompactionSkipped:
        """Compact now (as `%compact` does), keeping `focus` word for word.

        Runs `strategy`, or the strategies that answer requests (those with `when` "on_request",
        else the "over_limit" ones). Returns the compaction event; on failure (`success`
        False, `error` says why) the history is exactly as it was; `CompactionSkipped` when
        there is nothing to compact (nothing new since the last compaction).

        `summary` is applied instead of asking the summariser (no model call): the first of
        those strategies runs with it as its one summary, checked like any result (the focus,
        recent files and pending request kept as usual). It is recorded as edited unless it
        is the proposal `propose_summary` made for this history, unchanged.
        """
        answer_left_over(self._history, "it was interrupted")
        focus = self.redact(focus) if focus else None  # it reaches the summariser's request
        given = None
        if summary is not None:
            if not isinstance(summary, str):
                raise TypeError(f"summary must be a str, got {type(summary).__name__}")
            proposal = self.proposal
            given = GivenSummary(self.redact(summary), proposal.text if proposal else None)
        try:
            return self._compactor.request("user", focus, strategy, given)
        finally:
            self._transcript.sync()

    def undo_compaction(self) -> CompactionFinished:
        """Undo the last full compaction: the history it replaced and the compaction state are
        put back byte for byte, recorded as a compaction of its own (strategy "undo") that
        replay honours. Only the last one can be undone, once (ValueError when there is none);
        call it between asks."""
        if self._asking:
            raise RuntimeError("undo_compaction() cannot be called while an ask is running")
        try:
            return self._compactor.undo()
        finally:
            self._transcript.sync()

    def propose_summary(
        self, focus: str | None = None, strategy: Strategy | None = None
    ) -> SummaryProposal:
        """The summary `compact(focus, strategy)` would apply now, made by the real summariser
        with exactly the request `compact` would send (a paid call), without changing the
        history. Read or edit its `text`, then apply it with `compact(focus, strategy,
        summary=text)`; the session keeps it as `proposal` until the history changes.

        Raises ValueError when the strategy would fail or makes no single summary.
        """
        answer_left_over(self._history, "it was interrupted")  # as compact() would, first
        focus = self.redact(focus) if focus else None
        return self._compactor.requests.propose(strategy, focus)

    @property
    def proposal(self) -> SummaryProposal | None:
        """The last `propose_summary` result while the history is as it was then (None
        after the history changed, or after a compaction applied)."""
        return self._compactor.requests.proposal()

    def preview(
        self,
        strategy: Strategy | None = None,
        focus: str | None = None,
        *,
        summarise: bool = False,
    ) -> Preview:
        """What `compact(focus, strategy)` would do now, without doing it: which messages and
        tool results it would replace, the size before and after. No model call unless
        `summarise` (a summary is otherwise a stand-in of the right kind)."""
        if strategy is not None and server_edit(strategy) is not None:
            return self._services.server_preview(strategy)
        return self._compactor.preview(strategy, focus or None, summarise=summarise)

    def reset(self) -> None:
        """Start afresh: empty history and compaction state, same transcript, settings and
        pins (the pinned texts open the new history)."""
        self._history.reset()
        self._compactor.reset()
        self.emit(SessionReset())
        for pin in self._pins:
            self._history.append(pin_message(pin))

    def _check_window(self) -> None:
        """Say once when a token limit given as a share has no window to apply to."""
        share = self.policy.token_limit
        if share is None or share >= 1 or self.token_limit is not None:
            return
        if "unknown_window" not in self._notices:
            self._notices.add("unknown_window")
            note = (
                f"token_limit {share} is a share of the context window, but the window of "
                f"{self._model.name!r} is not known: the token limit is off. Set "
                "window_tokens (CompactPolicy, %config AgentMagics.window_tokens)."
            )
            self.emit(Notice("unknown_window", note))

    # -- pins ------------------------------------------------------------------------------

    def pin(self, text: str | None = None, *, path: str | None = None) -> int:
        """Pin `text` (or the workspace file `path`, read as read_file reads it and read again
        after each full compaction): from now on it is part of every request, verbatim,
        whatever any strategy does. It joins the history's end now (the cached prefix stays)
        and follows the header of every compacted history (a credential in it is redacted, as
        everywhere). Returns the pin's id. Call it between asks (not from an observer)."""
        if self._asking:
            raise RuntimeError("pin() cannot be called while an ask is running; pin between asks")
        answer_left_over(self._history, "it was interrupted")
        pin = self._pins.add(text, path)
        self._history.append(pin_message(pin))
        return pin.id

    def unpin(self, pin_id: int) -> None:
        """Stop carrying pin `pin_id`: no compaction keeps it any more (it stays in the history
        as it is until the next full compaction, so that the prompt cache is not rewritten)."""
        self._pins.remove(pin_id)

    @property
    def pins(self) -> list[tuple[int, str]]:
        """The pinned texts as (id, text), oldest first (a file's text as last read)."""
        return [(pin.id, pin.text) for pin in self._pins]

    def _record_pin(self, kind: str, fields_: dict[str, Any]) -> None:
        history = self._history
        self._write([pin_record(kind, fields_, history.epoch, len(history))])

    def sync(self) -> None:
        """Make the transcript durable now (written and fsynced; asks and compactions do)."""
        self._transcript.sync()

    def close(self) -> None:
        """Charge a summary prepared in the background that no compaction took, then flush
        and close the transcript (the transcript alone is closed at interpreter exit)."""
        try:
            if not self._transcript.closed:
                self._compactor.close()
        finally:
            self._transcript.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- wiring --------------------------------------------------------------------------

    def _loop_parts(self) -> LoopParts:
        self._history.overhead_chars = self._prompt_overhead()
        settings = self._settings
        return LoopParts(
            history=self._history,
            compactor=self._compactor,
            model=self._model,
            tools=self._tools,
            tool_context=lambda hook: self._services.tool_context(
                hook, self.state, self._notices, self._notes
            ),
            emit=self.emit,
            system=self.system,
            max_turns=settings.max_turns,
            max_tokens=settings.max_tokens,
            totals=self._totals,
            redact=self.redact,
            sync=self._transcript.sync,
            cache=settings.cache,
            ledger=self._ledger,
            prefix=self._prefix,
            cache_diagnosis=settings.cache_diagnosis,
        )

    def _prompt_overhead(self) -> int:
        """Characters of what every request sends besides the messages."""
        return len(self.system) + len(to_json([tool.definition() for tool in self._tools]))

    def _write(self, records: list[Record]) -> None:
        for kind, record in records:
            self._transcript.write(kind, record)

    def _record_start(self) -> None:
        self._write(
            start_records(
                self._settings,
                self._ledger.prices,
                [describe(s) for s in self._compactor.strategies],
                model=self._model.name,
                offline=self._model.offline,
                workspace=str(self.workspace),
                tools=[tool.name for tool in self._tools],
                outputs=self._services.outputs,
            )
        )


def _settings_value(settings: SessionSettings | None) -> SessionSettings:
    if settings is None:
        return SessionSettings()
    if not isinstance(settings, SessionSettings):
        raise TypeError(f"settings must be a SessionSettings, got {type(settings).__name__}")
    return settings


def _strategies(strategies: Sequence[Strategy] | None) -> list[Strategy]:
    """The strategies a session runs: these (each checked), or the seed's pipeline."""
    if strategies is None:
        return default_pipeline()
    return [check_strategy(s) for s in strategies]
