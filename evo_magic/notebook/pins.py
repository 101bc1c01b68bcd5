"""`%agent pin TEXT`, `%agent unpin ID`, `%agent pins`: the session's pinned texts, as plain
text. The magic passes the words it got; these functions call the session and say what
happened (a bad id or an empty text is a UsageError-worthy ValueError/KeyError, raised)."""

from __future__ import annotations

from typing import Any

from evo_magic.render import clip


def pin_words(session: Any, words: list[str]) -> str:
    """`%agent pin TEXT` (or `%agent pin --file PATH`): pin it; returns what to print."""
    if words[:1] == ["--file"]:
        if len(words) != 2:
            raise ValueError("%agent pin --file takes one workspace path")
        pin_id = session.pin(path=words[1])
        return (
            f"pinned {words[1]} as pin {pin_id}: in every request, read again after each "
            "compaction."
        )
    text = " ".join(words).strip()
    if not text:
        raise ValueError("%agent pin needs the text to pin, e.g. %agent pin Never use tabs.")
    pin_id = session.pin(text)
    return f"pinned as pin {pin_id}: in every request, verbatim, whatever the strategies do."


def unpin_words(session: Any, words: list[str]) -> str:
    """`%agent unpin ID`: unpin it; returns what to print."""
    if len(words) != 1 or not words[0].isdigit():
        raise ValueError("%agent unpin takes one pin id (see %agent pins)")
    session.unpin(int(words[0]))
    return f"unpinned {words[0]}: no compaction carries it any more."


def pins_text(session: Any) -> str:
    """`%agent pins`: one line per pin (id and the start of its text)."""
    pins = session.pins
    if not pins:
        return "no pins: %agent pin TEXT pins a text into every request."
    return "\n".join(f"{pin_id}: {clip(text, 120)}" for pin_id, text in pins)
