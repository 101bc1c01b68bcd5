"""Scripted answers of the loopback fake: what `FakeAnthropic.queue` and a responder give
(`Reply`, `Fault`, `StreamCut`, `RawStream`) and the helpers that build them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEFAULT_RETRY_AFTER_MS = 10

_tool_ids = itertools.count(1)


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
