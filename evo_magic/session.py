"""Session: one conversation with an agent, as long as a kernel (or a script) keeps it.

The composition root: it owns the `History` (messages, sizes, the pending request), the
`Compactor` (the strategies and the guarantees around them), the model, the tools, the
transcript and the observers, and wires them together. `ask(text)` runs the agent loop;
`compact(focus)` compacts on demand. Front ends observe the session's events; nothing here
prints, and nothing imports this module but the front ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.compact.base import Strategy, check_strategy, describe
from evo_magic.compact.compactor import Compactor, GivenSummary, Preview
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.state import CompactState
from evo_magic.context_log import MeterData, MeterLog, follow
from evo_magic.cost import Ledger, Overrides, PriceTable, Spending, price_table
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    ContextSize,
    Event,
    Notice,
    SessionReset,
)
from evo_magic.history import History
from evo_magic.loop import LoopParts, Totals, answer_left_over, run_ask
from evo_magic.measure import to_json
from evo_magic.models import Model, resolve_model
from evo_magic.prompt_cache import CacheSettings, PrefixTracker
from evo_magic.secrets import add_secret, known_secrets, redact
from evo_magic.strategies import default_pipeline
from evo_magic.summariser import AgentPrompt, Summariser, Summary
from evo_magic.tools import Tool, ToolContext, default_tools
from evo_magic.tools.sandbox import DEFAULT_SANDBOX, SandboxMode, check_mode
from evo_magic.transcript import Transcript
from evo_magic.usage import Usage

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Observer = Callable[[Event], None]

DEFAULT_SYSTEM = """\
You are a careful coding agent working inside a researcher's notebook session.
Your workspace is a directory; file paths are relative to it. Use the tools to look before you \
change anything, keep tool outputs small (head, grep, offset/limit), and say what you found.
When the context grows long, or before switching to a new part of the task, call `compact` with \
a focus that names what must survive."""


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
        system: the system prompt (None: evo_magic's default).
        policy: the limits (`context_limit`, `token_limit`, `max_failures`, ...) and the
            numbers of the default pipeline.
        strategies: the compaction strategies, cheapest first (None: the seed's pipeline,
            `default_pipeline(policy)`); changeable between asks.
        summariser: how summaries are made (None: the session's model with the seed's prompt
            and the policy's `summary_input_limit` / `summary_max_tokens`).
        max_turns, max_tokens: model calls per ask at most; max_tokens of each call.
        transcripts_root: where transcripts go (None: `<workspace>/.evo_magic`).
        session_id: the transcript directory's name (None: a new sortable id).
        tools: the tools offered (None: bash, read_file, write_file, edit_file, compact).
        bash_timeout: seconds before a bash command, and all it started, is killed.
        sandbox: where bash runs when bubblewrap cannot be used: "require" refuses to run it,
            "warn" (default) runs it unsandboxed and says so, "off" never sandboxes.
        cache: how requests are marked for prompt caching (None: `CacheSettings()`, on with
            the 5-minute TTL; `CacheSettings(enabled=False)` sends no breakpoint).
        prices: the price table calls are costed with: a `PriceTable`, or overrides of the
            shipped one (`{"claude-sonnet-5-5": {"cache_read": 0.2}}`); None: the shipped one.
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        *,
        model: Model | str | None = None,
        system: str | None = None,
        policy: CompactPolicy | None = None,
        strategies: Sequence[Strategy] | None = None,
        summariser: Summariser | None = None,
        max_turns: int = 30,
        max_tokens: int = 8_192,
        transcripts_root: str | Path | None = None,
        session_id: str | None = None,
        tools: list[Tool] | None = None,
        bash_timeout: float = 120.0,
        sandbox: SandboxMode = DEFAULT_SANDBOX,
        cache: CacheSettings | None = None,
        prices: PriceTable | Overrides | None = None,
    ):
        self.workspace = Path(workspace).expanduser().resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"workspace {self.workspace} is not a directory")
        self.model = resolve_model(model)
        self.system = DEFAULT_SYSTEM if system is None else system
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self.tools = list(tools) if tools is not None else default_tools()
        self.bash_timeout = bash_timeout
        self.sandbox = check_mode(sandbox)
        self._notices: set[str] = set()  # what tools have said once already (sandbox warnings)
        self._proposal: SummaryProposal | None = None
        self._proposed_at: tuple[int, int, int] | None = None
        self._policy = policy or CompactPolicy()
        self._summariser = summariser
        self._custom_strategies = strategies is not None
        self._observers: list[Observer] = []
        self.totals = Totals()
        self._cache = _checked_cache(cache)
        self.ledger = Ledger(price_table(prices))
        """Prices every call and keeps what the session spent (`spending`)."""
        self.cached_prefix = PrefixTracker()
        """Where the prompt cache of the history ends (what cache-aware strategies weigh)."""
        root = Path(transcripts_root) if transcripts_root else self.workspace / ".evo_magic"
        self.transcript = Transcript(root.expanduser(), session_id, secrets=self.secrets)
        self.history = History(self.emit, overhead_chars=self._prompt_overhead())
        chosen = list(strategies) if strategies is not None else default_pipeline(self._policy)
        self.compactor = Compactor(
            self.history,
            emit=self.emit,
            summarise=self._summarise,
            snapshot=lambda messages: str(self.transcript.snapshot(messages)),
            save_output=self._save_output,
            policy=self._policy,
            strategies=[check_strategy(s) for s in chosen],
            cache=self.cached_prefix,
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
    def policy(self) -> CompactPolicy:
        """The limits and the default pipeline's numbers; a new policy applies from the next
        model call (and rebuilds the default pipeline unless strategies were set)."""
        return self._policy

    @policy.setter
    def policy(self, policy: CompactPolicy) -> None:
        if not isinstance(policy, CompactPolicy):
            raise TypeError(f"policy must be a CompactPolicy, got {type(policy).__name__}")
        if policy == self._policy:
            return
        self._policy = policy
        self.compactor.policy = policy
        self.transcript.write("policy", {"policy": _policy_record(policy)})
        if not self._custom_strategies:
            self._set_strategies(default_pipeline(policy))

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        """The compaction strategies, cheapest first. Assign a list to change them (from the
        next model call); assign None for the seed's pipeline."""
        return self.compactor.strategies

    @strategies.setter
    def strategies(self, strategies: Sequence[Strategy] | None) -> None:
        self._custom_strategies = strategies is not None
        chosen = list(strategies) if strategies is not None else default_pipeline(self._policy)
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
        return self._cache

    @cache.setter
    def cache(self, cache: CacheSettings | None) -> None:
        cache = _checked_cache(cache)
        if cache != self._cache:
            self._cache = cache
            self.transcript.write("cache", {"cache": asdict(cache)})

    @property
    def prices(self) -> PriceTable:
        """The price table calls are costed with. Assign a `PriceTable`, overrides of the
        shipped table (model id -> rates in USD per million tokens), or None for the shipped
        one; it applies from the next call."""
        return self.ledger.prices

    @prices.setter
    def prices(self, prices: PriceTable | Overrides | None) -> None:
        self.ledger.prices = price_table(prices)

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
            input_limit=self._policy.summary_input_limit,
            max_tokens=self._policy.summary_max_tokens,
            in_context=self._policy.summary_in_context,
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
        from evo_magic.context_figure import context_figure

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
        try:
            finished = run_ask(self._loop_parts(), text)
        finally:
            unsubscribe()
        return _result(finished, events)

    def compact(
        self,
        focus: str | None = None,
        strategy: Strategy | None = None,
        *,
        summary: str | None = None,
    ) -> CompactionFinished:
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
        return self.compactor.preview(strategy, focus or None, summarise=summarise)

    def reset(self) -> None:
        """Start afresh: empty history and compaction state, same transcript and settings."""
        self.history.reset()
        self.compactor.reset()
        self.emit(SessionReset())

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
            cache=self._cache,
            ledger=self.ledger,
            prefix=self.cached_prefix,
        )

    def _tool_context(self, request_compaction: Callable[[str | None], None]) -> ToolContext:
        state, policy = self.compactor.state, self._policy
        return ToolContext(
            workspace=self.workspace,
            on_file=lambda path: state.note_file(path, policy.max_recent_files),
            request_compaction=request_compaction,
            bash_timeout=self.bash_timeout,
            sandbox=self.sandbox,
            read_only=(self.transcript.root,),
            notices=self._notices,
        )

    def _summarise(self, messages: Sequence[dict[str, Any]], focus: str | None) -> Summary:
        prompt = None
        if self.history.is_whole(messages):
            # The whole history: the prompt the agent's last call cached. (Part of it, as
            # SummariseOlder asks, ends where no cache entry is: asked as text.)
            tools = [tool.definition() for tool in self.tools]
            prompt = AgentPrompt(self.system, tools, self._cache)
        summary = self.summariser.summarise(messages, focus, self.model, prompt)
        cost = self.ledger.charge(summary.usage, summary.model, summary=True)
        if cost is None and (note := self.ledger.unpriced_notice(summary.model)):
            self.emit(Notice("unpriced_model", note))
        return replace(summary, text=self.redact(summary.text), cost_usd=cost)

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
                "policy": _policy_record(self._policy),
                "strategies": [describe(s) for s in self.compactor.strategies],
                "max_turns": self.max_turns,
                "cache": asdict(self._cache),
            },
        )


def _checked_cache(cache: CacheSettings | None) -> CacheSettings:
    if cache is None:
        return CacheSettings()
    if not isinstance(cache, CacheSettings):
        raise TypeError(f"cache must be a CacheSettings or None, got {type(cache).__name__}")
    return cache


def _name(observer: Observer) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__name__


def _policy_record(policy: CompactPolicy) -> dict[str, Any]:
    record = dict(vars(policy))
    record["exclude_tools"] = sorted(policy.exclude_tools)
    return record


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
