"""Characters of the thinking blocks of a history, kept as the history changes.

Replay's estimate counts thinking at a rate of its own (see `Stretches`); measuring every
thinking block of the history at every call made a replay quadratic in the session's length
(on a 990-call session, half of the replay's time). A `ThinkingChars` follows one history: new
messages, messages changed in place (`History.edited_since`) and a replaced history
(`History.generation`) are measured, nothing else."""

from __future__ import annotations

from evo_magic.history import History
from evo_magic.messages import thinking_chars


class ThinkingChars:
    """The thinking characters of a history, measured once per message version."""

    def __init__(self) -> None:
        self._generation: int | None = None
        self._edits = 0
        self._each: list[int] = []
        self._total = 0

    def of(self, history: History) -> int:
        """`thinking_chars(history.view())`, measuring only what changed since the last call."""
        view = history.view()
        if history.generation != self._generation:
            self._generation, self._edits, self._each, self._total = history.generation, 0, [], 0
        for index in history.edited_since(self._edits):
            if index < len(self._each):
                now = thinking_chars([view[index]])
                self._total += now - self._each[index]
                self._each[index] = now
        self._edits = history.edit_count
        for index in range(len(self._each), len(view)):
            now = thinking_chars([view[index]])
            self._each.append(now)
            self._total += now
        return self._total
