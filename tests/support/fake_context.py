"""The loopback fake's server-side context management: what the API does with
``context_management`` edits and the ``compaction`` parameter (beta API).

Shapes from the anthropic SDK's beta types (``beta_compact_20260112_edit_param.py``,
``beta_clear_tool_uses_20250919_edit_param.py``, ``beta_clear_thinking_20251015_edit_param.py``,
``beta_compaction_config_param.py``, ``beta_compaction_block(_param).py``,
``beta_compaction_iteration_usage.py``, ``beta_context_management_response.py``,
``beta_count_tokens_context_management_response.py``) and the platform's compaction and context
editing pages:

- each feature needs its beta header, else the field is unknown (``Extra inputs are not
  permitted``); unknown edit types, repeated ones, ``clear_thinking`` not first, a compaction
  trigger under 50,000 input tokens, ``compaction`` together with ``context_management`` are 400s;
- a ``compaction`` block in ``messages`` needs a compaction beta;
- the API drops every message block before the last ``compaction`` block of ``messages``;
  a compaction block's ``signature`` covers its content, ``encrypted_content`` and
  ``tool_changes``: a changed byte is a 400; empty-string content is a 400, null is a no-op;
  a block from the on-demand ``compaction`` parameter cannot meet a ``compact_`` edit;
- ``clear_thinking`` drops the thinking of older assistant turns, ``clear_tool_uses`` (over its
  trigger) replaces the oldest tool results by a placeholder, keeping the newest ``keep``; both
  are reported in ``context_management.applied_edits``. Both rules are the documentation's,
  written again without the project's code (`support.clearing`), so that the project's own
  (``evo_magic.compact.server_edits``, which replay's modelled server runs) is checked against
  them; the validation above is the fake's own too;
- ``compact_20260112`` over its trigger summarises (deterministically) the effective prompt into a
  signed ``compaction`` block that opens the reply (alone, ``stop_reason: "compaction"``, with
  ``pause_after_compaction``); ``usage.iterations`` gets a ``compaction`` entry (not in the
  top-level usage) and a ``message`` entry;
- ``count_tokens`` with ``context_management`` returns the edited count and
  ``context_management.original_input_tokens``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from support import clearing

COMPACT_BETA = "compact-2026-01-12"
SUMMARIZE_BETA = "compact-2026-09-04"
CONTEXT_BETA = "context-management-2025-06-27"
EDIT_BETAS = {
    "compact_20260112": COMPACT_BETA,
    "clear_tool_uses_20250919": CONTEXT_BETA,
    "clear_thinking_20251015": CONTEXT_BETA,
}
MIN_COMPACT_TRIGGER = 50_000
DEFAULT_COMPACT_TRIGGER = 150_000
CLEARED_PLACEHOLDER = clearing.CLEARED_PLACEHOLDER
COMPACTION_MODELS = (
    "mythos",
    "fable",
    "opus-5",
    "sonnet-5",
    "haiku-5",
    "opus-4-8",
    "opus-4-7",
    "opus-4-6",
    "sonnet-4-6",
)
"""Model name parts the fake offers compaction on (the docs' list and the newer models)."""
_SECRET = b"fake-compaction-signing-key"


def betas(headers: dict[str, str]) -> set[str]:
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def sign(block: dict) -> str:
    """The fake's signature over a compaction block's content, metadata and tool changes."""
    payload = json.dumps(
        [block.get("content"), block.get("encrypted_content"), block.get("tool_changes")],
        sort_keys=True,
    ).encode()
    return base64.b64encode(hmac.new(_SECRET, payload, hashlib.sha256).digest()).decode()


def _origin(block: dict) -> str | None:
    try:
        return json.loads(base64.b64decode(block.get("encrypted_content") or ""))["origin"]
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- validation


def check(body: dict, headers: dict[str, str], *, count_tokens: bool = False) -> str | None:
    """None when the real API would accept the request's context management, else why not."""
    given = betas(headers)
    if (error := _check_compaction_blocks(body)) is not None:
        return error
    blocks = _compaction_blocks(body)
    if blocks and not given & {COMPACT_BETA, SUMMARIZE_BETA}:
        path = blocks[0][0]
        return (
            f"{path}: Input tag 'compaction' found using 'type' requires the anthropic-beta "
            f"header '{COMPACT_BETA}' or '{SUMMARIZE_BETA}'"
        )
    if "compaction" in body and not count_tokens:
        if SUMMARIZE_BETA not in given:
            return "compaction: Extra inputs are not permitted"
        if "context_management" in body:
            return "compaction: cannot be combined with context_management"
        if (error := _check_compaction_param(body["compaction"])) is not None:
            return error
        if not _offers_compaction(body.get("model", "")):
            return f"compaction: summarize is not supported on model {body.get('model')}"
    if "context_management" not in body:
        return None
    config = body["context_management"]
    if not isinstance(config, dict) or not isinstance(config.get("edits", []), list):
        return "context_management: Input should be an object with a list of edits"
    edits = config.get("edits", [])
    if not edits:
        if CONTEXT_BETA not in given and COMPACT_BETA not in given:
            return "context_management: Extra inputs are not permitted"
        return None
    seen: set[str] = set()
    for i, edit in enumerate(edits):
        path = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in EDIT_BETAS:
            expected = ", ".join(f"'{t}'" for t in EDIT_BETAS)
            return (
                f"{path}: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags: {expected}"
            )
        if EDIT_BETAS[kind] not in given:
            return f"{path}: {kind} requires the anthropic-beta header '{EDIT_BETAS[kind]}'"
        if kind in seen:
            return f"{path}: each edit type may appear once ({kind} is repeated)"
        seen.add(kind)
        if kind == "clear_thinking_20251015" and i != 0:
            return f"{path}: clear_thinking_20251015 must be the first edit when combined"
        error = _EDIT_CHECKS[kind](path, edit)
        if error is not None:
            return error
        if kind == "compact_20260112" and not _offers_compaction(body.get("model", "")):
            return f"{path}: compact_20260112 is not supported on model {body.get('model')}"
    if "compact_20260112" in seen and any(
        _origin(block) == "summarize" for _, block in _compaction_blocks(body)
    ):
        return (
            "context_management: a compaction block from the `compaction` parameter cannot be "
            "combined with a compact_20260112 edit"
        )
    return None


def _offers_compaction(model: str) -> bool:
    return any(part in model for part in COMPACTION_MODELS)


def _count(path: str, value: Any, kind: str, minimum: int) -> str | None:
    if not isinstance(value, dict) or value.get("type") != kind:
        return f"{path}: Input should be an object with type '{kind}'"
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
        return f"{path}.value: Input should be greater than or equal to {minimum}"
    return None


def _check_compact(path: str, edit: dict) -> str | None:
    extra = set(edit) - {"type", "trigger", "pause_after_compaction", "instructions"}
    if extra:
        return f"{path}.{sorted(extra)[0]}: Extra inputs are not permitted"
    if edit.get("trigger") is not None:
        error = _count(f"{path}.trigger", edit["trigger"], "input_tokens", MIN_COMPACT_TRIGGER)
        if error is not None:
            return error
    if not isinstance(edit.get("pause_after_compaction", False), bool):
        return f"{path}.pause_after_compaction: Input should be a valid boolean"
    if edit.get("instructions") is not None and not isinstance(edit["instructions"], str):
        return f"{path}.instructions: Input should be a valid string"
    return None


def _check_clear_tool_uses(path: str, edit: dict) -> str | None:
    allowed = {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
    extra = set(edit) - allowed
    if extra:
        return f"{path}.{sorted(extra)[0]}: Extra inputs are not permitted"
    trigger = edit.get("trigger")
    if trigger is not None:
        kind = trigger.get("type") if isinstance(trigger, dict) else None
        if kind not in ("input_tokens", "tool_uses"):
            return f"{path}.trigger: Input tag '{kind}' does not match 'input_tokens', 'tool_uses'"
        if (error := _count(f"{path}.trigger", trigger, kind, 1)) is not None:
            return error
    if "keep" in edit and (error := _count(f"{path}.keep", edit["keep"], "tool_uses", 0)):
        return error
    at_least = edit.get("clear_at_least")
    if at_least is not None and (
        error := _count(f"{path}.clear_at_least", at_least, "input_tokens", 0)
    ):
        return error
    excluded = edit.get("exclude_tools")
    if excluded is not None and not (
        isinstance(excluded, list) and all(isinstance(n, str) for n in excluded)
    ):
        return f"{path}.exclude_tools: Input should be a valid list of strings"
    inputs = edit.get("clear_tool_inputs")
    if inputs is not None and not isinstance(inputs, bool | list):
        return f"{path}.clear_tool_inputs: Input should be a boolean or a list of tool names"
    return None


def _check_clear_thinking(path: str, edit: dict) -> str | None:
    extra = set(edit) - {"type", "keep"}
    if extra:
        return f"{path}.{sorted(extra)[0]}: Extra inputs are not permitted"
    keep = edit.get("keep")
    if keep is None or keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return None
    return _count(f"{path}.keep", keep, "thinking_turns", 1)


_EDIT_CHECKS = {
    "compact_20260112": _check_compact,
    "clear_tool_uses_20250919": _check_clear_tool_uses,
    "clear_thinking_20251015": _check_clear_thinking,
}


def _check_compaction_param(config: Any) -> str | None:
    if not isinstance(config, dict) or config.get("type") != "summarize":
        return "compaction.type: Input should be 'summarize'"
    extra = set(config) - {"type", "instructions"}
    if extra:
        return f"compaction.{sorted(extra)[0]}: Extra inputs are not permitted"
    return None


def _compaction_blocks(body: dict) -> list[tuple[str, dict]]:
    found = []
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "compaction":
                found.append((f"messages.{i}.content.{j}", block))
    return found


def _check_compaction_blocks(body: dict) -> str | None:
    for path, block in _compaction_blocks(body):
        extra = set(block) - {
            "type",
            "content",
            "encrypted_content",
            "signature",
            "tool_changes",
            "cache_control",
        }
        if extra:
            return f"{path}.{sorted(extra)[0]}: Extra inputs are not permitted"
        if block.get("content") == "":
            return f"{path}.content: empty string content is not allowed (use null)"
        if block.get("content") is None:
            continue  # a failed compaction: the server treats it as a no-op
        if not hmac.compare_digest(str(block.get("signature") or ""), sign(block)):
            return f"{path}: the compaction block's signature does not match its content"
    return None


# --------------------------------------------------------------------------- answering


@dataclass
class Plan:
    """What the server does with one accepted request before (or instead of) sampling."""

    body: dict
    """The prompt the model sees: blocks before the last compaction dropped, edits applied."""
    original_tokens: int
    applied_edits: list[dict] = field(default_factory=list)
    compaction: dict | None = None
    """The compaction block this request produced (None: none)."""
    compaction_usage: dict | None = None
    alone: bool = False
    """True: the reply is the compaction block alone (paused, or the on-demand parameter)."""
    managed: bool = False
    """True when the request had `context_management` (the reply reports it)."""


def plan(
    body: dict,
    estimate: Any,
    *,
    fail_summary: bool = False,
    counting: bool = False,
    tool_changes: list | None = None,
) -> Plan:
    """Apply the request's context management as the API does; `estimate(body)` counts a
    prompt's input tokens. `counting`: for count_tokens (the clearing edits only)."""
    effective = _after_last_compaction(body)
    original = estimate(effective)
    result = Plan(effective, original, managed="context_management" in body)
    if "compaction" in body and not counting:
        instructions = (body["compaction"].get("instructions") or "").strip()
        _compact(result, instructions, "summarize", estimate, fail_summary, tool_changes)
        result.alone = True
        return result
    for edit in (body.get("context_management") or {}).get("edits", []):
        kind = edit["type"]
        if kind == "clear_thinking_20251015":
            _clear_thinking(result, edit, estimate)
        elif kind == "clear_tool_uses_20250919":
            _clear_tool_uses(result, edit, estimate)
        elif kind == "compact_20260112" and not counting:
            trigger = (edit.get("trigger") or {}).get("value", DEFAULT_COMPACT_TRIGGER)
            if estimate(result.body) >= trigger:
                instructions = (edit.get("instructions") or "").strip()
                _compact(result, instructions, "edit", estimate, fail_summary, tool_changes)
                result.alone = bool(edit.get("pause_after_compaction"))
    return result


def _after_last_compaction(body: dict) -> dict:
    messages = body.get("messages") or []
    last = None
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            for j, block in enumerate(content):
                if block.get("type") == "compaction" and block.get("content") is not None:
                    last = (i, j)
    if last is None:
        return body
    i, j = last
    kept = [{**messages[i], "content": messages[i]["content"][j:]}, *messages[i + 1 :]]
    return {**body, "messages": kept}


def _clear_thinking(result: Plan, edit: dict, estimate: Any) -> None:
    _cleared(
        result,
        clearing.clear_thinking(result.body["messages"], edit, _counter(result, estimate)),
    )


def _clear_tool_uses(result: Plan, edit: dict, estimate: Any) -> None:
    _cleared(
        result,
        clearing.clear_tool_uses(result.body["messages"], edit, _counter(result, estimate)),
    )


def _counter(result: Plan, estimate: Any) -> Any:
    """Tokens of the prompt with other messages (the clearing rule counts what it frees)."""
    return lambda messages: estimate({**result.body, "messages": messages})


def _cleared(result: Plan, done: tuple[list, dict] | None) -> None:
    if done is not None:
        messages, applied = done
        result.body = {**result.body, "messages": messages}
        result.applied_edits.append(applied)


def summary_of(body: dict, instructions: str) -> str:
    """The fake's deterministic summary of a prompt: how many messages, and the user's texts."""
    texts = [
        block.get("text", "")
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text"
    ]
    summary = f"Summary of {len(body['messages'])} messages. The user asked: " + " | ".join(
        t[:80] for t in texts
    )
    return f"{summary}\nInstructions followed: {instructions}" if instructions else summary


def _compact(
    result: Plan,
    instructions: str,
    origin: str,
    estimate: Any,
    fail: bool,
    tool_changes: list | None,
) -> None:
    tokens = estimate(result.body)
    digest = hashlib.sha256(json.dumps(result.body["messages"]).encode()).hexdigest()[:16]
    opaque = json.dumps({"origin": origin, "digest": digest, "messages": len(result.body)})
    block: dict[str, Any] = {
        "type": "compaction",
        "content": None if fail else summary_of(result.body, instructions),
        "encrypted_content": base64.b64encode(opaque.encode()).decode(),
        "tool_changes": list(tool_changes or []),
    }
    block["signature"] = sign(block)
    result.compaction = block
    result.compaction_usage = {
        "type": "compaction",
        "input_tokens": tokens,
        "output_tokens": len(block["content"] or "") // 4 + 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if block["content"] is not None:
        # The model samples from the compacted context: the block alone.
        result.body = {**result.body, "messages": [{"role": "assistant", "content": [block]}]}
