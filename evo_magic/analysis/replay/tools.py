"""The tools a replayed call offers, and what that changes in its prompt: the recorded tools,
less those a recorded strategy offered that the run's strategies do not, plus those the run's
strategies offer that the recording lacked (in the order the live session would list them).
A tool's definition is in every request while it is offered; replay counts its characters."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from evo_magic.measure import to_json
from evo_magic.strategies import BUILTIN
from evo_magic.tools import Tool, offered_tools


@functools.cache
def strategy_tools() -> dict[str, Tool]:
    """The tools the built-in strategies offer, by name (their definitions do not depend on
    the strategies' parameters)."""
    tools: dict[str, Tool] = {}
    for cls in BUILTIN.values():
        if callable(getattr(cls, "tools", None)):
            tools.update((tool.name, tool) for tool in cls().tools())
    return tools


def offered(recorded: Sequence[str], strategies: Sequence[Any]) -> tuple[str, ...]:
    """The names of the tools a call of the run offers (see the module)."""
    own = [tool.name for tool in offered_tools((), strategies)]
    kept = [name for name in recorded if name in own or name not in strategy_tools()]
    return (*kept, *(name for name in own if name not in kept))


def added_chars(recorded: Sequence[str], strategies: Sequence[Any]) -> int:
    """Characters the run's tools add to each request over the recorded ones (negative when
    it offers fewer): the definitions added, less those of the recorded strategies' tools it
    no longer offers."""
    own = {tool.name: tool for tool in offered_tools((), strategies)}
    added = [tool.definition() for name, tool in own.items() if name not in recorded]
    known = strategy_tools()
    dropped = [known[n].definition() for n in recorded if n in known and n not in own]
    # In the recorded list each definition is joined by a comma: "," not "[]" per list.
    return _chars(added) - _chars(dropped)


def _chars(definitions: list[dict[str, Any]]) -> int:
    return len(to_json(definitions)) - 1 if definitions else 0
