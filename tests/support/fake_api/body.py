"""What the real Messages API accepts in the rest of a request (`validate_request`): model,
max_tokens, system, tools and tool_choice, the tools a conversation needs, and where the
``cache_control`` breakpoints may go (at most 4, 1-hour ones first, the top-level one)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from support.fake_api.cache import MAX_CACHE_BREAKPOINTS, may_be_cached
from support.fake_api.messages import (
    check_cache_control,
    check_marker,
    check_text_block,
    validate_messages,
)

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def validate_request(body: dict) -> str | None:
    """None if the real Messages API would accept ``body``, else its error message."""
    return validate_body(body, require_max_tokens=True)


def validate_body(body: Any, *, require_max_tokens: bool) -> str | None:
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
        if (error := check_text_block(f"system.{i}", block)) is not None:
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
    if (error := check_marker(path, tool)) is not None:
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


def _check_top_level_cache_control(body: dict) -> str | None:
    """Automatic caching: a top-level ``cache_control`` lands on the last cacheable block."""
    if body.get("cache_control") is None:
        return None
    control = body["cache_control"]
    if (error := check_cache_control("cache_control", control)) is not None:
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
        if may_be_cached(block):
            return path, block
    return None


def _automatic_breakpoint(body: dict) -> tuple[str, dict] | None:
    """The breakpoint a top-level ``cache_control`` adds, or None (absent, or a no-op)."""
    control = body.get("cache_control")
    if control is None:
        return None
    last = _last_cacheable(_marked_blocks(body))
    if last is None or last[1].get("cache_control") is not None:
        return None  # same TTL on the block already: a no-op (a different one was rejected)
    return last[0], control
