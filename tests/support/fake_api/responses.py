"""The fake's answers on the wire: a scripted `Reply` made a Messages API message (usage
estimated, the prompt cache's reads and writes, the server's context management), or the SSE
events that stream it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from support import fake_context
from support.fake_api.cache import estimate_input_tokens
from support.fake_api.script import Reply


def _usage(item: Reply, body: dict, cache: dict[str, Any] | None) -> dict:
    usage: dict[str, Any] = {
        "input_tokens": estimate_input_tokens(body),
        "output_tokens": len(json.dumps(item.content)) // 4,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }
    if cache is not None:
        usage.update(cache)
    if item.usage is not None:
        usage.update(item.usage)
    return usage


def message_body(
    item: Reply, body: dict, message_id: str, cache: dict[str, Any] | None = None
) -> dict:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": item.model or body.get("model"),
        "content": item.content,
        "stop_reason": item.stop_reason,
        "stop_sequence": None,
        "usage": _usage(item, body, cache),
    }


def with_context(message: dict, plan: fake_context.Plan) -> dict:
    """The reply with what the server's context management did: the compaction block first,
    `usage.iterations` (a compaction's tokens apart from the top-level usage), and the applied
    clearing edits."""
    message = {**message, "usage": dict(message["usage"])}
    if plan.compaction is not None:
        message["content"] = [plan.compaction, *message["content"]]
        iterations = [plan.compaction_usage]
        if not plan.alone:
            counts = ("input_tokens", "output_tokens")
            cached = ("cache_creation_input_tokens", "cache_read_input_tokens")
            sampled = {k: message["usage"].get(k, 0) for k in (*counts, *cached)}
            iterations.append({"type": "message", **sampled})
        message["usage"]["iterations"] = iterations
    if plan.managed:
        message["context_management"] = {"applied_edits": plan.applied_edits}
    return message


def error_body(error_type: str, message: str, request_id: str) -> dict:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


def _text_chunks(value: str) -> list[str]:
    """``value`` split by words (whitespace kept), as several text_delta pieces."""
    return re.findall(r"\s*\S+\s*", value) or ([value] if value else [])


def _json_chunks(value: dict, size: int = 12) -> list[str]:
    encoded = json.dumps(value)
    return [encoded[i : i + size] for i in range(0, len(encoded), size)]


def _block_start(block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": ""}
    if kind == "tool_use":
        return {**block, "input": {}}
    if kind == "thinking":
        return {**block, "thinking": "", "signature": ""}
    if kind == "compaction":
        return {**block, "content": None, "encrypted_content": None}
    return block


def _block_deltas(block: dict) -> list[dict]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text_delta", "text": piece} for piece in _text_chunks(block["text"])]
    if kind == "tool_use":
        chunks = _json_chunks(block.get("input", {}))
        return [{"type": "input_json_delta", "partial_json": piece} for piece in chunks]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        return [*deltas, {"type": "signature_delta", "signature": block.get("signature", "")}]
    if kind == "compaction":
        delta = {"content": block.get("content"), "encrypted_content": block["encrypted_content"]}
        return [{"type": "compaction_delta", **delta}]
    return []


def sse_events(message: dict) -> Iterator[dict]:
    """The events (``data`` payloads) the real API streams for a complete ``message``.

    Each event's SSE ``event:`` name is its ``"type"``.
    """
    usage = message["usage"]
    start_usage = {**usage, "output_tokens": 1}
    started = {**message, "content": [], "stop_reason": None, "usage": start_usage}
    yield {"type": "message_start", "message": started}
    for index, block in enumerate(message["content"]):
        yield {"type": "content_block_start", "index": index, "content_block": _block_start(block)}
        if index == 0:
            yield {"type": "ping"}
        for delta in _block_deltas(block):
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    if "iterations" in usage:
        delta["usage"]["iterations"] = usage["iterations"]
    if "context_management" in message:
        delta["context_management"] = message["context_management"]
    yield delta
    yield {"type": "message_stop"}


def encode_sse(data: dict) -> bytes:
    """One SSE event on the wire: ``event: <type>\\ndata: <json>\\n\\n``."""
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def http_chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk of a chunked transfer-encoded body."""
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"
