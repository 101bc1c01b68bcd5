"""What the model sent, made valid for the history before it joins it.

A reply can carry empty text, tool_use ids that are malformed or already taken, inputs that are
not objects, a credential the model read somewhere, or be cut off mid-way; what joins the history
is always content the API accepts, and each fix is said once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evo_magic.compact.server import entering
from evo_magic.events import Notice
from evo_magic.history import History
from evo_magic.loop.parts import LoopParts
from evo_magic.measure import to_json
from evo_magic.models.base import ModelReply

MAX_TOKENS_NOTE = (
    "[Your previous response was cut off at the max_tokens limit ({limit} tokens); tool calls "
    "in it were dropped. Continue from where you stopped, in smaller steps.]"
)
WINDOW_EXCEEDED = "model_context_window_exceeded"
WINDOW_NOTE = (
    "[Your previous response was cut off: the context window is full. Tool calls in it were "
    "dropped; continue from where you stopped.]"
)
_TOOL_USE_ID = re.compile(r"[A-Za-z0-9_-]+")


def append_reply(
    parts: LoopParts, reply: ModelReply
) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
    """Append the assistant's content, redacted and normalised; return its tool calls, by id
    those whose input was unusable (answered with an error, not run), and the content."""
    content, bad_inputs, fixes = normalise_reply(_redacted(reply.content, parts), parts.history)
    if fixes:
        note = "The model's reply was adjusted: " + "; ".join(fixes)
        parts.emit(Notice("reply_normalised", note))
    if reply.stop_reason == WINDOW_EXCEEDED:
        # Cut off mid-reply: keep its text, drop its calls (their input may be cut too).
        content = [block for block in content if block.get("type") != "tool_use"]
        content = content or [{"type": "text", "text": "[response cut off: context window full]"}]
        parts.history.append({"role": "assistant", "content": content})
        parts.history.append({"role": "user", "content": [{"type": "text", "text": WINDOW_NOTE}]})
        return [], {}, content
    if reply.stop_reason == "max_tokens":
        # A tool call cut off mid-input cannot be run safely: drop them all and say so.
        content = [block for block in content if block.get("type") != "tool_use"]
        content = content or [{"type": "text", "text": "[response cut off at max_tokens]"}]
        parts.history.append({"role": "assistant", "content": content})
        note = MAX_TOKENS_NOTE.format(limit=parts.max_tokens)
        parts.emit(Notice("max_tokens", note))
        parts.history.append({"role": "user", "content": [{"type": "text", "text": note}]})
        return [], {}, content
    if not content:
        content = [{"type": "text", "text": "(no response)"}]
    parts.history.append({"role": "assistant", "content": content})
    calls = [block for block in content if block.get("type") == "tool_use"]
    return calls, bad_inputs, content


def normalise_reply(
    content: Sequence[dict[str, Any]], history: History
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """What the model sent, made valid for the history: no empty text, tool_use ids that are
    well-formed and unique in the session, object inputs. Returns the content, the ids whose
    input was unusable (with what it was), and a note of each fix."""
    result: list[dict[str, Any]] = []
    bad_inputs: dict[str, str] = {}
    fixes: list[str] = []
    seen: set[str] = set()
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            fixes.append("dropped a block that was not a content block")
            continue
        if block["type"] == "text" and not str(block.get("text") or "").strip():
            continue
        if block["type"] != "tool_use":
            result.append(block)
            continue
        block = dict(block)
        block_id = block.get("id")
        well_formed = isinstance(block_id, str) and bool(_TOOL_USE_ID.fullmatch(block_id))
        repeated = well_formed and (block_id in seen or history.id_taken(block_id))
        if repeated or not well_formed:
            new_id = history.fresh_tool_use_id(seen)
            problem = "repeated" if repeated else "not a valid id"
            fixes.append(f"tool_use id {block_id!r} was {problem}; it is now {new_id}")
            block["id"] = block_id = new_id
        seen.add(block_id)
        if not isinstance(block.get("name"), str) or not block.get("name"):
            block["name"] = "unknown_tool"
        tool_input, problem = _object_input(block.get("input"))
        if problem:
            bad_inputs[block_id] = problem
            fixes.append(f"the input of {block['name']} ({block_id}) was {problem}")
        elif tool_input is not block.get("input"):
            kind = _kind(block.get("input"))
            fixes.append(
                f"the input of {block['name']} ({block_id}) was {kind}; it is now an object"
            )
        block["input"] = tool_input
        result.append(block)
    return result, bad_inputs, fixes


def _object_input(value: Any) -> tuple[dict[str, Any], str | None]:
    """The tool input as an object, and what was wrong when it could not be one. A missing
    input (servers send none for argument-less calls) is an empty object; a string holding a
    JSON object is that object."""
    if isinstance(value, dict):
        return value, None
    if value is None:
        return {}, None
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed, None
    return {}, _kind(value)


def _kind(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"a {type(value).__name__} ({shown})"


def _redacted(content: list[dict[str, Any]], parts: LoopParts) -> list[dict[str, Any]]:
    """The reply with every credential the session knows replaced (a model that read one
    somewhere never puts it back into the history); a compaction block, which is signed, as
    `server.entering` lets it in (whole, or its summary redacted as a text block)."""
    encoded = to_json(content)
    cleaned = parts.redact(encoded)
    if cleaned == encoded:
        return content
    return [
        entering(block, parts.redact)
        if block.get("type") == "compaction"
        else json.loads(parts.redact(to_json(block)))
        for block in content
    ]


def text_of(content: list[dict[str, Any]]) -> str:
    """The text the model said in `content` (its tool calls left out)."""
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")
