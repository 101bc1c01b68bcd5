"""Codex rollout items into block rows: message parts, tool outputs, web searches, and the
prompts a person typed, told apart by the rollout's `user_message` events (see `codex`)."""

from __future__ import annotations

import json
from typing import Any


def text_of(parts: Any) -> str:
    """The text of a content field: a string as is, a list of parts their texts joined."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


Read = tuple[str, str, list[dict[str, Any]]]
"""What a response item is: the role of its message, the message's kind, its blocks."""


def tool_output(output: Any) -> dict[str, Any]:
    """A tool output's fields of its `tool_result` block: an output that says it failed is an
    error; a list of parts is kept as parts (`_parts`), its text their texts."""
    block: dict[str, Any] = {}
    if isinstance(output, dict):  # {"content": ..., "success": bool} in some versions
        if output.get("success") is False:
            block.update(is_error=True, status="error")
        output = output.get("content")
    if isinstance(output, list):
        block["parts"] = len(output)
        block["_parts"] = [part_row(p) for p in output]
        block["text"] = text_of(output)
    else:
        block["text"] = output if isinstance(output, str) else json.dumps(output)
    return block


def prompt_lines(
    records: list[dict[str, Any]], payloads: list[dict[str, Any]]
) -> tuple[set[int] | None, set[int]]:
    """The lines of the user messages a person typed: each `user_message` event follows the
    `message` item of what was typed (None when the rollout has no such events: then message
    text decides); and the lines of the events with no such item before them (since the
    previous event or the turn's start), whose prompt exists only as the event."""
    found: set[int] = set()
    alone: set[int] = set()
    typed: int | None = None  # the last user message item since the last event
    events = False
    for record, payload in zip(records, payloads, strict=True):
        kind, inner = record.get("type"), payload.get("type")
        if kind == "response_item" and inner == "message" and payload.get("role") == "user":
            typed = record["line"]
        elif kind == "event_msg" and inner == "task_started":
            typed = None  # a turn starts: what it was typed with comes after
        elif kind == "event_msg" and inner == "user_message":
            events = True
            if typed is not None:
                found.add(typed)
            else:
                alone.add(record["line"])
            typed = None
    return (found if events else None), alone


def typed_prompt(event: dict[str, Any]) -> Read:
    """A prompt read from its `user_message` event: its text, then its images (data URLs)."""
    text, images = event.get("message"), event.get("images")
    blocks = [{"block_type": "text", "text": text if isinstance(text, str) else ""}]
    urls = images if isinstance(images, list) else []
    return (
        "user",
        "prompt",
        blocks + [part_block({"type": "input_image", "image_url": u}) for u in urls],
    )


def user_kind(text: str, default: str) -> str:
    return "interrupt" if text.lstrip().startswith("<turn_aborted>") else default


def web_search_block(item: dict[str, Any], line: int) -> dict[str, Any]:
    """A web search the server ran: a `server_tool_use` block named `web_search`, its input the
    recorded action (`{}` when the rollout keeps only the status), its id the item's or, when
    the rollout has none, one made from its line (`ws_line<n>`), so that it can be referred to."""
    call_id = item.get("id") or item.get("call_id")
    action = item.get("action")
    return {
        "block_type": "server_tool_use",
        "tool_name": "web_search",
        "tool_use_id": call_id if isinstance(call_id, str) and call_id else f"ws_line{line}",
        "text": json.dumps(action if isinstance(action, dict) else {}, ensure_ascii=False),
    }


def part_block(part: Any) -> dict[str, Any]:
    if not isinstance(part, dict):
        return {"block_type": "text", "text": None if part is None else str(part)}
    kind = part.get("type")
    if kind in ("input_image", "image"):
        url = part.get("image_url") if isinstance(part.get("image_url"), str) else ""
        media = url[5:].split(";", 1)[0] if url.startswith("data:") else None
        return {"block_type": "image", "media_type": media, "chars": len(url.partition(",")[2])}
    return {"block_type": "text", "text": part.get("text")}


def part_row(part: Any) -> dict[str, Any]:
    block = part_block(part)
    kind = part.get("type") if isinstance(part, dict) else None
    return {
        "part_type": "image" if block["block_type"] == "image" else (kind or "text"),
        "text": block.get("text"),
        "chars": block.get("chars", len(block["text"]) if block.get("text") else None),
        "media_type": block.get("media_type"),
    }
