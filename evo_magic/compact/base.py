"""The strategy protocol: what a compaction strategy is, and the context it is given.

A strategy is any object with a `name`, a `when` and `compact(messages, ctx)`:

    class KeepLastTurns:
        name = "keep-last-turns"
        when = "over_limit"

        def __init__(self, n=2):
            self.n = n

        def compact(self, messages, ctx):
            starts = ctx.user_turn_starts(messages)
            if len(starts) <= self.n:
                return None                       # nothing to do
            cut = starts[-self.n]
            summary = ctx.summarise(messages[:cut], ctx.focus)
            return [ctx.compacted_message(summary), *messages[cut:]]

`messages` is the history, read-only: a strategy never changes what it is given; it returns a
new list (reusing the unchanged dicts) or None. The session checks every result (a request the
API accepts, the pending request carried, smaller than before when it replaces the history),
puts the original on disk first, and turns any failure into a failed compaction that leaves
the history byte-identical.

A server strategy (the API's own compaction and context editing) edits no history: it also
has `server_edit()`, returning a `ServerEdit` the loop adds to every request while it is
configured (see `evo_magic.compact.server`); its `compact` does nothing before a call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload, runtime_checkable

from evo_magic.compact.listed import index_in, scan_tool_results
from evo_magic.compact.pins import with_pins
from evo_magic.compacted import REQUEST_HEADER, compacted_message
from evo_magic.measure import ContextSize, measure, message_chars, to_json
from evo_magic.messages import Message, has_text
from evo_magic.prompt_cache import CachedPrefix, clearing_saving

if TYPE_CHECKING:
    from evo_magic.history import ResultRef

When = Literal["every_call", "over_limit", "on_request"]
WHENS: tuple[str, ...] = ("every_call", "over_limit", "on_request")
TRIGGERS: tuple[str, ...] = ("every_call", "auto", "model", "user")


@runtime_checkable
class Strategy(Protocol):
    """A compaction strategy (see the module docstring)."""

    name: str
    when: str
    """"every_call": before every model call; "over_limit": when the context is over the
    session's limit (and for manual requests unless an "on_request" strategy is configured);
    "on_request": only for `%compact`, `Session.compact` and the model's `compact` tool."""

    def compact(self, messages: Sequence[Message], ctx: Context) -> Sequence[Message] | None:
        """The new history, or None when there is nothing to do."""
        ...


class Edited(Sequence[Message]):
    """A result that rewrites a few messages of the history and keeps the rest: what
    `Context.edit` returns. It reads like the new list without copying the old one, so a
    strategy that runs before every call costs what it changes, not the history's length."""

    __slots__ = ("base", "changes")

    def __init__(self, base: Sequence[Message], changes: Mapping[int, Message]):
        self.base = base
        self.changes = dict(changes)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.base)))]
        if index < 0:
            index += len(self.base)
        return self.changes.get(index, self.base[index])

    def __len__(self) -> int:
        return len(self.base)

    def __iter__(self) -> Iterator[Message]:
        changes = self.changes
        for index, message in enumerate(self.base):
            yield changes.get(index, message)


@dataclass
class Context:
    """What a strategy may know and use. One is made for each run of a strategy."""

    focus: str | None
    """What the summary must keep (from `%compact focus=...` or the compact tool), or None."""
    trigger: str
    """"every_call", "auto" (over the limit), "model" (the compact tool) or "user"."""
    size: ContextSize
    """The history's size now: messages, characters, tokens of the whole prompt."""
    context_limit: int | None
    """The session's limit in characters (JSON of the messages)."""
    token_limit: int | None
    recent_files: tuple[str, ...]
    pending_request: str | None
    """The user's request the model has not finished answering, verbatim."""
    memo: dict[str, Any] = field(default_factory=dict)
    """A place for a strategy to keep notes about this history between its runs (emptied
    when the history is replaced or reset)."""
    tokens_per_char: float = 0.25
    """Tokens per character of message JSON, fitted on the session's exact counts (the
    system prompt and tools apart)."""
    compaction_due: bool = False
    """True when, at this size, the over-limit strategies will run after the every-call ones
    and are expected to replace the history: over the limit, automatic compaction not paused,
    and the last one did not fail."""
    cached_prefix: CachedPrefix | None = None
    """Where the prompt cache stands: the tokens and messages the last model call left cached,
    its age, TTL and the model's price. None when no message of the history is cached
    (caching off, a prompt too short to cache, no call yet)."""
    model: str | None = None
    """The model the session calls (its window: `evo_magic.catalog.context_window`),
    or None when unknown."""
    auto_compaction: bool = True
    """False when no automatic compaction can follow: no over-limit strategy is configured,
    or automatic compaction is paused."""
    pins: tuple[str, ...] = ()
    """The text blocks of the pinned texts (`evo_magic.compact.pins`): a full compaction's
    result carries each verbatim (`with_pins`); the compactor puts back any it lacks."""
    tools: tuple[str, ...] = ()
    """The names of the tools the model is offered (e.g. "recall": a placeholder can say the
    original is one call away)."""
    details: dict[str, Any] = field(default_factory=dict)
    """What this run reports about what it did besides its result (e.g. the prompts a summary
    kept, the files it re-read and their tokens): recorded with the compaction."""
    _summarise: Callable[[Sequence[Message], str | None], str] | None = None
    _tool_name: Callable[[str], str | None] = lambda tool_use_id: None
    _tool_results: Callable[[], Sequence[ResultRef]] | None = None
    _history: Sequence[Message] | None = None
    _save_output: Callable[[str, str], str] | None = None
    _message_chars: Callable[[int], int] | None = None
    _read_file: Callable[[str, int], str | None] | None = None
    _server_summarise: Callable[[Sequence[Message], str | None], dict[str, Any]] | None = None
    _prepared: Callable[[Sequence[Message]], tuple[str, int] | None] = lambda messages: None
    summaries: list[str] = field(default_factory=list)
    """Every summary this run asked for, in order."""
    notes: list[str] = field(default_factory=list)
    """One-line notes for the user from this run (e.g. a grammar `fold-files` lacks): each is
    told as a `Notice` (never sent to the model)."""
    turn_notes: list[str] = field(default_factory=list)
    """Notes for the model this run asks to send with the next call only, as a mid-conversation
    system message after the newest message (never in the history; see `Compactor.turn_note`)."""

    @classmethod
    def for_messages(
        cls,
        messages: Sequence[Message],
        *,
        focus: str | None = None,
        trigger: str = "user",
        context_limit: int | None = None,
        token_limit: int | None = None,
        recent_files: Sequence[str] = (),
        pending_request: str | None = None,
        summarise: Callable[[Sequence[Message], str | None], str] | None = None,
        cached_prefix: CachedPrefix | None = None,
        model: str | None = None,
        read_file: Callable[[str, int], str | None] | None = None,
        pins: Sequence[str] = (),
        memo: dict[str, Any] | None = None,
    ) -> Context:
        """A context over a plain list of messages: to try a strategy outside a session (in a
        test, a notebook, a replay). `summarise(messages, focus)` stands in for the summariser;
        `cached_prefix` says what the prompt cache holds (None: nothing); `read_file(path,
        max_chars)` reads workspace files (see `Context.read_file`; None: none can be read);
        `pins` are the pinned blocks' texts a full compaction carries. Nothing is measured or
        scanned up front: the size when `size` is first read, the tool names when one is
        asked for (a strategy that reads neither costs the same at any length).

        `memo` is the strategy's notes between runs (`Context.memo`; None: a new dict): pass
        the same dict to each run over one list that grows at its end (and takes the
        strategy's results) and the strategy resumes where it stopped, the tool results and
        names indexed only for the messages added since, so a strategy run before every model
        call costs the same at any length, as in a session. A new dict after the list was
        replaced otherwise (a list that is not the old one grown is indexed afresh)."""
        index = index_in(memo)
        ctx = _ListContext(
            focus=focus,
            trigger=trigger,
            size=ContextSize(0, 0, 0),  # unset below: measured when first read
            context_limit=context_limit,
            token_limit=token_limit,
            recent_files=tuple(recent_files),
            pending_request=pending_request,
            _summarise=summarise,
            memo={} if memo is None else memo,
            _tool_name=lambda tool_use_id: index.tool_name(messages, tool_use_id),
            _tool_results=lambda: index.tool_results(messages),
            _history=messages,
            cached_prefix=cached_prefix,
            model=model,
            _read_file=read_file,
            pins=tuple(pins),
        )
        del ctx.size  # measured when first read (`_ListContext.size`)
        return ctx

    def summarise(self, messages: Sequence[Message], focus: str | None = None) -> str:
        """A summary of `messages` by the session's summariser, keeping `focus`; raises when
        there is no usable summary (a model error, an empty or cut-off reply)."""
        if self._summarise is None:
            raise RuntimeError("this context has no summariser")
        summary = self._summarise(list(messages), focus)
        self.summaries.append(summary)
        return summary

    def prepared_summary(self, messages: Sequence[Message]) -> tuple[str, int] | None:
        """The summary prepared in the background (`compact.background`) and how many of the
        first `messages` it covers, when it still covers them; None: summarise now."""
        prepared = self._prepared(messages)
        if prepared is not None:
            self.summaries.append(prepared[0])
        return prepared

    def server_summarise(self, messages: Sequence[Message], focus: str | None = None) -> dict:
        """The API's own summary of `messages` (the whole history): its `compaction` block, to
        be kept byte for byte (or, when its summary held a credential, the redacted summary as
        a text block: `evo_magic.compact.server.entering`). `focus` becomes the summary's
        instructions. Raises when there is no usable block (an error, a null summary, or no
        model that offers it)."""
        if self._server_summarise is None:
            raise RuntimeError("this context cannot ask the API for a summary")
        block = self._server_summarise(list(messages), focus)
        self.summaries.append(block.get("content") or block.get("text") or "")
        return block

    def pending_request_message(self) -> list[Message]:
        """The user's unanswered request, verbatim, as the one user message that follows a
        server's compaction block ([] when nothing is pending)."""
        request = self.pending_request
        if not request or not request.strip():
            return []
        text = f"{REQUEST_HEADER}\n{request}"
        return [{"role": "user", "content": [{"type": "text", "text": text}]}]

    def compacted_message(self, summary: str) -> Message:
        """The seed's compacted message: a header, the summary, the focus, the recent files,
        and the pending request verbatim; the pinned texts follow the header, each its own
        block."""
        message = compacted_message(summary, self.focus, self.recent_files, self.pending_request)
        return with_pins([message], self.pins)[0]

    def with_pins(self, messages: Sequence[Message]) -> list[Message]:
        """`messages` with the pinned texts they lack put back after the compacted header."""
        return with_pins(messages, self.pins)

    @staticmethod
    def user_turn_starts(messages: Sequence[Message]) -> list[int]:
        """Indices of the messages where a user turn starts: user messages holding text (a
        request or a compacted summary), not those holding only tool results."""
        return [
            index
            for index, message in enumerate(messages)
            if message.get("role") == "user" and has_text(message)
        ]

    def tool_name(self, block: Mapping[str, Any]) -> str | None:
        """The tool a tool_use or tool_result block belongs to (None when unknown)."""
        if block.get("type") == "tool_use":
            return block.get("name")
        return self._tool_name(block.get("tool_use_id", ""))

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of `messages`, estimated from their characters with the session's calibration."""
        return round(message_chars(messages) * self.tokens_per_char)

    def tokens_of_chars(self, chars: int) -> int:
        """`chars` characters of message JSON in tokens (the same calibration)."""
        return round(chars * self.tokens_per_char)

    @property
    def over_limit(self) -> bool:
        """True when the history is over the session's limit (characters, or tokens when
        set): the over-limit strategies will run after the every-call ones."""
        return self.size.over(self.context_limit, self.token_limit)

    def under_limit_after(self, freed_chars: int) -> bool:
        """True when freeing `freed_chars` characters of message JSON would bring the history
        within the limits (characters, and tokens when set): the over-limit strategies would
        then not run."""
        freed = max(freed_chars, 0)
        size = replace(
            self.size,
            chars=self.size.chars - freed,
            tokens=self.size.tokens - self.tokens_of_chars(freed),
        )
        return not size.over(self.context_limit, self.token_limit)

    def clearing_pays(self, index: int, freed_chars: int, calls_ahead: int) -> bool:
        """The cache-aware rule for an edit from message `index` on that frees `freed_chars`
        characters: True when it is asked for (`trigger` "user" or "model"), nothing is cached
        to weigh, or it saves at least what the cache write it causes costs over `calls_ahead`
        calls (a tie, a free model, clears). Over the limit: True when it brings the history
        under the limit (a full compaction breaks the whole cache and loses detail), or when no
        full compaction follows (paused, backing off: clearing keeps the context bounded);
        False when one follows anyway (it replaces the history; its summary reads it whole)."""
        if self.trigger in ("user", "model") or self.cached_prefix is None:
            return True
        if self.over_limit:
            return self.under_limit_after(freed_chars) or not self.compaction_due
        saving = self.clearing_saving(index, freed_chars, calls_ahead)
        return saving is None or saving >= 0

    @property
    def cached_prefix_tokens(self) -> int:
        """Prompt tokens the cache holds for this history (0 when none)."""
        return self.cached_prefix.tokens if self.cached_prefix is not None else 0

    @property
    def cached_prefix_end(self) -> int:
        """The messages before this index are in the cached prefix (0 when none is)."""
        return self.cached_prefix.end if self.cached_prefix is not None else 0

    def cache_invalidated_tokens(self, index: int) -> int:
        """Tokens of cached prompt that an edit of message `index` invalidates: those of the
        messages from `index` to the end of the cached prefix (estimated from their characters
        at the fitted tokens per character, at most what is cached). 0 when the message is
        past the prefix, nothing is cached, or the cache has gone cold (its TTL passed: nothing
        is left to lose)."""
        prefix = self.cached_prefix
        if prefix is None or not prefix.warm or index >= prefix.end:
            return 0
        chars_of = self._message_chars or self._measured_chars
        chars = sum(chars_of(i) for i in range(max(index, 0), prefix.end))
        return min(round(chars * self.tokens_per_char), prefix.tokens)

    def clearing_saving(self, index: int, freed_chars: int, calls_ahead: int) -> float | None:
        """USD saved over `calls_ahead` calls by an edit from message `index` on that frees
        `freed_chars` characters of message JSON (negative: the cache write it causes costs
        more than it saves); None when there is no basis to price it (nothing cached, or no
        price for the model). A cold cache is rewritten whatever happens, so then the edit
        only saves."""
        prefix = self.cached_prefix
        if prefix is None or prefix.price is None:
            return None
        freed = round(max(freed_chars, 0) * self.tokens_per_char)
        invalidated = max(self.cache_invalidated_tokens(index), freed)
        return clearing_saving(
            freed_tokens=freed,
            invalidated_tokens=invalidated,
            calls_ahead=max(calls_ahead, 0),
            price=prefix.price,
            ttl=prefix.ttl,
        )

    def _measured_chars(self, index: int) -> int:
        history = self._history if self._history is not None else ()
        return len(to_json(history[index])) if index < len(history) else 0

    def tool_results(self, messages: Sequence[Message] | None = None) -> Sequence[ResultRef]:
        """Where every tool_result block is, oldest first: `(index, block_index,
        tool_use_id)`. For the history itself (`messages` None or the sequence this strategy
        was given) this is the history's own index, so a strategy can look at the newest
        results without scanning; for any other list, a scan of it."""
        if self._tool_results is not None and (messages is None or messages is self._history):
            return self._tool_results()
        return scan_tool_results(messages if messages is not None else ())

    @staticmethod
    def edit(messages: Sequence[Message], changes: Mapping[int, Message]) -> Edited:
        """`messages` with the messages at the given indices replaced: the efficient way for a
        strategy to return a history that differs in a few messages."""
        return Edited(messages, changes)

    def read_file(self, path: str, max_chars: int) -> str | None:
        """The whole text of the workspace file `path` as it is now, or None when it holds
        more than `max_chars` characters. Read as the file tools read (confined to the
        workspace, no link followed, UTF-8 text only); raises saying why when it cannot be
        read (outside the workspace, missing, binary, or no workspace to read from)."""
        if self._read_file is None:
            raise RuntimeError("this context has no workspace to read files from")
        return self._read_file(path, max_chars)

    def save_output(self, tool_use_id: str, text: str) -> str:
        """Save a full tool output to the session's `tool-results/` folder; returns the path to
        show the model (relative to the workspace when it is inside)."""
        if self._save_output is None:
            raise RuntimeError("this context cannot save outputs")
        return self._save_output(tool_use_id, text)


class _ListContext(Context):
    """A context over a plain list (`Context.for_messages`): its `size` is measured when it is
    first read, then kept (a given `size` is kept as given)."""

    @cached_property
    def size(self) -> ContextSize:  # type: ignore[override]
        return measure(self._history if self._history is not None else (), None)


@dataclass(frozen=True)
class ServerEdit:
    """What a server strategy adds to every request: a `context_management` edit (None for
    the on-demand `compaction` parameter), the beta it needs, and the feature it is (a name
    of `evo_magic.catalog.FEATURES`, for the capability table and error messages)."""

    feature: str
    beta: str
    edit: Mapping[str, Any] | None = None


def server_edit(strategy: object) -> ServerEdit | None:
    """The strategy's `ServerEdit` when it is a server strategy, else None."""
    method = getattr(strategy, "server_edit", None)
    return method() if callable(method) else None


def parameters_of(strategy: object) -> dict[str, Any]:
    """A strategy's parameters as given: a dataclass's fields, else its public attributes
    (`when` apart: it is the strategy's, recorded on its own)."""
    if is_dataclass(strategy):
        params = {f.name: getattr(strategy, f.name) for f in fields(strategy)}
    else:
        params = {k: v for k, v in vars(strategy).items() if not k.startswith("_")}
    params.pop("when", None)
    return params


def settings_of(strategy: Strategy) -> tuple[Any, ...]:
    """What makes two strategies the same setting: class, name, when and parameters."""
    return (type(strategy), strategy.name, strategy.when, parameters_of(strategy))


def check_strategy(strategy: object) -> Strategy:
    """`strategy` if it is one; TypeError saying what is missing otherwise."""
    problems = []
    name = getattr(strategy, "name", None)
    if not isinstance(name, str) or not name:
        problems.append("a `name` (a non-empty string)")
    if getattr(strategy, "when", None) not in WHENS:
        problems.append(f"a `when` ({' | '.join(WHENS)})")
    if not callable(getattr(strategy, "compact", None)):
        problems.append("a `compact(messages, ctx)` method")
    if problems:
        raise TypeError(
            f"{strategy!r} is not a compaction strategy: it needs {', '.join(problems)}"
        )
    return strategy  # type: ignore[return-value]
