"""The loopback HTTP server (``POST /v1/messages`` and ``/v1/messages/count_tokens`` on
127.0.0.1, standard library only) and `FakeAnthropic`, which scripts its answers and records
what it was sent."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from support import fake_context
from support.fake_api import diagnosis, system_messages
from support.fake_api.body import validate_body, validate_request
from support.fake_api.cache import FakeClock, PromptCache, estimate_input_tokens
from support.fake_api.responses import (
    encode_sse,
    error_body,
    http_chunk,
    message_body,
    sse_events,
    with_context,
)
from support.fake_api.script import Fault, Item, RawStream, Reply, Responder, StreamCut, reply, text

if TYPE_CHECKING:
    import anthropic
    import httpx2


FAKE_API_KEY = "sk-ant-fake-test-key"

MESSAGES_PATH = "/v1/messages"

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"


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
        self.send_json(status, error_body(error_type, message, request_id), all_headers)

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
            self.wfile.write(http_chunk(event))
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
        self.cache = PromptCache(self.clock, min_cacheable_tokens)
        """The emulated prompt cache (``cache.clear()`` empties it)."""
        self.url = ""
        self.requests: list[dict] = []
        self.accepted: list[dict] = []
        self.rejections: list[tuple[dict, str]] = []
        self.headers: list[dict[str, str]] = []
        self.count_tokens_requests: list[dict] = []
        self.diagnoser = diagnosis.Diagnoser()
        """The prompts answered, by response id: the cache diagnosis compares with them."""
        self.tool_changes: list[dict] = []
        """The `tool_changes` of the compaction blocks the fake makes (as a server reports
        them when the compacted range added or withdrew tools)."""
        self.fail_next_summary = False
        """True: the next compaction the fake makes fails (its block has null content)."""
        self.summary_note = ""
        """Text the summaries the fake makes end with (signed with them): what a server's
        summary may repeat from the conversation, a credential included."""
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
        betas = fake_context.betas(headers)
        # A mid-conversation system message is checked on its own; the rest without it.
        error = system_messages.check(body, betas)
        checked = system_messages.without(body)
        error = error or validate_request(checked) or fake_context.check(checked, headers)
        error = error or diagnosis.check(body, betas)
        if error is not None:
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
        if self.summary_note and plan.compaction is not None and plan.compaction["content"]:
            plan.compaction["content"] += self.summary_note
            plan.compaction["signature"] = fake_context.sign(plan.compaction)
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
        error = validate_body(body, require_max_tokens=False) or fake_context.check(
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
        message = message_body(scripted, prompt, self._new_id("msg"), cache)
        if plan is not None:
            message = with_context(message, plan)
        if "diagnostics" in body:  # in `message_start`, where the SDK reads it
            message["diagnostics"] = self.diagnoser.diagnose(body)
        self.diagnoser.remember(message["id"], body)
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
