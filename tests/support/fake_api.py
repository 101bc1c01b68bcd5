"""A loopback fake of the Anthropic Messages API, for the test suite.

`FakeAnthropic` serves ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` on
``127.0.0.1`` (standard library only) so that code under test can talk to it through the
real ``anthropic`` SDK by passing ``base_url``. Every request body is checked by
`validate_request`, which rejects what the real API rejects (with close wording), so tests
catch malformed conversations that a hand-written mock would let through.

Prompt caching is emulated as the API documents it: `validate_request` checks every
``cache_control`` (shape, at most 4 breakpoints, blocks that may not carry one, 1-hour before
5-minute), and each answered request reads and writes an in-memory prefix cache whose lifetimes
run on `FakeAnthropic.clock`, a `FakeClock` the tests advance. The usage then reports
``cache_read_input_tokens``, ``cache_creation_input_tokens`` and ``cache_creation`` by TTL, and
``input_tokens`` for the rest, the three adding up to `estimate_input_tokens`. Token positions are
the fake's estimate (`cached_block_tokens` per block); the minimum cacheable length follows the
model (`MIN_CACHEABLE_TOKENS`, 1,024 for unknown names) unless ``min_cacheable_tokens`` is given.

Responses are scripted: `FakeAnthropic.queue` items are used first (FIFO), then the
`Responder` callback, then a default text reply. An item is a `Reply` (a message, sent as
JSON or as SSE when the request has ``"stream": true``), a `Fault` (an HTTP error the SDK
may retry) or a `StreamCut` (a stream that dies mid-body).

Example::

    with FakeAnthropic() as fake:
        fake.queue(reply(tool_use("run", {"code": "1+1"})), reply(text("done")))
        client = fake.client()
        message = client.messages.create(model="m", max_tokens=64, messages=[...])
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from support import fake_context

if TYPE_CHECKING:
    import anthropic
    import httpx2

__all__ = [
    "Fault",
    "FakeAnthropic",
    "FakeClock",
    "RawStream",
    "Reply",
    "Responder",
    "StreamCut",
    "overloaded",
    "rate_limited",
    "reply",
    "server_error",
    "text",
    "tool_use",
    "unmarked",
    "validate_messages",
    "validate_request",
]

FAKE_API_KEY = "sk-ant-fake-test-key"
DEFAULT_RETRY_AFTER_MS = 10
MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"

_tool_ids = itertools.count(1)

CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
DEFAULT_MIN_CACHEABLE_TOKENS = 1024
MIN_CACHEABLE_TOKENS = {
    # The docs' per-model minimums (Claude API); Haiku 5.5 and the 5.2 models assumed at 512.
    **dict.fromkeys(
        [
            "fable-5-2",
            "mythos-5-2",
            "fable-5-1",
            "mythos-5-1",
            "fable-5",
            "mythos-5",
            "opus-5-5",
            "opus-5",
            "sonnet-5-5",
            "haiku-5-5",
        ],
        512,
    ),
    **dict.fromkeys(
        ["opus-4-8", "sonnet-5", "sonnet-4-6", "sonnet-4-5", "opus-4-1", "opus-4", "sonnet-4"], 1024
    ),
    **dict.fromkeys(["opus-4-7", "mythos-preview", "3-5-haiku"], 2048),
    **dict.fromkeys(["opus-4-6", "opus-4-5", "haiku-4-5"], 4096),
}
"""Minimum cacheable prompt length by model (``claude-`` prefix and snapshot date left out)."""


# --------------------------------------------------------------------------- scripted items


@dataclass
class Reply:
    """One scripted assistant response.

    ``content`` holds blocks in API shape (see `text` and `tool_use`). ``usage=None`` means
    estimated: the prompt's size from the request's messages, system and tools, split into
    ``input_tokens`` and cache reads and writes by the emulated prompt cache (all input when
    the request has no breakpoint), ``output_tokens`` from the size of ``content`` (4
    characters of JSON a token). Fields given in ``usage`` replace the estimated ones.
    ``model=None`` echoes the request's model.
    """

    content: list[dict]
    stop_reason: str = "end_turn"
    usage: dict | None = None
    model: str | None = None


@dataclass
class Fault:
    """An HTTP error response, sent in the Anthropic error shape.

    A fault is only ever sent to a request that passed validation. Build one with
    `overloaded`, `rate_limited` or `server_error`: they carry a ``retry-after-ms`` header
    so the SDK retries after milliseconds instead of its ~0.5 s+ exponential backoff.
    """

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamCut:
    """A response whose connection is aborted mid-body.

    For a ``stream=True`` request the first ``after_events`` SSE events of ``reply`` are sent
    as HTTP/1.1 chunks, then the socket is shut down without the terminating zero-length
    chunk. With anthropic 2.16 the SDK does *not* wrap this: iterating the stream
    (``for event in client.messages.stream(...)`` or ``client.messages.create(stream=True)``)
    raises the raw ``httpx2.RemoteProtocolError`` ("peer closed connection without sending
    complete message body: incomplete chunked read"), which is not an
    ``anthropic.APIError`` and is not retried, because the SDK returned the stream as soon
    as the headers arrived.

    ``after_events`` counts every event sent, the ``ping`` included (the SDK skips pings).

    For a non-streaming request, the headers announce the full ``Content-Length`` but only
    half of the JSON body is sent. The SDK reads that body inside its retry loop, so it
    surfaces as ``anthropic.APIConnectionError`` and *is* retried like any connection error
    (each retry takes the next scripted item), after its exponential backoff of ~0.5 s and
    more, as there is no ``retry-after`` to honour: use ``max_retries=0`` in fast tests.
    """

    reply: Reply
    after_events: int = 3


@dataclass
class RawStream:
    """A streamed response sent as given, for servers that are not quite the real API: each
    event is a payload dict (sent as ``event: <type>`` / ``data: <json>``) or raw bytes (sent
    verbatim, e.g. garbage). Build the dicts from `sse_events` of a message and change them."""

    events: list[dict | bytes]


Item = Reply | Fault | StreamCut | RawStream
Responder = Callable[[dict], Item]


def text(s: str) -> dict:
    """A text content block."""
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict, id: str | None = None) -> dict:
    """A tool_use content block; ``id`` defaults to a unique ``toolu_fake_<n>``."""
    block_id = id if id is not None else f"toolu_fake_{next(_tool_ids)}"
    return {"type": "tool_use", "id": block_id, "name": name, "input": input}


def reply(
    *blocks: dict,
    stop_reason: str | None = None,
    usage: dict | None = None,
    model: str | None = None,
) -> Reply:
    """A `Reply` of ``blocks``; ``stop_reason`` defaults to ``tool_use`` if any block is one."""
    if stop_reason is None:
        has_tool_use = any(block.get("type") == "tool_use" for block in blocks)
        stop_reason = "tool_use" if has_tool_use else "end_turn"
    return Reply(content=list(blocks), stop_reason=stop_reason, usage=usage, model=model)


def unmarked(value: Any) -> Any:
    """``value`` (a request body, messages, a block) without any ``cache_control``: what was
    sent, as the sender's history holds it."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(item) for item in value]
    return value


def _fault_headers() -> dict[str, str]:
    return {"retry-after-ms": str(DEFAULT_RETRY_AFTER_MS)}


def overloaded() -> Fault:
    """A 529 ``overloaded_error`` (the SDK raises ``anthropic.OverloadedError`` if not retried)."""
    return Fault(529, "overloaded_error", "Overloaded", _fault_headers())


def rate_limited(retry_after_ms: int = DEFAULT_RETRY_AFTER_MS) -> Fault:
    """A 429 ``rate_limit_error`` with ``retry-after: 0`` and ``retry-after-ms`` headers.

    The SDK prefers ``retry-after-ms``; it must be positive, as a zero wait falls back to
    the SDK's exponential backoff.
    """
    headers = {"retry-after": "0", "retry-after-ms": str(retry_after_ms)}
    message = "Number of request tokens has exceeded your per-minute rate limit"
    return Fault(429, "rate_limit_error", message, headers)


def server_error() -> Fault:
    """A 500 ``api_error`` (the SDK raises ``anthropic.InternalServerError`` if not retried)."""
    return Fault(500, "api_error", "Internal server error", _fault_headers())


# --------------------------------------------------------------------------- validation

_ROLES = ("user", "assistant")
_BLOCK_TYPES = frozenset(
    {
        "text",
        "tool_use",
        "tool_result",
        "image",
        "thinking",
        "redacted_thinking",
        "document",
        "compaction",
    }
)
_TOOL_RESULT_CONTENT_TYPES = frozenset({"text", "image"})
_UNMARKABLE_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass
class _Turn:
    """Consecutive messages of one role, merged as the real API does.

    ``blocks`` holds ``(path, block)`` pairs where ``path`` is like ``messages.2.content.0``,
    pointing into the original (unmerged) request.
    """

    role: str
    first_index: int
    blocks: list[tuple[str, dict]] = field(default_factory=list)


def validate_request(body: dict) -> str | None:
    """None if the real Messages API would accept ``body``, else its error message."""
    return _validate_body(body, require_max_tokens=True)


def _validate_body(body: Any, *, require_max_tokens: bool) -> str | None:
    if not isinstance(body, dict):
        return "Request body must be a JSON object"
    checks: list[Callable[[], str | None]] = [
        lambda: _check_model(body),
        lambda: _check_max_tokens(body) if require_max_tokens else None,
        lambda: _check_system(body),
        lambda: _check_tools(body),
        lambda: _check_tool_choice(body),
        lambda: _check_messages_field(body),
        lambda: _check_tools_defined(body),
        lambda: _check_top_level_cache_control(body),
        lambda: _check_breakpoints(body),
    ]
    for check in checks:
        if (error := check()) is not None:
            return error
    return None


def _check_model(body: dict) -> str | None:
    if "model" not in body:
        return "model: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a valid string"
    return None


def _check_max_tokens(body: dict) -> str | None:
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    value = body["max_tokens"]
    if not isinstance(value, int) or isinstance(value, bool):
        return "max_tokens: Input should be a valid integer"
    if value < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    return None


def _check_messages_field(body: dict) -> str | None:
    if "messages" not in body:
        return "messages: Field required"
    return validate_messages(body["messages"])


def _check_system(body: dict) -> str | None:
    if "system" not in body:
        return None
    system = body["system"]
    if isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: Input should be a valid string or a list of text blocks"
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"system.{i}.type: Input should be 'text'"
        if (error := _check_text_block(f"system.{i}", block)) is not None:
            return error
    return None


def _check_tools(body: dict) -> str | None:
    if "tools" not in body:
        return None
    tools = body["tools"]
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if (error := _check_tool(f"tools.{i}", tool)) is not None:
            return error
        if tool["name"] in names:
            return "tools: Tool names must be unique."
        names.add(tool["name"])
    return None


def _check_tool_choice(body: dict) -> str | None:
    if "tool_choice" not in body:
        return None
    choice = body["tool_choice"]
    kinds = ("auto", "any", "tool", "none")
    if not isinstance(choice, dict) or choice.get("type") not in kinds:
        return "tool_choice: Input tag does not match any of the expected tags: " + ", ".join(
            repr(kind) for kind in kinds
        )
    extra = set(choice) - {"type", "name", "disable_parallel_tool_use"}
    if choice["type"] == "none":
        extra |= set(choice) & {"name", "disable_parallel_tool_use"}
    if choice["type"] != "tool":
        extra |= set(choice) & {"name"}
    if extra:
        return f"tool_choice.{sorted(extra)[0]}: Extra inputs are not permitted"
    if "disable_parallel_tool_use" in choice and not isinstance(
        choice["disable_parallel_tool_use"], bool
    ):
        return "tool_choice.disable_parallel_tool_use: Input should be a valid boolean"
    if choice["type"] == "tool":
        names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if not isinstance(choice.get("name"), str):
            return "tool_choice.name: Field required"
        if choice["name"] not in names:
            return f"Tool '{choice['name']}' not found in provided tools"
    return None


def _check_tools_defined(body: dict) -> str | None:
    """Tool calls and results in the conversation need the tools defined (the API's rule)."""
    if body.get("tools"):
        return None
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return None


def _check_tool(path: str, tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return f"{path}: Input should be a valid dictionary"
    if (error := _check_marker(path, tool)) is not None:
        return error
    name = tool.get("name")
    if not isinstance(name, str):
        return f"{path}.name: Field required"
    if not _TOOL_NAME.match(name):
        return f"{path}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
    if tool.get("type", "custom") != "custom":
        return None  # a server tool (e.g. web_search_20250305): no input_schema
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        return f"{path}.input_schema: Field required"
    if schema.get("type") != "object":
        return f"{path}.input_schema.type: Input should be 'object'"
    return None


def validate_messages(messages: list) -> str | None:
    """The ``messages`` part of `validate_request`: None if valid, else the error message."""
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if (error := _check_message(i, message)) is not None:
            return error
    if messages[0]["role"] != "user" and not _opens_with_compaction(messages[0]):
        return 'messages: first message must use the "user" role'
    turns = _merge_turns(messages)
    checks = (_check_block_roles, _check_unique_tool_use_ids, _check_tool_pairing)
    for check in checks:
        if (error := check(turns)) is not None:
            return error
    return None


def _opens_with_compaction(message: dict) -> bool:
    """A history may start with the assistant message holding a compaction block (which
    stands for everything before it)."""
    content = message.get("content")
    return isinstance(content, list) and bool(content) and content[0].get("type") == "compaction"


def _check_message(i: int, message: Any) -> str | None:
    path = f"messages.{i}"
    if not isinstance(message, dict):
        return f"{path}: Input should be a valid dictionary"
    if message.get("role") not in _ROLES:
        return f"{path}.role: Input should be 'user' or 'assistant'"
    if "content" not in message:
        return f"{path}.content: Field required"
    content = message["content"]
    if isinstance(content, str):
        if not content:
            return _empty_content_error(path)
        if not content.strip():
            return f"{path}.content: text content blocks must contain non-whitespace text"
        return None
    if not isinstance(content, list):
        return f"{path}.content: Input should be a valid string or a list of content blocks"
    if not content:
        return _empty_content_error(path)
    for j, block in enumerate(content):
        if (error := _check_block(f"{path}.content.{j}", block)) is not None:
            return error
    return None


def _empty_content_error(path: str) -> str:
    return (
        f"{path}: all messages must have non-empty content except for the optional final "
        "assistant message"
    )


def _check_block(path: str, block: Any) -> str | None:
    if not isinstance(block, dict):
        return f"{path}: Input should be a valid dictionary"
    kind = block.get("type")
    if kind not in _BLOCK_TYPES:
        expected = ", ".join(f"'{t}'" for t in sorted(_BLOCK_TYPES))
        return (
            f"{path}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    if kind in _UNMARKABLE_BLOCKS and block.get("cache_control") is not None:
        return f"{path}.{kind}.cache_control: Extra inputs are not permitted"
    if (error := _check_marker(path, block)) is not None:
        return error
    if kind == "text":
        return _check_text_block(path, block)
    if kind == "tool_use":
        return _check_tool_use_block(path, block)
    if kind == "tool_result":
        return _check_tool_result_block(path, block)
    if kind in ("image", "document"):
        return _check_media_block(path, block)
    if kind == "thinking":
        for name in ("thinking", "signature"):
            if not isinstance(block.get(name), str):
                return f"{path}.thinking.{name}: Field required"
    return None


def _check_media_block(path: str, block: dict) -> str | None:
    """An image or document needs its source: base64 data with its media type, or a URL."""
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{path}.source: Field required"
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) else f"{path}.source.url: Field required"
    if source.get("type") not in ("base64", "text", "content", "file"):
        kind = source.get("type")
        return (
            f"{path}.source: Input tag '{kind}' found using 'type' does not match any of the tags"
        )
    if source.get("type") == "base64":
        for name in ("media_type", "data"):
            if not isinstance(source.get(name), str):
                return f"{path}.source.base64.{name}: Field required"
    return None


def _check_text_block(path: str, block: dict) -> str | None:
    value = block.get("text")
    if value is None:
        return f"{path}.text: Field required"
    if not isinstance(value, str):
        return f"{path}.text: Input should be a valid string"
    if (error := _check_marker(path, block)) is not None:
        return error
    if not value and block.get("cache_control") is not None:
        return f"{path}.text: cache_control cannot be set for empty text blocks"
    if not value:
        return f"{path}.text: text content blocks must be non-empty"
    if not value.strip():
        return f"{path}.text: text content blocks must contain non-whitespace text"
    return None


def _check_tool_use_block(path: str, block: dict) -> str | None:
    block_id = block.get("id")
    if not isinstance(block_id, str):
        return f"{path}.id: Field required"
    if not _TOOL_USE_ID.match(block_id):
        return f"{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    if not isinstance(block.get("name"), str):
        return f"{path}.name: Field required"
    if "input" not in block:
        return f"{path}.input: Field required"
    if not isinstance(block["input"], dict):
        return f"{path}.input: Input should be a valid dictionary"
    return None


def _check_tool_result_block(path: str, block: dict) -> str | None:
    if not isinstance(block.get("tool_use_id"), str):
        return f"{path}.tool_use_id: Field required"
    content = block.get("content", "")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{path}.content: Input should be a valid string or a list of text/image blocks"
    for k, inner in enumerate(content):
        inner_path = f"{path}.content.{k}"
        if not isinstance(inner, dict) or inner.get("type") not in _TOOL_RESULT_CONTENT_TYPES:
            kind = inner.get("type") if isinstance(inner, dict) else None
            return (
                f"{inner_path}: Input tag '{kind}' found using 'type' does not match any of "
                "the expected tags: 'image', 'text'"
            )
        if inner["type"] == "text" and (error := _check_text_block(inner_path, inner)):
            return error
        if inner["type"] == "image" and (error := _check_media_block(inner_path, inner)):
            return error
        if (error := _check_marker(inner_path, inner)) is not None:
            return error
    return None


def _check_marker(path: str, block: dict) -> str | None:
    """The shape of a block's ``cache_control``, if it has one."""
    if block.get("cache_control") is None:
        return None  # absent, or null (the SDK's "no breakpoint")
    return _check_cache_control(f"{path}.cache_control", block["cache_control"])


def _check_cache_control(path: str, control: Any) -> str | None:
    if not isinstance(control, dict):
        return f"{path}: Input should be a valid dictionary"
    if "type" not in control:
        return f"{path}.type: Field required"
    if control["type"] != "ephemeral":
        return f"{path}.type: Input should be 'ephemeral'"
    if "ttl" in control and control["ttl"] not in CACHE_TTL_SECONDS:
        return f"{path}.ttl: Input should be '5m' or '1h'"
    for key in control:
        if key not in ("type", "ttl"):
            return f"{path}.{key}: Extra inputs are not permitted"
    return None


def _check_top_level_cache_control(body: dict) -> str | None:
    """Automatic caching: a top-level ``cache_control`` lands on the last cacheable block."""
    if body.get("cache_control") is None:
        return None
    control = body["cache_control"]
    if (error := _check_cache_control("cache_control", control)) is not None:
        return error
    last = _last_cacheable(_marked_blocks(body))
    if last is None or last[1].get("cache_control") is None:
        return None
    existing = last[1]["cache_control"].get("ttl", "5m")
    wanted = control.get("ttl", "5m")
    if existing != wanted:
        # The docs say only that this is a 400; the wording here is the fake's own.
        return (
            f"cache_control.ttl: the top-level cache_control (ttl='{wanted}') conflicts with "
            f"the cache_control of the last cacheable block, {last[0]} (ttl='{existing}')"
        )
    return None


def _check_breakpoints(body: dict) -> str | None:
    """At most 4 breakpoints; no 1-hour breakpoint after a 5-minute one."""
    marked = [
        (path, block["cache_control"])
        for path, block in _marked_blocks(body)
        if block.get("cache_control") is not None
    ]
    automatic = _automatic_breakpoint(body)
    if automatic is not None:
        marked.append(automatic)
    if len(marked) > MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marked)}."
        )
    seen_5m = False
    for path, control in marked:
        ttl = control.get("ttl", "5m")
        if ttl == "1h" and seen_5m:
            return (
                f"{path}.cache_control.ttl: a ttl='1h' cache_control block must not come after "
                "a ttl='5m' cache_control block. Note that blocks are processed in the following "
                "order: `tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"
    return None


def _marked_blocks(body: dict) -> list[tuple[str, dict]]:
    """Every block that may hold ``cache_control``, in prompt order: tools, system, messages."""
    blocks: list[tuple[str, dict]] = []
    for i, tool in enumerate(body.get("tools") or []):
        blocks.append((f"tools.{i}", tool))
    system = body.get("system")
    if isinstance(system, list):
        blocks += [(f"system.{i}", block) for i, block in enumerate(system)]
    for i, message in enumerate(body.get("messages") or []):
        content = message["content"]
        if isinstance(content, list):
            for j, block in enumerate(content):
                path = f"messages.{i}.content.{j}"
                inner = block.get("content") if block.get("type") == "tool_result" else None
                if isinstance(inner, list):  # inside the tool_result, so before its end
                    blocks += [(f"{path}.content.{k}", b) for k, b in enumerate(inner)]
                blocks.append((path, block))
    return blocks


def _last_cacheable(blocks: list[tuple[str, dict]]) -> tuple[str, dict] | None:
    for path, block in reversed(blocks):
        if _may_be_cached(block):
            return path, block
    return None


def _may_be_cached(block: dict) -> bool:
    if block.get("type") in _UNMARKABLE_BLOCKS:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _automatic_breakpoint(body: dict) -> tuple[str, dict] | None:
    """The breakpoint a top-level ``cache_control`` adds, or None (absent, or a no-op)."""
    control = body.get("cache_control")
    if control is None:
        return None
    last = _last_cacheable(_marked_blocks(body))
    if last is None or last[1].get("cache_control") is not None:
        return None  # same TTL on the block already: a no-op (a different one was rejected)
    return last[0], control


def _message_blocks(i: int, message: dict) -> list[tuple[str, dict]]:
    content = message["content"]
    if isinstance(content, str):
        return [(f"messages.{i}.content", text(content))]
    return [(f"messages.{i}.content.{j}", block) for j, block in enumerate(content)]


def _merge_turns(messages: list[dict]) -> list[_Turn]:
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        if not turns or turns[-1].role != message["role"]:
            turns.append(_Turn(role=message["role"], first_index=i))
        turns[-1].blocks.extend(_message_blocks(i, message))
    return turns


def _check_block_roles(turns: list[_Turn]) -> str | None:
    for turn in turns:
        forbidden = ("tool_result",) if turn.role == "assistant" else ("tool_use", "compaction")
        for path, block in turn.blocks:
            if block["type"] in forbidden:
                kind = block["type"]
                return f"{path}: `{kind}` blocks are not allowed in {turn.role} messages"
    return None


def _check_unique_tool_use_ids(turns: list[_Turn]) -> str | None:
    seen: set[str] = set()
    for turn in turns:
        for path, block in turn.blocks:
            if block["type"] != "tool_use":
                continue
            if block["id"] in seen:
                return f"{path}: `tool_use` ids must be unique (duplicate id: {block['id']})"
            seen.add(block["id"])
    return None


def _tool_use_ids(turn: _Turn | None) -> list[str]:
    if turn is None:
        return []
    return [block["id"] for _, block in turn.blocks if block["type"] == "tool_use"]


def _check_tool_pairing(turns: list[_Turn]) -> str | None:
    for n, turn in enumerate(turns):
        following = turns[n + 1] if n + 1 < len(turns) else None
        if turn.role == "assistant":
            error = _check_answered(turn, following)
        else:
            error = _check_user_tool_results(turn, turns[n - 1] if n > 0 else None)
        if error is not None:
            return error
    return None


def _check_answered(turn: _Turn, following: _Turn | None) -> str | None:
    """Every tool_use of ``turn`` needs a tool_result at the start of the next (user) turn."""
    ids = _tool_use_ids(turn)
    if not ids:
        return None
    leading, later = _tool_result_ids(following)
    missing = [tool_id for tool_id in ids if tool_id not in leading]
    if not missing:
        return None
    error = (
        f"messages.{turn.first_index}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message."
    )
    if any(tool_id in later for tool_id in missing):
        error += " (`tool_result` blocks must come first in the user message, before any text.)"
    return error


def _tool_result_ids(turn: _Turn | None) -> tuple[set[str], set[str]]:
    """The tool_use_ids answered at the start of ``turn``, and those answered after a non-result."""
    leading: set[str] = set()
    later: set[str] = set()
    if turn is None:
        return leading, later
    target = leading
    for _, block in turn.blocks:
        if block["type"] != "tool_result":
            target = later
        else:
            target.add(block["tool_use_id"])
    return leading, later


def _check_user_tool_results(turn: _Turn, previous: _Turn | None) -> str | None:
    """tool_results must answer the previous assistant turn and come before other blocks."""
    expected = set(_tool_use_ids(previous))
    seen_other = False
    for path, block in turn.blocks:
        if block["type"] != "tool_result":
            seen_other = True
            continue
        if seen_other:
            return (
                f"{path}: `tool_result` blocks must come first in the user message, "
                "before any text."
            )
        if block["tool_use_id"] not in expected:
            return (
                f"{path}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    return None


# --------------------------------------------------------------------------- prompt caching


class FakeClock:
    """The fake's clock for cache lifetimes: seconds that move only when a test advances them."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (>= 0)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._now += seconds


def cached_block_tokens(block: dict) -> int:
    """The fake's token count of one prompt block: its JSON without ``cache_control``, over 4."""
    unmarked = {key: value for key, value in block.items() if key != "cache_control"}
    return len(json.dumps(unmarked)) // 4


@dataclass
class _Unit:
    """One block of the prompt, in processing order, as the cache sees it."""

    tokens: int  # prompt tokens up to and including this block
    key: bytes  # hash of the model and every block up to this one
    ttl: str | None  # its breakpoint's TTL, or None when it has no breakpoint


def _cache_units(body: dict) -> list[_Unit]:
    """The prompt's blocks (tools, system, message blocks) with running tokens and prefix keys.

    A string system prompt or message content counts as one text block, as the API treats it.
    A marker inside a tool_result's content counts at the end of that tool_result.
    """
    digest = hashlib.sha256(_model_key(body.get("model", "")).encode()).digest()
    automatic = body.get("cache_control")
    units: list[_Unit] = []
    tokens = 0
    last_cacheable = -1
    for role, block, opens_message in _prompt_blocks(body):
        unmarked = {key: value for key, value in block.items() if key != "cache_control"}
        digest = hashlib.sha256(digest + json.dumps([role, unmarked]).encode()).digest()
        tokens += cached_block_tokens(block)
        if opens_message:  # a message's framing is part of the prefix that holds it
            tokens += len(json.dumps({"role": role, "content": []})) // 4
        control = _block_marker(block)
        units.append(_Unit(tokens, digest, control.get("ttl", "5m") if control else None))
        if _may_be_cached(block):
            last_cacheable = len(units) - 1
    if automatic is not None and last_cacheable >= 0 and units[last_cacheable].ttl is None:
        units[last_cacheable].ttl = automatic.get("ttl", "5m")
    return units


def _block_marker(block: dict) -> dict | None:
    if block.get("cache_control") is not None:
        return block["cache_control"]
    inner = block.get("content") if block.get("type") == "tool_result" else None
    if isinstance(inner, list):
        markers = [b["cache_control"] for b in inner if b.get("cache_control") is not None]
        return markers[-1] if markers else None
    return None


def _prompt_blocks(body: dict) -> Iterator[tuple[str, dict, bool]]:
    """(role, block, whether it is the first block of a message), in processing order."""
    for tool in body.get("tools") or []:
        yield "tools", tool, False
    system = body.get("system")
    if isinstance(system, str):
        if system:
            yield "system", text(system), False
    else:
        yield from (("system", block, False) for block in system or [])
    for message in body["messages"]:
        content = message["content"]
        blocks = [text(content)] if isinstance(content, str) else content
        yield from ((message["role"], block, i == 0) for i, block in enumerate(blocks))


def _model_key(model: str) -> str:
    """``model`` without its ``claude-`` prefix and snapshot date (caches are per model)."""
    return re.sub(r"-\d{8}$", "", model.lower()).removeprefix("claude-")


@dataclass
class _CacheEntry:
    ttl: str
    expires: float


class _PromptCache:
    """The server-side prompt cache, as the prompt-caching docs describe it.

    Entries are keyed by the exact prefix up to a breakpoint. A breakpoint reads the entry at its
    own block or, walking back, at one of the 19 blocks before it (20 positions); a read
    refreshes the entry for its TTL. A breakpoint that finds no entry of its own writes one.
    Billing: read the longest hit A; write at 1 hour up to the last 1-hour breakpoint B after A;
    write at 5 minutes up to the last breakpoint C; the rest is uncached input. Prefixes below
    the model's minimum cacheable length are neither written nor read.
    """

    def __init__(self, clock: FakeClock, min_tokens: int | Mapping[str, int] | None) -> None:
        self.clock = clock
        self.min_tokens = min_tokens
        self._entries: dict[bytes, _CacheEntry] = {}
        self._lock = threading.Lock()

    def minimum(self, model: str) -> int:
        if isinstance(self.min_tokens, int):
            return self.min_tokens
        if isinstance(self.min_tokens, Mapping) and model in self.min_tokens:
            return self.min_tokens[model]
        return MIN_CACHEABLE_TOKENS.get(_model_key(model), DEFAULT_MIN_CACHEABLE_TOKENS)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def usage(self, body: dict) -> dict[str, Any]:
        """The cache part of the usage of ``body``, updating the cache as the API would."""
        units = _cache_units(body)
        # The prompt as the cache sees it: every block and the framing of each message (the
        # markers themselves are not tokens), so what follows the last breakpoint is all that
        # is billed as uncached input.
        total = estimate_input_tokens(body)
        minimum = max(1, self.minimum(body.get("model", "")))
        marked = [i for i, unit in enumerate(units) if unit.ttl and unit.tokens >= minimum]
        with self._lock:
            now = self.clock.now()
            hit = max([0, *(self._read(units, i, now) for i in marked)])
            for i in marked:
                if self._live(units[i].key, now) is None:
                    ttl = units[i].ttl or "5m"
                    self._entries[units[i].key] = _CacheEntry(ttl, now + CACHE_TTL_SECONDS[ttl])
        last = max([hit, *(units[i].tokens for i in marked)])
        upto_1h = max([hit, *(units[i].tokens for i in marked if units[i].ttl == "1h")])
        return {
            "input_tokens": total - last,
            "cache_creation_input_tokens": last - hit,
            "cache_read_input_tokens": hit,
            "cache_creation": {
                "ephemeral_5m_input_tokens": last - upto_1h,
                "ephemeral_1h_input_tokens": upto_1h - hit,
            },
        }

    def _live(self, key: bytes, now: float) -> _CacheEntry | None:
        entry = self._entries.get(key)
        return entry if entry is not None and now < entry.expires else None

    def _read(self, units: list[_Unit], index: int, now: float) -> int:
        for j in range(index, max(-1, index - CACHE_LOOKBACK_BLOCKS), -1):
            entry = self._live(units[j].key, now)
            if entry is not None:
                entry.expires = now + CACHE_TTL_SECONDS[entry.ttl]
                return units[j].tokens
        return 0


# --------------------------------------------------------------------------- responses


def estimate_input_tokens(body: dict) -> int:
    """The fake's token count of a request's prompt: each tool, system and message block (its
    JSON without ``cache_control``, over 4) and each message's framing. The prompt cache counts
    the same blocks, so cached, written and uncached tokens always add up to this."""
    units = _cache_units(body) if isinstance(body.get("messages"), list) else []
    return max(1, units[-1].tokens if units else 0)


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


def _message(item: Reply, body: dict, message_id: str, cache: dict[str, Any] | None = None) -> dict:
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


def _with_context(message: dict, plan: fake_context.Plan) -> dict:
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


def _error_body(error_type: str, message: str, request_id: str) -> dict:
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


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk of a chunked transfer-encoded body."""
    return f"{len(data):X}\r\n".encode() + data + b"\r\n"


# --------------------------------------------------------------------------- HTTP server


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection (keep-alive) for the `FakeAnthropic` that owns the server."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is dropped after this many seconds
    disable_nagle_algorithm = True  # else headers + body in two writes cost ~40 ms a response
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, open=True)

    def finish(self) -> None:
        self.server.track(self.connection, open=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request stderr logging."""

    def do_GET(self) -> None:
        self._read_body()
        self._not_found()

    def do_POST(self) -> None:
        raw = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == MESSAGES_PATH:
            self.server.fake._handle_messages(self, raw, headers)
        elif path == COUNT_TOKENS_PATH:
            self.server.fake._handle_count_tokens(self, raw, headers)
        else:
            self._not_found()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def _not_found(self) -> None:
        message = f"Not found: {self.command} {self.path}"
        self.send_error_json(404, "not_found_error", message, self.server.fake._new_id("req"))

    def send_json(self, status: int, payload: dict, headers: dict[str, str]) -> None:
        """A complete JSON response with Content-Length (the connection stays open)."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(
        self,
        status: int,
        error_type: str,
        message: str,
        request_id: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        """An error in the Anthropic shape, with a ``request-id`` header."""
        all_headers = {"request-id": request_id, **(headers or {})}
        self.send_json(status, _error_body(error_type, message, request_id), all_headers)

    def send_truncated_json(self, payload: dict, request_id: str) -> None:
        """Headers for the whole of ``payload``, then half of it, then abort the connection."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", request_id)
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.abort_connection()

    def send_sse(self, events: list[bytes], request_id: str, *, cut: bool) -> None:
        """``events`` as a chunked SSE body; with ``cut``, abort before the final chunk."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", request_id)
        self.end_headers()
        delay = self.server.fake.event_delay
        for event in events:
            self.wfile.write(_chunk(event))
            if delay:
                self.wfile.flush()
                time.sleep(delay)
        if cut:
            self.abort_connection()
        else:
            self.wfile.write(b"0\r\n\r\n")

    def abort_connection(self) -> None:
        """Close the socket mid-response, without completing the body."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: FakeAnthropic) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hang up mid-response (e.g. a stream closed early)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def track(self, connection: socket.socket, *, open: bool) -> None:
        """Remember (or forget) an accepted connection, so `close_connections` can end it."""
        with self._connections_lock:
            if open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        """Shut down every open keep-alive connection, so no request is served after stop."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def _has_credentials(headers: dict[str, str]) -> bool:
    """An ``x-api-key`` header, or ``Authorization: Bearer ...``.

    anthropic 2.16 sends ``api_key`` as ``Authorization: Bearer <key>``, not ``x-api-key``.
    """
    bearer = headers.get("authorization", "")
    return bool(headers.get("x-api-key")) or (bearer.startswith("Bearer ") and len(bearer) > 7)


def _parse_json(raw: bytes) -> tuple[Any, str | None]:
    try:
        return json.loads(raw), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"There was an error parsing the body: {exc}"


@functools.cache
def _loopback_http_client_class() -> type[httpx2.Client]:
    """The SDK's default HTTP client class, closed when garbage-collected like the SDK's own.

    `FakeAnthropic.client` builds it with ``verify=False``: the fake speaks plain HTTP, and
    loading the CA bundle for a TLS context nobody uses costs ~45 ms per client.
    """
    import anthropic

    class LoopbackHttpClient(anthropic.DefaultHttpxClient):
        def __del__(self) -> None:
            with contextlib.suppress(Exception):
                if not self.is_closed:
                    self.close()

    return LoopbackHttpClient


class FakeAnthropic:
    """A loopback Anthropic Messages API server with scripted replies.

    Use as a context manager (or `start`/`stop`) and talk to it with `client`. Recorded,
    in arrival order and guarded by a lock: ``requests`` (every JSON body POSTed to
    ``/v1/messages``), ``accepted`` (those that passed validation), ``rejections``
    (``(body, message)`` for every 400 sent, count_tokens included; unparseable bodies are
    recorded as ``{"_raw": text}``), ``headers`` (lower-cased request headers of every
    ``/v1/messages`` call) and ``count_tokens_requests``.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        clock: FakeClock | None = None,
        min_cacheable_tokens: int | Mapping[str, int] | None = None,
    ) -> None:
        self.responder = responder
        self.clock = clock or FakeClock()
        """Time for cache lifetimes; stands still until a test calls ``clock.advance``."""
        self.cache = _PromptCache(self.clock, min_cacheable_tokens)
        """The emulated prompt cache (``cache.clear()`` empties it)."""
        self.url = ""
        self.requests: list[dict] = []
        self.accepted: list[dict] = []
        self.rejections: list[tuple[dict, str]] = []
        self.headers: list[dict[str, str]] = []
        self.count_tokens_requests: list[dict] = []
        self.tool_changes: list[dict] = []
        """The `tool_changes` of the compaction blocks the fake makes (as a server reports
        them when the compacted range added or withdrew tools)."""
        self.fail_next_summary = False
        """True: the next compaction the fake makes fails (its block has null content)."""
        self.event_delay = 0.0
        """Seconds to wait after each SSE event (a slow stream, to interrupt mid-way)."""
        self.context_window: int | None = None
        """Tokens a prompt may hold (None: no limit): a longer one is refused as the API
        refuses it, 400 "prompt is too long: N tokens > M maximum" (kept in ``too_long``,
        not in ``rejections``: the request itself is well-formed)."""
        self.too_long: list[dict] = []
        self._queue: deque[Item] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeAnthropic:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="fake-anthropic",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scripting and inspection

    def queue(self, *items: Item) -> None:
        """Script the next responses, FIFO; they are used before the responder."""
        with self._lock:
            self._queue.extend(items)

    def client(self, **kwargs: Any) -> anthropic.Anthropic:
        """A real ``anthropic.Anthropic`` client pointed at this fake (``max_retries=2``).

        ``kwargs`` go to ``anthropic.Anthropic`` and win over these defaults. Unless an
        ``http_client`` is given, the SDK's default one is used with ``verify=False``
        (plain HTTP on loopback; skips ~45 ms of CA loading per client).
        """
        import anthropic

        options: dict[str, Any] = {
            "base_url": self.url,
            "api_key": FAKE_API_KEY,
            "max_retries": 2,
            **kwargs,
        }
        if "http_client" not in options:
            options["http_client"] = _loopback_http_client_class()(verify=False)
        return anthropic.Anthropic(**options)

    def assert_no_rejections(self) -> None:
        """Raise AssertionError listing the messages of every request the fake rejected."""
        with self._lock:
            messages = [message for _, message in self.rejections]
        if messages:
            listing = "\n".join(f"  - {message}" for message in messages)
            raise AssertionError(f"{len(messages)} request(s) rejected by the fake API:\n{listing}")

    # -- request handling (called from handler threads)

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_fake_{next(self._ids)}"

    def _record(self, target: list, value: Any) -> None:
        with self._lock:
            target.append(value)

    def _next_item(self, body: dict) -> Item:
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.responder is not None:
            return self.responder(body)
        return reply(text("(fake: no scripted reply)"))

    def _parse_checked(
        self, handler: _Handler, raw: bytes, headers: dict[str, str], log: list[dict]
    ) -> tuple[dict, str] | None:
        """Authenticate and parse; answers the errors itself and returns None on failure."""
        request_id = self._new_id("req")
        body, parse_error = _parse_json(raw)
        if parse_error is None and not isinstance(body, dict):
            body, parse_error = {"_raw": body}, "Request body must be a JSON object"
        if parse_error is None:
            self._record(log, body)
        if not _has_credentials(headers):
            message = "x-api-key header is required"
            handler.send_error_json(401, "authentication_error", message, request_id)
            return None
        if parse_error is not None:
            raw_body = body if isinstance(body, dict) else {"_raw": raw.decode(errors="replace")}
            self._reject(handler, raw_body, parse_error, request_id)
            return None
        return body, request_id

    def _reject(self, handler: _Handler, body: Any, message: str, request_id: str) -> None:
        self._record(self.rejections, (body, message))
        handler.send_error_json(400, "invalid_request_error", message, request_id)

    def _handle_messages(self, handler: _Handler, raw: bytes, headers: dict[str, str]) -> None:
        self._record(self.headers, headers)
        parsed = self._parse_checked(handler, raw, headers, self.requests)
        if parsed is None:
            return
        body, request_id = parsed
        if (error := validate_request(body) or fake_context.check(body, headers)) is not None:
            self._reject(handler, body, error, request_id)
            return
        window = self.context_window
        if window is not None and (tokens := estimate_input_tokens(body)) > window:
            self._record(self.too_long, body)
            message = f"prompt is too long: {tokens} tokens > {window} maximum"
            handler.send_error_json(400, "invalid_request_error", message, request_id)
            return
        self._record(self.accepted, body)
        with self._lock:
            fail, self.fail_next_summary = self.fail_next_summary, False
        plan = fake_context.plan(
            body, estimate_input_tokens, fail_summary=fail, tool_changes=self.tool_changes
        )
        if plan.alone:  # nothing is sampled: the compaction block alone
            zero = {"input_tokens": 0, "output_tokens": 0}
            item: Item = Reply([], "compaction", usage=zero)
        else:
            item = self._next_item(plan.body)
        self._respond(handler, body, item, request_id, plan)

    def _handle_count_tokens(self, handler: _Handler, raw: bytes, headers: dict[str, str]) -> None:
        parsed = self._parse_checked(handler, raw, headers, self.count_tokens_requests)
        if parsed is None:
            return
        body, request_id = parsed
        error = _validate_body(body, require_max_tokens=False) or fake_context.check(
            body, headers, count_tokens=True
        )
        if error is not None:
            self._reject(handler, body, error, request_id)
            return
        plan = fake_context.plan(body, estimate_input_tokens, counting=True)
        payload: dict[str, Any] = {"input_tokens": estimate_input_tokens(plan.body)}
        if plan.managed:
            payload["context_management"] = {"original_input_tokens": plan.original_tokens}
        handler.send_json(200, payload, {"request-id": request_id})

    def _respond(
        self,
        handler: _Handler,
        body: dict,
        item: Item,
        request_id: str,
        plan: fake_context.Plan | None = None,
    ) -> None:
        if isinstance(item, RawStream):
            raw = [e if isinstance(e, bytes) else encode_sse(e) for e in item.events]
            handler.send_sse(raw, request_id, cut=False)
            return
        if isinstance(item, Fault):
            handler.send_error_json(
                item.status, item.error_type, item.message, request_id, item.headers
            )
            return
        cut = isinstance(item, StreamCut)
        scripted = item.reply if isinstance(item, StreamCut) else item
        # The response begins, so the prompt was processed: the cache is read and written.
        prompt = plan.body if plan is not None else body
        cache = None if plan is not None and plan.alone else self.cache.usage(prompt)
        message = _message(scripted, prompt, self._new_id("msg"), cache)
        if plan is not None:
            message = _with_context(message, plan)
        if not body.get("stream"):
            if cut:
                handler.send_truncated_json(message, request_id)
            else:
                handler.send_json(200, message, {"request-id": request_id})
            return
        events = [encode_sse(data) for data in sse_events(message)]
        if isinstance(item, StreamCut):
            events = events[: item.after_events]
        handler.send_sse(events, request_id, cut=cut)
