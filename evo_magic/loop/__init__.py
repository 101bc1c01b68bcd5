"""The ReAct loop: call the model, run the tools it asks for, repeat; compact on the way.

Before every model call the compactor runs the strategies that are due. Whatever happens (a
failed call, an interrupt, an observer or a transcript that fails, a server that sends odd
replies) the history stays one the API accepts: what the model sent is normalised before it
joins the history, each tool result joins it as its tool returns, and every call left without
a result is answered with an error saying what happened.

The loop gets the narrow parts it needs (`LoopParts`), not the session. Its modules:
`ask` (the loop itself and the reactive compaction), `call` (one model call), `reply` (what
the model sent, made valid for the history), `tool_calls` (running a reply's tool calls and
answering those that did not run), `parts` (what an ask needs from the session).
"""

from evo_magic.loop.ask import CONTEXT_EXCEEDED, STILL_TOO_LONG, run_ask
from evo_magic.loop.call import INTERRUPTED_TEXT
from evo_magic.loop.parts import LoopParts, Totals
from evo_magic.loop.reply import MAX_TOKENS_NOTE, WINDOW_EXCEEDED, WINDOW_NOTE, normalise_reply
from evo_magic.loop.tool_calls import (
    BAD_INPUT,
    COMPACT_FAILED,
    INTERRUPTED_TOOL,
    NOT_RUN,
    STOPPED_TOOL,
    answer_left_over,
)

__all__ = [
    "BAD_INPUT",
    "COMPACT_FAILED",
    "CONTEXT_EXCEEDED",
    "INTERRUPTED_TEXT",
    "INTERRUPTED_TOOL",
    "MAX_TOKENS_NOTE",
    "NOT_RUN",
    "STILL_TOO_LONG",
    "STOPPED_TOOL",
    "WINDOW_EXCEEDED",
    "WINDOW_NOTE",
    "LoopParts",
    "Totals",
    "answer_left_over",
    "normalise_reply",
    "run_ask",
]
