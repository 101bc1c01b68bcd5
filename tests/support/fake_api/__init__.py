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

from support.fake_api.body import validate_request
from support.fake_api.cache import FakeClock, cached_block_tokens, estimate_input_tokens
from support.fake_api.messages import validate_messages
from support.fake_api.responses import encode_sse, sse_events
from support.fake_api.script import (
    Fault,
    RawStream,
    Reply,
    Responder,
    StreamCut,
    overloaded,
    rate_limited,
    reply,
    server_error,
    text,
    tool_use,
    unmarked,
)
from support.fake_api.server import FAKE_API_KEY, FakeAnthropic

__all__ = [
    "FAKE_API_KEY",
    "FakeAnthropic",
    "FakeClock",
    "Fault",
    "RawStream",
    "Reply",
    "Responder",
    "StreamCut",
    "cached_block_tokens",
    "encode_sse",
    "estimate_input_tokens",
    "overloaded",
    "rate_limited",
    "reply",
    "server_error",
    "sse_events",
    "text",
    "tool_use",
    "unmarked",
    "validate_messages",
    "validate_request",
]
