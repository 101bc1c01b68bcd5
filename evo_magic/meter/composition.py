"""What a context holds, by kind: system prompt and tools, user text, assistant text, thinking,
tool calls, tool results by tool, summaries, as Claude Code's `/context` shows it.

Characters are measured as everywhere in evo_magic (the compact JSON of each block, a
message's own framing counted with its first block, so the kinds add up to the history's
size); tokens split the whole prompt's count in proportion to characters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evo_magic.compacted import COMPACTED_HEADER
from evo_magic.measure import to_json
from evo_magic.messages import content_blocks, tool_names

if TYPE_CHECKING:
    from evo_magic.history import History

SYSTEM = "system & tools"
SUMMARY = "summaries"
USER = "user text"
ASSISTANT = "assistant text"
THINKING = "thinking"
TOOL_CALLS = "tool calls"
RESULTS = "tool results"
OTHER = "other"
KIND_ORDER = (SYSTEM, SUMMARY, USER, ASSISTANT, THINKING, TOOL_CALLS, RESULTS, OTHER)
"""The composition's kinds in the order they are shown; tool results come one per tool."""


@dataclass(frozen=True)
class Share:
    """One kind of content in the context: its characters and (estimated) tokens."""

    kind: str
    """One of KIND_ORDER; tool results are "tool results · <tool>"."""
    chars: int
    tokens: int


def block_kind(role: str, block: Mapping[str, Any], tool_names: Mapping[str, str]) -> str:
    """The composition kind of one content block of a message of `role`."""
    kind = block.get("type")
    if kind == "text":
        if role == "assistant":
            return ASSISTANT
        text = block.get("text")
        return SUMMARY if isinstance(text, str) and text.startswith(COMPACTED_HEADER) else USER
    if kind in ("thinking", "redacted_thinking"):
        return THINKING
    if kind in ("tool_use", "server_tool_use"):
        return TOOL_CALLS
    if kind == "tool_result":
        return f"{RESULTS} · {tool_names.get(block.get('tool_use_id', ''), 'unknown tool')}"
    return OTHER


class Composer:
    """Measures what a history holds by kind. Messages are measured once each (a history's
    messages are never changed in place, only replaced), so a live meter can ask often."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Mapping[str, Any], dict[str, int]]] = {}

    def shares(
        self, messages: Sequence[Mapping[str, Any]], overhead_chars: int, tokens: int
    ) -> list[Share]:
        """The context by kind: `overhead_chars` of system prompt and tool schemas, then the
        messages' blocks. Tokens split the prompt's `tokens` in proportion to characters."""
        names = tool_names(messages)
        chars: dict[str, int] = {SYSTEM: overhead_chars} if overhead_chars else {}
        seen: dict[int, tuple[Mapping[str, Any], dict[str, int]]] = {}
        for message in messages:
            cached = self._seen.get(id(message))
            if cached is None or cached[0] is not message:
                cached = (message, _message_kinds(message, names))
            seen[id(message)] = cached
            for kind, count in cached[1].items():
                chars[kind] = chars.get(kind, 0) + count
        self._seen = seen
        return _with_tokens(chars, tokens)


class _HistoryNames(Mapping[str, str]):
    """The tool names a history keeps, read as the mapping `block_kind` takes (no scan)."""

    def __init__(self, history: History):
        self._history = history

    def __getitem__(self, tool_use_id: str) -> str:
        name = self._history.tool_name(tool_use_id)
        if name is None:
            raise KeyError(tool_use_id)
        return str(name)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


@dataclass
class HistoryComposition:
    """What a live history holds by kind, kept as it changes: a refresh measures the messages
    appended or changed in place since the last one (the history says which), not the whole
    history; a replaced history is measured once, whole."""

    history: History
    _view: Any = None
    _count: int = 0
    _edits: int = 0
    _kinds: list[dict[str, int]] = field(default_factory=list)
    _totals: dict[str, int] = field(default_factory=dict)

    def shares(self, overhead_chars: int, tokens: int) -> list[Share]:
        """As `Composer.shares` of the whole history, at the cost of what changed."""
        history = self.history
        view = history.view()
        names = _HistoryNames(history)
        if view is not self._view:  # replaced or reset: start again
            self._view, self._count, self._edits = view, 0, history.edit_count
            self._kinds, self._totals = [], {}
        for index in dict.fromkeys(history.edited_since(self._edits)):
            if index < self._count:
                self._add(self._kinds[index], -1)
                self._kinds[index] = _message_kinds(view[index], names)
                self._add(self._kinds[index], 1)
        self._edits = history.edit_count
        for index in range(self._count, len(view)):
            self._kinds.append(_message_kinds(view[index], names))
            self._add(self._kinds[index], 1)
        self._count = len(view)
        chars = {SYSTEM: overhead_chars} if overhead_chars else {}
        for kind, count in self._totals.items():
            chars[kind] = chars.get(kind, 0) + count
        return _with_tokens(chars, tokens)

    def _add(self, kinds: Mapping[str, int], sign: int) -> None:
        for kind, count in kinds.items():
            self._totals[kind] = self._totals.get(kind, 0) + sign * count


def composition(
    messages: Sequence[Mapping[str, Any]], overhead_chars: int = 0, tokens: int = 0
) -> list[Share]:
    """What `messages` (plus `overhead_chars` of system and tools) hold by kind, in the meter's
    order; `tokens` (the whole prompt's) is split in proportion to characters."""
    return Composer().shares(messages, overhead_chars, tokens)


def _message_kinds(message: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, int]:
    """Characters of one message by kind; the message's own framing counts with its first
    block, so the kinds add up to the message's JSON length."""
    role = str(message.get("role", ""))
    blocks = content_blocks(message)
    total = len(to_json(message))
    out: dict[str, int] = {}
    measured = 0
    for block in blocks:
        kind = block_kind(role, block, names)
        size = len(to_json(block))
        out[kind] = out.get(kind, 0) + size
        measured += size
    first = block_kind(role, blocks[0], names) if blocks else OTHER
    out[first] = out.get(first, 0) + max(total - measured, 0)
    return out


def _with_tokens(chars: Mapping[str, int], tokens: int) -> list[Share]:
    total = sum(chars.values())
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}

    def rank(kind: str) -> tuple[int, int]:
        base = kind.split(" · ")[0]
        return order.get(base, len(order)), -chars[kind]

    return [
        Share(kind, chars[kind], round(tokens * chars[kind] / total) if total else 0)
        for kind in sorted(chars, key=rank)
        if chars[kind] > 0
    ]
