"""The one rule for the text that replaces a tool result: when the model is offered `recall`,
a placeholder names the original and the call that reads it again; otherwise it is the
strategy's own text, exactly as set.

Every strategy that replaces a tool result by a placeholder (`micro`, `observation-masking`,
`interval-summary`'s masking, `clear-tool-uses`) asks `placeholder_for`. With `recall` offered,
the placeholder keeps its own wording, loses any advice to run the tool again (the original
is one call away, and the tool may answer something else now), and ends with `RECALL_NOTE`:
the seed's `[Earlier tool result compacted. Re-run the tool if you need full detail.]` becomes
`[Earlier tool result compacted. The original is kept: use recall(id="toolu_…") to read it
again.]`, and SWE-agent's `Old environment output: (12 lines omitted)` gains the note in
brackets. Without `recall` nothing changes, so a benchmark's exact placeholder stays exact.
"""

from __future__ import annotations

import re

from evo_magic.compact.base import Context
from evo_magic.strategies.recall import RECALL_TOOL

RECALL_NOTE = 'The original is kept: use recall(id="{id}") to read it again.'
"""What a placeholder says when the model is offered `recall`."""

_RUN_AGAIN = re.compile(r"\s*(?:Re-run|Run) the tool(?: again)? if you need[^.\]]*\.")
"""The built-in placeholders' advice to run the tool again."""


def placeholder_for(text: str, tool_use_id: str, ctx: Context) -> str:
    """The placeholder of the result of `tool_use_id` whose own text is `text`: pointing to
    `recall` when the model is offered it (see the module), else `text` unchanged."""
    if RECALL_TOOL not in ctx.tools or not tool_use_id:
        return text
    note = RECALL_NOTE.format(id=tool_use_id)
    kept = _RUN_AGAIN.sub("", text).rstrip()
    if kept.startswith("[") and kept.endswith("]"):
        return f"{kept[:-1].rstrip()} {note}]"
    return f"{kept} [{note}]"
