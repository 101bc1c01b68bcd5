"""How the magics fail: one line each, never a traceback of evo_magic's own.

A bad line is a `UsageError` (IPython shows that exact class as one line); a cell the API,
an observer or the transcript stopped is an `AgentCellError`; an interrupted cell is an
`AgentInterrupted`. Each says what the session kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.error import UsageError

from evo_magic.render import plural


class AgentCellError(Exception):
    """A %%agent cell failed (e.g. the API failed after retries). Shown without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentError: {self}"]


class AgentInterrupted(KeyboardInterrupt):
    """The user interrupted a cell; shown as one line, and it still stops "Run all". The one
    place a cell says so: its view leaves out the loop's "interrupted" notice."""

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Raise a UsageError of a subclass (a SettingError) as a UsageError itself: IPython shows
    exactly that class as one line, and a subclass with its whole traceback."""
    try:
        yield
    except UsageError as exc:
        if type(exc) is UsageError:
            raise
        raise UsageError(str(exc)) from None


def kept(session: Any) -> str:
    """What a stopped cell leaves: "the history is kept (3 messages); the next cell ..."."""
    return (
        f"the history is kept ({plural(len(session.messages), 'message')}); the next cell "
        "continues the conversation."
    )


def sentence(text: str) -> str:
    """`text` as one sentence: capitalised, ending with exactly one full stop."""
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""
