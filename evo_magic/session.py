"""Session: one conversation with an agent, as long as a kernel (or a script) keeps it.

The composition root: it owns the `History` (messages, sizes, the pending request), the
`Compactor` (the strategies and the guarantees around them), the model, the tools, the
transcript and the observers, and wires them together. `ask(text)` runs the agent loop;
`compact(focus)` compacts on demand. Front ends observe the session's events; nothing here
prints, and nothing imports this module but the front ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.compact import server
from evo_magic.compact.base import Strategy, check_strategy, server_edit
from evo_magic.compact.compactor import Compactor, GivenSummary, Preview
from evo_magic.compact.pins import Pin, pin_message
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.state import CompactState
from evo_magic.cost import RATE_FIELDS, Ledger, Overrides, PriceTable, Spending, price_table
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    CompactionSkipped,
    ContextSize,
    Event,
    Notice,
    SessionReset,
)
from evo_magic.history import History
from evo_magic.loop import LoopParts, Totals, answer_left_over, run_ask
from evo_magic.measure import to_json
from evo_magic.meter.data import MeterData
from evo_magic.meter.log import MeterLog, follow
from evo_magic.models import Model, ModelRequest, resolve_model
from evo_magic.prompt_cache import CacheSettings, PrefixTracker
from evo_magic.secrets import add_secret, known_secrets, redact
from evo_magic.settings import SessionSettings
from evo_magic.strategies import default_pipeline
from evo_magic.strategies.registry import describe
from evo_magic.summariser import AgentPrompt, Summariser, Summary
from evo_magic.tools import BashSettings, Tool, ToolContext, default_tools
from evo_magic.tools.files import read_text
from evo_magic.transcript import Transcript
from evo_magic.usage import Usage

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Observer = Callable[[Event], None]

PIN_FILE_MAX_CHARS = 100_000
"""A pinned file holds at most this many characters (about 25,000 tokens in every request)."""


@dataclass(frozen=True)
class SummaryProposal:
    """A summary the summariser proposed (see `Session.propose_summary`)."""

    text: str
    focus: str | None
    strategy: str
    """The strategy that asked for it (and that `compact` runs with it)."""
    before: ContextSize
    after: ContextSize
    """The history's size before, and after the summary applied as proposed."""
    chosen: Strategy | None = field(default=None, repr=False, compare=False)
    """The strategy passed to `propose_summary` (None: the configured ones): apply the text
    with `compact(focus, chosen, summary=...)`."""


class ObserverError(RuntimeError):
    """An observer raised while handling an event. The history is kept (and valid); the
    message names the observer and its error."""


@dataclass
class AskResult:
    """What one `ask` did: the final text, why it stopped, and every event it emitted."""

    text: str
    stop_reason: str
    """"end_turn", "max_turns", "max_tokens", "stop_sequence", "refusal", ... as the loop saw it."""
    turns: int
    usage: Usage
    duration: float
    context: ContextSize
    events: list[Event] = field(default_factory=list)

    @property
    def compactions(self) -> list[CompactionFinished]:
        return [e for e in self.events if isinstance(e, CompactionFinished)]


class Session:
    """A conversation with an agent in a workspace.

    Parameters:
        workspace: the directory the agent works in (its file tools cannot leave it).
        model: a `Model` (e.g. `FunctionModel(fn)`), a Claude model name, "offline", or None
            (Claude when ANTHROPIC_API_KEY is set, else the offline stand-in).
        strategies: the compaction strategies, cheapest first (None: the seed's pipeline,
            `default_pipeline(policy)`); changeable between asks.
        summariser: how summaries are made (None: the session's model with the seed's prompt
            and the policy's `summary_input_limit` / `summary_max_tokens`).
        transcripts_root: where transcripts go (None: `<workspace>/.evo_magic`).
        session_id: the transcript directory's name (None: a new sortable id).
        tools: the tools offered (None: bash, read_file, write_file, edit_file, compact).
        settings: a `SessionSettings` (None: the defaults).
        **changes: settings by name, over `settings`: every `SessionSettings` field
            (`system_prompt`, `max_turns`, `max_tokens`, `bash_timeout`, `sandbox`, the bash
            environment and bounds such as `sandbox_network`, `caching`, `cache_ttl`,
            `prices`, `policy`), a `CompactPolicy` field (`context_limit=...`), or
            `cache=CacheSettings(...)`. Each is checked by its one rule (ValueError).
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
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"workspace {self.workspace} is not a directory")
        settings = (settings or SessionSettings()).with_changes(**changes)
        self._settings = settings
        self.model = resolve_model(model)
        self.tools = list(tools) if tools is not None else default_tools()
        self._notices: set[str] = set()  # what tools have said once already (sandbox warnings)
        self._proposal: SummaryProposal | None = None
        self._proposed_at: tuple[int, int, int] | None = None
        self._pins: dict[int, Pin] = {}
        self._asking = False  # pins join the history between asks, never inside one
        self._next_pin = 1
        self._summariser = summariser
        self._custom_strategies = strategies is not None
        self._observers: list[Observer] = []
        self.totals = Totals()
        self.ledger = Ledger(price_table(settings.prices or None))
        """Prices every call and keeps what the session spent (`spending`)."""
        self.cached_prefix = PrefixTracker()
        """Where the prompt cache of the history ends (what cache-aware strategies weigh)."""
        root = Path(transcripts_root) if transcripts_root else self.workspace / ".evo_magic"
        self.transcript = Transcript(root.expanduser(), session_id, secrets=self.secrets)
        self.history = History(self.emit, overhead_chars=self._prompt_overhead())
        chosen = list(strategies) if strategies is not None else default_pipeline(settings.policy)
        self.compactor = Compactor(
            self.history,
            emit=self.emit,
            summarise=self._summarise,
            snapshot=lambda messages: str(self.transcript.snapshot(messages)),
            save_output=self._save_output,
            policy=settings.policy,
            strategies=[check_strategy(s) for s in chosen],
            cache=self.cached_prefix,
            read_file=self._read_for_compaction,
            model=lambda: self.model.name,
            pins=self._pin_texts,
            server_summarise=self._server_summarise,
        )
        self.context_log: MeterLog = follow(self)
        """Every model call and compaction of the session, as the context meter and
        `context_figure` draw them."""
        self._record_start()

    # -- settings ------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        """The model the loop calls; assign another (a `Model`) to switch from the next call."""
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        self._model = model
        self.secrets()  # its credentials are known (and redacted) from now on

    @property
    def settings(self) -> SessionSettings:
        """Every setting the session runs with (the policy is the compactor's)."""
        if self._settings.policy is not self.compactor.policy:
            self._settings = replace(self._settings, policy=self.compactor.policy)
        return self._settings

    @settings.setter
    def settings(self, settings: SessionSettings) -> None:
        """Apply new settings from the next model call on; each change is recorded once."""
        if not isinstance(settings, SessionSettings):
            raise TypeError(f"settings must be a SessionSettings, got {type(settings).__name__}")
        old = self.settings
        self._settings = settings
        if settings.policy != old.policy:
            self.compactor.policy = settings.policy
            self.transcript.write("policy", {"policy": _policy_record(settings.policy)})
            if not self._custom_strategies:
                self._set_strategies(default_pipeline(settings.policy))
        if settings.cache != old.cache:
            self.transcript.write("cache", {"cache": asdict(settings.cache)})
        if settings.prices != old.prices:
            table = price_table(settings.prices or None)
            if _price_record(table) != _price_record(self.ledger.prices):
                self.transcript.write("prices", {"prices": _price_record(table)})
            self.ledger.prices = table
        changed = _changed(old, settings)
        if changed:
            self.transcript.write("settings", {"settings": changed})

    def _change(self, **changes: Any) -> None:
        self.settings = self.settings.with_changes(**changes)

    @property
    def system(self) -> str:
        """The system prompt sent (`settings.system_prompt`, or evo_magic's default when it
        is empty); assign a text to change it, "" for the default."""
        return self._settings.system

    @system.setter
    def system(self, text: str) -> None:
        self._change(system_prompt=text)

    @property
    def max_turns(self) -> int:
        return self._settings.max_turns

    @max_turns.setter
    def max_turns(self, value: int) -> None:
        self._change(max_turns=value)

    @property
    def max_tokens(self) -> int:
        return self._settings.max_tokens

    @max_tokens.setter
    def max_tokens(self, value: int) -> None:
        self._change(max_tokens=value)

    @property
    def bash_timeout(self) -> float:
        return self._settings.bash_timeout

    @bash_timeout.setter
    def bash_timeout(self, value: float) -> None:
        self._change(bash_timeout=value)

    @property
    def sandbox(self) -> str:
        return self._settings.sandbox

    @sandbox.setter
    def sandbox(self, mode: str) -> None:
        self._change(sandbox=mode)

    @property
    def bash_settings(self) -> BashSettings:
        """What a bash command gets and how far it may go; assign a new `BashSettings` to
        change it from the next command."""
        return self._settings.bash

    @bash_settings.setter
    def bash_settings(self, bash: BashSettings) -> None:
        self._change(bash=bash)

    @property
    def policy(self) -> CompactPolicy:
        """The limits and the default pipeline's numbers (the compactor's); a new policy
        applies from the next model call (and rebuilds the default pipeline unless strategies
        were set)."""
        return self.compactor.policy

    @policy.setter
    def policy(self, policy: CompactPolicy) -> None:
        if not isinstance(policy, CompactPolicy):
            raise TypeError(f"policy must be a CompactPolicy, got {type(policy).__name__}")
        self._change(policy=policy)

    @property
    def token_limit(self) -> int | None:
        """The policy's token limit in tokens (a share resolved against the model's context
        window, or `policy.window_tokens`), or None when off or when the window is unknown."""
        return self.compactor.token_limit

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        """The compaction strategies, cheapest first. Assign a list to change them (from the
        next model call); assign None for the seed's pipeline."""
        return self.compactor.strategies

    @strategies.setter
    def strategies(self, strategies: Sequence[Strategy] | None) -> None:
        self._custom_strategies = strategies is not None
        chosen = list(strategies) if strategies is not None else default_pipeline(self.policy)
        self._set_strategies(chosen)

    def _set_strategies(self, strategies: list[Strategy]) -> None:
        checked = [check_strategy(s) for s in strategies]
        if [describe(s) for s in checked] == [describe(s) for s in self.compactor.strategies]:
            return  # the same settings: keep the running ones (and what they know)
        self.compactor.strategies = checked
        self.transcript.write("strategies", {"strategies": [describe(s) for s in checked]})

    @property
    def cache(self) -> CacheSettings:
        """How requests are marked for prompt caching; a new value applies from the next call
        (and is recorded in the transcript)."""
        return self._settings.cache

    @cache.setter
    def cache(self, cache: CacheSettings | None) -> None:
        self._change(cache=cache)

    @property
    def prices(self) -> PriceTable:
        """The price table calls are costed with. Assign a `PriceTable`, overrides of the
        shipped table (model id -> rates in USD per million tokens), or None for the shipped
        one; it applies from the next call."""
        return self.ledger.prices

    @prices.setter
    def prices(self, prices: PriceTable | Overrides | None) -> None:
        self._change(prices=prices or {})

    @property
    def spending(self) -> Spending:
        """USD spent so far: the agent's calls and the summaries, and how many had no price."""
        return self.ledger.spent

    @property
    def cost_usd(self) -> float | None:
        """USD spent so far by every model and summarisation call (None when one had no
        price: see `spending` for the part that had one)."""
        return self.ledger.spent.total_usd

    @property
    def summariser(self) -> Summariser:
        """How summaries are made (see `Summariser`)."""
        if self._summariser is not None:
            return self._summariser
        return Summariser(
            input_limit=self.policy.summary_input_limit,
            max_tokens=self.policy.summary_max_tokens,
            in_context=self.policy.summary_in_context,
        )

    @summariser.setter
    def summariser(self, summariser: Summariser | None) -> None:
        self._summariser = summariser

    # -- reading -------------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history, as Messages API dicts (a new list; treat the dicts as read-only)."""
        return self.history.messages

    @property
    def state(self) -> CompactState:
        """has_compacted, last_summary, recent_files, compact_count, and the back-off."""
        return self.compactor.state

    @property
    def usage(self) -> Usage:
        """Tokens of every model call of the session (summaries not included)."""
        return self.totals.usage

    @property
    def calls(self) -> int:
        return self.totals.calls

    @property
    def asks(self) -> int:
        return self.history.turn

    @property
    def pending_request(self) -> str | None:
        """The request the model has not finished answering (carried over by a compaction)."""
        return self.history.pending_request

    @property
    def session_id(self) -> str:
        return self.transcript.session_id

    @property
    def directory(self) -> Path:
        """The session's own directory under the transcripts root."""
        return self.transcript.directory

    def context(self) -> ContextSize:
        """The size of the history now: messages, characters (the seed's measure) and tokens
        of the whole prompt (system, tools and messages; exact right after a model call)."""
        return self.history.size()

    def context_figure(self, width: float = 3.4) -> Figure:
        """The context chart of the whole session as a matplotlib Figure `width` inches wide
        (3.4: a paper's column): the prompt sent at each model call in tokens, what was removed
        just before it, the limit, and every compaction. Save it with `figure.savefig(path)`
        (in a notebook it also shows as an image once matplotlib's inline backend is on, e.g.
        after `%matplotlib inline`). Needs matplotlib (imported here, not before)."""
        from evo_magic.meter.figure import context_figure

        return context_figure(MeterData.of_session(self, self.context_log), width)

    def secrets(self) -> list[str]:
        """Every credential the session knows: the environment's, and those its model holds
        (a key passed in code or held by a client object)."""
        credentials = getattr(self.model, "credentials", None)
        if callable(credentials):
            for value in credentials():
                add_secret(value)
        return known_secrets()

    def redact(self, text: str) -> str:
        """`text` with every credential the session knows replaced."""
        return redact(text, self.secrets())

    def __repr__(self) -> str:
        size = self.context()
        return (
            f"<Session {self.session_id} model={self.model.name!r} messages={size.messages} "
            f"chars={size.chars} compactions={self.state.compact_count}>"
        )

    # -- observing -----------------------------------------------------------------------

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event; returns a function that unsubscribes."""
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def emit(self, event: Event) -> None:
        """Record the event in the transcript, then pass it to every observer.

        An observer that raises does not stop the others; the first failure is raised
        afterwards as ObserverError (a failed transcript write as TranscriptWriteError).
        """
        if event.recorded:
            record, raw = event.record_parts()
            self.transcript.write(record.pop("kind"), record, raw)
        failure: tuple[Observer, Exception] | None = None
        for observer in list(self._observers):
            try:
                observer(event)
            except Exception as exc:
                failure = failure or (observer, exc)
        if failure is not None:
            observer, exc = failure
            raise ObserverError(
                f"the observer {_name(observer)} failed on a {event.kind} event "
                f"({type(exc).__name__}: {exc}); the history is kept and the next ask continues"
            ) from exc

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
        return _result(finished, events)

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
        False, `error` says why) the history is exactly as it was.

        `summary` is applied instead of asking the summariser (no model call): the first of
        those strategies runs with it as its one summary, checked like any result (the focus,
        recent files and pending request kept as usual). It is recorded as edited, with the
        proposal it came from when `propose_summary` made one for this history.
        """
        answer_left_over(self.history, "it was interrupted")
        focus = self.redact(focus) if focus else None  # it reaches the summariser's request
        given = None
        if summary is not None:
            if not isinstance(summary, str):
                raise TypeError(f"summary must be a str, got {type(summary).__name__}")
            proposal = self.proposal
            given = GivenSummary(self.redact(summary), proposal.text if proposal else None)
        try:
            event = self.compactor.request("user", focus, strategy, given)
        finally:
            self.transcript.sync()
        if event.success:
            self._proposal = None
        return event

    def propose_summary(
        self, focus: str | None = None, strategy: Strategy | None = None
    ) -> SummaryProposal:
        """The summary `compact(focus, strategy)` would apply now, made by the real summariser
        with exactly the request `compact` would send (a paid call), without changing the
        history. Read or edit its `text`, then apply it with `compact(focus, strategy,
        summary=text)`; the session keeps it as `proposal` until the history changes.

        Raises ValueError when the strategy would fail or makes no single summary.
        """
        answer_left_over(self.history, "it was interrupted")  # as compact() would, first
        focus = self.redact(focus) if focus else None
        preview = self.compactor.preview(strategy, focus, summarise=True)
        if preview.error:
            raise ValueError(f"no summary to propose: {preview.error}")
        if len(preview.summaries) != 1:
            made = "makes several summaries" if preview.summaries else "makes no summary"
            if not preview.acts and not preview.summaries:
                made = "has nothing to compact now"
            raise ValueError(f"no summary to propose: the strategy {preview.strategy!r} {made}")
        self._proposal = SummaryProposal(
            preview.summaries[0], focus, preview.strategy, preview.before, preview.after, strategy
        )
        self._proposed_at = self._history_mark()
        return self._proposal

    @property
    def proposal(self) -> SummaryProposal | None:
        """The last `propose_summary` result while the history is as it was then (None
        after the history changed, or after a compaction applied)."""
        if self._proposal is None or self._proposed_at != self._history_mark():
            return None
        return self._proposal

    def _history_mark(self) -> tuple[int, int, int]:
        """Changes whenever the history does (a message, a result, an edit, a replacement)."""
        return (self.history.generation, len(self.history), self.history.size().chars)

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
            return self._server_preview(strategy)
        return self.compactor.preview(strategy, focus or None, summarise=summarise)

    def reset(self) -> None:
        """Start afresh: empty history and compaction state, same transcript, settings and
        pins (the pinned texts open the new history)."""
        self.history.reset()
        self.compactor.reset()
        self.emit(SessionReset())
        for pin in self._pins.values():
            self.history.append(pin_message(pin))

    def _check_window(self) -> None:
        """Say once when a token limit given as a share has no window to apply to."""
        share = self.policy.token_limit
        if share is None or share >= 1 or self.token_limit is not None:
            return
        if "unknown_window" not in self._notices:
            self._notices.add("unknown_window")
            note = (
                f"token_limit {share} is a share of the context window, but the window of "
                f"{self.model.name!r} is not known: the token limit is off. Set "
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
        if (text is None) == (path is None):
            raise ValueError("pin() takes a text or path=..., not both or neither")
        if path is not None:
            text = self._read_pinned_file(path)
        elif not isinstance(text, str) or not text.strip():
            raise ValueError("pin() needs a non-empty text")
        pin = Pin(self._next_pin, self.redact(text), path)
        answer_left_over(self.history, "it was interrupted")
        self._next_pin += 1
        self._pins[pin.id] = pin
        self._record_pin("pin", pin)
        self.history.append(pin_message(pin))
        return pin.id

    def unpin(self, pin_id: int) -> None:
        """Stop carrying pin `pin_id`: no compaction keeps it any more (it stays in the history
        as it is until the next full compaction, so that the prompt cache is not rewritten)."""
        if pin_id not in self._pins:
            known = ", ".join(map(str, self._pins)) or "none"
            raise KeyError(f"no pin {pin_id!r} (pins: {known})")
        self._record_pin("unpin", self._pins.pop(pin_id))

    @property
    def pins(self) -> list[tuple[int, str]]:
        """The pinned texts as (id, text), oldest first (a file's text as last read)."""
        return [(pin.id, pin.text) for pin in self._pins.values()]

    def _read_pinned_file(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ValueError("pin(path=...) needs a workspace file's path")
        text = read_text(self.workspace, path, PIN_FILE_MAX_CHARS)  # raises ToolError saying why
        if text is None:
            raise ValueError(f"{path} is too large to pin (over {PIN_FILE_MAX_CHARS:,} characters)")
        if not text.strip():
            raise ValueError(f"{path} is empty: nothing to pin")
        return text

    def _pin_texts(self, reread: bool) -> tuple[str, ...]:
        """The pins' blocks, for the compactor; `reread`: a full compaction, so pinned files
        are read again first (a file that cannot be read keeps its last text, said)."""
        if reread:
            for pin in list(self._pins.values()):
                if pin.path is not None:
                    self._reread_pin(pin)
        return tuple(pin.block_text for pin in self._pins.values())

    def _reread_pin(self, pin: Pin) -> None:
        try:
            text = self.redact(self._read_pinned_file(pin.path or ""))
        except Exception as exc:
            note = f"The pinned file {pin.path} could not be read again ({exc}); its text stays."
            self.emit(Notice("pin_unreadable", note))
            return
        if text != pin.text:
            self._pins[pin.id] = replace(pin, text=text)
            self._record_pin("pin", self._pins[pin.id])

    def _record_pin(self, kind: str, pin: Pin) -> None:
        """A pin or unpin record, with where in the history it happened (replay applies it
        there: before the message `index` of `epoch`)."""
        record: dict[str, Any] = {"id": pin.id}
        if kind == "pin":
            record.update(text=pin.text, path=pin.path)
        where = {"epoch": self.history.epoch, "index": len(self.history)}
        self.transcript.write(kind, {**record, **where})

    def close(self) -> None:
        """Flush and close the transcript (also done at interpreter exit)."""
        self.transcript.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- wiring --------------------------------------------------------------------------

    def _loop_parts(self) -> LoopParts:
        self.history.overhead_chars = self._prompt_overhead()
        return LoopParts(
            history=self.history,
            compactor=self.compactor,
            model=self.model,
            tools=self.tools,
            tool_context=self._tool_context,
            emit=self.emit,
            system=self.system,
            max_turns=self.max_turns,
            max_tokens=self.max_tokens,
            totals=self.totals,
            redact=self.redact,
            sync=self.transcript.sync,
            cache=self.cache,
            ledger=self.ledger,
            prefix=self.cached_prefix,
        )

    def _tool_context(self, request_compaction: Callable[[str | None], None]) -> ToolContext:
        state, policy = self.compactor.state, self.policy
        return ToolContext(
            workspace=self.workspace,
            on_file=lambda path: state.note_file(path, policy.max_recent_files),
            request_compaction=request_compaction,
            bash_timeout=self.bash_timeout,
            sandbox=self.sandbox,
            read_only=(self.transcript.root,),
            bash=self._settings.bash,
            notices=self._notices,
        )

    def _summarise(self, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        prompt = None
        if self.history.is_whole(messages):
            # The whole history: the prompt the agent's last call cached. (Part of it, as
            # SummariseOlder asks, ends where no cache entry is: asked as text.)
            tools = [tool.definition() for tool in self.tools]
            prompt = AgentPrompt(self.system, tools, self.cache)
        summary = self.summariser.summarise(messages, focus, self.model, prompt)
        cost = self.ledger.charge(summary.usage, summary.model, summary=True)
        if cost is None and (note := self.ledger.unpriced_notice(summary.model)):
            self.emit(Notice("unpriced_model", note))
        return replace(summary, text=self.redact(summary.text), cost_usd=cost)

    def _read_for_compaction(self, path: str, max_chars: int) -> str | None:
        """A workspace file as a compaction puts it back: read as read_file reads it, and
        redacted as a tool result is."""
        text = read_text(self.workspace, path, max_chars)
        return None if text is None else self.redact(text)

    def _server_summarise(
        self, messages: Sequence[dict[str, Any]], focus: str | None
    ) -> tuple[dict[str, Any], Summary]:
        tools = [tool.definition() for tool in self.tools]
        request = server.summary_request(
            messages, focus, system=self.system, tools=tools, max_tokens=self.max_tokens
        )
        reply = self.model.respond(request)
        block, usage = server.summary_block(reply)
        cost = self.ledger.charge(usage, reply.model, summary=True)
        return block, Summary(block["content"], usage, reply.model, cost)

    def _server_preview(self, strategy: Strategy) -> Preview:
        """What a server strategy's edits would take out of the prompt now: `count_tokens`
        with them (free) against the count without them."""
        view = list(self.history.view())
        before = self.history.size()
        params = server.request_params([strategy])
        tools = [tool.definition() for tool in self.tools]
        request = ModelRequest(
            messages=view, max_tokens=self.max_tokens, system=self.system, tools=tools,
            context_management=params.context_management, betas=params.betas,
        )  # fmt: skip
        count = getattr(self.model, "count_tokens", None)
        if count is None or not view or params.context_management is None:
            why = "no edit to count" if params.context_management is None else "nothing to count"
            if count is None:
                why = f"the model {self.model.name!r} cannot count tokens"
            return Preview(strategy.name, strategy.when, before, before, view, why, original=view)
        edited, original = count(request)
        after = replace(before, tokens=edited, tokens_exact=True)
        return Preview(
            strategy.name, strategy.when, before, after, view, None, original=view,
            input_tokens=edited, original_input_tokens=original,
        )  # fmt: skip

    def _save_output(self, tool_use_id: str, text: str) -> str:
        path = self.transcript.save_tool_output(tool_use_id, text)
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)

    def _prompt_overhead(self) -> int:
        """Characters of what every request sends besides the messages."""
        return len(self.system) + len(to_json([tool.definition() for tool in self.tools]))

    def _record_start(self) -> None:
        self.transcript.write(
            "session_start",
            {
                "model": self.model.name,
                "offline": self.model.offline,
                "workspace": str(self.workspace),
                "system": self.system,
                "tools": [tool.name for tool in self.tools],
                "policy": _policy_record(self.policy),
                "strategies": [describe(s) for s in self.compactor.strategies],
                "max_turns": self.max_turns,
                "cache": asdict(self.cache),
                "prices": _price_record(self.ledger.prices),
            },
        )
        # Every other setting (those session_start does not carry, a new one included).
        rest = _recorded(self._settings, skip=frozenset({"system_prompt", "max_turns"}))
        self.transcript.write("settings", {"settings": rest})


def _name(observer: Observer) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__name__


def _policy_record(policy: CompactPolicy) -> dict[str, Any]:
    record = dict(vars(policy))
    record["exclude_tools"] = sorted(policy.exclude_tools)
    return record


RECORDED_ELSEWHERE = frozenset({"policy", "caching", "cache_ttl", "cache_static_ttl", "prices"})
"""Settings with records of their own (`policy`, `cache`, `prices`); the others go in
`settings` records, at the start and when they change."""


def _recorded(settings: SessionSettings, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        f.name: getattr(settings, f.name)
        for f in fields(settings)
        if f.name not in RECORDED_ELSEWHERE and f.name not in skip
    }


def _changed(old: SessionSettings, new: SessionSettings) -> dict[str, Any]:
    """The settings `new` changes, as a `settings` record holds them."""
    before = _recorded(old)
    return {name: value for name, value in _recorded(new).items() if before[name] != value}


def _price_record(table: PriceTable) -> dict[str, dict[str, float]]:
    """The rates of `table` that differ from the shipped ones, by model (what a `prices`
    record holds; `price_table` of it is the table again)."""
    shipped = price_table(None)
    return {
        model: {rate: getattr(price, rate) for rate in RATE_FIELDS}
        for model in table.models()
        if (price := table.lookup(model)) is not None and price != shipped.lookup(model)
    }


def _result(finished: AskFinished, events: list[Event]) -> AskResult:
    return AskResult(
        text=finished.text,
        stop_reason=finished.stop_reason,
        turns=finished.turns,
        usage=finished.usage,
        duration=finished.duration,
        context=finished.context,
        events=events,
    )
