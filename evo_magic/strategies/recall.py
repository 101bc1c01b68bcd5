"""Recall: a way back to what was compacted. The model gets a `recall` tool over the session's
own originals (every message and tool output as it first was, and the snapshots of replaced
histories), to search them and read one again a page at a time.

Source: the OpenHands SDK's `NotesRetrievalCondenser` (a `conversation_history` tool: literal
search, snippets, pages of the originals), Letta's searchable evicted messages, DeepAgents'
history offloaded to a file. The seed's placeholder tells the model to re-run the tool,
although the original is on disk and the tool may now answer something else; with `recall`
offered, the placeholder names the original instead (`placeholders.placeholder_for`, the one rule
of every strategy's placeholder).

The strategy edits nothing by itself: it offers the tool (its definition is in every request
from then on, which replay counts). Results are bounded (`max_hits` hits of `snippet_chars`,
pages of `page_chars`), credentials are redacted, and every call and result is recorded in
the transcript like any tool's. See `evo_magic.tools.recall` for what is read and how it is
ranked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Message
from evo_magic.declared import check_fields, setting
from evo_magic.secrets import known_secrets, redact
from evo_magic.tools.base import Tool, ToolContext, ToolError
from evo_magic.tools.recall import Hit, Originals

RECALL_TOOL = "recall"


@dataclass(frozen=True)
class Recall:
    """Offer the model a `recall` tool over the session's originals (see the module)."""

    max_hits: int = setting(8, "Most hits one search returns.", minimum=1)
    snippet_chars: int = setting(200, "Characters of each hit's snippet.", minimum=20)
    page_chars: int = setting(4_000, "Characters of one page of an original.", minimum=200)

    name = "recall"
    when = "every_call"
    source = "OpenHands' NotesRetrievalCondenser, Letta's searchable evicted messages"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        """Nothing to edit: the placeholders of the other strategies point to the tool."""
        return None

    def tools(self) -> tuple[Tool, ...]:
        """The `recall` tool."""
        return (
            Tool(
                name=RECALL_TOOL,
                description=(
                    "Search or read again the originals of this conversation: every message "
                    "and tool output as it first was, including those compacted away. Give "
                    "`query` to search (literal text; `ranked`: true for the best matches of "
                    "its words), or `id` (a tool use id, or an id a search returned) and "
                    "`page` to read an original a page at a time."
                ),
                input_schema={
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Text to search for."},
                        "ranked": {
                            "type": "boolean",
                            "description": "Rank by relevance of the words (BM25) instead of "
                            "matching the text literally.",
                        },
                        "id": {"type": "string", "description": "The original to read."},
                        "page": {"type": "integer", "description": "Page to read, from 1."},
                    },
                    "required": [],
                },
                run=self._run,
                main_argument="query",
            ),
        )

    def _run(self, tool_input: dict[str, Any], ctx: ToolContext) -> str:
        query, original_id = tool_input.get("query"), tool_input.get("id")
        if (query is None) == (original_id is None):
            raise ToolError("recall: give either `query` (to search) or `id` (to read)")
        originals = _originals(ctx)
        if query is not None:
            shown = self.search(originals, query, bool(tool_input.get("ranked")), ctx.shown)
        else:
            shown = self.read(originals, original_id, tool_input.get("page", 1))
        return redact(shown, known_secrets())  # the transcript redacted them; a key added since

    def search(
        self,
        originals: Originals,
        query: str,
        ranked: bool,
        shown: Callable[[str], str | None] = lambda tool_use_id: None,
    ) -> str:
        """The hits of `query` as the tool shows them, each saying whether the context still
        holds it whole (`shown`: a result's text in the context now, None when gone)."""
        if not query.strip():
            raise ToolError("recall: `query` is empty")
        find = originals.ranked if ranked else originals.literal
        hits, total = find(query, self.max_hits, self.snippet_chars)
        if not hits:
            return f"No original matches {query!r}."
        head = f"{total} original(s) match {query!r}" + (
            f"; the {len(hits)} {'best' if ranked else 'newest'}:" if total > len(hits) else ":"
        )
        lines = (_hit_line(hit, self.page_chars, shown) for hit in hits)
        return "\n".join([head, *lines])

    def read(self, originals: Originals, original_id: str, page: object) -> str:
        """Page `page` of the original `original_id`, with where it stands."""
        original = originals.found.get(original_id)
        if original is None:
            raise ToolError(f"recall: no original {original_id!r} (search to find ids)")
        pages = max(-(-len(original.text) // self.page_chars), 1)
        if not isinstance(page, int) or isinstance(page, bool) or not 1 <= page <= pages:
            raise ToolError(f"recall: `page` must be from 1 to {pages} for {original_id!r}")
        start = (page - 1) * self.page_chars
        text = original.text[start : start + self.page_chars]
        return f"[{original_id}: {original.label}; page {page} of {pages}]\n{text}"


def _originals(ctx: ToolContext) -> Originals:
    """The session's index of its originals, kept in its tool notes, brought up to date."""
    if ctx.originals is None:
        raise ToolError("recall: this session keeps no transcript to read")
    originals = ctx.notes.get(RECALL_TOOL)
    if not isinstance(originals, Originals) or originals.folder != ctx.originals:
        originals = ctx.notes[RECALL_TOOL] = Originals(ctx.originals)
    originals.refresh()
    return originals


def _hit_line(hit: Hit, page_chars: int, shown: Callable[[str], str | None]) -> str:
    original = hit.original
    pages = max(-(-len(original.text) // page_chars), 1)
    where = ""
    if original.kind == "tool_result":
        now = shown(original.id)
        where = "; in view" if now == original.text else "; gone" if now is None else "; compacted"
    return f"- id={original.id} ({original.label}; {pages} page(s){where}): {hit.snippet}"
