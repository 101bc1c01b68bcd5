"""What a strategy run outside a session asks of a plain list of messages (`Context.for_messages`):
where the tool results are and which tool each tool_use id called, found by scanning the list
once and, when the caller keeps the context's memo between runs, extended with only the
messages added since; so a strategy called before every model call outside a session costs the
same at any length, as it does inside one (where the history keeps these as it grows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evo_magic.history import ReadOnlyList, ResultRef
from evo_magic.messages import Message, blocks_of_type

KEPT = "_tool_results_index"
"""The memo key a kept `ListIndex` lives under (strategies' own notes use other keys)."""


def scan_tool_results(messages: Sequence[Message], start: int = 0) -> list[ResultRef]:
    """Where the tool_result blocks of `messages` (from message `start` on) are, oldest first."""
    found = []
    for index in range(start, len(messages)):
        message = messages[index]
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block_index, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found.append(ResultRef(index, block_index, block.get("tool_use_id", "")))
    return found


class ListIndex:
    """The tool results and tool names of a list of messages that grows at its end, each
    message looked at once: a read extends the index with the messages past the last read.

    A list that is not the old one grown (shorter, or its newest indexed result no longer where
    it was: the history was replaced, not appended to or edited in place) is scanned afresh.
    """

    __slots__ = ("_results", "_names", "_scanned", "_named")

    def __init__(self) -> None:
        self._results: list[ResultRef] = []
        self._names: dict[str, str] = {}
        self._scanned = 0
        self._named = 0

    def tool_results(self, messages: Sequence[Message]) -> Sequence[ResultRef]:
        """Where every tool_result block of `messages` is, oldest first (a read-only view of
        the index, not a copy)."""
        if not self._fits(messages):
            self._results, self._scanned = [], 0
        self._results += scan_tool_results(messages, self._scanned)
        self._scanned = len(messages)
        return ReadOnlyList(self._results)

    def tool_name(self, messages: Sequence[Message], tool_use_id: str) -> str | None:
        """The tool the tool_use `tool_use_id` of `messages` called (None: no such call)."""
        if self._named > len(messages):
            self._names, self._named = {}, 0
        for index in range(self._named, len(messages)):
            if messages[index].get("role") == "assistant":
                for block in blocks_of_type(messages[index], "tool_use"):
                    self._names[str(block.get("id", ""))] = str(block.get("name", ""))
        self._named = len(messages)
        return self._names.get(tool_use_id)

    def _fits(self, messages: Sequence[Message]) -> bool:
        if self._scanned > len(messages):
            return False
        if not self._results:
            return True
        last = self._results[-1]
        content = messages[last.index].get("content")
        if not isinstance(content, list) or last.block_index >= len(content):
            return False
        block: Any = content[last.block_index]
        return (
            isinstance(block, dict)
            and block.get("type") == "tool_result"
            and block.get("tool_use_id", "") == last.tool_use_id
        )


def index_in(memo: dict[str, Any] | None) -> ListIndex:
    """The index kept in `memo` (made there on first use), or a new one for this run alone."""
    if memo is None:
        return ListIndex()
    kept = memo.get(KEPT)
    if not isinstance(kept, ListIndex):
        kept = memo[KEPT] = ListIndex()
    return kept
