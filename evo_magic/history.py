"""The conversation of a session: messages in Messages API shape, their sizes kept as they
change, the request being worked on, and the turn and epoch counters.

Only the methods below change the history, each as one unit (an interrupt cannot cut one in
half) that emits the event the transcript records. The size is kept incrementally: appending,
rewriting a few blocks or replacing the history costs what changed, not the whole history, so
measuring before every model call stays cheap at any length.

Validity is kept by construction: a user request is its own message; an assistant turn's tool
results join one user message as each tool returns; and `answer_unanswered` gives every call
left without a result (an interrupt, an error mid-batch, a crash of an observer) an error result
saying what happened, so a request is only ever built from a history the API accepts.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from evo_magic.encoded import PLAIN, EncodedBlocks
from evo_magic.events import Event, MessageAppended, ToolResultAppended
from evo_magic.history_snapshot import Snapshot
from evo_magic.interrupts import interrupts_deferred
from evo_magic.measure import (
    ContextSize,
    TokenAnchor,
    TokenRate,
    anchored_tokens,
    estimate_tokens,
    list_chars,
    message_chars,
    to_json,
)
from evo_magic.messages import Message, blocks_of_type, calls_tools

UNFINISHED = ("max_tokens", "compaction")
"""Stop reasons of a reply that does not answer the request: cut off, or paused after the
server's compaction."""
# The JSON of a tool-results message around its blocks: a new one measures this plus its block.
_RESULTS_SHELL = to_json({"role": "user", "content": []})
Emit = Callable[[Event], None]
T = TypeVar("T")


@dataclass(frozen=True)
class ResultRef:
    """Where a tool_result block sits: message index and position in its content."""

    index: int
    block_index: int
    tool_use_id: str


class ReadOnlyList(Sequence[T]):
    """A list seen through `Sequence` only: read it without a copy, change it never.

    Indexing returns the items themselves (for messages, the dicts: do not change them; return
    new ones). Slicing returns a new list.
    """

    __slots__ = ("_items",)

    def __init__(self, items: list[T]):
        self._items = items

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"<read-only list of {len(self._items)}>"


class History:
    """See the module docstring. `emit` receives every event (the session records it)."""

    def __init__(self, emit: Emit, overhead_chars: int = 0, encoded: EncodedBlocks = PLAIN):
        self._emit = emit
        self._encoded = encoded
        """The JSON of blocks known already (a replayed conversation's, shared by its runs)."""
        self.overhead_chars = overhead_chars
        """Characters of the system prompt and tool schemas, for token estimates."""
        self._messages: list[Message] = []
        self._view = ReadOnlyList(self._messages)
        self._snapshots: weakref.WeakSet[Snapshot] = weakref.WeakSet()
        self._chars: list[int] = []
        self._chars_sum = 0
        # Per message, the JSON length of each block when known (tool-results messages, built
        # block by block): rewriting one block then re-measures that block, not the message.
        self._block_chars: list[list[int] | None] = []
        self._results: list[ResultRef] = []
        self._tool_uses: dict[str, dict[str, Any]] = {}
        # Assistant messages holding a server compaction block, kept as messages come and go:
        # asking before every request whether one is in the history costs nothing.
        self._compaction_holders = 0
        self._edited: list[int] = []
        """Indexes of messages changed in place, in order (see `edited_since`)."""
        self._ids_ever: set[str] = set()
        self._fresh_ids = 0
        self._anchor: TokenAnchor | None = None
        self._overhead_tokens: int | None = None
        self._rate = TokenRate()
        self.pending_request: str | None = None
        """The user's request while the model has not finished answering it."""
        self.turn = 0
        """Asks so far (the turn a new message belongs to)."""
        self.epoch = 0
        """Full compactions since the start (or the last reset)."""
        self.generation = 0
        """Bumped when the history is replaced or reset (not when blocks are rewritten in
        place): what was derived from message positions is stale."""

    # -- reading -------------------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """A new list of the messages (the dicts themselves: treat them as read-only)."""
        return list(self._messages)

    def view(self) -> ReadOnlyList[Message]:
        """The messages without a copy, read-only: the same object until the history is
        replaced or reset, so a strategy's context knows it is looking at the history itself
        (and uses its index of tool results instead of scanning every message)."""
        return self._view

    def snapshot(self) -> Snapshot:
        """The messages as they are now, kept as they are whatever the history does next,
        without a copy (what a request sends: see `evo_magic.history_snapshot`)."""
        taken = Snapshot(self._messages)
        self._snapshots.add(taken)
        return taken

    def is_whole(self, messages: Sequence[Message]) -> bool:
        """True when `messages` are this history's messages, the same dicts in the same order
        (a strategy summarising the whole history, not a part of it)."""
        return len(messages) == len(self._messages) and all(
            a is b for a, b in zip(messages, self._messages, strict=True)
        )

    def __len__(self) -> int:
        return len(self._messages)

    def size(self) -> ContextSize:
        """Messages, characters (the seed's measure) and tokens of the whole prompt."""
        chars = list_chars(self._chars_sum, len(self._messages))
        if self._anchor is not None:
            exact = chars == self._anchor.chars
            return ContextSize(
                len(self._messages), chars, anchored_tokens(chars, self._anchor), exact
            )
        if self._overhead_tokens is not None:
            tokens = self._overhead_tokens + self.tokens_of_chars(chars)
        else:
            tokens = estimate_tokens(chars + self.overhead_chars)
        return ContextSize(len(self._messages), chars, tokens)

    def projected_size(self, messages: Sequence[Message], replaced: bool) -> ContextSize:
        """The size the history would have with `messages` instead, measured as `size()` would
        measure it after `replace(messages)` (or after rewriting in place)."""
        chars = message_chars(messages)
        if not replaced and self._anchor is not None:
            return ContextSize(len(messages), chars, anchored_tokens(chars, self._anchor))
        overhead = self._prompt_overhead_tokens() if replaced else self._overhead_tokens
        if overhead is None:
            return ContextSize(len(messages), chars, estimate_tokens(chars + self.overhead_chars))
        return ContextSize(len(messages), chars, overhead + self.tokens_of_chars(chars))

    @property
    def tokens_per_char(self) -> float:
        """Tokens per character of message JSON, fitted on the session's exact counts."""
        return self._rate.rate

    def tokens_of_chars(self, chars: int) -> int:
        """`chars` characters of message JSON in tokens, at the fitted rate."""
        return round(chars * self._rate.rate)

    def message_chars(self, index: int) -> int:
        """Characters of the JSON of message `index` (kept, not measured again)."""
        return self._chars[index]

    def holds_compaction(self) -> bool:
        """True when an assistant message of the history holds a server compaction block
        (kept as the history changes, not found by a scan)."""
        return self._compaction_holders > 0

    @property
    def edit_count(self) -> int:
        """How many in-place changes the history has had since it was last replaced."""
        return len(self._edited)

    def edited_since(self, count: int) -> Sequence[int]:
        """Indexes of the messages changed in place after the first `count` changes (a
        follower that kept `edit_count` reads what changed since, not the whole history)."""
        return ReadOnlyList(self._edited[count:])

    def tool_results(self) -> Sequence[ResultRef]:
        """Every tool_result block of the history, oldest first (a read-only view)."""
        return ReadOnlyList(self._results)

    def tool_name(self, tool_use_id: str) -> str | None:
        """The name of the tool a tool_use id called, if that call is in the history."""
        block = self._tool_uses.get(tool_use_id)
        return None if block is None else block.get("name", "")

    def tool_use(self, tool_use_id: str) -> dict[str, Any] | None:
        """The tool_use block of that id (name and input), if that call is in the history."""
        return self._tool_uses.get(tool_use_id)

    def id_taken(self, tool_use_id: str) -> bool:
        """True when a tool_use of this session already used the id (ids stay unique)."""
        return tool_use_id in self._ids_ever

    def fresh_tool_use_id(self, avoid: set[str] | frozenset[str] = frozenset()) -> str:
        """A tool_use id no call of this session has used (nor any in `avoid`)."""
        while True:
            self._fresh_ids += 1
            candidate = f"toolu_evo_{self._fresh_ids:06d}"
            if candidate not in self._ids_ever and candidate not in avoid:
                return candidate

    def unanswered(self) -> list[dict[str, Any]]:
        """The tool_use blocks of the last assistant turn that have no tool_result yet."""
        messages = self._messages
        if not messages:
            return []
        if messages[-1]["role"] == "assistant":
            return blocks_of_type(messages[-1], "tool_use")
        if (
            len(messages) < 2
            or messages[-2]["role"] != "assistant"
            or not _only_results(messages[-1])
        ):
            return []
        answered = {b.get("tool_use_id") for b in blocks_of_type(messages[-1], "tool_result")}
        return [b for b in blocks_of_type(messages[-2], "tool_use") if b.get("id") not in answered]

    # -- changing --------------------------------------------------------------------------

    def begin_request(self, text: str, message: Message | None = None) -> None:
        """A new user request: the next turn, pending until the model answers it (`answered`).
        `message` carries it (default: one text block of `text`)."""
        self.turn += 1
        self.pending_request = text
        self.append(message or {"role": "user", "content": [{"type": "text", "text": text}]})

    def answered(self, stop_reason: str | None) -> bool:
        """The model's newest message, which ended with `stop_reason`, was appended: True
        (and nothing is pending any more, so a later compaction carries nothing) when it
        answers the pending request: it calls no tool, and it was neither cut off at
        max_tokens nor paused by the server's compaction (the ask goes on). Live and replay
        both end a request here."""
        last = self._messages[-1] if self._messages else None
        if last is None or last.get("role") != "assistant" or calls_tools(last):
            return False
        if stop_reason in UNFINISHED:
            return False
        self.pending_request = None
        return True

    def append(self, message: Message) -> None:
        """Add a message as the newest one."""
        with interrupts_deferred():
            encoded = self._push(message)
            index = len(self._messages) - 1
            self._emit(MessageAppended(index, encoded, self.turn, self.epoch))

    def add_tool_result(self, block: dict[str, Any], status: str = "ok") -> None:
        """Add one tool_result block to the tool-results message that follows the last
        assistant turn (the first result starts it). `status` says how the tool ended."""
        with interrupts_deferred():
            encoded = self._encoded.block(block)
            last = self._messages[-1] if self._messages else None
            if last is not None and last["role"] == "user" and _only_results(last):
                index = len(self._messages) - 1
                block_index = len(last["content"])
                # Same keys, one more block: the JSON grows by a comma and the block.
                message = {**last, "content": [*last["content"], block]}
                sizes = self._block_chars[index]
                sizes = [*sizes, len(encoded)] if sizes is not None else None
                self._set(index, message, self._chars[index] + 1 + len(encoded), sizes)
                self._results.append(ResultRef(index, block_index, block["tool_use_id"]))
            else:
                message = {"role": "user", "content": [block]}
                self._push(message, len(_RESULTS_SHELL) + len(encoded), [len(encoded)])
                index, block_index = len(self._messages) - 1, 0
            event = ToolResultAppended(index, block_index, encoded, self.turn, self.epoch, status)
            self._emit(event)

    def answer_unanswered(self, reason: Callable[[dict[str, Any]], tuple[str, str]]) -> int:
        """Give every unanswered tool_use a result; `reason(block)` returns its text and
        status (an error unless the status is "ok"). Every call is answered even when
        recording one fails (the first such error is raised afterwards). Returns how many."""
        missing = self.unanswered()
        failure: BaseException | None = None
        for block in missing:
            text, status = reason(block)
            result = {"type": "tool_result", "tool_use_id": block["id"], "content": text}
            if status != "ok":
                result["is_error"] = True
            try:
                self.add_tool_result(result, status)
            except Exception as exc:  # recording failed; the result is in the history anyway
                failure = failure or exc
        if failure is not None:
            raise failure
        return len(missing)

    def fork(self, emit: Emit) -> History:
        """A copy of this history to try something on (the same message dicts, which are never
        changed in place, in lists of its own; its counts, token anchor and fitted rate too):
        what the copy does leaves this one as it is. Its events go to `emit`."""
        other = copy.copy(self)
        other._emit = emit
        other._messages = list(self._messages)
        other._view = ReadOnlyList(other._messages)
        other._snapshots = weakref.WeakSet()  # this history's snapshots read its own list
        other._edited = list(self._edited)
        other._chars = list(self._chars)
        other._block_chars = [None if s is None else list(s) for s in self._block_chars]
        other._results = list(self._results)
        other._tool_uses = dict(self._tool_uses)
        other._ids_ever = set(self._ids_ever)
        other._rate = copy.deepcopy(self._rate)
        return other

    def anchor(self, chars: int, tokens: int) -> None:
        """The API counted `tokens` for the whole prompt when the messages measured `chars`."""
        self._rate.add(chars, tokens)
        self._anchor = TokenAnchor(chars, tokens, self._rate.rate)

    def rewrite(self, changes: Mapping[int, Message]) -> None:
        """Replace some messages in place (same count, same order): an every-call strategy's
        result. The caller validated them and emits the event that records the change."""
        with interrupts_deferred():
            for index, message in changes.items():
                sizes = self._rewritten_sizes(index, message)
                chars = _joined(message["role"], sizes) if sizes is not None else None
                self._set(index, message, chars, sizes)

    def _rewritten_sizes(self, index: int, message: Message) -> list[int] | None:
        """The block sizes of `message` replacing message `index`, measuring only the blocks
        that changed; None when the old sizes are unknown or the shape differs."""
        old, sizes = self._messages[index], self._block_chars[index]
        content = message.get("content")
        same_shape = (
            sizes is not None
            and list(message) == ["role", "content"]
            and isinstance(content, list)
            and len(content) == len(sizes)
        )
        if not same_shape:
            return None
        before = old["content"]
        return [
            size if block is previous else len(self._encoded.block(block))
            for size, block, previous in zip(sizes, content, before, strict=True)
        ]

    def replace(self, messages: Sequence[Message]) -> None:
        """Swap in a whole new history (a full compaction): the next epoch, recorded whole."""
        with interrupts_deferred():
            self._overhead_tokens = self._prompt_overhead_tokens()
            self._anchor = None
            self._clear()
            self.epoch += 1
            encoded = [self._push(message) for message in messages]
        for index, message in enumerate(encoded):
            self._emit(MessageAppended(index, message, self.turn, self.epoch))

    def reset(self) -> None:
        """Empty the history; the turn counter goes on, the epoch starts again."""
        with interrupts_deferred():
            self._clear()
            self._anchor = None
            self._overhead_tokens = None
            self.pending_request = None
            self.epoch = 0

    # -- internals -----------------------------------------------------------------------

    def _prompt_overhead_tokens(self) -> int | None:
        """Tokens of what is not messages (system, tools), from the last exact count."""
        if self._anchor is None:
            return self._overhead_tokens
        return self._anchor.overhead_tokens

    def _clear(self) -> None:
        self._messages = []  # a new list: snapshots of the old one still read it
        self._view = ReadOnlyList(self._messages)
        self._snapshots = weakref.WeakSet()
        self._chars = []
        self._block_chars = []
        self._chars_sum = 0
        self._results = []
        self._tool_uses = {}
        self._compaction_holders = 0
        self._edited = []
        self.generation += 1

    def _push(
        self, message: Message, chars: int | None = None, sizes: list[int] | None = None
    ) -> str:
        """Append `message`; returns its JSON (measured once, reused by the caller), or ""
        when the caller gave its length in `chars` (and its blocks' in `sizes`)."""
        index = len(self._messages)
        encoded = "" if chars is not None else self._encoded.message(message)
        chars = len(encoded) if chars is None else chars
        self._messages.append(message)
        self._chars.append(chars)
        self._block_chars.append(sizes)
        self._chars_sum += chars
        self._index_blocks(index, message)
        return encoded

    def _set(
        self, index: int, message: Message, chars: int | None = None, sizes: list[int] | None = None
    ) -> None:
        """Put `message` at `index`; `chars` is its JSON's length when the caller knows it,
        `sizes` its blocks' (None: unknown)."""
        if chars is None:
            chars = len(self._encoded.message(message))
        self._chars_sum += chars - self._chars[index]
        self._chars[index] = chars
        self._block_chars[index] = sizes
        old = self._messages[index]
        self._compaction_holders += _holds_compaction(message) - _holds_compaction(old)
        for taken in self._snapshots:
            taken.keep(index, old)
        self._messages[index] = message
        self._edited.append(index)
        for block in blocks_of_type(message, "tool_use"):
            self._tool_uses[block.get("id", "")] = block

    def _index_blocks(self, index: int, message: Message) -> None:
        self._compaction_holders += _holds_compaction(message)
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block_index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                self._tool_uses[block.get("id", "")] = block
                self._ids_ever.add(block.get("id", ""))
            elif kind == "tool_result":
                self._results.append(ResultRef(index, block_index, block.get("tool_use_id", "")))


def _joined(role: str, sizes: list[int]) -> int:
    """The JSON length of `{"role": role, "content": [blocks]}` from the blocks' lengths."""
    shell = len(_RESULTS_SHELL) if role == "user" else len(to_json({"role": role, "content": []}))
    return shell + sum(sizes) + max(len(sizes) - 1, 0)


def _holds_compaction(message: Message) -> bool:
    """True when `message` is an assistant message holding a server compaction block."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "compaction" for b in content)
    )


def _only_results(message: Message) -> bool:
    content = message.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )
