"""Server strategies in a request: which edits and betas a call carries, which strategies a
rejection names, what takes over from them, and where a reply's compaction block cuts the
history.

The edits go in the order the API requires: `clear_thinking_20251015` first (the context
editing docs: it must come first when combined with other edits), then
`clear_tool_uses_20250919`, then `compact_20260112`. The top-level `compaction` parameter
cannot be combined with `context_management`, so it is sent only by its own request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.catalog import (
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT_EDIT,
    supports,
)
from evo_magic.compact.base import Message, ServerEdit, Strategy, server_edit
from evo_magic.models.base import ModelReply, ModelRequest
from evo_magic.usage import Usage

SUMMARIZE_BETA = "compact-2026-09-04"
COMPACT_BETA = "compact-2026-01-12"

EDIT_ORDER: tuple[str, ...] = (CLEAR_THINKING, CLEAR_TOOL_USES, COMPACT_EDIT)


@dataclass(frozen=True)
class ServerParams:
    """What the configured server strategies add to every request."""

    context_management: dict[str, Any] | None = None
    betas: tuple[str, ...] = ()

    @property
    def edits(self) -> list[dict[str, Any]]:
        return list((self.context_management or {}).get("edits", []))


def request_params(strategies: Sequence[Strategy]) -> ServerParams:
    """The `context_management` edits (in the API's order) and betas of the strategies that
    edit every request; on-demand ones (`ServerSummarise`) add nothing here."""
    edits: list[ServerEdit] = [
        edit for s in strategies if (edit := server_edit(s)) is not None and edit.edit is not None
    ]
    if not edits:
        return ServerParams()
    edits.sort(key=lambda e: EDIT_ORDER.index(e.feature) if e.feature in EDIT_ORDER else 99)
    betas = tuple(dict.fromkeys(e.beta for e in edits))
    return ServerParams({"edits": [dict(e.edit or {}) for e in edits]}, betas)


def server_strategies(strategies: Sequence[Strategy]) -> list[Strategy]:
    return [s for s in strategies if server_edit(s) is not None]


def names_feature(message: str, edit: ServerEdit) -> bool:
    """True when an API error message names the feature of `edit`: its type or its beta."""
    text = message.lower()
    return edit.feature.lower() in text or edit.beta.lower() in text


NO_BLOCK = "the reply holds no compaction block"
"""How an on-demand summary's reply without a block is reported: the server (a stand-in, a
compatible endpoint) ignored the `compaction` parameter, so the feature is not offered there."""


def not_offered(message: str, edit: ServerEdit) -> bool:
    """True when a failure's message says the feature of `edit` is not offered: the API
    refused it by name, or a reply came back without what the feature makes."""
    return names_feature(message, edit) or NO_BLOCK in message


def named_in(message: str, strategies: Sequence[Strategy]) -> list[Strategy]:
    """The server strategies whose edits a request carried and an API error message names:
    by edit type or beta; when it names none of them but `context_management` itself (a
    server without the parameter), all of them."""
    sent = [s for s in server_strategies(strategies) if _edit_of(s).edit is not None]
    named = [s for s in sent if names_feature(message, _edit_of(s))]
    if named:
        return named
    return sent if "context_management" in message.lower() else []


def _edit_of(strategy: Strategy) -> ServerEdit:
    edit = server_edit(strategy)
    assert edit is not None
    return edit


def unsupported(strategies: Sequence[Strategy], model: str) -> list[Strategy]:
    """The server strategies the capability table says `model` lacks (unknown models: none)."""
    lacking = []
    for strategy in server_strategies(strategies):
        edit = server_edit(strategy)
        assert edit is not None
        if supports(model, edit.feature) is False:
            lacking.append(strategy)
    return lacking


def replaced_by_fallbacks(
    strategies: Sequence[Strategy], failing: Sequence[Strategy]
) -> list[Strategy] | None:
    """`strategies` with each failing one replaced by its `fallback` (dropped when it has
    none); None when one of them has no fallback (the failure then stands)."""
    if any(getattr(s, "fallback", None) is None for s in failing):
        return None
    chosen = []
    for strategy in strategies:
        if any(strategy is f for f in failing):
            chosen.append(strategy.fallback)  # type: ignore[attr-defined]
        else:
            chosen.append(strategy)
    return chosen


def compaction_index(content: Sequence[dict[str, Any]]) -> int | None:
    """Where the last `compaction` block of a reply is (None: there is none)."""
    found = None
    for index, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "compaction":
            found = index
    return found


def entering(block: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """A compaction block from the API as it may enter the history, the state, the events and
    the next request: itself when its summary holds no credential the session knows; else a
    text block of the summary, redacted (`stand_in`). The block is signed: changed by one byte
    the API refuses it, so a summary that must be redacted cannot stay a server block; the
    compaction then keeps that text as a compacted message of our own."""
    content = block.get("content")
    if block.get("type") != "compaction" or not isinstance(content, str):
        return block
    cleaned = redact(content)
    return block if cleaned == content else stand_in(cleaned)


def stand_in(summary: str) -> dict[str, Any]:
    """The text block that stands in for a compaction block whose summary was redacted."""
    return {"type": "text", "text": summary}


def from_compaction(message: Message) -> Message:
    """The assistant message cut to start at its last compaction block: the API drops every
    block before it, so the history keeps what the server will read."""
    content = message["content"]
    index = compaction_index(content)
    assert index is not None
    return {**message, "content": content[index:]}


def summary_request(
    messages: Sequence[Message], focus: str | None, *, system: str, tools: list[dict[str, Any]],
    max_tokens: int,
) -> ModelRequest:  # fmt: skip
    """The on-demand compaction request: the whole conversation and the `compaction`
    parameter (the focus as its instructions), nothing that shapes a reply."""
    compaction: dict[str, Any] = {"type": "summarize"}
    if focus and focus.strip():
        compaction["instructions"] = focus
    return ModelRequest(
        messages=list(messages), max_tokens=max_tokens, system=system, tools=tools,
        compaction=compaction, betas=(SUMMARIZE_BETA,),
    )  # fmt: skip


def summary_block(reply: ModelReply) -> tuple[dict[str, Any], Usage]:
    """The compaction block of an on-demand reply and its tokens (the compaction iteration's,
    which the top-level usage leaves out); ValueError when there is no usable summary."""
    index = compaction_index(reply.content)
    if index is None:
        raise ValueError(f"{NO_BLOCK} (stop_reason {reply.stop_reason})")
    block = reply.content[index]
    usage = sum(
        (Usage.from_api(i) for i in reply.iterations if i.get("type") == "compaction"),
        reply.usage,
    )
    if not block.get("content"):
        raise ValueError("the server's summary failed (its compaction block has null content)")
    return block, usage
