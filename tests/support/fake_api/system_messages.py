"""Mid-conversation system messages as the SDK 2.17 types define them
(`BetaSystemMessageParam`, beta `mid-conversation-system-clear-at-2026-08-21`): in `messages`,
`{"role": "system", "content": str | [text blocks], "clear_at": "next_user_message" | "never"}`
after a user turn. Without the beta the role is rejected as the API rejects any other role;
with it, the message is checked here and the rest of the request is checked without it."""

from __future__ import annotations

from typing import Any

from support.fake_api.messages import check_text_block

BETA = "mid-conversation-system-clear-at-2026-08-21"
_CLEAR_AT = ("next_user_message", "never")
_FIELDS = {"role", "content", "clear_at", "output_config"}


def check(body: dict, betas: set[str]) -> str | None:
    """None when the real API would accept the request's system messages (none is fine),
    else why not."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        if BETA not in betas:
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if (error := _check_one(f"messages.{i}", message)) is not None:
            return error
        if i == 0 or messages[i - 1].get("role") != "user":
            return f"messages.{i}: a system message must follow a user message"
    return None


def without(body: dict) -> dict:
    """`body` without its system messages (what the other checks and the script see)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    kept = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    return {**body, "messages": kept}


def _check_one(path: str, message: dict[str, Any]) -> str | None:
    if extra := set(message) - _FIELDS:
        return f"{path}.{sorted(extra)[0]}: Extra inputs are not permitted"
    if message.get("clear_at") not in (None, *_CLEAR_AT):
        return f"{path}.clear_at: Input should be 'next_user_message' or 'never'"
    content = message.get("content")
    if isinstance(content, str):
        return None if content.strip() else f"{path}.content: text must be non-empty"
    if not isinstance(content, list) or not content:
        return f"{path}.content: Input should be a valid string or a list of text blocks"
    for j, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"{path}.content.{j}.type: Input should be 'text'"
        if (error := check_text_block(f"{path}.content.{j}", block)) is not None:
            return error
    return None
