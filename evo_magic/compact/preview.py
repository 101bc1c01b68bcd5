"""Before a compaction applies: what it would do (`Preview`, made by `Compactor.preview`), and a
summary a person wrote or edited to apply instead of the summariser's (`GivenSummary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.compact.results import CompactionRefused, block_id
from evo_magic.measure import ContextSize, message_chars
from evo_magic.messages import Message
from evo_magic.render import plural, size

STAND_IN = "[summary stand-in: a summary of {chars:,} characters of conversation goes here]"


def stand_in(messages: Sequence[Message], focus: str | None) -> str:
    """A summary that costs nothing, for previews: says how much it would summarise."""
    return STAND_IN.format(chars=message_chars(list(messages)))


@dataclass(frozen=True)
class GivenSummary:
    """A summary written or edited by a person, to apply instead of the summariser's."""

    text: str
    proposed: str | None = None
    """The summariser's proposal it came from (None: written without one)."""

    @property
    def edited(self) -> bool:
        """True when the text is not the proposal as it was (a person changed or wrote it)."""
        return self.proposed is None or self.text.strip() != self.proposed.strip()

    def take(self, already: int) -> str:
        """The text as a strategy's one summary (`already`: summaries it asked for before);
        CompactionRefused when it is empty or the strategy asks for a second one."""
        if already:
            raise CompactionRefused("it asks for more than one summary; a given summary is one")
        if not self.text.strip():
            raise CompactionRefused("the given summary is empty")
        return self.text.strip()


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
    chosen: Any = field(default=None, repr=False, compare=False)
    """The strategy passed to `propose_summary` (None: the configured ones): apply the text
    with `compact(focus, chosen, summary=...)`."""


@dataclass(frozen=True)
class Preview:
    """What a compaction would do now (see `Compactor.preview`)."""

    strategy: str
    when: str
    before: ContextSize
    after: ContextSize
    messages: list[Message]
    """The history it would leave (the current one when it would do nothing or fail)."""
    error: str | None
    """Why the compaction would be refused, or None."""
    replaces: bool = False
    """True when the history would be replaced (a new epoch), False for edits in place."""
    original: list[Message] = field(default_factory=list)
    summaries: tuple[str, ...] = ()
    stand_in: bool = False
    """True when the summaries are stand-ins (no model was called)."""
    input_tokens: int | None = None
    """A server strategy's preview: the prompt's tokens with its edits (`count_tokens`)."""
    original_input_tokens: int | None = None
    """A server strategy's preview: the prompt's tokens without them, as the API reports."""
    reason: str | None = None
    """Why it would do nothing (e.g. nothing new since the last compaction), when known."""

    @property
    def acts(self) -> bool:
        return self.error is None and self.messages != self.original and bool(self.original)

    def changed_blocks(self) -> list[tuple[int, int, str]]:
        """For edits in place: `(message index, block index, tool_use id)` of each block the
        strategy would rewrite."""
        if self.replaces:
            return []
        changed = []
        for index, (old, new) in enumerate(zip(self.original, self.messages, strict=True)):
            if old is new:
                continue
            pairs = zip(_content(old), _content(new), strict=False)
            for position, (a, b) in enumerate(pairs):
                if a != b:
                    changed.append((index, position, block_id(b) or ""))
        return changed

    def dropped(self) -> list[int]:
        """For replacements: indices of the messages that would not be kept verbatim."""
        if not self.replaces:
            return []
        kept = {id(m) for m in self.messages}
        return [i for i, m in enumerate(self.original) if id(m) not in kept]

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The preview as plain text: what would go, what would stay, sizes before and after."""
        head = f"preview of {self.strategy} ({self.when})"
        if self.error:
            return f"{head}: would FAIL, history kept: {self.error}"
        if not self.acts:
            return f"{head}: nothing to do now" + (f" ({self.reason})" if self.reason else "")
        sizes = f"{size(self.before)} -> {size(self.after)}"
        if self.replaces:
            dropped = self.dropped()
            detail = f"replaces {len(dropped)} of {len(self.original)} messages"
            if self.summaries:
                kind = "a stand-in" if self.stand_in else "a real"
                detail += f" with {kind} summary"
        else:
            detail = f"rewrites {plural(len(self.changed_blocks()), 'block')}"
        return f"{head}: {detail}; {sizes}"


def _content(message: Message) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else [content]
