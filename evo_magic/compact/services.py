"""What the compactor asks of whoever runs it: a live session, or a replay. One list of its
collaborators (`CompactionServices`), each with what it does where there is none, so a new one
is added here once and both sides get its default."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.events import Event
from evo_magic.messages import Message
from evo_magic.summariser import Summary

Summarise = Callable[[Sequence[Message], str | None], Summary]
ServerSummarise = Callable[[Sequence[Message], str | None], tuple[dict[str, Any], Summary]]
"""Asks the API for its own summary: the compaction block, and its text and cost."""


def _no_file(path: str, max_chars: int) -> str | None:
    raise RuntimeError("there is no workspace to read files from")


def _no_server(messages: Sequence[Message], focus: str | None) -> tuple[dict[str, Any], Summary]:
    raise RuntimeError("this session cannot ask the API for a summary")


@dataclass(frozen=True)
class CompactionServices:
    """What the compactor asks of whoever runs it (a session, a replay)."""

    emit: Callable[[Event], None]
    """Receives every event (the session records it and shows it)."""
    summarise: Summarise
    """The summariser (`Summary` with its usage and cost)."""
    save_output: Callable[[str, str], str]
    """Saves a tool output whole; returns the path shown to the model."""
    snapshot: Callable[[list[Message]], str] = lambda messages: ""
    """Writes a history about to be replaced; returns where ("" for nowhere)."""
    read_file: Callable[[str, int], str | None] = _no_file
    """Reads a workspace file as the file tools do (None: over the size given)."""
    model: Callable[[], str | None] = lambda: None
    """The model the session calls now (its window, its prices)."""
    server_summarise: ServerSummarise = _no_server
    pins: Callable[[bool], tuple[str, ...]] = lambda reread: ()
    """The pinned block texts (`reread`: a full compaction follows, pinned files read again)."""
    tools: Callable[[], tuple[str, ...]] = lambda: ()
    """The names of the tools the model is offered now (a placeholder can point to `recall`)."""
    background: bool = True
    """False: a summary prepared "in the background" is made at once, in order (a replay)."""
