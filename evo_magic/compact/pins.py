"""Pinned texts: what is part of every request, verbatim, whatever a strategy does.

A pin lives in the history as a user text block of its own (`pin_block`): appended at the
history's end when it is pinned (the cached prefix stays as it is), and, after every full
compaction, right after the compacted header (the replacement rewrites the cache anyway). The
compactor checks every result against the active pins and puts back any a strategy dropped
(`with_pins`); unpinning stops the protection, and the text leaves the context with the next
full compaction. Living in the history, not in the system prompt, a pin keeps the API's rules
(a user text block, never empty, never between a call and its result) and the prompt cache
(pinning never rewrites what was sent before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evo_magic.compacted import FILE_PIN_PREFIX, PIN_PREFIX
from evo_magic.events import Notice
from evo_magic.history import History
from evo_magic.messages import Message, as_blocks, with_blocks


@dataclass(frozen=True)
class Pin:
    """One pinned text (or file: `path`, its text as last read)."""

    id: int
    text: str
    path: str | None = None

    @property
    def block_text(self) -> str:
        """The text of the block that carries the pin in a request."""
        if self.path is not None:
            return FILE_PIN_PREFIX.format(path=self.path) + self.text
        return PIN_PREFIX + self.text


CARRIED = "carried"
"""The key of a session's tool notes under which a strategy's tool keeps texts that every full
compaction carries like pins (`todo`'s list): name -> block text."""


def carried_texts(notes: Mapping[str, Any]) -> tuple[str, ...]:
    """The block texts a strategy's tool asked every full compaction to carry, in the order
    they were first written."""
    carried = notes.get(CARRIED)
    return tuple(carried.values()) if isinstance(carried, Mapping) else ()


def pin_message(pin: Pin) -> Message:
    """The user message that brings a new pin into the history."""
    return {"role": "user", "content": [{"type": "text", "text": pin.block_text}]}


def missing_pins(messages: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[str]:
    """The pin block texts of `texts` no user text block of `messages` holds exactly."""
    present = {
        block.get("text")
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, Mapping) and block.get("type") == "text"
    }
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            present.add(message["content"])
    return [text for text in texts if text not in present]


def with_pins(messages: Sequence[Message], texts: Sequence[str]) -> list[Message]:
    """`messages` with every pin of `texts` they lack put back, each as its own text block
    right after the first block of the first message (the compacted header); a new list, the
    messages themselves untouched. A first message that is not the user's gets a user message
    of the pins before it."""
    result = list(messages)
    missing = missing_pins(result, texts)
    if not missing:
        return result
    blocks = [{"type": "text", "text": text} for text in missing]
    first = result[0] if result else None
    if first is None or first.get("role") != "user":
        return [{"role": "user", "content": blocks}, *result]
    content = as_blocks(first["content"])
    at = 1 if content and content[0].get("type") == "text" else 0
    result[0] = {**first, "content": [*content[:at], *blocks, *content[at:]]}
    return result


def restore_edited_pins(
    changes: dict[int, Message], view: Sequence[Message], pins: Sequence[str]
) -> tuple[dict[int, Message], int]:
    """In-place edits with every pinned block an edited user message held put back at its
    end; and how many were put back."""
    if not pins:
        return changes, 0
    restored = 0
    fixed = dict(changes)
    for index, message in changes.items():
        if not 0 <= index < len(view) or not isinstance(message, dict):
            continue  # refused by the checks that follow
        held = [text for text in pins if not missing_pins([view[index]], [text])]
        lost = missing_pins([message], held)
        if lost and message.get("role") == "user":
            fixed[index] = with_blocks(message, ({"type": "text", "text": t} for t in lost))
            restored += len(lost)
    return fixed, restored


def carry_pins(history: History, texts: Sequence[str]) -> Notice | None:
    """After the API's own compaction (which keeps only its block and what follows), the pins
    it left out join the newest message, the user's: the model has not seen it, so nothing
    sent before is rewritten. Returns the Notice saying so (None when none was missing)."""
    view = history.view()
    if not texts or not view or view[-1].get("role") != "user":
        return None
    missing = missing_pins(view, texts)
    if not missing:
        return None
    blocks = ({"type": "text", "text": text} for text in missing)
    history.rewrite({len(view) - 1: with_blocks(view[-1], blocks)})
    return Notice(
        "pins_carried",
        f"{len(missing)} pinned text(s) were not in the history (the API's compaction keeps "
        "only its summary and what follows it); they were added to the newest message.",
    )


class Pins:
    """The pinned texts of a session, by id: what a full compaction carries, a pinned file read
    again before each one. Reading files, redacting and recording are the session's (given
    as callables); this keeps the pins and their rules."""

    def __init__(
        self,
        read_file: Callable[[str], str],
        redact: Callable[[str], str],
        record: Callable[[str, dict[str, Any]], None],
        emit: Callable[[Notice], None],
    ):
        self._read_file = read_file
        self._redact = redact
        self._record = record
        self._emit = emit
        self._pins: dict[int, Pin] = {}
        self._next = 1

    def __iter__(self) -> Iterator[Pin]:
        """The pins, oldest first (a copy: pinning while iterating is safe)."""
        return iter(list(self._pins.values()))

    def __len__(self) -> int:
        return len(self._pins)

    def add(self, text: str | None = None, path: str | None = None) -> Pin:
        """A new pin of `text`, or of the file `path` (read now); ValueError when neither or
        both are given, or the text is empty. Recorded."""
        if (text is None) == (path is None):
            raise ValueError("pin() takes a text or path=..., not both or neither")
        if path is not None:
            text = self._read_file(path)
        elif not isinstance(text, str) or not text.strip():
            raise ValueError("pin() needs a non-empty text")
        pin = Pin(self._next, self._redact(text or ""), path)
        self._next += 1
        self._pins[pin.id] = pin
        self._record("pin", {"id": pin.id, "text": pin.text, "path": pin.path})
        return pin

    def remove(self, pin_id: int) -> Pin:
        """Stop carrying pin `pin_id` (KeyError naming the pins when there is no such pin)."""
        if pin_id not in self._pins:
            known = ", ".join(map(str, self._pins)) or "none"
            raise KeyError(f"no pin {pin_id!r} (pins: {known})")
        pin = self._pins.pop(pin_id)
        self._record("unpin", {"id": pin.id})
        return pin

    def texts(self, reread: bool = False) -> tuple[str, ...]:
        """The pins' block texts, for the compactor; `reread`: a full compaction follows, so
        pinned files are read again first (a file that cannot be read keeps its last text,
        said)."""
        if reread:
            for pin in list(self._pins.values()):
                if pin.path is not None:
                    self._reread(pin)
        return tuple(pin.block_text for pin in self._pins.values())

    def _reread(self, pin: Pin) -> None:
        try:
            text = self._redact(self._read_file(pin.path or ""))
        except Exception as exc:
            note = f"The pinned file {pin.path} could not be read again ({exc}); its text stays."
            self._emit(Notice("pin_unreadable", note))
            return
        if text != pin.text:
            self._pins[pin.id] = replace(pin, text=text)
            self._record("pin", {"id": pin.id, "text": text, "path": pin.path})
