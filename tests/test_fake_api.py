"""Tests of the loopback fake Anthropic API (tests/support/fake_api.py), through the real SDK."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import Message
from support.fake_api import (
    FakeAnthropic,
    FakeClock,
    Fault,
    Reply,
    StreamCut,
    overloaded,
    rate_limited,
    reply,
    server_error,
    text,
    tool_use,
    validate_messages,
    validate_request,
)

MODEL = "claude-fake-model"
HI = {"role": "user", "content": "hi"}
pytestmark = pytest.mark.provokes_rejections


@pytest.fixture
def client(fake: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    """``fake.client()``, closed after the test."""
    with fake.client() as sdk_client:
        yield sdk_client


def create(client: anthropic.Anthropic, messages: list | None = None, **kwargs: Any) -> Message:
    """``client.messages.create`` with the fake's defaults."""
    return client.messages.create(model=MODEL, max_tokens=64, messages=messages or [HI], **kwargs)


def post_raw(
    fake: FakeAnthropic, path: str, data: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """POST ``data`` with http.client (loopback); returns ``(status, headers, body bytes)``."""
    host, port = fake.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("POST", path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


# --------------------------------------------------------------------------- helpers


def test_reply_helpers_infer_stop_reason_and_unique_tool_ids() -> None:
    first, second = tool_use("a", {}), tool_use("b", {})
    assert first["id"] != second["id"]
    assert first["id"].startswith("toolu_fake_")
    assert tool_use("c", {}, id="toolu_mine")["id"] == "toolu_mine"
    assert reply(text("x")).stop_reason == "end_turn"
    assert reply(text("x"), first).stop_reason == "tool_use"
    assert reply(first, stop_reason="max_tokens").stop_reason == "max_tokens"


def test_faults_carry_fast_retry_headers() -> None:
    for fault in (overloaded(), rate_limited(), server_error()):
        assert float(fault.headers["retry-after-ms"]) > 0
    assert (overloaded().status, overloaded().error_type) == (529, "overloaded_error")
    assert (server_error().status, server_error().error_type) == (500, "api_error")
    limited = rate_limited(25)
    assert (limited.status, limited.error_type) == (429, "rate_limit_error")
    assert limited.headers == {"retry-after": "0", "retry-after-ms": "25"}


# --------------------------------------------------------------------------- non-streaming


def test_create_returns_scripted_text_and_tool_use(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    usage = {"input_tokens": 11, "output_tokens": 7}
    fake.queue(
        reply(text("Let me run that."), tool_use("run", {"code": "1+1"}, id="toolu_1"), usage=usage)
    )
    message = create(client)
    assert message.id.startswith("msg_fake_")
    assert message.role == "assistant"
    assert message.model == MODEL
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    assert message.content[0].type == "text"
    assert message.content[0].text == "Let me run that."
    block = message.content[1]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_1", "run", {"code": "1+1"})
    assert message.usage.input_tokens == 11
    assert message.usage.output_tokens == 7
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.cache_read_input_tokens == 0
    assert fake.accepted == fake.requests
    assert fake.requests[0]["messages"] == [HI]
    fake.assert_no_rejections()


def test_estimated_usage_and_model_override(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    content = [text("four score and seven")]
    fake.queue(Reply(content=content, model="claude-other"))
    message = create(client, system="be brief")
    assert message.usage.input_tokens == fake_input_tokens(fake.requests[0])
    assert message.usage.output_tokens == len(json.dumps(content)) // 4
    assert message.model == "claude-other"
    assert message.stop_reason == "end_turn"


def test_queue_then_responder_then_default() -> None:
    seen: list[dict] = []

    def responder(body: dict) -> Reply:
        seen.append(body)
        return reply(text(f"echo {len(body['messages'])}"))

    with FakeAnthropic(responder) as fake, fake.client() as client:
        fake.queue(reply(text("queued")))
        assert create(client).content[0].text == "queued"
        assert create(client).content[0].text == "echo 1"
        assert len(seen) == 1
    with FakeAnthropic() as fake, fake.client() as client:
        assert create(client).content[0].text == "(fake: no scripted reply)"


def test_headers_are_recorded_lowercased(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    create(client)
    headers = fake.headers[0]
    assert all(name == name.lower() for name in headers)
    assert headers["authorization"] == "Bearer sk-ant-fake-test-key"
    assert "anthropic-version" in headers


def test_repeated_calls_reuse_the_connection_quickly(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    started = time.monotonic()
    for n in range(20):
        fake.queue(reply(text(f"reply {n}")))
        assert create(client).content[0].text == f"reply {n}"
    assert time.monotonic() - started < 2
    assert len(fake.accepted) == 20


def test_concurrent_requests_are_all_recorded(fake: FakeAnthropic) -> None:
    ids: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with fake.client() as client:
            for _ in range(5):
                message_id = create(client).id
                with lock:
                    ids.append(message_id)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(ids) == len(set(ids)) == 40
    assert len(fake.requests) == len(fake.accepted) == len(fake.headers) == 40


# --------------------------------------------------------------------------- streaming


def test_stream_returns_scripted_blocks(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    words = "Running the code now, one moment."
    tool_input = {"code": "print('hi')", "timeout": 5, "tags": ["a", "b"]}
    content = [text(words), tool_use("run", tool_input, id="toolu_s")]
    fake.queue(reply(*content))
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[HI]) as stream:
        events = list(stream)
        final = stream.get_final_message()
    types = [event.type for event in events]
    assert types[0] == "message_start"
    assert types[-2:] == ["message_delta", "message_stop"]
    text_events = [event for event in events if event.type == "text"]
    assert len(text_events) >= 3
    assert "".join(event.text for event in text_events) == words
    assert types.count("input_json") >= 2
    assert final.content[0].text == words
    block = final.content[1]
    assert (block.type, block.id, block.name) == ("tool_use", "toolu_s", "run")
    assert block.input == tool_input
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens == len(json.dumps(content)) // 4
    assert final.usage.input_tokens == fake_input_tokens(fake.accepted[0])
    assert fake.accepted[0]["stream"] is True


def fake_input_tokens(body: dict) -> int:
    """The fake's documented count: each tool, system and message block (its JSON without
    cache_control, over 4), and each message's framing (`{"role": ..., "content": []}`, over 4)."""

    def tokens(block: dict) -> int:
        return len(json.dumps({k: v for k, v in block.items() if k != "cache_control"})) // 4

    system = body.get("system") or []
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system
    total = sum(tokens(b) for b in [*(body.get("tools") or []), *system])
    for message in body["messages"]:
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        total += len(json.dumps({"role": message["role"], "content": []})) // 4
        total += sum(tokens(block) for block in content)
    return max(total, 1)


def test_create_with_stream_true_yields_raw_events(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(reply(text("alpha beta gamma"), usage={"input_tokens": 3, "output_tokens": 9}))
    events = list(create(client, stream=True))
    types = [event.type for event in events]
    assert types == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0].message.usage.input_tokens == 3
    assert events[0].message.usage.output_tokens == 1
    assert events[0].message.content == []
    assert events[1].content_block.text == ""
    assert [event.delta.text for event in events[2:5]] == ["alpha ", "beta ", "gamma"]
    assert events[6].delta.stop_reason == "end_turn"
    assert events[6].usage.output_tokens == 9


def test_sse_wire_format_is_chunked_event_stream(fake: FakeAnthropic) -> None:
    fake.queue(reply(tool_use("run", {"x": 1}, id="toolu_w")))
    body = {"model": MODEL, "max_tokens": 8, "messages": [HI], "stream": True}
    headers = {"x-api-key": "k", "content-type": "application/json"}
    status, response_headers, data = post_raw(
        fake, "/v1/messages", json.dumps(body).encode(), headers
    )
    assert status == 200
    assert response_headers["Content-Type"] == "text/event-stream"
    assert response_headers["Transfer-Encoding"] == "chunked"
    frames = data.decode().split("\n\n")
    assert frames[-1] == ""
    parsed = []
    for frame in frames[:-1]:
        event_line, data_line = frame.split("\n")
        event = event_line.removeprefix("event: ")
        payload = json.loads(data_line.removeprefix("data: "))
        assert payload["type"] == event
        parsed.append(payload)
    assert [p["type"] for p in parsed[:3]] == ["message_start", "content_block_start", "ping"]
    assert parsed[1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_w",
        "name": "run",
        "input": {},
    }
    partial = "".join(
        p["delta"]["partial_json"] for p in parsed if p["type"] == "content_block_delta"
    )
    assert json.loads(partial) == {"x": 1}
    assert parsed[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_stream_closed_early_leaves_the_fake_usable(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(reply(text(" ".join(["word"] * 5000))), reply(text("next")))
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[HI]) as stream:
        assert next(iter(stream)).type == "message_start"
    assert create(client).content[0].text == "next"


def test_stream_cut_raises_during_iteration(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(StreamCut(reply(text("one two three four five")), after_events=4))
    seen: list[str] = []
    with (
        # The SDK raises the HTTP library's error (2.16) or wraps it (2.17 on).
        pytest.raises(
            (httpx2.RemoteProtocolError, anthropic.APIConnectionError),
            match="incomplete chunked read",
        ),
        client.messages.stream(model=MODEL, max_tokens=64, messages=[HI]) as stream,
    ):
        for event in stream:
            seen.append(event.type)
    assert seen[:2] == ["message_start", "content_block_start"]
    assert "text" in seen
    assert len(fake.accepted) == 1  # not retried


def test_stream_cut_on_non_streaming_request_is_a_connection_error(fake: FakeAnthropic) -> None:
    fake.queue(StreamCut(reply(text("never complete"))))
    with fake.client(max_retries=0) as client, pytest.raises(anthropic.APIConnectionError):
        create(client)


def test_fault_before_a_stream_is_retried(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.queue(overloaded(), reply(text("streamed after retry")))
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[HI]) as stream:
        assert stream.get_final_text() == "streamed after retry"
    assert len(fake.requests) == 2


# --------------------------------------------------------------------------- faults and retries


def test_overloaded_then_success_is_retried(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(overloaded(), reply(text("ok")))
    started = time.monotonic()
    assert create(client).content[0].text == "ok"
    assert time.monotonic() - started < 1
    assert len(fake.requests) == len(fake.accepted) == 2
    assert [h["x-stainless-retry-count"] for h in fake.headers] == ["0", "1"]


def test_rate_limited_is_retried(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.queue(rate_limited(), rate_limited(), reply(text("finally")))
    started = time.monotonic()
    assert create(client).content[0].text == "finally"
    assert time.monotonic() - started < 1
    assert len(fake.requests) == 3


def test_rate_limit_error_shape(fake: FakeAnthropic) -> None:
    fake.queue(rate_limited(40))
    with fake.client(max_retries=0) as client, pytest.raises(anthropic.RateLimitError) as caught:
        create(client)
    error = caught.value
    assert error.status_code == 429
    assert error.type == "rate_limit_error"
    assert error.response.headers["retry-after"] == "0"
    assert error.response.headers["retry-after-ms"] == "40"
    assert error.request_id is not None
    assert error.request_id.startswith("req_fake_")
    assert error.body["type"] == "error"


def test_three_server_errors_exhaust_retries(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(server_error(), server_error(), server_error(), reply(text("too late")))
    with pytest.raises(anthropic.InternalServerError) as caught:
        create(client)
    assert caught.value.status_code == 500
    assert caught.value.type == "api_error"
    assert len(fake.requests) == 3
    assert create(client).content[0].text == "too late"


def test_overloaded_without_retries_is_overloaded_error(fake: FakeAnthropic) -> None:
    fake.queue(overloaded())
    with fake.client(max_retries=0) as client, pytest.raises(anthropic.OverloadedError) as caught:
        create(client)
    assert caught.value.status_code == 529


def test_custom_fault(fake: FakeAnthropic) -> None:
    fake.queue(Fault(403, "permission_error", "nope", {"x-should-retry": "false"}))
    with fake.client() as client, pytest.raises(anthropic.PermissionDeniedError, match="nope"):
        create(client)
    assert len(fake.requests) == 1


def test_faults_are_only_sent_to_valid_requests(fake: FakeAnthropic) -> None:
    fake.queue(overloaded())
    with fake.client(max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError):
            create(client, [{"role": "assistant", "content": "hi"}])
        with pytest.raises(anthropic.OverloadedError):
            create(client)
    assert len(fake.requests) == 2
    assert len(fake.accepted) == 1
    assert len(fake.rejections) == 1


# --------------------------------------------------------------------------- other endpoints


def test_count_tokens(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    result = client.messages.count_tokens(model=MODEL, messages=[HI], system="sys")
    body = fake.count_tokens_requests[0]
    assert result.input_tokens == fake_input_tokens(body)
    assert "max_tokens" not in body
    assert fake.requests == []
    with pytest.raises(anthropic.BadRequestError, match="first message"):
        client.messages.count_tokens(model=MODEL, messages=[{"role": "assistant", "content": "x"}])
    assert len(fake.count_tokens_requests) == 2
    assert len(fake.rejections) == 1


def test_unknown_path_is_not_found(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.get("/v1/models", cast_to=object)
    assert caught.value.type == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        client.post("/v1/complete", body={}, cast_to=object)


def test_missing_credentials_is_401(fake: FakeAnthropic) -> None:
    body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": [HI]}).encode()
    status, headers, data = post_raw(
        fake, "/v1/messages", body, {"content-type": "application/json"}
    )
    assert status == 401
    assert json.loads(data)["error"]["type"] == "authentication_error"
    assert headers["request-id"].startswith("req_fake_")
    assert fake.accepted == []
    assert len(fake.requests) == 1


def test_bad_json_is_400(fake: FakeAnthropic) -> None:
    status, headers, data = post_raw(fake, "/v1/messages", b"{not json", {"x-api-key": "k"})
    assert status == 400
    error = json.loads(data)
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert error["request_id"] == headers["request-id"]
    assert len(fake.rejections) == 1
    assert fake.requests == []


def test_stopped_fake_refuses_connections() -> None:
    fake = FakeAnthropic().start()
    with fake.client(max_retries=0) as client:
        create(client)
        fake.stop()
        with pytest.raises(anthropic.APIConnectionError):
            create(client)


# --------------------------------------------------------------------------- validation

TOOL = {"name": "run", "description": "run code", "input_schema": {"type": "object"}}


def use(tool_id: str, name: str = "run", input: Any = None) -> dict:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": name,
        "input": {} if input is None else input,
    }


def result(tool_id: str, content: Any = "ok") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def user(*blocks: Any) -> dict:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def body_with(messages: Any = None, drop: tuple[str, ...] = (), **fields: Any) -> dict:
    """A valid request body, with ``fields`` overridden and the ``drop`` keys removed."""
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [HI] if messages is None else messages,
        **fields,
    }
    for key in drop:
        body.pop(key)
    return body


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
TURN = [user(text("go")), assistant(use("toolu_a"))]
THINKING = {"type": "thinking", "thinking": "Let me see.", "signature": "sig"}
EPHEMERAL = {"type": "ephemeral"}


def marked(block: dict, ttl: str | None = None) -> dict:
    """``block`` with a cache breakpoint (the API's default TTL unless ``ttl`` is given)."""
    control = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {**block, "cache_control": control}


REJECTED: dict[str, tuple[dict, str]] = {
    "tool calls without tools defined": (
        body_with([user(text("go")), assistant(use("toolu_a")), user(result("toolu_a"))]),
        "Requests which include `tool_use` or `tool_result` blocks must define tools.",
    ),
    "tool_choice of an unknown type": (
        body_with(tools=[TOOL], tool_choice={"type": "never"}),
        "tool_choice: Input tag does not match",
    ),
    "tool_choice a string": (body_with(tools=[TOOL], tool_choice="none"), "Input tag"),
    "tool_choice none with a name": (
        body_with(tools=[TOOL], tool_choice={"type": "none", "name": "run"}),
        "tool_choice.name: Extra inputs are not permitted",
    ),
    "tool_choice of a tool not provided": (
        body_with(tools=[TOOL], tool_choice={"type": "tool", "name": "fly"}),
        "Tool 'fly' not found in provided tools",
    ),
    "model missing": (body_with(drop=("model",)), "model: Field required"),
    "max_tokens missing": (body_with(drop=("max_tokens",)), "max_tokens: Field required"),
    "max_tokens zero": (body_with(max_tokens=0), "greater than or equal to 1"),
    "max_tokens negative": (body_with(max_tokens=-5), "greater than or equal to 1"),
    "max_tokens string": (body_with(max_tokens="64"), "valid integer"),
    "max_tokens float": (body_with(max_tokens=1.5), "valid integer"),
    "max_tokens bool": (body_with(max_tokens=True), "valid integer"),
    "messages missing": (body_with(drop=("messages",)), "messages: Field required"),
    "messages not a list": (body_with("hi"), "messages: Input should be a valid list"),
    "messages empty": (body_with([]), "at least one message"),
    "message not an object": (body_with(["hi"]), "messages.0: Input should be a valid dict"),
    "bad role": (body_with([{"role": "system", "content": "x"}]), "messages.0.role"),
    "content missing": (body_with([{"role": "user"}]), "messages.0.content: Field required"),
    "content not str or list": (body_with([{"role": "user", "content": 5}]), "messages.0.content"),
    "first message from assistant": (
        body_with([{"role": "assistant", "content": "hi"}, HI]),
        'first message must use the "user" role',
    ),
    "empty string content": (body_with([{"role": "user", "content": ""}]), "non-empty content"),
    "empty list content": (body_with([user()]), "non-empty content"),
    "empty final assistant content": (
        body_with([HI, {"role": "assistant", "content": []}]),
        "messages.1: all messages must have non-empty content",
    ),
    "whitespace string content": (
        body_with([{"role": "user", "content": " \n"}]),
        "non-whitespace",
    ),
    "text block missing text": (
        body_with([user({"type": "text"})]),
        "content.0.text: Field required",
    ),
    "empty text block": (body_with([user(text(""))]), "text content blocks must be non-empty"),
    "whitespace text block": (
        body_with([user(text("ok"), text("  \t\n"))]),
        "messages.0.content.1.text: text content blocks must contain non-whitespace text",
    ),
    "text not a string": (body_with([user({"type": "text", "text": 3})]), "valid string"),
    "block not an object": (body_with([user("hi")]), "messages.0.content.0: Input should be"),
    "unknown block type": (body_with([user({"type": "video"})]), "Input tag 'video'"),
    "tool_use unanswered": (
        body_with([*TURN, user(text("what happened?"))]),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_a",
    ),
    "tool_use in the last message": (body_with(TURN), "without `tool_result`"),
    "parallel tool_use partly answered": (
        body_with([HI, assistant(use("toolu_a"), use("toolu_b")), user(result("toolu_a"))]),
        "immediately after: toolu_b",
    ),
    "tool_result after text": (
        body_with([*TURN, user(text("here you go"), result("toolu_a"))]),
        "must come first",
    ),
    "tool_result after image": (
        body_with([*TURN, user(IMAGE, result("toolu_a"))]),
        "must come first",
    ),
    "tool_result after text in a merged user message": (
        body_with([*TURN, user(text("here")), user(result("toolu_a"))]),
        "must come first",
    ),
    "tool_result answered two turns late": (
        body_with([*TURN, user(text("wait")), assistant(text("ok")), user(result("toolu_a"))]),
        "without `tool_result`",
    ),
    "orphan tool_result": (
        body_with([*TURN, user(result("toolu_a"), result("toolu_zzz"))]),
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_zzz",
    ),
    "tool_result in first message": (
        body_with([user(result("toolu_a"))]),
        "unexpected `tool_use_id`",
    ),
    "tool_result after an assistant without tool_use": (
        body_with([HI, assistant(text("hm")), user(result("toolu_a"))]),
        "unexpected `tool_use_id`",
    ),
    "tool_result missing tool_use_id": (
        body_with([*TURN, user({"type": "tool_result", "content": "x"})]),
        "tool_use_id: Field required",
    ),
    "tool_result in assistant message": (
        body_with([*TURN, user(result("toolu_a")), assistant(result("toolu_a"))]),
        "messages.3.content.0: `tool_result` blocks are not allowed in assistant messages",
    ),
    "tool_use in user message": (
        body_with([user(use("toolu_u"))]),
        "`tool_use` blocks are not allowed in user messages",
    ),
    "duplicate tool_use ids across turns": (
        body_with(
            [*TURN, user(result("toolu_a")), assistant(use("toolu_a")), user(result("toolu_a"))]
        ),
        "messages.3.content.0: `tool_use` ids must be unique",
    ),
    "duplicate tool_use ids in one message": (
        body_with([HI, assistant(use("toolu_d"), use("toolu_d")), user(result("toolu_d"))]),
        "ids must be unique",
    ),
    "tool_use input not an object": (
        body_with([HI, assistant(use("toolu_a", input=[1])), user(result("toolu_a"))]),
        "input: Input should be a valid dictionary",
    ),
    "tool_use input missing": (
        body_with([HI, assistant({"type": "tool_use", "id": "toolu_a", "name": "run"})]),
        "input: Field required",
    ),
    "tool_use id invalid": (
        body_with([HI, assistant(use("toolu a")), user(result("toolu a"))]),
        "id: String should match pattern",
    ),
    "tool_result content a number": (
        body_with([*TURN, user(result("toolu_a", 42))]),
        "messages.2.content.0.content: Input should be a valid string or a list",
    ),
    "tool_result content with a tool_use block": (
        body_with([*TURN, user(result("toolu_a", [use("toolu_x")]))]),
        "Input tag 'tool_use'",
    ),
    "tool_result content with an empty text block": (
        body_with([*TURN, user(result("toolu_a", [text("")]))]),
        "content.0.content.0.text: text content blocks must be non-empty",
    ),
    "system a number": (body_with(system=3), "system: Input should be a valid string"),
    "system list with a non-text block": (body_with(system=[IMAGE]), "system.0.type"),
    "system list with an empty text block": (body_with(system=[text("")]), "system.0.text"),
    "tools not a list": (body_with(tools=TOOL), "tools: Input should be a valid list"),
    "tool not an object": (body_with(tools=["run"]), "tools.0: Input should be a valid dict"),
    "tool name missing": (body_with(tools=[{"input_schema": {"type": "object"}}]), "tools.0.name"),
    "tool name with a space": (
        body_with(tools=[{**TOOL, "name": "run code"}]),
        "should match pattern",
    ),
    "tool name too long": (body_with(tools=[{**TOOL, "name": "x" * 65}]), "should match pattern"),
    "duplicate tool names": (body_with(tools=[TOOL, TOOL]), "Tool names must be unique"),
    "input_schema missing": (
        body_with(tools=[{"name": "run"}]),
        "tools.0.input_schema: Field required",
    ),
    "input_schema not an object schema": (
        body_with(tools=[TOOL, {**TOOL, "name": "b", "input_schema": {"type": "array"}}]),
        "tools.1.input_schema.type: Input should be 'object'",
    ),
    "five cache breakpoints": (
        body_with(
            [user(marked(text("a")), marked(text("b")), marked(text("c")))],
            system=[marked(text("s"))],
            tools=[marked(TOOL)],
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    "top-level cache_control as the fifth breakpoint": (
        body_with(
            [user(marked(text("a")), marked(text("b")), text("c"))],
            system=[marked(text("s"))],
            tools=[marked(TOOL)],
            cache_control=EPHEMERAL,
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    "1h breakpoint after a 5m one across sections": (
        body_with(system=[marked(text("s"), "1h")], tools=[marked(TOOL)]),
        "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a "
        "ttl='5m' cache_control block. Note that blocks are processed in the following order: "
        "`tools`, `system`, `messages`.",
    ),
    "1h breakpoint after a default-TTL one in messages": (
        body_with([user(marked(text("a")), marked(text("b"), "1h"))]),
        "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not come",
    ),
    "cache_control on a thinking block": (
        body_with([HI, assistant(marked(THINKING), text("ok")), user(text("go on"))]),
        "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted",
    ),
    "cache_control on a redacted_thinking block": (
        body_with([HI, assistant(marked({"type": "redacted_thinking", "data": "x"}))]),
        "messages.1.content.0.redacted_thinking.cache_control: Extra inputs are not permitted",
    ),
    "cache_control on an empty text block": (
        body_with([user(text("ok"), marked(text("")))]),
        "messages.0.content.1.text: cache_control cannot be set for empty text blocks",
    ),
    "cache_control on an empty system block": (
        body_with(system=[marked(text(""))]),
        "system.0.text: cache_control cannot be set for empty text blocks",
    ),
    "cache_control type not ephemeral": (
        body_with([user({**text("a"), "cache_control": {"type": "persistent"}})]),
        "messages.0.content.0.cache_control.type: Input should be 'ephemeral'",
    ),
    "cache_control ttl of 10 minutes": (
        body_with(tools=[{**TOOL, "cache_control": {"type": "ephemeral", "ttl": "10m"}}]),
        "tools.0.cache_control.ttl: Input should be '5m' or '1h'",
    ),
    "cache_control without type": (
        body_with([user({**text("a"), "cache_control": {"ttl": "5m"}})]),
        "messages.0.content.0.cache_control.type: Field required",
    ),
    "cache_control not an object": (
        body_with([user({**text("a"), "cache_control": "ephemeral"})]),
        "messages.0.content.0.cache_control: Input should be a valid dictionary",
    ),
    "cache_control with an extra field": (
        body_with(system=[{**text("s"), "cache_control": {"type": "ephemeral", "scope": "x"}}]),
        "system.0.cache_control.scope: Extra inputs are not permitted",
    ),
    "cache_control inside a tool_result with a bad ttl": (
        body_with([*TURN, user(result("toolu_a", [marked(text("out"), "2h")]))]),
        "messages.2.content.0.content.0.cache_control.ttl: Input should be '5m' or '1h'",
    ),
    "top-level cache_control with a bad ttl": (
        body_with(cache_control={"type": "ephemeral", "ttl": "1d"}),
        "cache_control.ttl: Input should be '5m' or '1h'",
    ),
    "top-level ttl conflicting with the last block's": (
        body_with([user(marked(text("a"), "1h"))], cache_control=EPHEMERAL),
        "cache_control.ttl: the top-level cache_control (ttl='5m') conflicts",
    ),
}

PARALLEL_CONVERSATION = [
    user(text("Compute two things.")),
    assistant(
        {"type": "thinking", "thinking": "Two tools at once.", "signature": "sig"},
        text("Running both."),
        use("toolu_p1", input={"code": "1+1"}),
        use("toolu_p2", input={"code": "2+2"}),
    ),
    user(
        result("toolu_p1", "2"),
        result("toolu_p2", [text("4"), IMAGE]),
        text("Both done?"),
    ),
    assistant(text("Yes: 2 and 4.")),
    {"role": "user", "content": "Now plot it."},
    {"role": "user", "content": [text("As a bar chart.")]},
    assistant(text("Plotting."), use("toolu_p3", name="plot")),
    user({"type": "tool_result", "tool_use_id": "toolu_p3", "is_error": True}),
    user(text("It failed; try again?")),
    assistant(text("Retrying.")),
    assistant(use("toolu_p4", name="plot", input={"kind": "bar"})),
    user(result("toolu_p4", [])),
]

ACCEPTED: dict[str, dict] = {
    "plain string content": body_with(),
    "tool_choice none over a conversation with tool calls": body_with(
        [user(text("go")), assistant(use("toolu_a")), user(result("toolu_a"), text("Sum up."))],
        tools=[TOOL],
        tool_choice={"type": "none"},
    ),
    "tool_choice of a named tool": body_with(
        tools=[TOOL], tool_choice={"type": "tool", "name": "run", "disable_parallel_tool_use": True}
    ),
    "parallel tool calls over many turns": body_with(
        PARALLEL_CONVERSATION,
        system=[
            text("You are a notebook agent."),
            {**text("Be brief."), "cache_control": {"type": "ephemeral"}},
        ],
        tools=[
            TOOL,
            {**TOOL, "name": "plot"},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
    ),
    "final assistant prefill": body_with([HI, {"role": "assistant", "content": "Sure,"}]),
    "system string": body_with(system="You are helpful."),
    "empty tools list": body_with(tools=[]),
    "four breakpoints, 1h before 5m, on tools, system, tool_use and in a tool_result": body_with(
        [
            user(text("go")),
            assistant(THINKING, marked(use("toolu_a"), "1h")),
            user(result("toolu_a", [marked(text("out"), "5m"), IMAGE])),
        ],
        system=[text("You are a notebook agent."), marked(text("Be brief."), "1h")],
        tools=[marked(TOOL, "1h")],
    ),
    "breakpoints on an image and a string-content neighbour": body_with(
        [user(marked(IMAGE), text("describe it"))]
    ),
    "null cache_control is no breakpoint": body_with(
        [user(*[{**text(f"t{n}"), "cache_control": None} for n in range(6)])]
    ),
    "top-level cache_control (automatic caching)": body_with(cache_control=EPHEMERAL),
    "top-level cache_control matching the last block's, with three others": body_with(
        [user(marked(text("a")), marked(text("b")), marked(text("c"), "5m"))],
        tools=[marked(TOOL)],
        cache_control={"type": "ephemeral", "ttl": "5m"},
    ),
}


@pytest.mark.parametrize(("body", "expected"), REJECTED.values(), ids=REJECTED.keys())
def test_sdk_gets_bad_request_for_invalid_bodies(
    fake: FakeAnthropic, client: anthropic.Anthropic, body: dict, expected: str
) -> None:
    fake.queue(reply(text("must not be used")))
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.post("/v1/messages", body=body, cast_to=Message)
    error = caught.value
    assert error.status_code == 400
    assert error.type == "invalid_request_error"
    assert error.request_id is not None
    assert error.request_id.startswith("req_fake_")
    assert expected in (error.api_message or "")
    assert error.api_message == validate_request(body)
    assert fake.rejections == [(body, error.api_message)]
    assert fake.requests == [body]
    assert fake.accepted == []


@pytest.mark.parametrize("body", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_valid_bodies_are_accepted(
    fake: FakeAnthropic, client: anthropic.Anthropic, body: dict
) -> None:
    assert validate_request(body) is None
    fake.queue(reply(text("fine")))
    message = client.post("/v1/messages", body=body, cast_to=Message)
    assert message.content[0].text == "fine"
    fake.assert_no_rejections()
    assert fake.accepted == [body]


def test_sdk_response_content_can_be_sent_back(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.queue(
        reply(text("Let me check."), tool_use("run", {"code": "1"}), tool_use("run", {"code": "2"}))
    )
    messages: list[Any] = [HI]
    first = create(client, messages, tools=[TOOL])
    messages.append({"role": "assistant", "content": first.content})
    results = [result(block.id, "done") for block in first.content if block.type == "tool_use"]
    messages.append({"role": "user", "content": results})
    create(client, messages, tools=[TOOL])
    fake.assert_no_rejections()
    assert len(fake.accepted) == 2


def test_validate_messages_directly() -> None:
    assert validate_messages([HI]) is None
    assert validate_messages(PARALLEL_CONVERSATION) is None
    assert validate_messages([]) == "messages: at least one message is required"
    error = validate_messages([*TURN, user(text("?"))])
    assert error is not None
    assert "toolu_a" in error


def test_validate_request_rejects_non_object() -> None:
    assert validate_request([]) is not None  # type: ignore[arg-type]


def test_assert_no_rejections(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    create(client)
    fake.assert_no_rejections()
    with pytest.raises(anthropic.BadRequestError):
        create(client, [user(text(" "))])
    with pytest.raises(AssertionError, match="non-whitespace text"):
        fake.assert_no_rejections()


# --------------------------------------------------------------------------- prompt caching

LONG = "Notes on the project, kept for every call. " * 200  # about 2,150 tokens


def block_tokens(*blocks: dict) -> int:
    """The fake's documented token count of prompt blocks: each one's JSON over 4."""
    return sum(len(json.dumps(block)) // 4 for block in blocks)


def message_tokens(role: str, *blocks: dict) -> int:
    """The tokens of a message: its framing (`{"role": ..., "content": []}` over 4) and blocks."""
    return len(json.dumps({"role": role, "content": []})) // 4 + block_tokens(*blocks)


def cache_fields(message: Message) -> tuple[int, int, int, int]:
    """(read, written at 5m, written at 1h, uncached input) of a response."""
    usage = message.usage
    assert usage.cache_creation is not None
    split = usage.cache_creation
    assert usage.cache_creation_input_tokens == (
        split.ephemeral_5m_input_tokens + split.ephemeral_1h_input_tokens
    )
    return (
        usage.cache_read_input_tokens or 0,
        split.ephemeral_5m_input_tokens,
        split.ephemeral_1h_input_tokens,
        usage.input_tokens,
    )


def send(client: anthropic.Anthropic, fake: FakeAnthropic, **body: Any) -> Message:
    """Post ``body`` (with the fake's defaults) and check the usage adds up to the estimate."""
    full = body_with(**body)
    message = client.post("/v1/messages", body=full, cast_to=Message)
    read, written_5m, written_1h, uncached = cache_fields(message)
    assert read + written_5m + written_1h + uncached == fake_input_tokens(full)
    return message


def test_a_prefix_is_written_once_then_read_within_its_ttl(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    system = [marked(text(LONG))]
    prefix = block_tokens(text(LONG))
    assert prefix > 1024  # above the minimum of an unknown model
    first = send(client, fake, system=system)
    assert cache_fields(first)[:3] == (0, prefix, 0)
    fake.clock.advance(299)
    second = send(client, fake, system=system)
    assert cache_fields(second)[:3] == (prefix, 0, 0)
    assert second.usage.input_tokens == first.usage.input_tokens


def test_an_entry_expires_after_its_ttl_unless_a_read_refreshes_it(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    system = [marked(text(LONG))]
    reads = []
    for wait in (0, 200, 200, 299, 300):
        fake.clock.advance(wait)
        reads.append(cache_fields(send(client, fake, system=system))[0] > 0)
    # 200 s after the write, 200 s after a read, 299 s after a read: hits; 300 s idle: expired.
    assert reads == [False, True, True, True, False]


def test_one_hour_entries_outlive_five_minute_ones(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    hour = [marked(text(LONG), "1h")]
    minutes = [marked(text(LONG + " Five minutes."))]
    assert cache_fields(send(client, fake, system=hour))[2] == block_tokens(text(LONG))
    send(client, fake, system=minutes)
    fake.clock.advance(30 * 60)
    assert cache_fields(send(client, fake, system=hour))[0] == block_tokens(text(LONG))
    assert cache_fields(send(client, fake, system=minutes))[0] == 0
    fake.clock.advance(3600)
    assert cache_fields(send(client, fake, system=hour))[0] == 0


def test_mixed_ttls_are_billed_by_position(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    system = [marked(text(LONG), "1h")]
    question = text("What changed since yesterday? " * 40)
    first = send(client, fake, system=system, messages=[user(marked(question))])
    system_tokens = block_tokens(text(LONG))
    assert cache_fields(first)[:3] == (0, message_tokens("user", question), system_tokens)
    answer, follow_up = text("Three files."), text("Which ones?")
    second = send(
        client,
        fake,
        system=system,
        messages=[user(question), assistant(answer), user(marked(follow_up))],
    )
    # The lookback from the new breakpoint finds the first call's write two blocks back.
    read, written_5m, written_1h, _ = cache_fields(second)
    assert (read, written_1h) == (system_tokens + message_tokens("user", question), 0)
    assert written_5m == message_tokens("assistant", answer) + message_tokens("user", follow_up)


def test_the_minimum_cacheable_length_follows_the_model(fake: FakeAnthropic) -> None:
    system = [marked(text(LONG))]
    prompt = block_tokens(text(LONG))
    assert 512 < prompt < 4096
    with fake.client() as client:
        for model, cached in [
            ("claude-opus-5", True),
            ("claude-sonnet-5", True),
            ("claude-haiku-4-5", False),
            ("claude-haiku-4-5-20251001", False),
            ("claude-opus-4-6", False),
        ]:
            message = send(client, fake, system=system, model=model)
            assert (message.usage.cache_creation_input_tokens > 0) is cached, model
            if not cached:
                assert message.usage.input_tokens == fake_input_tokens(body_with(system=system))
    with FakeAnthropic(min_cacheable_tokens=5000) as strict, strict.client() as client:
        message = send(client, strict, system=system, model="claude-opus-5")
        assert cache_fields(message)[:3] == (0, 0, 0)


def test_an_edit_breaks_the_cache_from_that_point_on(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    system = [marked(text(LONG))]
    old_output, new_output = "line\n" * 400, "[cleared]"
    turn = [user(text("go")), assistant(use("toolu_a"))]
    first = [*turn, user(marked(result("toolu_a", old_output)))]
    send(client, fake, system=system, tools=[TOOL], messages=first)
    edited = [*turn, user(marked(result("toolu_a", new_output)))]
    message = send(client, fake, system=system, tools=[TOOL], messages=edited)
    read, written_5m, _, _ = cache_fields(message)
    assert read == block_tokens(TOOL, text(LONG))
    assert written_5m == (
        message_tokens("user", text("go"))
        + message_tokens("assistant", use("toolu_a"))
        + message_tokens("user", result("toolu_a", new_output))
    )


def test_the_lookback_window_spans_twenty_blocks(fake: FakeAnthropic) -> None:
    blocks = [text(f"paragraph {n} " * 20) for n in range(40)]

    def marked_at(n: int) -> list[dict]:
        return [user(*blocks[:n], marked(blocks[n]), *blocks[n + 1 :])]

    with FakeAnthropic(min_cacheable_tokens=0) as api, api.client() as client:
        written = message_tokens("user", *blocks[:6])
        assert cache_fields(send(client, api, messages=marked_at(5)))[1] == written
        # From block 24, blocks 24 down to 5 are the 20 positions checked: block 5 is found.
        assert cache_fields(send(client, api, messages=marked_at(24)))[0] == written
        api.cache.clear()
        send(client, api, messages=marked_at(5))
        # From block 25 the window stops at block 6: a miss, everything is written again.
        assert cache_fields(send(client, api, messages=marked_at(25)))[:2] == (
            0,
            message_tokens("user", *blocks[:26]),
        )


def test_caches_are_per_model(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    system = [marked(text(LONG))]
    send(client, fake, system=system, model="claude-sonnet-5-5")
    assert cache_fields(send(client, fake, system=system, model="claude-opus-5-5"))[0] == 0
    assert cache_fields(send(client, fake, system=system, model="claude-sonnet-5-5"))[0] > 0


def test_a_marker_does_not_change_the_prefix(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    system = [text(LONG)]
    first = [user(marked(text("Summarise the notes.")))]
    send(client, fake, system=system, messages=first)
    later = [user(text("Summarise the notes.")), assistant(text("Done.")), user(marked(text("Ok")))]
    read = cache_fields(send(client, fake, system=system, messages=later))[0]
    assert read == block_tokens(text(LONG)) + message_tokens("user", text("Summarise the notes."))


def test_tools_and_string_content_are_part_of_the_prefix(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    tools = [{**TOOL, "description": LONG}, marked({**TOOL, "name": "plot"})]
    message = send(client, fake, tools=tools, messages=[{"role": "user", "content": "hi"}])
    assert cache_fields(message)[1] == block_tokens(tools[0], {**TOOL, "name": "plot"})
    # A string is one text block: the same prompt written with strings is read with blocks.
    send(client, fake, system=LONG, messages=[user(marked(text("go")))])
    as_blocks = send(client, fake, system=[text(LONG)], messages=[user(marked(text("go")))])
    assert cache_fields(as_blocks)[:2] == (
        block_tokens(text(LONG)) + message_tokens("user", text("go")),
        0,
    )


def test_automatic_caching_marks_the_last_cacheable_block(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    question = user(text(LONG))
    first = send(client, fake, messages=[question], cache_control=EPHEMERAL)
    assert cache_fields(first)[1] == message_tokens("user", text(LONG))
    later = [question, assistant(text("Read it."), THINKING), user(text("Next?"))]
    second = send(client, fake, messages=later, cache_control=EPHEMERAL)
    read, written_5m, _, uncached = cache_fields(second)
    assert read == message_tokens("user", text(LONG))
    assert written_5m == message_tokens("assistant", text("Read it."), THINKING) + message_tokens(
        "user", text("Next?")
    )


def test_streams_report_the_cache_usage(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    system = [marked(text(LONG))]
    send(client, fake, system=system)
    with client.messages.stream(model=MODEL, max_tokens=64, system=system, messages=[HI]) as s:
        final = s.get_final_message()
    assert cache_fields(final)[:3] == (block_tokens(text(LONG)), 0, 0)


def test_faults_and_token_counts_leave_the_cache_alone(fake: FakeAnthropic) -> None:
    system = [marked(text(LONG))]
    fake.queue(overloaded())
    with fake.client(max_retries=0) as client:
        with pytest.raises(anthropic.OverloadedError):
            client.messages.create(model=MODEL, max_tokens=8, system=system, messages=[HI])
        client.messages.count_tokens(model=MODEL, system=system, messages=[HI])
        first = send(client, fake, system=system)
    assert cache_fields(first)[:2] == (0, block_tokens(text(LONG)))


def test_scripted_usage_still_wins(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.queue(reply(text("ok"), usage={"input_tokens": 3, "cache_read_input_tokens": 99}))
    message = client.post(
        "/v1/messages", body=body_with(system=[marked(text(LONG))]), cast_to=Message
    )
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (3, 99)


def test_the_clock_only_moves_forward() -> None:
    clock = FakeClock(10.0)
    clock.advance(2.5)
    assert clock.now() == 12.5
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    with FakeAnthropic(clock=clock) as fake:
        assert fake.clock is clock
